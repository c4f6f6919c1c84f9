// SPDX-License-Identifier: MIT OR Apache-2.0
// culpert upload / pull end to end against the real archive worker, run by
// `wrangler dev` (archive-worker/scripts/dev-server.sh) on 127.0.0.1 with
// its data in a temporary directory; the shared scenarios also run against
// a local directory archive, which must behave the same.
//
// The server runs in its own session and process group (spawn detached =
// setsid) and is stopped with a signal to the whole group, also when a test
// fails or this process is interrupted. Exits 77 (ctest: skipped) only when
// the worker's npm dependencies are missing and cannot be installed.
// Usage: node worker_e2e_test.mjs PATH/TO/culpert PATH/TO/mkprofile

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { CF_ID, CF_SECRET, MKPROFILE, READ_TOKEN, TOKEN, closedPort, expectExit, makeProfile, randomSha, run, tempDir } from "./lib.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const workerDir = path.resolve(here, "../../archive-worker");
const MAX_BODY = 65536;
const dir = tempDir("e2e");

const install = spawnSync("sh", [path.join(workerDir, "scripts/install-deps.sh")], { stdio: ["ignore", "inherit", "inherit"], env: { ...process.env, CI: "true" } });
if (install.status !== 0) {
	console.log("# SKIP: archive-worker's npm dependencies are missing and `npm ci` failed");
	process.exit(77);
}

let server = null; // { child, url, log }

function stopServer(signal = "SIGTERM") {
	if (!server || server.child.exitCode !== null || server.child.signalCode !== null) return;
	try {
		process.kill(-server.child.pid, signal); // the whole group: wrangler and workerd
	} catch {
		/* already gone */
	}
}
process.on("exit", () => stopServer("SIGKILL"));
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"])
	process.on(sig, () => {
		stopServer("SIGKILL");
		process.exit(1);
	});

async function startServer() {
	const port = await closedPort();
	const data = path.join(dir, "worker-data");
	const log = path.join(dir, "wrangler.log");
	const fd = fs.openSync(log, "w");
	const child = spawn("sh", [path.join(workerDir, "scripts/dev-server.sh"), String(port), data, TOKEN, READ_TOKEN], {
		detached: true,
		stdio: ["ignore", fd, fd],
		env: { ...process.env, MAX_BODY_BYTES: String(MAX_BODY) },
	});
	fs.closeSync(fd);
	server = { child, url: `http://127.0.0.1:${port}`, log };
	const deadline = Date.now() + 180000;
	while (Date.now() < deadline) {
		if (child.exitCode !== null) break;
		try {
			const res = await fetch(`${server.url}/v1/profiles`, { headers: { authorization: `Bearer ${TOKEN}` } });
			if (res.status === 200) return;
		} catch {
			/* not listening yet */
		}
		await new Promise((r) => setTimeout(r, 500));
	}
	const tail = fs.readFileSync(log, "utf8").split("\n").slice(-30).join("\n");
	throw new Error(`wrangler dev did not become ready on ${server.url}:\n${tail}`);
}

async function waitStopped() {
	if (!server) return;
	stopServer("SIGTERM");
	const exited = new Promise((r) => (server.child.exitCode !== null || server.child.signalCode !== null ? r() : server.child.once("exit", r)));
	const timer = new Promise((r) => setTimeout(r, 10000).unref());
	await Promise.race([exited, timer]);
	stopServer("SIGKILL");
	// workerd may outlive the shell briefly; the group signal reaches it too.
	try {
		process.kill(-server.child.pid, "SIGKILL");
	} catch {
		/* the group is gone */
	}
}

/**
 * Sends `method path` with a body of `size` bytes (gzip magic first) sent
 * chunked, without Content-Length, when `size` is a number. Resolves
 * { status, type, body, ms }, or { status: "timeout" } after `timeout` ms.
 */
function rawRequest(method, path, { size = null, timeout = 10000 } = {}) {
	return new Promise((resolve) => {
		const started = performance.now();
		const headers = { authorization: `Bearer ${TOKEN}` };
		if (size !== null) headers["transfer-encoding"] = "chunked";
		const agent = new http.Agent({ keepAlive: false });
		const req = http.request(`${server.url}${path}`, { method, headers, agent }, (res) => {
			const parts = [];
			res.on("data", (c) => parts.push(c));
			res.on("end", () =>
				resolve({ status: res.statusCode, type: res.headers["content-type"], body: Buffer.concat(parts).toString(), ms: performance.now() - started }),
			);
		});
		req.setTimeout(timeout, () => {
			req.destroy();
			resolve({ status: "timeout", ms: performance.now() - started });
		});
		req.on("error", (e) => resolve({ status: `error ${e.code}`, ms: performance.now() - started }));
		if (size === null) return req.end();
		const chunk = Buffer.alloc(65536);
		chunk.set([0x1f, 0x8b]);
		let sent = 0;
		const pump = () => {
			while (sent < size) {
				const part = chunk.subarray(0, Math.min(chunk.length, size - sent));
				sent += part.length;
				if (!req.write(part)) return req.once("drain", pump);
			}
			req.end();
		};
		pump();
	});
}

/** Scenarios both kinds of archive must pass; conn() gives the options. */
function sharedScenarios(kind, conn) {
	const up = (sha, branch, file, ...extra) => run(["upload", ...conn(), "--commit-sha", sha, "--branch", branch, ...extra, file]);
	const pull = (...sel) => run(["pull", ...conn(), ...sel]);

	test(`${kind}: upload, pull by SHA, the answer's shape`, async () => {
		const p = makeProfile(dir, `${kind}-a.pb.gz`);
		const sha = randomSha();
		const r = await up(sha.toUpperCase(), "main", p.file);
		expectExit(r, 0, "upload");
		const answer = JSON.parse(r.stdout.toString());
		assert.deepEqual(Object.keys(answer).sort(), ["branch", "project", "sha", "size", "uploaded_at"]);
		assert.deepEqual([answer.project, answer.sha, answer.branch, answer.size], ["default", sha, "main", p.bytes.length]);
		assert.ok(!Number.isNaN(Date.parse(answer.uploaded_at)));
		assert.match(r.stderr, new RegExp(`uploaded .* as commit ${sha} on branch main`));
		const s = await pull("--sha", sha);
		expectExit(s, 0, "pull --sha");
		assert.ok(s.stdout.equals(p.bytes));
	});

	test(`${kind}: a real profile comes back byte for byte and still reads the same`, async () => {
		assert.ok(MKPROFILE, "the suite needs tests/tools/mkprofile as its second argument");
		const original = path.join(dir, `${kind}-real.pb.gz`);
		const made = spawnSync(MKPROFILE, [path.join(here, "fixtures/profile.txt"), original]);
		assert.equal(made.status, 0, `mkprofile failed: ${made.stderr}`);
		const sha = randomSha();
		expectExit(await up(sha, "feature/archive", original), 0, "upload");
		const pulled = path.join(dir, `${kind}-real-pulled.pb.gz`);
		expectExit(await pull("--latest-of", "feature/archive", "-o", pulled), 0, "pull");
		assert.ok(fs.readFileSync(pulled).equals(fs.readFileSync(original)));
		const info = async (f) => {
			const r = await run(["info", f]);
			expectExit(r, 0, `culpert info ${f}`);
			return r.stdout.toString().replace(/^File:.*\n/, "");
		};
		const before = await info(original);
		assert.match(before, /Total bytes: +1\.50 MB/);
		assert.equal(await info(pulled), before);
	});

	test(`${kind}: latest of a branch is the newest upload; a re-upload replaces`, async () => {
		const branch = `feature/${kind}-ü`;
		const a = makeProfile(dir, `${kind}-la.pb.gz`);
		const b = makeProfile(dir, `${kind}-lb.pb.gz`);
		const c = makeProfile(dir, `${kind}-lc.pb.gz`);
		const [s1, s2] = [`f${randomSha(39)}`, `0${randomSha(39)}`];
		expectExit(await up(s1, branch, a.file), 0, "upload 1");
		await new Promise((r) => setTimeout(r, 5)); // distinct millisecond times
		expectExit(await up(s2, branch, b.file), 0, "upload 2");
		const out = path.join(dir, `${kind}-latest.pb.gz`);
		const r = await pull("--latest-of", branch, "-o", out);
		expectExit(r, 0, "pull latest");
		assert.ok(fs.readFileSync(out).equals(b.bytes), "the newer upload, not the greater SHA");
		assert.match(r.stderr, new RegExp(`pulled the latest of branch .* \\(commit ${s2}\\)`), "names the commit it got");
		await new Promise((r) => setTimeout(r, 5));
		expectExit(await up(s1, branch, c.file), 0, "re-upload");
		expectExit(await pull("--latest-of", branch, "-o", out), 0, "pull latest again");
		assert.ok(fs.readFileSync(out).equals(c.bytes), "the re-upload is the newest, with its new bytes");
	});

	test(`${kind}: --allow-missing writes nothing and exits 0; without it, exit 2`, async () => {
		const out = path.join(dir, `${kind}-missing.pb.gz`);
		for (const sel of [["--sha", randomSha(12)], ["--latest-of", "never-uploaded"]]) {
			let r = await pull(...sel, "-o", out);
			expectExit(r, 2, `pull ${sel.join(" ")}`);
			assert.match(r.stderr, /no profile for/);
			r = await pull(...sel, "-o", out, "--allow-missing");
			expectExit(r, 0, `pull ${sel.join(" ")} --allow-missing`);
			assert.match(r.stderr, /note: no profile for/);
			assert.ok(!fs.existsSync(out));
		}
	});

	test(`${kind}: projects are kept apart`, async () => {
		const a = makeProfile(dir, `${kind}-pa.pb.gz`);
		const b = makeProfile(dir, `${kind}-pb.pb.gz`);
		const sha = randomSha();
		expectExit(await up(sha, "main", a.file, "--project", "alpha"), 0, "upload alpha");
		let r = await pull("--sha", sha, "--project", "beta", "--allow-missing");
		expectExit(r, 0, "pull beta");
		assert.equal(r.stdout.length, 0, "beta does not see alpha's profile");
		expectExit(await up(sha, "main", b.file, "--project", "beta"), 0, "upload beta");
		r = await pull("--sha", sha, "--project", "alpha");
		assert.ok(r.stdout.equals(a.bytes), "alpha keeps its own bytes");
		r = await pull("--latest-of", "main", "--project", "beta");
		assert.ok(r.stdout.equals(b.bytes));
	});

	test(`${kind}: 20 concurrent uploads to one branch`, async () => {
		const branch = `race/${kind}`;
		const uploads = Array.from({ length: 20 }, (_, i) => ({ sha: randomSha(), ...makeProfile(dir, `${kind}-race-${i}.pb.gz`, 5000 + i) }));
		const results = await Promise.all(uploads.map((u) => up(u.sha, branch, u.file)));
		results.forEach((r, i) => expectExit(r, 0, `concurrent upload ${i}`));
		for (const u of uploads) {
			const r = await pull("--sha", u.sha);
			expectExit(r, 0, `pull ${u.sha}`);
			assert.ok(r.stdout.equals(u.bytes), `upload ${u.sha} intact`);
		}
		// Newest by the upload time each answer reported; equal times go to the greater SHA.
		const answers = results.map((r) => JSON.parse(r.stdout.toString()));
		const key = (a) => [Date.parse(a.uploaded_at), a.uploaded_at, a.sha];
		answers.sort((x, y) => {
			const [tx, sx, hx] = key(x);
			const [ty, sy, hy] = key(y);
			if (tx !== ty) return ty - tx;
			if (sx !== sy) return sx < sy ? 1 : -1;
			return hx < hy ? 1 : -1;
		});
		const r = await pull("--latest-of", branch);
		expectExit(r, 0, "pull latest");
		assert.ok(r.stdout.equals(uploads.find((u) => u.sha === answers[0].sha).bytes), "latest is well defined");
	});
}

describe("the archive worker under wrangler dev", () => {
	before(startServer, { timeout: 200000 });
	after(waitStopped);

	const conn = () => ["--endpoint", server.url, "--token", TOKEN];
	sharedScenarios("worker", conn);

	test("worker: a wrong token is rejected, and named as such", async () => {
		const r = await run(["pull", "--endpoint", server.url, "--token", `x${READ_TOKEN}`, "--sha", randomSha()]);
		expectExit(r, 2, "pull with a wrong token");
		assert.match(r.stderr, /token rejected .*HTTP 401/);
	});

	test("worker: the read-only token pulls but cannot upload", async () => {
		const p = makeProfile(dir, "ro.pb.gz");
		const sha = randomSha();
		expectExit(await run(["upload", ...conn(), "--commit-sha", sha, "--branch", "main", p.file]), 0, "upload with the write token");
		const ro = ["--endpoint", server.url, "--token", READ_TOKEN];
		const r = await run(["pull", ...ro, "--sha", sha]);
		expectExit(r, 0, "pull with the read token");
		assert.ok(r.stdout.equals(p.bytes));
		const u = await run(["upload", ...ro, "--commit-sha", sha, "--branch", "main", p.file]);
		expectExit(u, 2, "upload with the read token");
		assert.match(u.stderr, /upload refused .*HTTP 403/);
	});

	test("worker: Cloudflare Access headers are accepted alongside the token", async () => {
		const p = makeProfile(dir, "cf.pb.gz");
		const sha = randomSha();
		const cf = ["--cf-access-client-id", CF_ID, "--cf-access-client-secret", CF_SECRET];
		expectExit(await run(["upload", ...conn(), ...cf, "--commit-sha", sha, "--branch", "main", p.file, "--verbose"]), 0, "upload");
		const r = await run(["pull", "--sha", sha], { env: { CULPERT_ARCHIVE: server.url, CULPERT_TOKEN: TOKEN, CF_ACCESS_CLIENT_ID: CF_ID, CF_ACCESS_CLIENT_SECRET: CF_SECRET } });
		expectExit(r, 0, "pull");
		assert.ok(r.stdout.equals(p.bytes));
	});

	test("worker: a profile over the body limit is refused with 413", async () => {
		const big = makeProfile(dir, "big.pb.gz", MAX_BODY * 2);
		const r = await run(["upload", ...conn(), "--commit-sha", randomSha(), "--branch", "main", big.file]);
		expectExit(r, 2, "upload over the limit");
		assert.match(r.stderr, /larger than the archive .* accepts \(HTTP 413/);
	});

	test("worker: a chunked upload over the limit gets its 413, and the next requests are answered", async () => {
		// Under wrangler dev, a chunked body the worker began to read and then
		// abandoned made the next request hang (or answer a plain-text 503).
		for (const size of [MAX_BODY * 5, 64 * 1024 * 1024]) {
			const refused = await rawRequest("POST", `/v1/profiles/${randomSha()}?branch=main`, { size, timeout: 60000 });
			assert.equal(refused.status, 413, `chunked upload of ${size} bytes: ${refused.body}`);
			assert.equal(refused.type, "application/json");
			assert.match(JSON.parse(refused.body).error, new RegExp(`limit of ${MAX_BODY} bytes`));
			const list = await rawRequest("GET", "/v1/profiles?limit=1");
			assert.equal(list.status, 200, `the list after a refused chunked upload of ${size} bytes`);
			const p = makeProfile(dir, "after-413.pb.gz");
			const r = await run(["upload", ...conn(), "--commit-sha", randomSha(), "--branch", "main", p.file]);
			expectExit(r, 0, `an upload after a refused chunked upload of ${size} bytes`);
		}
	});

	test("worker: a wrong base URL is an error even with --allow-missing", async () => {
		const r = await run(["pull", "--endpoint", `${server.url}/api`, "--token", TOKEN, "--sha", randomSha(), "--allow-missing"]);
		expectExit(r, 2, "pull from a wrong base URL");
		assert.match(r.stderr, /no archive API at/);
	});
});

describe("a local directory archive", () => {
	const root = path.join(dir, "local-archive");
	sharedScenarios("directory", () => ["--endpoint", root]);
});
