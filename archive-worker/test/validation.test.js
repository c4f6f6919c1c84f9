// SPDX-License-Identifier: MIT OR Apache-2.0
// Refused input: SHA, branch, project, limit, body content and body size.
import { describe, expect, it } from "vitest";
import { LIMIT, call, callWithEnv, env, freshProject, gzip, sha } from "./helpers.js";

async function post(commit, query, body) {
	return call("POST", `/v1/profiles/${commit}`, { body: body ?? (await gzip("p")), query });
}

async function expectError(res, status, pattern) {
	expect(res.status).toBe(status);
	expect(res.headers.get("content-type")).toBe("application/json");
	const json = await res.json();
	expect(Object.keys(json)).toEqual(["error"]);
	expect(json.error).toMatch(pattern);
}

const BAD_SHAS = [
	["too short", "abc123"],
	["too long", "a".repeat(65)],
	["not hex", "g".repeat(40)],
	["punctuation", "abcdef0-"],
	["percent-encoded", "abcdef0%41"],
];

describe("SHA", () => {
	it.each(BAD_SHAS)("refuses a SHA that is %s on POST and GET", async (_, bad) => {
		await expectError(await post(bad, { branch: "main", project: freshProject() }), 400, /bad SHA/);
		await expectError(await call("GET", `/v1/profiles/${bad}`), 400, /bad SHA/);
	});
});

const BAD_BRANCHES = [
	["empty", ""],
	["256 bytes long", "b".repeat(256)],
	["256 bytes of two-byte characters", "é".repeat(128)],
	["a newline", "main\nx"],
	["a tab", "ma\tin"],
	["a NUL", "ma\u0000in"],
	["DEL", "main\u007f"],
	["a C1 control", "main\u0085"],
];

describe("branch", () => {
	it.each(BAD_BRANCHES)("refuses a branch with %s on every route", async (_, bad) => {
		const project = freshProject();
		await expectError(await post(sha("a1"), { branch: bad, project }), 400, /bad branch/);
		await expectError(await call("GET", "/v1/profiles/latest", { query: { branch: bad, project } }), 400, /bad branch/);
		await expectError(await call("GET", "/v1/profiles", { query: { branch: bad, project } }), 400, /bad branch/);
	});

	it("accepts a branch of exactly 255 bytes", async () => {
		const res = await post(sha("a2"), { branch: "é".repeat(127) + "x", project: freshProject() });
		expect(res.status).toBe(201);
	});

	it("requires a branch on upload", async () => {
		await expectError(await post(sha("a3"), { project: freshProject() }), 400, /branch.*required/);
	});

	it("refuses a branch given twice", async () => {
		const res = await call("POST", `/v1/profiles/${sha("a4")}?branch=a&branch=b`, { body: await gzip("p") });
		await expectError(res, 400, /branch: given more than once/);
	});
});

const BAD_PROJECTS = [
	["empty", ""],
	["65 characters long", "p".repeat(65)],
	["a slash", "a/b"],
	["a space", "a b"],
	["a dot only", "."],
	["two dots", ".."],
	["a leading dash", "-p"],
	["non-ASCII", "prøject"],
];

describe("project", () => {
	it.each(BAD_PROJECTS)("refuses a project that is %s on every route", async (_, bad) => {
		await expectError(await post(sha("b1"), { branch: "main", project: bad }), 400, /bad project/);
		await expectError(await call("GET", `/v1/profiles/${sha("b1")}`, { query: { project: bad } }), 400, /bad project/);
		await expectError(await call("GET", "/v1/profiles/latest", { query: { branch: "main", project: bad } }), 400, /bad project/);
		await expectError(await call("GET", "/v1/profiles", { query: { project: bad } }), 400, /bad project/);
	});

	it("accepts letters, digits, dot, underscore and dash up to 64 characters", async () => {
		for (const project of ["A.b_c-9", "x".repeat(64), "9"]) {
			expect((await post(sha("b2"), { branch: "main", project })).status, project).toBe(201);
		}
	});
});

describe("limit", () => {
	it.each(["0", "1001", "-1", "abc", "1.5", "", "10000", " 5"])("refuses limit=%j", async (bad) => {
		await expectError(await call("GET", "/v1/profiles", { query: { limit: bad } }), 400, /bad limit/);
	});

	it("accepts 1 and 1000", async () => {
		for (const limit of ["1", "1000"]) {
			expect((await call("GET", "/v1/profiles", { query: { limit, project: freshProject() } })).status).toBe(200);
		}
	});
});

// Every route, with a query that repeats one parameter; P stands for a
// project of the test's own. The route need not read the parameter.
const REPEATED = [
	["GET by SHA, a branch it does not read", "GET", "/v1/profiles/c0ffee1?project=P&branch=a&branch=b", /bad branch: given more than once/],
	["GET by SHA, the project", "GET", "/v1/profiles/c0ffee1?project=P&project=P", /bad project: given more than once/],
	["latest, a limit it does not read", "GET", "/v1/profiles/latest?project=P&branch=x&limit=1&limit=2", /bad limit: given more than once/],
	["latest, the branch", "GET", "/v1/profiles/latest?project=P&branch=x&branch=x", /bad branch: given more than once/],
	["list, an unknown parameter", "GET", "/v1/profiles?project=P&x=1&x=2", /bad x: given more than once/],
	["list, with empty values", "GET", "/v1/profiles?project=P&limit&limit=", /bad limit: given more than once/],
	["list, spelt differently", "GET", "/v1/profiles?project=P&branch=a&%62ranch=a", /bad branch: given more than once/],
	["upload, a limit it does not read", "POST", "/v1/profiles/c0ffee2?project=P&branch=x&limit=0&limit=x", /bad limit: given more than once/],
	["upload, the branch", "POST", "/v1/profiles/c0ffee2?project=P&branch=x&branch=y", /bad branch: given more than once/],
];

// Percent-encodings that do not decode to valid UTF-8, in every parameter.
const NOT_UTF8 = [
	["a lone byte FF", "rel%FF"],
	["a truncated sequence", "rel%C3"],
	["a continuation byte alone", "%80"],
	["an overlong slash", "%C0%AF"],
	["a UTF-16 surrogate", "%ED%A0%80"],
	["a code point over U+10FFFF", "%F4%90%80%80"],
];

describe("query string", () => {
	it.each(REPEATED)("refuses a parameter given twice: %s", async (_, method, path, pattern) => {
		const project = freshProject();
		const body = method === "POST" ? await gzip("p") : undefined;
		await expectError(await call(method, path.replaceAll("=P", `=${project}`), { body }), 400, pattern);
		const list = await call("GET", "/v1/profiles", { query: { project } });
		expect(await list.json()).toEqual([]);
	});

	it.each(NOT_UTF8)("refuses %s in any parameter on every route", async (_, bad) => {
		const project = freshProject();
		const routes = [
			["POST", `/v1/profiles/${sha("d1")}?project=${project}&branch=`, "branch"],
			["GET", `/v1/profiles/latest?project=${project}&branch=`, "branch"],
			["GET", `/v1/profiles?project=${project}&branch=`, "branch"],
			["GET", `/v1/profiles?project=${project}&limit=`, "limit"],
			["GET", `/v1/profiles/${sha("d1")}?project=${project}&unread=`, "unread"],
			["GET", `/v1/profiles/${sha("d1")}?project=`, "project"],
		];
		for (const [method, path, name] of routes) {
			const body = method === "POST" ? await gzip("p") : undefined;
			await expectError(await call(method, path + bad, { body }), 400, new RegExp(`^bad ${name}: not valid UTF-8`));
		}
		await expectError(await call("GET", `/v1/profiles?${bad}=1`), 400, /^bad query parameter name .*: not valid UTF-8/);
		const list = await call("GET", "/v1/profiles", { query: { project } });
		expect(await list.json()).toEqual([]);
	});

	it("keeps branches apart that URLSearchParams would turn into one", async () => {
		// rel%FF, rel%FE and rel%EF%BF%BD all read as "rel\uFFFD" there.
		const project = freshProject();
		await expectError(await call("POST", `/v1/profiles/fff0001?branch=rel%FF&project=${project}`, { body: await gzip("p") }), 400, /bad branch/);
		await expectError(await call("GET", `/v1/profiles/latest?branch=rel%FE&project=${project}`), 400, /bad branch/);
		const replacement = await call("GET", `/v1/profiles/latest?branch=rel%EF%BF%BD&project=${project}`);
		await expectError(replacement, 404, /no profile on branch/);
	});

	it("decodes valid percent-encodings and + as URLSearchParams does", async () => {
		const project = freshProject();
		const branch = "feat/ü €+ 😀 %zz";
		const query = `branch=feat%2F%C3%BC+%E2%82%AC%2B%20%F0%9F%98%80+%zz&project=${project}`;
		const res = await call("POST", `/v1/profiles/${sha("d2")}?${query}`, { body: await gzip("p") });
		expect(res.status).toBe(201);
		expect((await res.json()).branch).toBe(branch);
		const latest = await call("GET", "/v1/profiles/latest", { query: { branch, project } });
		expect(latest.status).toBe(200);
		expect(latest.headers.get("x-culpert-sha")).toBe(sha("d2"));
	});
});

describe("body", () => {
	it.each([
		["plain text", new TextEncoder().encode("not a profile")],
		["one byte of the magic", new Uint8Array([0x1f])],
		["a zip file", new Uint8Array([0x50, 0x4b, 0x03, 0x04])],
		["the magic reversed", new Uint8Array([0x8b, 0x1f, 0x08])],
		["compress (.Z) data, which shares the first byte", new Uint8Array([0x1f, 0x9d, 0x90])],
	])("refuses %s as not gzip", async (_, body) => {
		await expectError(await post(sha("c1"), { branch: "main", project: freshProject() }, body), 400, /not gzip/);
	});

	it("refuses an empty body", async () => {
		await expectError(await post(sha("c2"), { branch: "main" }, new Uint8Array(0)), 400, /not gzip/);
		const none = await call("POST", `/v1/profiles/${sha("c2")}`, { query: { branch: "main" } });
		await expectError(none, 400, /not gzip/);
	});

	it("accepts the bare magic: the archive never parses profiles", async () => {
		const res = await post(sha("c3"), { branch: "main", project: freshProject() }, new Uint8Array([0x1f, 0x8b]));
		expect(res.status).toBe(201);
		expect((await res.json()).size).toBe(2);
	});

	it("accepts a body of exactly MAX_BODY_BYTES", async () => {
		const body = new Uint8Array(LIMIT);
		body.set([0x1f, 0x8b]);
		const res = await post(sha("c4"), { branch: "main", project: freshProject() }, body);
		expect(res.status).toBe(201);
		expect((await res.json()).size).toBe(LIMIT);
	});

	it("answers 413 when Content-Length is over the limit", async () => {
		const project = freshProject();
		const body = new Uint8Array(LIMIT + 1);
		body.set([0x1f, 0x8b]);
		const res = await post(sha("c5"), { branch: "main", project }, body);
		await expectError(res, 413, new RegExp(`limit of ${LIMIT} bytes`));
		const list = await call("GET", "/v1/profiles", { query: { project } });
		expect(await list.json()).toEqual([]);
	});

	it("answers 413 when a streamed body without Content-Length grows over the limit", async () => {
		const project = freshProject();
		let sent = 0;
		const stream = new ReadableStream({
			pull(controller) {
				const chunk = new Uint8Array(1000);
				if (sent === 0) chunk.set([0x1f, 0x8b]);
				sent += chunk.byteLength;
				controller.enqueue(chunk);
				if (sent > 3 * LIMIT) controller.close();
			},
		});
		const req = new Request(`http://archive.test/v1/profiles/${sha("c6")}?branch=main&project=${project}`, {
			method: "POST",
			body: stream,
			headers: { authorization: "Bearer test-write-token" },
		});
		expect(req.headers.get("content-length")).toBeNull();
		const { default: worker } = await import("../src/index.js");
		await expectError(await worker.fetch(req, env), 413, /limit/);
		const list = await call("GET", "/v1/profiles", { query: { project } });
		expect(await list.json()).toEqual([]);
	});

	it("counts a streamed body without Content-Length to the byte", async () => {
		// One byte over the limit in the last chunk is refused; the limit itself is not.
		const { default: worker } = await import("../src/index.js");
		const send = (project, size) => {
			let sent = 0;
			const stream = new ReadableStream({
				pull(controller) {
					const chunk = new Uint8Array(Math.min(1000, size - sent));
					if (sent === 0) chunk.set([0x1f, 0x8b]);
					sent += chunk.byteLength;
					controller.enqueue(chunk);
					if (sent === size) controller.close();
				},
			});
			return worker.fetch(
				new Request(`http://archive.test/v1/profiles/${sha("ca")}?branch=main&project=${project}`, {
					method: "POST",
					body: stream,
					headers: { authorization: "Bearer test-write-token" },
				}),
				env,
			);
		};
		const over = freshProject();
		await expectError(await send(over, LIMIT + 1), 413, new RegExp(`limit of ${LIMIT} bytes`));
		expect(await (await call("GET", "/v1/profiles", { query: { project: over } })).json()).toEqual([]);
		const at = await send(freshProject(), LIMIT);
		expect(at.status).toBe(201);
		expect((await at.json()).size).toBe(LIMIT);
	});

	it("reads a refused chunked body to its end before answering", async () => {
		// Under `wrangler dev`, a body abandoned part-way made the next request
		// hang (tests/archive/worker_e2e_test.mjs checks that end to end).
		// Counts what the worker pulls from a long gzip-looking stream, and
		// from a non-gzip one, both far over the limit.
		function counted(first, chunks) {
			const state = { pulled: 0, closed: false };
			state.stream = new ReadableStream({
				pull(controller) {
					const chunk = new Uint8Array(500);
					if (state.pulled === 0) chunk.set(first);
					state.pulled += chunk.byteLength;
					controller.enqueue(chunk);
					if (state.pulled >= chunks * 500) {
						controller.close();
						state.closed = true;
					}
				},
				cancel() {
					state.cancelled = true;
				},
			});
			return state;
		}
		const { default: worker } = await import("../src/index.js");
		const send = (stream) =>
			worker.fetch(
				new Request(`http://archive.test/v1/profiles/${sha("c9")}?branch=main&project=${freshProject()}`, {
					method: "POST",
					body: stream,
					headers: { authorization: "Bearer test-write-token" },
				}),
				env,
			);

		const big = counted([0x1f, 0x8b], 400); // 200000 bytes, 48 times the limit
		await expectError(await send(big.stream), 413, /limit/);
		expect(big.pulled).toBe(200000);
		expect(big.closed && !big.cancelled).toBe(true);

		const plain = counted([0x41, 0x42], 100);
		await expectError(await send(plain.stream), 400, /not gzip/);
		expect(plain.pulled).toBe(50000);
		expect(plain.closed && !plain.cancelled).toBe(true);
	});

	it("uses 32 MiB when MAX_BODY_BYTES is not set", async () => {
		const body = new Uint8Array(LIMIT * 2);
		body.set([0x1f, 0x8b]);
		const res = await callWithEnv({ ...env, MAX_BODY_BYTES: undefined }, "POST", `/v1/profiles/${sha("c7")}`, {
			body,
			query: { branch: "main", project: freshProject() },
		});
		expect(res.status).toBe(201);
		const whole = new Uint8Array(32 * 1024 * 1024);
		whole.set([0x1f, 0x8b]);
		const exact = await callWithEnv({ ...env, MAX_BODY_BYTES: undefined }, "POST", `/v1/profiles/${sha("c7")}`, {
			body: whole,
			query: { branch: "main", project: freshProject() },
		});
		expect(exact.status).toBe(201);
		expect((await exact.json()).size).toBe(32 * 1024 * 1024);
		const big = await callWithEnv({ ...env, MAX_BODY_BYTES: undefined }, "POST", `/v1/profiles/${sha("c7")}`, {
			body: new Uint8Array([0x1f, 0x8b]),
			headers: { "content-length": String(32 * 1024 * 1024 + 1) },
			query: { branch: "main", project: freshProject() },
		});
		expect(big.status).toBe(413);
	});

	it("answers 500 for a MAX_BODY_BYTES that is not a positive integer", async () => {
		for (const bad of ["0", "-5", "32MiB", "1e6"]) {
			const res = await callWithEnv({ ...env, MAX_BODY_BYTES: bad }, "POST", `/v1/profiles/${sha("c8")}`, {
				body: await gzip("p"),
				query: { branch: "main", project: freshProject() },
			});
			await expectError(res, 500, /MAX_BODY_BYTES/);
		}
	});
});
