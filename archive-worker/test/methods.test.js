// SPDX-License-Identifier: MIT OR Apache-2.0
// Unknown paths answer 404 and wrong methods 405 with an Allow header.
import { describe, expect, it } from "vitest";
import { call, sha } from "./helpers.js";

describe("methods", () => {
	it.each([
		["POST", "/v1/profiles", "GET"],
		["DELETE", "/v1/profiles", "GET"],
		["POST", "/v1/profiles/latest", "GET"],
		["PUT", "/v1/profiles/latest", "GET"],
		["PUT", `/v1/profiles/${sha("a")}`, "GET, POST"],
		["DELETE", `/v1/profiles/${sha("a")}`, "GET, POST"],
		["PATCH", `/v1/profiles/${sha("a")}`, "GET, POST"],
	])("%s %s answers 405 with Allow: %s", async (method, path, allow) => {
		const res = await call(method, path);
		expect(res.status).toBe(405);
		expect(res.headers.get("allow")).toBe(allow);
		expect((await res.json()).error).toMatch(new RegExp(method));
	});

	it("answers 405 before checking the token", async () => {
		const res = await call("DELETE", "/v1/profiles", { token: null });
		expect(res.status).toBe(405);
	});
});

describe("unknown paths", () => {
	it.each([
		"/",
		"/v1",
		"/v1/",
		"/v1/profiles/",
		"/v1/profile",
		"/v2/profiles",
		`/v1/profiles/${sha("a")}/extra`,
		"/v1/profiles/latest/main",
		"/V1/PROFILES",
	])("GET %s answers 404 JSON", async (path) => {
		const res = await call("GET", path);
		expect(res.status).toBe(404);
		expect(res.headers.get("content-type")).toBe("application/json");
		expect((await res.json()).error).toMatch(/no such route/);
	});
});
