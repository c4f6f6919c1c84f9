// SPDX-License-Identifier: MIT OR Apache-2.0
// Bearer-token check. Tokens are compared as SHA-256 digests in constant
// time, so neither their content nor their length shows in the timing.
// Nothing here may log or echo a token.

import { HttpError } from "./http.js";

const CHALLENGE = { "www-authenticate": 'Bearer realm="culpert-archive"' };

async function digest(text) {
	const bytes = new TextEncoder().encode(text);
	return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

/** Equal-length byte arrays compared without an early exit. */
function sameBytes(a, b) {
	if (typeof crypto.subtle.timingSafeEqual === "function") {
		return crypto.subtle.timingSafeEqual(a, b);
	}
	let diff = 0;
	for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
	return diff === 0;
}

/**
 * Checks the request's `Authorization: Bearer` header against the secrets
 * AUTH_TOKEN (read and write) and READ_TOKEN (optional, reads only).
 * Returns "write" or "read"; throws 401 when the token is missing or wrong,
 * and 500 when AUTH_TOKEN is not configured (the archive never runs open).
 * CF-Access-* headers are ignored here: Cloudflare Access is checked at the
 * edge, and the bearer check applies regardless.
 */
export async function authorize(request, env) {
	const writeSecret = env.AUTH_TOKEN;
	if (typeof writeSecret !== "string" || writeSecret === "") {
		throw new HttpError(500, "server misconfigured: AUTH_TOKEN is not set");
	}
	const header = request.headers.get("authorization");
	const match = header === null ? null : /^Bearer +(.+)$/i.exec(header.trim());
	if (match === null) {
		throw new HttpError(401, "missing bearer token", CHALLENGE);
	}
	const given = await digest(match[1].trim());
	const isWrite = sameBytes(given, await digest(writeSecret));
	const readSecret = env.READ_TOKEN;
	const hasRead = typeof readSecret === "string" && readSecret !== "";
	const isRead = hasRead && sameBytes(given, await digest(readSecret));
	if (isWrite) return "write";
	if (isRead) return "read";
	throw new HttpError(401, "wrong token", {
		"www-authenticate": 'Bearer realm="culpert-archive", error="invalid_token"',
	});
}
