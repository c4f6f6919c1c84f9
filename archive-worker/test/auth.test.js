// SPDX-License-Identifier: MIT OR Apache-2.0
// Bearer tokens: AUTH_TOKEN reads and writes, READ_TOKEN only reads.
import { describe, expect, it } from "vitest";
import { READ, WRITE, call, callWithEnv, env, freshProject, gzip, sha, upload } from "./helpers.js";

const ROUTES = [
	["GET", () => `/v1/profiles/${sha("a")}`],
	["GET", () => "/v1/profiles/latest"],
	["GET", () => "/v1/profiles"],
	["POST", () => `/v1/profiles/${sha("a")}`],
];

async function postOptions(token) {
	return { token, body: await gzip("x"), query: { project: freshProject(), branch: "main" } };
}

describe("authorization", () => {
	it.each(ROUTES)("%s %s without a token answers 401 with a Bearer challenge", async (method, path) => {
		const res = await call(method, path(), { token: null, query: { branch: "main" } });
		expect(res.status).toBe(401);
		expect(res.headers.get("www-authenticate")).toBe('Bearer realm="culpert-archive"');
		expect(await res.json()).toEqual({ error: "missing bearer token" });
	});

	it.each(ROUTES)("%s %s with a wrong token answers 401 with error=invalid_token", async (method, path) => {
		const res = await call(method, path(), { token: "not-the-token", query: { branch: "main" } });
		expect(res.status).toBe(401);
		expect(res.headers.get("www-authenticate")).toBe('Bearer realm="culpert-archive", error="invalid_token"');
		expect(await res.json()).toEqual({ error: "wrong token" });
	});

	it("refuses a token that is a prefix or an extension of the secret", async () => {
		for (const token of [WRITE.slice(0, -1), `${WRITE}x`, WRITE.toUpperCase()]) {
			const res = await call("GET", "/v1/profiles", { token });
			expect(res.status, token).toBe(401);
		}
	});

	it("refuses other authorization schemes", async () => {
		const res = await call("GET", "/v1/profiles", {
			token: null,
			headers: { authorization: `Basic ${btoa(`x:${WRITE}`)}` },
		});
		expect(res.status).toBe(401);
	});

	it("accepts the scheme name in any case", async () => {
		const res = await call("GET", "/v1/profiles", { token: null, headers: { authorization: `bearer ${WRITE}` } });
		expect(res.status).toBe(200);
	});

	it("never echoes the token it was given", async () => {
		const res = await call("GET", "/v1/profiles", { token: "secret-looking-value" });
		expect(await res.text()).not.toContain("secret-looking-value");
	});

	it("lets the read-only token use every GET route", async () => {
		const project = freshProject();
		await upload(project, sha("b1"), "main", "readable");
		const bySha = await call("GET", `/v1/profiles/${sha("b1")}`, { token: READ, query: { project } });
		expect(bySha.status).toBe(200);
		const latest = await call("GET", "/v1/profiles/latest", { token: READ, query: { project, branch: "main" } });
		expect(latest.status).toBe(200);
		const list = await call("GET", "/v1/profiles", { token: READ, query: { project } });
		expect(list.status).toBe(200);
	});

	it("refuses an upload with the read-only token with 403 and stores nothing", async () => {
		const options = await postOptions(READ);
		const res = await call("POST", `/v1/profiles/${sha("b2")}`, options);
		expect(res.status).toBe(403);
		expect((await res.json()).error).toMatch(/only read/);
		const list = await call("GET", "/v1/profiles", { query: { project: options.query.project } });
		expect(await list.json()).toEqual([]);
	});

	it("checks the token before the parameters", async () => {
		const bad = { project: "../x", branch: "" };
		const none = await call("POST", "/v1/profiles/not-a-sha", { token: null, query: bad, body: "plain" });
		expect(none.status).toBe(401);
		const read = await call("POST", "/v1/profiles/not-a-sha", { token: READ, query: bad, body: "plain" });
		expect(read.status).toBe(403);
		const write = await call("POST", "/v1/profiles/not-a-sha", { query: bad, body: "plain" });
		expect(write.status).toBe(400);
	});

	it("still requires the bearer token when Cloudflare Access headers are present", async () => {
		const access = { "cf-access-client-id": "id.access", "cf-access-client-secret": "s3cret" };
		const without = await call("GET", "/v1/profiles", { token: null, headers: access });
		expect(without.status).toBe(401);
		const withToken = await call("GET", "/v1/profiles", { headers: access });
		expect(withToken.status).toBe(200);
	});

	it("refuses the read token when READ_TOKEN is not configured", async () => {
		const noRead = { ...env, READ_TOKEN: "" };
		const res = await callWithEnv(noRead, "GET", "/v1/profiles", { token: READ });
		expect(res.status).toBe(401);
		const empty = await callWithEnv(noRead, "GET", "/v1/profiles", { token: null, headers: { authorization: "Bearer " } });
		expect(empty.status).toBe(401);
	});

	it.each([
		["not set", undefined],
		["empty", ""],
	])("answers 500 rather than running open when AUTH_TOKEN is %s", async (_, secret) => {
		for (const token of ["", WRITE]) {
			const res = await callWithEnv({ ...env, AUTH_TOKEN: secret }, "GET", "/v1/profiles", { token });
			expect(res.status, token).toBe(500);
			expect((await res.json()).error).toMatch(/AUTH_TOKEN/);
		}
	});

	it("runs where crypto.subtle.timingSafeEqual exists", () => {
		// auth.js falls back to its own loop, but workerd should offer this.
		expect(typeof crypto.subtle.timingSafeEqual).toBe("function");
	});
});
