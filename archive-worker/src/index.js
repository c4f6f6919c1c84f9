// SPDX-License-Identifier: MIT OR Apache-2.0
// The culpert archive worker: routing and the four routes of
// shared/spec/archive-api.md. Checks run in this order: route (404), method
// (405), token (401/403), parameters (400), body size and magic (413/400).
// Never logs a token or a body.

import { authorize } from "./auth.js";
import { readProfileBody } from "./body.js";
import { HttpError, errorResponse, jsonResponse } from "./http.js";
import { listProfiles, openBySha, openLatest, putProfile } from "./store.js";
import { maxBodyBytes, parseBranch, parseLimit, parseProject, parseQuery, parseSha } from "./validate.js";

const PREFIX = "/v1/profiles";

/** Which route a path names, or null: "list", "latest" or "sha". */
function routeOf(pathname) {
	if (pathname === PREFIX) return { name: "list", allow: ["GET"] };
	if (!pathname.startsWith(PREFIX + "/")) return null;
	const segment = pathname.slice(PREFIX.length + 1);
	if (segment === "" || segment.includes("/")) return null;
	if (segment === "latest") return { name: "latest", allow: ["GET"] };
	return { name: "sha", allow: ["GET", "POST"], segment };
}

function profileResponse({ row, object }) {
	return new Response(object.body, {
		status: 200,
		headers: {
			"content-type": "application/octet-stream",
			"content-length": String(object.size),
			"cache-control": "no-store",
			"x-culpert-sha": row.sha,
			"x-culpert-uploaded-at": new Date(row.uploaded_at).toISOString(),
		},
	});
}

function notFound(message) {
	return jsonResponse(404, { error: message });
}

async function handle(request, env) {
	const url = new URL(request.url);
	const route = routeOf(url.pathname);
	if (route === null) return notFound(`no such route: ${url.pathname}`);
	if (!route.allow.includes(request.method)) {
		throw new HttpError(405, `method ${request.method} not allowed here`, {
			allow: route.allow.join(", "),
		});
	}

	const access = await authorize(request, env);
	if (request.method === "POST" && access !== "write") {
		throw new HttpError(403, "this token may only read; uploads need AUTH_TOKEN");
	}
	const params = parseQuery(url);
	const project = parseProject(params);

	if (route.name === "list") {
		const branch = parseBranch(params, false);
		const limit = parseLimit(params);
		return jsonResponse(200, await listProfiles(env, project, branch, limit));
	}

	if (route.name === "latest") {
		const branch = parseBranch(params, true);
		const found = await openLatest(env, project, branch);
		if (found === null) return notFound(`no profile on branch ${branch} in project ${project}`);
		return profileResponse(found);
	}

	const sha = parseSha(route.segment);
	if (request.method === "GET") {
		const found = await openBySha(env, project, sha);
		if (found === null) return notFound(`no profile for SHA ${sha} in project ${project}`);
		return profileResponse(found);
	}

	const branch = parseBranch(params, true);
	const bytes = await readProfileBody(request, maxBodyBytes(env));
	const stored = await putProfile(env, { project, sha, branch, bytes });
	const location = `${PREFIX}/${sha}?project=${encodeURIComponent(project)}`;
	return jsonResponse(201, stored, { location });
}

export default {
	async fetch(request, env) {
		try {
			return await handle(request, env);
		} catch (err) {
			if (err instanceof HttpError) return errorResponse(err);
			console.error(`archive: internal error: ${err?.message}`);
			return jsonResponse(500, { error: "internal error" });
		}
	},
};
