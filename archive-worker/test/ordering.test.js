// SPDX-License-Identifier: MIT OR Apache-2.0
// "Newest" is the server's upload time, ties broken by the greater SHA; and
// an upload that fails part-way never becomes visible.
import { describe, expect, it } from "vitest";
import {
	blobKeys,
	call,
	callWithEnv,
	env,
	freshProject,
	gunzip,
	gzip,
	setUploadedAt,
	sha,
	upload,
} from "./helpers.js";

async function latestSha(project, branch) {
	const res = await call("GET", "/v1/profiles/latest", { query: { project, branch } });
	expect(res.status).toBe(200);
	return res.headers.get("x-culpert-sha");
}

async function listShas(project, query = {}) {
	const res = await call("GET", "/v1/profiles", { query: { project, ...query } });
	expect(res.status).toBe(200);
	return (await res.json()).map((u) => u.sha);
}

describe("newest first", () => {
	it("picks the later upload even when its SHA is smaller", async () => {
		const project = freshProject();
		await upload(project, sha("ff"), "main", "older");
		await upload(project, sha("11"), "main", "newer");
		await setUploadedAt(project, sha("ff"), 1_000);
		await setUploadedAt(project, sha("11"), 2_000);
		expect(await latestSha(project, "main")).toBe(sha("11"));
		expect(await listShas(project)).toEqual([sha("11"), sha("ff")]);
	});

	it("breaks a tie in upload time by the greater SHA", async () => {
		const project = freshProject();
		for (const seed of ["5a", "c3", "07"]) await upload(project, sha(seed), "main", seed);
		for (const seed of ["5a", "c3", "07"]) await setUploadedAt(project, sha(seed), 5_000);
		expect(await latestSha(project, "main")).toBe(sha("c3"));
		expect(await listShas(project)).toEqual([sha("c3"), sha("5a"), sha("07")]);
		expect(await listShas(project, { branch: "main" })).toEqual([sha("c3"), sha("5a"), sha("07")]);
	});

	it("answers the bytes of the newest row, not just its SHA", async () => {
		const project = freshProject();
		await upload(project, sha("a1"), "main", "first");
		await upload(project, sha("a2"), "main", "second");
		await setUploadedAt(project, sha("a1"), 9_000);
		await setUploadedAt(project, sha("a2"), 8_000);
		const res = await call("GET", "/v1/profiles/latest", { query: { project, branch: "main" } });
		expect(await gunzip(new Uint8Array(await res.arrayBuffer()))).toBe("first");
	});

	it("moves a re-uploaded SHA to the front", async () => {
		const project = freshProject();
		await upload(project, sha("b1"), "main", "b1");
		await upload(project, sha("b2"), "main", "b2");
		await setUploadedAt(project, sha("b1"), 1_000);
		await setUploadedAt(project, sha("b2"), 2_000);
		expect(await latestSha(project, "main")).toBe(sha("b2"));
		await upload(project, sha("b1"), "main", "b1 again");
		expect(await latestSha(project, "main")).toBe(sha("b1"));
		expect(await listShas(project)).toEqual([sha("b1"), sha("b2")]);
	});

	it("honours limit, keeping the newest", async () => {
		const project = freshProject();
		const seeds = ["01", "02", "03", "04", "05"];
		for (const [i, seed] of seeds.entries()) {
			await upload(project, sha(seed), "main", seed);
			await setUploadedAt(project, sha(seed), 1_000 + i);
		}
		expect(await listShas(project, { limit: "2" })).toEqual([sha("05"), sha("04")]);
		expect(await listShas(project)).toHaveLength(5);
	});

	it("lists the newest 50 when no limit is given", async () => {
		const project = freshProject();
		const seeds = Array.from({ length: 51 }, (_, i) => i.toString(16).padStart(2, "0"));
		for (const [i, seed] of seeds.entries()) {
			await upload(project, sha(seed), "main", seed);
			await setUploadedAt(project, sha(seed), 1_000 + i);
		}
		const newest = seeds.map((seed) => sha(seed)).reverse();
		expect(await listShas(project)).toEqual(newest.slice(0, 50));
		expect(await listShas(project, { branch: "main" })).toEqual(newest.slice(0, 50));
		expect(await listShas(project, { limit: "1000" })).toEqual(newest);
	});

	it("reports uploaded_at as the stored server time", async () => {
		const project = freshProject();
		await upload(project, sha("c1"), "main", "t");
		await setUploadedAt(project, sha("c1"), Date.UTC(2026, 0, 2, 3, 4, 5, 6));
		const [row] = await (await call("GET", "/v1/profiles", { query: { project } })).json();
		expect(row.uploaded_at).toBe("2026-01-02T03:04:05.006Z");
	});
});

/** An environment whose binding runs `method` through wrap(real method, args). */
function wrapped(binding, method, wrap) {
	const real = env[binding];
	const proxy = new Proxy(real, {
		get(target, prop) {
			const value = target[prop];
			if (prop === method) return (...args) => wrap(value.bind(target), ...args);
			return typeof value === "function" ? value.bind(target) : value;
		},
	});
	return { ...env, [binding]: proxy };
}

/** An environment whose D1 or R2 fails on the named operation. */
function failing(binding, method) {
	return wrapped(binding, method, async () => {
		throw new Error(`injected ${binding}.${method} failure`);
	});
}

describe("failed uploads", () => {
	it("leaves neither row nor blob when the index write fails", async () => {
		const project = freshProject();
		const res = await callWithEnv(failing("DB", "batch"), "POST", `/v1/profiles/${sha("d1")}`, {
			body: await gzip("lost"),
			query: { project, branch: "main" },
		});
		expect(res.status).toBe(500);
		expect(await res.json()).toEqual({ error: "internal error" });
		expect(await listShas(project)).toEqual([]);
		expect(await blobKeys(project)).toEqual([]);
		const latest = await call("GET", "/v1/profiles/latest", { query: { project, branch: "main" } });
		expect(latest.status).toBe(404);
	});

	it("keeps the earlier upload of a SHA when replacing it fails", async () => {
		const project = freshProject();
		await upload(project, sha("d2"), "main", "kept");
		const res = await callWithEnv(failing("DB", "batch"), "POST", `/v1/profiles/${sha("d2")}`, {
			body: await gzip("lost"),
			query: { project, branch: "main" },
		});
		expect(res.status).toBe(500);
		const got = await call("GET", `/v1/profiles/${sha("d2")}`, { query: { project } });
		expect(await gunzip(new Uint8Array(await got.arrayBuffer()))).toBe("kept");
		expect(await blobKeys(project)).toHaveLength(1);
	});

	it("keeps the new blob when the index write fails after it committed", async () => {
		// D1 may report an error for a batch it did commit (a lost answer):
		// the row then names the new blob, which must stay.
		const project = freshProject();
		await upload(project, sha("d7"), "main", "old");
		const lostAnswer = wrapped("DB", "batch", async (batch, statements) => {
			await batch(statements);
			throw new Error("injected D1 failure after the commit");
		});
		const res = await callWithEnv(lostAnswer, "POST", `/v1/profiles/${sha("d7")}`, {
			body: await gzip("new"),
			query: { project, branch: "main" },
		});
		expect(res.status).toBe(500);
		const got = await call("GET", `/v1/profiles/${sha("d7")}`, { query: { project } });
		expect(got.status).toBe(200);
		expect(await gunzip(new Uint8Array(await got.arrayBuffer()))).toBe("new");
		const latest = await call("GET", "/v1/profiles/latest", { query: { project, branch: "main" } });
		expect(await gunzip(new Uint8Array(await latest.arrayBuffer()))).toBe("new");
	});

	it("adds no row when the blob write fails", async () => {
		const project = freshProject();
		const res = await callWithEnv(failing("PROFILES", "put"), "POST", `/v1/profiles/${sha("d3")}`, {
			body: await gzip("lost"),
			query: { project, branch: "main" },
		});
		expect(res.status).toBe(500);
		expect(await listShas(project)).toEqual([]);
	});

	it("still answers 201 when deleting the replaced blob fails, serving the new one", async () => {
		const project = freshProject();
		await upload(project, sha("d4"), "main", "old");
		const res = await callWithEnv(failing("PROFILES", "delete"), "POST", `/v1/profiles/${sha("d4")}`, {
			body: await gzip("new"),
			query: { project, branch: "main" },
		});
		expect(res.status).toBe(201);
		const got = await call("GET", `/v1/profiles/${sha("d4")}`, { query: { project } });
		expect(await gunzip(new Uint8Array(await got.arrayBuffer()))).toBe("new");
		// The old blob is an orphan: stored, but never listed or served.
		expect(await blobKeys(project)).toHaveLength(2);
		expect(await listShas(project)).toEqual([sha("d4")]);
	});

	it("never serves a blob that has no index row", async () => {
		const project = freshProject();
		await env.PROFILES.put(`${project}/${sha("d5")}/orphan`, new Uint8Array([0x1f, 0x8b]));
		expect((await call("GET", `/v1/profiles/${sha("d5")}`, { query: { project } })).status).toBe(404);
		expect((await call("GET", "/v1/profiles/latest", { query: { project, branch: "main" } })).status).toBe(404);
		expect(await listShas(project)).toEqual([]);
	});

	it("answers 500 JSON when a row names a missing blob", async () => {
		const project = freshProject();
		await upload(project, sha("d6"), "main", "gone");
		for (const key of await blobKeys(project)) await env.PROFILES.delete(key);
		const res = await call("GET", `/v1/profiles/${sha("d6")}`, { query: { project } });
		expect(res.status).toBe(500);
		expect((await res.json()).error).toMatch(/missing from storage/);
	});
});

describe("reads racing a re-upload", () => {
	/**
	 * An environment in which the first `races` blob reads each let a
	 * re-upload of `commit` ("replacement 1", "replacement 2", ...) in
	 * first, so the blob the reader's row named is gone when it gets there.
	 */
	function replacedOnRead(project, commit, races) {
		const reads = { races: 0 };
		reads.env = wrapped("PROFILES", "get", async (get, key) => {
			if (reads.races < races) {
				reads.races++;
				expect((await upload(project, commit, "main", `replacement ${reads.races}`)).status).toBe(201);
			}
			return get(key);
		});
		return reads;
	}

	it.each([
		["by SHA", (project) => [`/v1/profiles/${sha("e1")}`, { project }]],
		["latest", (project) => ["/v1/profiles/latest", { project, branch: "main" }]],
	])("GET %s whose blob was replaced meanwhile answers the new profile", async (_, route) => {
		const project = freshProject();
		await upload(project, sha("e1"), "main", "first");
		const reads = replacedOnRead(project, sha("e1"), 1);
		const [path, query] = route(project);
		const res = await callWithEnv(reads.env, "GET", path, { query });
		expect(res.status).toBe(200);
		expect(res.headers.get("x-culpert-sha")).toBe(sha("e1"));
		expect(await gunzip(new Uint8Array(await res.arrayBuffer()))).toBe("replacement 1");
	});

	it("answers 503 with Retry-After once the profile was replaced four times during one read", async () => {
		const project = freshProject();
		await upload(project, sha("e2"), "main", "first");
		const reads = replacedOnRead(project, sha("e2"), Infinity);
		const res = await callWithEnv(reads.env, "GET", `/v1/profiles/${sha("e2")}`, { query: { project } });
		expect(res.status).toBe(503);
		expect(res.headers.get("retry-after")).toBe("1");
		expect((await res.json()).error).toMatch(/replaced.*retry/);
		expect(reads.races).toBe(4);
		const after = await call("GET", `/v1/profiles/${sha("e2")}`, { query: { project } });
		expect(await gunzip(new Uint8Array(await after.arrayBuffer()))).toBe("replacement 4");
	});
});
