// SPDX-License-Identifier: MIT OR Apache-2.0
// Parsing of the request parameters. Each parser returns the normalised value
// or throws an HttpError(400) naming the parameter; none of them trusts the
// length or content of what the client sent.

import { HttpError } from "./http.js";

export const DEFAULT_PROJECT = "default";
export const DEFAULT_LIST_LIMIT = 50;
export const MAX_LIST_LIMIT = 1000;
export const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024;

const SHA_RE = /^[0-9a-f]{7,64}$/i;
// Starts with a letter or digit so that "." and ".." can never be a project:
// the CLI keeps the same index in a local directory named after it.
const PROJECT_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
// C0 controls, DEL and C1 controls.
const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f]/;
const MAX_BRANCH_BYTES = 255;

/** A commit SHA of 7 to 64 hex digits, returned in lowercase. */
export function parseSha(text) {
	if (!SHA_RE.test(text)) {
		throw new HttpError(400, "bad SHA: expected 7 to 64 hex digits");
	}
	return text.toLowerCase();
}

/**
 * The query string of `url` as a Map from name to value, decoded as
 * URLSearchParams decodes it ("+" is a space, %XX a byte, a "%" not followed
 * by two hex digits stays as it is), with two refusals, on every route:
 * a name given twice, even spelt differently ("branch" and "%62ranch"), and
 * a name or value whose bytes are not valid UTF-8. URLSearchParams keeps
 * every copy, and turns invalid UTF-8 into U+FFFD, so that "rel%FF" and
 * "rel%FE" would name one branch.
 */
export function parseQuery(url) {
	const params = new Map();
	for (const pair of url.search.slice(1).split("&")) {
		if (pair === "") continue;
		const eq = pair.indexOf("=");
		const rawName = eq === -1 ? pair : pair.slice(0, eq);
		const name = decodeUtf8(rawName, () => `bad query parameter name ${rawName}: not valid UTF-8 once percent-decoded`);
		const value = decodeUtf8(eq === -1 ? "" : pair.slice(eq + 1), () => `bad ${name}: not valid UTF-8 once percent-decoded`);
		if (params.has(name)) throw new HttpError(400, `bad ${name}: given more than once`);
		params.set(name, value);
	}
	return params;
}

const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Percent-decodes one name or value; throws 400 (message()) for bad UTF-8. */
function decodeUtf8(text, message) {
	const raw = new TextEncoder().encode(text);
	const bytes = new Uint8Array(raw.length);
	let n = 0;
	for (let i = 0; i < raw.length; i++) {
		const hex = raw[i] === 0x25 && i + 2 < raw.length ? hexByte(raw[i + 1], raw[i + 2]) : -1;
		if (hex >= 0) {
			bytes[n++] = hex;
			i += 2;
		} else {
			bytes[n++] = raw[i] === 0x2b ? 0x20 : raw[i];
		}
	}
	try {
		return STRICT_UTF8.decode(bytes.subarray(0, n));
	} catch {
		throw new HttpError(400, message());
	}
}

/** The value of one hex digit given as its ASCII code, or -1. */
function hexDigit(c) {
	if (c >= 0x30 && c <= 0x39) return c - 0x30; // 0-9
	const lower = c | 0x20;
	if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10; // a-f, A-F
	return -1;
}

/** The byte written as two hex digits (ASCII codes), or -1. */
function hexByte(hi, lo) {
	const h = hexDigit(hi);
	const l = hexDigit(lo);
	return h < 0 || l < 0 ? -1 : h * 16 + l;
}

/** The value of query parameter `name` (parseQuery's Map), or null. */
function single(params, name) {
	return params.has(name) ? params.get(name) : null;
}

/** `project`: absent means "default"; present, 1 to 64 of [A-Za-z0-9._-]. */
export function parseProject(params) {
	const value = single(params, "project");
	if (value === null) return DEFAULT_PROJECT;
	if (!PROJECT_RE.test(value)) {
		throw new HttpError(
			400,
			"bad project: expected 1 to 64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit",
		);
	}
	return value;
}

/**
 * `branch`: a non-empty string of at most 255 UTF-8 bytes without control
 * characters. Returns null when absent and not required.
 */
export function parseBranch(params, required) {
	const value = single(params, "branch");
	if (value === null) {
		if (required) throw new HttpError(400, "bad branch: the branch parameter is required");
		return null;
	}
	if (value === "") throw new HttpError(400, "bad branch: empty");
	if (new TextEncoder().encode(value).byteLength > MAX_BRANCH_BYTES) {
		throw new HttpError(400, `bad branch: longer than ${MAX_BRANCH_BYTES} bytes`);
	}
	if (CONTROL_RE.test(value)) {
		throw new HttpError(400, "bad branch: contains a control character");
	}
	return value;
}

/** `limit`: a decimal integer from 1 to 1000; absent means 50. */
export function parseLimit(params) {
	const value = single(params, "limit");
	if (value === null) return DEFAULT_LIST_LIMIT;
	if (!/^[0-9]{1,4}$/.test(value)) {
		throw new HttpError(400, `bad limit: expected an integer from 1 to ${MAX_LIST_LIMIT}`);
	}
	const n = Number(value);
	if (n < 1 || n > MAX_LIST_LIMIT) {
		throw new HttpError(400, `bad limit: expected an integer from 1 to ${MAX_LIST_LIMIT}`);
	}
	return n;
}

/**
 * The configured body limit (var MAX_BODY_BYTES, default 32 MiB). A value
 * that is not a positive integer is a deployment mistake and answers 500
 * instead of silently accepting bodies of any size.
 */
export function maxBodyBytes(env) {
	const raw = env.MAX_BODY_BYTES;
	if (raw === undefined || raw === null || raw === "") return DEFAULT_MAX_BODY_BYTES;
	const text = String(raw).trim();
	const n = Number(text);
	if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n) || n < 1) {
		throw new HttpError(500, "server misconfigured: MAX_BODY_BYTES is not a positive integer");
	}
	return n;
}
