// SPDX-License-Identifier: MIT OR Apache-2.0
// The four routes of archive-api.md, their answers and their 404s.
import { describe, expect, it } from "vitest";
import { blobKeys, call, freshProject, gunzip, gzip, setUploadedAt, sha, upload } from "./helpers.js";

describe("POST /v1/profiles/{sha}", () => {
	it("answers 201 with the stored upload's description", async () => {
		const project = freshProject();
		const body = await gzip("profile one");
		const before = Date.now();
		const res = await call("POST", `/v1/profiles/${sha("a1")}`, {
			body,
			query: { project, branch: "main" },
		});
		expect(res.status).toBe(201);
		expect(res.headers.get("content-type")).toBe("application/json");
		const json = await res.json();
		expect(json).toEqual({
			project,
			sha: sha("a1"),
			branch: "main",
			size: body.byteLength,
			uploaded_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
		});
		expect(Date.parse(json.uploaded_at)).toBeGreaterThanOrEqual(before - 1000);
		expect(res.headers.get("location")).toBe(`/v1/profiles/${sha("a1")}?project=${project}`);
	});

	it("stores the SHA in lowercase and finds it whatever the case asked", async () => {
		const project = freshProject();
		const upper = "ABCDEF0123456789ABCDEF0123456789ABCDEF01";
		const res = await upload(project, upper, "main", "mixed case");
		expect((await res.json()).sha).toBe(upper.toLowerCase());
		const got = await call("GET", `/v1/profiles/${upper.toLowerCase()}`, { query: { project } });
		expect(got.status).toBe(200);
		const again = await call("GET", `/v1/profiles/${upper}`, { query: { project } });
		expect(await gunzip(new Uint8Array(await again.arrayBuffer()))).toBe("mixed case");
	});

	it("accepts a short 7-digit SHA and a 64-digit one", async () => {
		const project = freshProject();
		expect((await upload(project, "abc1234", "main", "short")).status).toBe(201);
		expect((await upload(project, "f".repeat(64), "main", "long")).status).toBe(201);
	});

	it("puts uploads without a project under 'default'", async () => {
		const commit = crypto.randomUUID().replaceAll("-", "");
		const res = await call("POST", `/v1/profiles/${commit}`, {
			body: await gzip("default project"),
			query: { branch: "main" },
		});
		expect(res.status).toBe(201);
		expect((await res.json()).project).toBe("default");
		const got = await call("GET", `/v1/profiles/${commit}`, { query: { project: "default" } });
		expect(got.status).toBe(200);
	});

	it("replaces an earlier upload of the same SHA, keeping one row and one blob", async () => {
		const project = freshProject();
		await upload(project, sha("b1"), "feature", "first");
		const second = await upload(project, sha("b1"), "main", "second, longer");
		expect(second.status).toBe(201);

		const got = await call("GET", `/v1/profiles/${sha("b1")}`, { query: { project } });
		expect(await gunzip(new Uint8Array(await got.arrayBuffer()))).toBe("second, longer");

		const list = await (await call("GET", "/v1/profiles", { query: { project } })).json();
		expect(list.map((u) => u.sha)).toEqual([sha("b1")]);
		expect(list[0].branch).toBe("main");
		expect(await blobKeys(project)).toHaveLength(1);

		// The SHA moved to main, so it is no longer the latest of feature.
		const old = await call("GET", "/v1/profiles/latest", { query: { project, branch: "feature" } });
		expect(old.status).toBe(404);
	});
});

describe("GET /v1/profiles/{sha}", () => {
	it("answers the exact bytes uploaded as application/octet-stream", async () => {
		const project = freshProject();
		const body = await gzip("exact bytes");
		await call("POST", `/v1/profiles/${sha("c1")}`, { body, query: { project, branch: "main" } });
		const res = await call("GET", `/v1/profiles/${sha("c1")}`, { query: { project } });
		expect(res.status).toBe(200);
		expect(res.headers.get("content-type")).toBe("application/octet-stream");
		expect(res.headers.get("x-culpert-sha")).toBe(sha("c1"));
		expect(new Uint8Array(await res.arrayBuffer())).toEqual(body);
	});

	it("names the commit and its upload time in X-Culpert-Sha and X-Culpert-Uploaded-At", async () => {
		const project = freshProject();
		const stored = await (await upload(project, sha("c3"), "main", "timed")).json();
		const bySha = await call("GET", `/v1/profiles/${sha("c3")}`, { query: { project } });
		const latest = await call("GET", "/v1/profiles/latest", { query: { project, branch: "main" } });
		for (const res of [bySha, latest]) {
			expect(res.status).toBe(200);
			expect(res.headers.get("x-culpert-sha")).toBe(sha("c3"));
			expect(res.headers.get("x-culpert-uploaded-at")).toBe(stored.uploaded_at);
		}
	});

	// `culpert pull --allow-missing` tells a missing profile from a wrong
	// URL's 404 by the message's start, "no profile".
	it("answers 404 JSON for an unknown SHA", async () => {
		const res = await call("GET", `/v1/profiles/${sha("dead")}`, { query: { project: freshProject() } });
		expect(res.status).toBe(404);
		expect(await res.json()).toEqual({ error: expect.stringMatching(new RegExp(`^no profile .*${sha("dead")}`)) });
	});

	it("matches the whole SHA only, not a prefix", async () => {
		const project = freshProject();
		await upload(project, sha("c2"), "main", "full");
		const res = await call("GET", `/v1/profiles/${sha("c2").slice(0, 7)}`, { query: { project } });
		expect(res.status).toBe(404);
	});
});

describe("GET /v1/profiles/latest", () => {
	it("answers the newest upload of the branch", async () => {
		const project = freshProject();
		await upload(project, sha("d1"), "main", "on main");
		await upload(project, sha("d2"), "other", "on other");
		const res = await call("GET", "/v1/profiles/latest", { query: { project, branch: "main" } });
		expect(res.status).toBe(200);
		expect(res.headers.get("content-type")).toBe("application/octet-stream");
		expect(res.headers.get("x-culpert-sha")).toBe(sha("d1"));
		expect(await gunzip(new Uint8Array(await res.arrayBuffer()))).toBe("on main");
	});

	it("matches the whole branch name, in its case", async () => {
		const project = freshProject();
		await upload(project, sha("d5"), "release/1", "release 1");
		for (const [seed, branch] of [["d6", "release/10"], ["d7", "Release/1"], ["d8", "release_1"]]) {
			await upload(project, sha(seed), branch, branch);
			await setUploadedAt(project, sha(seed), Date.now() + 60_000); // newer than release/1
		}
		const res = await call("GET", "/v1/profiles/latest", { query: { project, branch: "release/1" } });
		expect(res.headers.get("x-culpert-sha")).toBe(sha("d5"));
		const list = await (await call("GET", "/v1/profiles", { query: { project, branch: "release/1" } })).json();
		expect(list.map((u) => u.sha)).toEqual([sha("d5")]);
		const none = await call("GET", "/v1/profiles/latest", { query: { project, branch: "release/" } });
		expect(none.status).toBe(404);
	});

	it("answers 404 for a branch without uploads", async () => {
		const project = freshProject();
		await upload(project, sha("d3"), "main", "x");
		const res = await call("GET", "/v1/profiles/latest", { query: { project, branch: "nope" } });
		expect(res.status).toBe(404);
		expect((await res.json()).error).toMatch(/^no profile .*nope/); // see the unknown SHA's 404
	});

	it("requires branch", async () => {
		const res = await call("GET", "/v1/profiles/latest", { query: { project: freshProject() } });
		expect(res.status).toBe(400);
		expect((await res.json()).error).toMatch(/branch/);
	});

	it("handles branch names with slashes, spaces and non-ASCII text", async () => {
		const project = freshProject();
		const branch = "feature/ünïcode + space";
		expect((await upload(project, sha("d4"), branch, "odd branch")).status).toBe(201);
		const res = await call("GET", "/v1/profiles/latest", { query: { project, branch } });
		expect(res.status).toBe(200);
		expect(res.headers.get("x-culpert-sha")).toBe(sha("d4"));
	});
});

describe("GET /v1/profiles", () => {
	it("lists uploads as JSON, filtered by branch when asked", async () => {
		const project = freshProject();
		await upload(project, sha("e1"), "main", "1");
		await upload(project, sha("e2"), "dev", "22");
		const all = await call("GET", "/v1/profiles", { query: { project } });
		expect(all.status).toBe(200);
		expect(all.headers.get("content-type")).toBe("application/json");
		const list = await all.json();
		expect(list.map((u) => u.sha).sort()).toEqual([sha("e1"), sha("e2")]);
		for (const u of list) expect(Object.keys(u).sort()).toEqual(["branch", "project", "sha", "size", "uploaded_at"]);

		const dev = await (await call("GET", "/v1/profiles", { query: { project, branch: "dev" } })).json();
		expect(dev.map((u) => u.sha)).toEqual([sha("e2")]);
	});

	it("answers an empty list for a project without uploads", async () => {
		const res = await call("GET", "/v1/profiles", { query: { project: freshProject() } });
		expect(res.status).toBe(200);
		expect(await res.json()).toEqual([]);
	});
});

describe("projects", () => {
	it("keeps the same SHA and branch apart in two projects", async () => {
		const a = freshProject();
		const b = freshProject();
		await upload(a, sha("f1"), "main", "from a");
		await upload(b, sha("f1"), "main", "from b");
		await upload(a, sha("f2"), "main", "only a");

		const fromB = await call("GET", `/v1/profiles/${sha("f1")}`, { query: { project: b } });
		expect(await gunzip(new Uint8Array(await fromB.arrayBuffer()))).toBe("from b");
		const missing = await call("GET", `/v1/profiles/${sha("f2")}`, { query: { project: b } });
		expect(missing.status).toBe(404);
		const latestB = await call("GET", "/v1/profiles/latest", { query: { project: b, branch: "main" } });
		expect(latestB.headers.get("x-culpert-sha")).toBe(sha("f1"));
		const listB = await (await call("GET", "/v1/profiles", { query: { project: b } })).json();
		expect(listB.map((u) => u.sha)).toEqual([sha("f1")]);
	});

	it("tells projects apart by case", async () => {
		const lower = freshProject();
		const upper = lower.toUpperCase();
		await upload(lower, sha("f3"), "main", "lower");
		expect((await call("GET", `/v1/profiles/${sha("f3")}`, { query: { project: upper } })).status).toBe(404);
		expect((await call("GET", "/v1/profiles/latest", { query: { project: upper, branch: "main" } })).status).toBe(404);
		expect(await (await call("GET", "/v1/profiles", { query: { project: upper } })).json()).toEqual([]);
		await upload(upper, sha("f3"), "main", "upper");
		const got = await call("GET", `/v1/profiles/${sha("f3")}`, { query: { project: lower } });
		expect(await gunzip(new Uint8Array(await got.arrayBuffer()))).toBe("lower");
	});
});
