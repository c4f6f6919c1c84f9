// SPDX-License-Identifier: MIT OR Apache-2.0
// Shared test helpers: requests against the worker inside workerd, gzip
// bodies, and a fresh project name per test so tests never see each other's
// uploads.
import { env, exports } from "cloudflare:workers";
import worker from "../src/index.js";

export const WRITE = "test-write-token";
export const READ = "test-read-token";
export const LIMIT = 4096; // MAX_BODY_BYTES in vitest.config.js

export { env };

/** A project name no other test uses. */
export function freshProject() {
	return `t-${crypto.randomUUID().slice(0, 12)}`;
}

/** A 40-digit lowercase SHA made from a short seed, e.g. sha("a1"). */
export function sha(seed) {
	return seed.padEnd(40, "0");
}

/** Real gzip of `text`. */
export async function gzip(text) {
	const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
	return new Uint8Array(await new Response(stream).arrayBuffer());
}

export async function gunzip(bytes) {
	const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
	return await new Response(stream).text();
}

/** Builds a request for the archive. `token: null` sends no Authorization. */
export function request(method, path, { token = WRITE, body, headers = {}, query = {} } = {}) {
	const url = new URL(path, "http://archive.test");
	for (const [name, value] of Object.entries(query)) {
		if (value !== undefined) url.searchParams.set(name, value);
	}
	const all = { ...headers };
	if (token !== null) all.authorization = `Bearer ${token}`;
	return new Request(url, { method, body, headers: all });
}

/** Sends a request to the worker as deployed (bindings from the config). */
export function call(method, path, options) {
	return exports.default.fetch(request(method, path, options));
}

/** Sends a request to the worker module with a replaced environment. */
export function callWithEnv(testEnv, method, path, options) {
	return worker.fetch(request(method, path, options), testEnv);
}

/** Uploads `text` (gzipped) and returns the response. */
export async function upload(project, commit, branch, text, token = WRITE) {
	return call("POST", `/v1/profiles/${commit}`, {
		token,
		body: await gzip(text),
		query: { project, branch },
	});
}

/** Sets the server-side upload time of a row, for ordering tests. */
export async function setUploadedAt(project, commit, millis) {
	await env.DB.prepare("UPDATE profiles SET uploaded_at = ?3 WHERE project = ?1 AND sha = ?2")
		.bind(project, commit, millis)
		.run();
}

/** The R2 keys stored for a project. */
export async function blobKeys(project) {
	const listed = await env.PROFILES.list({ prefix: `${project}/` });
	return listed.objects.map((o) => o.key);
}
