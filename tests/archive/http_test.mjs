// SPDX-License-Identifier: MIT OR Apache-2.0
// culpert upload / pull against a local HTTP server that misbehaves on cue
// (misbehaving_server.mjs): retries, Retry-After, cut downloads, timeouts,
// refusals, headers sent. Every run also checks that no secret reaches the
// output (lib.mjs). Usage: node http_test.mjs PATH/TO/culpert

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, beforeEach, test } from "node:test";

import { CF_ID, CF_SECRET, TOKEN, closedPort, expectExit, listDir, makeProfile, randomSha, run, tempDir } from "./lib.mjs";
import { startServer } from "./misbehaving_server.mjs";

let server;
const dir = tempDir("http");
const profile = makeProfile(dir, "profile.pb.gz");
const SHA = randomSha();
const BRANCH = "feature/ü x";

// Short backoff budget: most tests pass --retries explicitly.
const conn = () => ["--endpoint", server.url, "--token", TOKEN];
const upload = (...extra) => run(["upload", ...conn(), "--commit-sha", SHA, "--branch", BRANCH, ...extra, profile.file]);
const answer201 = () => ({
	status: 201,
	headers: { "content-type": "application/json" },
	body: JSON.stringify({ project: "default", sha: SHA, branch: BRANCH, size: profile.bytes.length, uploaded_at: "2026-01-01T00:00:00.000Z" }),
});
const missing = { status: 404, body: '{"error":"no profile for SHA 1234567 in project default"}' };

before(async () => {
	server = await startServer();
});
after(async () => {
	await server.close();
});
beforeEach(() => server.reset());

test("upload sends the bytes, the bearer token, the user agent and no Expect header", async () => {
	server.plan.push(answer201());
	const r = await upload("--project", "team.a");
	expectExit(r, 0, "upload");
	assert.equal(server.requests.length, 1);
	const q = server.requests[0];
	assert.equal(q.method, "POST");
	assert.equal(q.url, `/v1/profiles/${SHA}?branch=feature%2F%C3%BC%20x&project=team.a`);
	assert.equal(q.headers.authorization, `Bearer ${TOKEN}`);
	assert.equal(q.headers.expect, undefined, "no Expect: 100-continue");
	assert.match(q.headers["user-agent"], /^culpert\/\d+\.\d+\.\d+/);
	assert.equal(q.headers["content-type"], "application/octet-stream");
	assert.equal(q.headers["cf-access-client-id"], undefined);
	assert.ok(q.body.equals(profile.bytes), "the body is the file, byte for byte");
	assert.deepEqual(JSON.parse(r.stdout.toString()).sha, SHA, "stdout is the server's answer");
	assert.match(r.stderr, new RegExp(`uploaded ${profile.file} as commit ${SHA} on branch ${BRANCH}`));
});

test("an upload of a large file sends no Expect header either", async () => {
	const big = makeProfile(dir, "big.pb.gz", 3 * 1024 * 1024);
	server.plan.push(answer201());
	const r = await run(["upload", ...conn(), "--commit-sha", SHA, "--branch", "main", big.file]);
	expectExit(r, 0, "upload");
	assert.equal(server.requests[0].headers.expect, undefined);
	assert.equal(server.requests[0].bodyBytes, big.bytes.length);
});

test("Cloudflare Access headers are forwarded next to the bearer token", async () => {
	server.plan.push(answer201());
	const r = await upload("--cf-access-client-id", CF_ID, "--cf-access-client-secret", CF_SECRET, "--verbose");
	expectExit(r, 0, "upload");
	const q = server.requests[0];
	assert.equal(q.headers["cf-access-client-id"], CF_ID);
	assert.equal(q.headers["cf-access-client-secret"], CF_SECRET);
	assert.equal(q.headers.authorization, `Bearer ${TOKEN}`);
	assert.match(r.stderr, /CF-Access-Client-Secret: \[redacted\]/);
});

test("the Access headers also come from CF_ACCESS_CLIENT_ID / _SECRET", async () => {
	server.plan.push({ status: 200, body: profile.bytes });
	const r = await run(["pull", ...conn(), "--sha", SHA, "-o", path.join(dir, "env.pb.gz")], {
		env: { CF_ACCESS_CLIENT_ID: CF_ID, CF_ACCESS_CLIENT_SECRET: CF_SECRET },
	});
	expectExit(r, 0, "pull");
	assert.equal(server.requests[0].headers["cf-access-client-secret"], CF_SECRET);
});

test("500 or 503 then 201: the upload is retried and succeeds", async () => {
	for (const status of [500, 503]) {
		server.reset();
		server.plan.push({ status, body: '{"error":"internal error"}' }, answer201());
		const r = await upload("--retries", "2");
		expectExit(r, 0, `upload answered ${status}, then 201`);
		assert.equal(server.requests.length, 2, `${status} is retried`);
		assert.ok(server.requests[1].body.equals(profile.bytes), "the retry sends the whole body again");
	}
});

test("429 with Retry-After: the client waits that long before retrying", async () => {
	server.plan.push({ status: 429, headers: { "retry-after": "2" }, body: '{"error":"slow down"}' }, answer201());
	const r = await upload("--retries", "1", "--verbose");
	expectExit(r, 0, "upload");
	assert.equal(server.requests.length, 2);
	const gap = server.requests[1].at - server.requests[0].at;
	// The backoff alone would be at most 0.5 s for the first retry.
	assert.ok(gap >= 1900, `retried after ${gap.toFixed(0)} ms, Retry-After asked for 2000`);
	assert.match(r.stderr, /Retry-After/);
});

test("5xx until the retries run out: exit 2, naming the status and the attempts", async () => {
	server.setFallback({ status: 502, body: "<html>bad gateway</html>" });
	const r = await upload("--retries", "2");
	expectExit(r, 2, "upload");
	assert.equal(server.requests.length, 3);
	assert.match(r.stderr, /HTTP 502.*after 3 attempt\(s\)/);
});

for (const [status, pattern] of [
	[400, /HTTP 400: bad branch/],
	[401, /token rejected.*HTTP 401.*--token/],
	[403, /refused.*HTTP 403/],
	[405, /HTTP 405/],
	[413, /larger than the archive .* accepts \(HTTP 413/],
]) {
	test(`${status} on upload: no retry, exit 2 with a clear message`, async () => {
		server.setFallback({ status, body: JSON.stringify({ error: status === 400 ? "bad branch: empty" : "no" }) });
		for (const verbose of [[], ["--verbose"]]) {
			server.requests.length = 0;
			const r = await upload("--retries", "3", ...verbose);
			expectExit(r, 2, `upload answered ${status}`);
			assert.equal(server.requests.length, 1, `${status} must not be retried`);
			assert.match(r.stderr, pattern);
			assert.match(r.stderr, /^culpert: error: /m);
		}
	});
}

test("401 on pull says the token was rejected and never shows it, even with --verbose", async () => {
	server.setFallback({ status: 401, body: '{"error":"wrong token"}' });
	const out = path.join(dir, "never.pb.gz");
	const r = await run(["pull", ...conn(), "--sha", SHA, "-o", out, "--verbose"]);
	expectExit(r, 2, "pull");
	assert.match(r.stderr, /token rejected/);
	assert.match(r.stderr, /Authorization: Bearer \[redacted\]/);
	assert.ok(!fs.existsSync(out));
});

test("credentials in the endpoint URL are masked in --verbose output as in errors", async () => {
	const password = `pw-${randomSha(16)}`;
	const endpoint = `http://alice:${password}@127.0.0.1:${server.port}`;
	const masked = `http://***@127.0.0.1:${server.port}`;
	server.plan.push(answer201(), { status: 200, body: profile.bytes }, { status: 500, body: '{"error":"down"}' });
	const runs = [
		await run(["upload", "--endpoint", endpoint, "--token", TOKEN, "--commit-sha", SHA, "--branch", "main", "--verbose", profile.file]),
		await run(["pull", "--endpoint", `${endpoint}/`, "--token", TOKEN, "--sha", SHA, "--verbose", "-o", path.join(dir, "cred.pb.gz")]),
		await run(["pull", "--endpoint", endpoint, "--token", TOKEN, "--sha", SHA, "--verbose", "--retries", "0"]),
	];
	expectExit(runs[0], 0, "upload --verbose");
	expectExit(runs[1], 0, "pull --verbose");
	expectExit(runs[2], 2, "pull answered 500");
	const has = (r, text) => assert.ok(r.stderr.includes(text), `no '${text}' in:\n${r.stderr}`);
	has(runs[0], `> POST ${masked}/v1/profiles/${SHA}?branch=main (attempt 1 of 4)`);
	has(runs[0], "> Authorization: Bearer [redacted]");
	has(runs[1], `> GET ${masked}/v1/profiles/${SHA} (attempt 1 of 4)`);
	has(runs[2], `> GET ${masked}/v1/profiles/${SHA} (attempt 1 of 1)`);
	has(runs[2], `the archive at ${masked} answered HTTP 500`);
	for (const r of runs) assert.ok(!r.stderr.includes(password) && !r.stderr.includes("alice"), r.stderr);
});

test("a server that echoes the token in its error message gets it redacted", async () => {
	server.setFallback({ status: 400, body: JSON.stringify({ error: `you sent ${TOKEN} and ${CF_SECRET}` }) });
	const r = await upload("--cf-access-client-id", CF_ID, "--cf-access-client-secret", CF_SECRET, "--verbose");
	expectExit(r, 2, "upload");
	assert.match(r.stderr, /you sent \[redacted\] and \[redacted\]/);
});

test("a successful answer echoing the token is redacted on stdout too", async () => {
	server.plan.push({ status: 201, body: JSON.stringify({ sha: SHA, note: TOKEN }) });
	const r = await upload();
	expectExit(r, 0, "upload");
	assert.match(r.stdout.toString(), /\[redacted\]/);
});

test("upload prints the server's JSON on stdout ending in exactly one newline", async () => {
	for (const ending of ["", "\n"]) {
		const answer = answer201();
		server.plan.push({ ...answer, body: answer.body + ending });
		const r = await upload();
		expectExit(r, 0, "upload");
		assert.equal(r.stdout.toString(), `${answer.body}\n`);
	}
});

test("a 2xx other than 201, or a 201 that is not a JSON object, is not reported as an upload", async () => {
	const json = { "content-type": "application/json" };
	for (const [status, body, headers] of [
		[200, JSON.stringify({ sha: SHA }), json],
		[202, JSON.stringify({ queued: true }), json],
		[204, "", {}],
		[201, "<html><body>Welcome to nginx!</body></html>", { "content-type": "text/html" }],
		[201, "", {}],
		[201, `[${JSON.stringify({ sha: SHA })}]`, json],
		[201, `{"sha":"${SHA}"`, json],
		[201, `{"sha":"${SHA}"} {}`, json],
	]) {
		const what = `upload answered ${status} ${JSON.stringify(body.slice(0, 30))}`;
		server.reset();
		server.plan.push({ status, headers, body });
		const r = await upload("--retries", "3");
		expectExit(r, 2, what);
		assert.equal(r.stdout.length, 0, `${what}: nothing on stdout`);
		assert.equal(server.requests.length, 1, `${what}: not retried`);
		assert.match(r.stderr, new RegExp(`^culpert: error: upload of '${profile.file}' not confirmed: ${server.url} answered HTTP ${status}\\b`, "m"), what);
		assert.match(r.stderr, /the endpoint may not be a culpert archive \(check --endpoint \/ CULPERT_ARCHIVE\)/, what);
		assert.doesNotMatch(r.stderr, /uploaded /, what);
	}

	// Any JSON object is the archive's answer, whatever else it holds.
	const object = `\t\n {"sha":"${SHA}","extra":{"a":[1,-0.5,2.5E+3,true,false,null,"\\u00e9\\"\\n"],"b":{}},"c":[]}\n`;
	server.reset();
	server.plan.push({ status: 201, body: object });
	const r = await upload();
	expectExit(r, 0, "upload answered 201 with a JSON object");
	assert.deepEqual(JSON.parse(r.stdout.toString()).extra.b, {});
});

test("an oversized JSON answer to an upload is refused, not buffered without end", async () => {
	server.plan.push({ status: 201, body: `{"pad":"${"x".repeat(2 * 1024 * 1024)}"}` });
	const r = await upload();
	expectExit(r, 2, "upload with a 2 MiB answer");
	assert.match(r.stderr, /answer from the archive at .* is larger than 1048576 bytes/);
	assert.equal(server.requests.length, 1, "not retried");
	assert.equal(r.stdout.length, 0);
});

test("pull by SHA writes the bytes to -o, and pull latest encodes the branch", async () => {
	const out = path.join(dir, "by-sha.pb.gz");
	server.plan.push({ status: 200, body: profile.bytes });
	let r = await run(["pull", ...conn(), "--sha", SHA.toUpperCase(), "-o", out]);
	expectExit(r, 0, "pull --sha");
	assert.ok(fs.readFileSync(out).equals(profile.bytes));
	assert.equal(server.requests[0].url, `/v1/profiles/${SHA}`);
	assert.equal(server.requests[0].method, "GET");

	server.plan.push({ status: 200, headers: { "x-culpert-sha": SHA }, body: profile.bytes });
	r = await run(["pull", ...conn(), "--latest-of", "release/1.0+rc&x=y", "--project", "p-1"]);
	expectExit(r, 0, "pull --latest-of");
	assert.match(r.stderr, new RegExp(`latest of branch release/1\\.0\\+rc&x=y \\(commit ${SHA}\\)`));
	assert.ok(r.stdout.equals(profile.bytes), "the profile on stdout");
	assert.equal(server.requests[1].url, "/v1/profiles/latest?branch=release%2F1.0%2Brc%26x%3Dy&project=p-1");
});

test("pull fetches a profile of several MiB whole", async () => {
	const big = makeProfile(dir, "big-pull.pb.gz", 3 * 1024 * 1024);
	const out = path.join(dir, "big-pulled.pb.gz");
	server.plan.push({ status: 200, headers: { "x-culpert-sha": SHA }, body: big.bytes });
	const r = await run(["pull", ...conn(), "--latest-of", "main", "-o", out]);
	expectExit(r, 0, "pull of a 3 MiB profile");
	assert.ok(fs.readFileSync(out).equals(big.bytes));
	assert.match(r.stderr, new RegExp(`\\(${big.bytes.length} bytes\\)`));
});

// curl_easy_escape's encoding: all but A-Z a-z 0-9 - . _ ~, in uppercase hex.
const escape = (s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

test("long valid branches and endpoints reach the server with the whole query", async () => {
	const branches = [
		`feature/${"性能".repeat(27)}`, // 170 bytes
		`feature/${"性".repeat(82)}`, // 254 bytes, 746 encoded
		`${"a/".repeat(125)}abcde`, // 255 bytes, 125 slashes
	];
	for (const branch of branches) {
		const query = `branch=${escape(branch)}&project=team.a`;
		server.reset();
		server.plan.push(answer201(), { status: 200, headers: { "x-culpert-sha": SHA }, body: profile.bytes });
		let r = await run(["upload", ...conn(), "--project", "team.a", "--commit-sha", SHA, "--branch", branch, profile.file]);
		expectExit(r, 0, `upload --branch of ${Buffer.byteLength(branch)} bytes`);
		assert.equal(JSON.parse(r.stdout.toString()).sha, SHA);
		r = await run(["pull", ...conn(), "--project", "team.a", "--latest-of", branch, "-o", path.join(dir, "long.pb.gz")]);
		expectExit(r, 0, `pull --latest-of of ${Buffer.byteLength(branch)} bytes`);
		assert.ok(fs.readFileSync(path.join(dir, "long.pb.gz")).equals(profile.bytes));
		assert.deepEqual(
			server.requests.map((q) => `${q.method} ${q.url}`),
			[`POST /v1/profiles/${SHA}?${query}`, `GET /v1/profiles/latest?${query}`],
		);
	}

	// A base URL with a long path, and a long token, go out whole as well.
	const base = `/${"p".repeat(600)}/${"q".repeat(600)}`;
	const token = `${TOKEN}${"t".repeat(700)}`;
	server.reset();
	server.plan.push({ status: 200, body: profile.bytes });
	const r = await run(["pull", "--endpoint", `${server.url}${base}/`, "--token", token, "--sha", SHA, "-o", path.join(dir, "long.pb.gz")]);
	expectExit(r, 0, "pull from a long endpoint");
	assert.equal(server.requests[0].url, `${base}/v1/profiles/${SHA}`);
	assert.equal(server.requests[0].headers.authorization, `Bearer ${token}`);
});

test("pull: a connection cut mid-body exits 2 and leaves no file, not even a temporary", async () => {
	const outDir = path.join(dir, "cut");
	fs.mkdirSync(outDir);
	const out = path.join(outDir, "profile.pb.gz");
	server.setFallback({ status: 200, dropAfter: 1000, totalBytes: 100000 });
	let r = await run(["pull", ...conn(), "--sha", SHA, "-o", out, "--retries", "1"]);
	expectExit(r, 2, "pull");
	assert.equal(server.requests.length, 2, "a cut transfer is retried");
	assert.match(r.stderr, /cut short/);
	assert.deepEqual(listDir(outDir), [], "no output file and no temporary left");

	// An existing file keeps its old content.
	fs.writeFileSync(out, "old");
	r = await run(["pull", ...conn(), "--sha", SHA, "-o", out, "--retries", "0"]);
	expectExit(r, 2, "pull over an existing file");
	assert.equal(fs.readFileSync(out, "utf8"), "old");
	assert.deepEqual(listDir(outDir), ["profile.pb.gz"]);

	// On stdout nothing at all is written.
	r = await run(["pull", ...conn(), "--sha", SHA, "--retries", "0"]);
	expectExit(r, 2, "pull to stdout");
	assert.equal(r.stdout.length, 0);
});

test("pull: a 200 whose body is not a whole gzip stream is refused", async () => {
	const truncated = profile.bytes.subarray(0, profile.bytes.length - 5);
	for (const body of ["<html>Sign in with Cloudflare Access</html>", truncated]) {
		server.reset();
		server.plan.push({ status: 200, body });
		const out = path.join(dir, "html.pb.gz");
		const r = await run(["pull", ...conn(), "--sha", SHA, "-o", out]);
		expectExit(r, 2, "pull");
		assert.match(r.stderr, /not a complete gzip stream/);
		assert.ok(!fs.existsSync(out));
	}
});

test("pull: an X-Culpert-Sha header that is not a SHA is not echoed", async () => {
	server.plan.push({ status: 200, headers: { "x-culpert-sha": "<script>not-a-sha" }, body: profile.bytes });
	const r = await run(["pull", ...conn(), "--latest-of", "main", "--timeout", "20"]);
	expectExit(r, 0, "pull");
	assert.match(r.stderr, /commit not named by the archive/);
	assert.ok(!r.stderr.includes("not-a-sha"));
});

test("pull: a redirect (an Access login page) is an error, not followed", async () => {
	server.setFallback({ status: 302, headers: { location: "https://team.cloudflareaccess.com/login" } });
	const r = await run(["pull", ...conn(), "--sha", SHA, "-o", path.join(dir, "redir.pb.gz")]);
	expectExit(r, 2, "pull");
	assert.equal(server.requests.length, 1);
	assert.match(r.stderr, /redirected to https:\/\/team\.cloudflareaccess\.com\/login.*--cf-access-client-id/);
});

test("pull: 404 is an error without --allow-missing, a note with it", async () => {
	const out = path.join(dir, "missing.pb.gz");
	server.setFallback(missing);
	let r = await run(["pull", ...conn(), "--sha", "1234567", "-o", out]);
	expectExit(r, 2, "pull of a missing SHA");
	assert.match(r.stderr, /no profile for commit 1234567 in project default/);
	assert.ok(!fs.existsSync(out));

	r = await run(["pull", ...conn(), "--latest-of", "main", "-o", out, "--allow-missing"]);
	expectExit(r, 0, "pull --allow-missing");
	assert.match(r.stderr, /note: no profile for branch main/);
	assert.ok(!fs.existsSync(out), "nothing written");

	r = await run(["pull", ...conn(), "--latest-of", "main", "--allow-missing"]);
	expectExit(r, 0, "pull --allow-missing to stdout");
	assert.equal(r.stdout.length, 0);
	assert.equal(server.requests.length, 3, "404 is never retried");
});

test("pull: a 404 that is not the archive's (wrong base URL) stays an error with --allow-missing", async () => {
	server.setFallback({ status: 404, body: "<html>Not Found</html>" });
	const r = await run(["pull", ...conn(), "--sha", SHA, "--allow-missing", "-o", path.join(dir, "x.pb.gz")]);
	expectExit(r, 2, "pull");
	assert.match(r.stderr, /no archive API at/);
});

test("pull: the worker's own 'no such route' (a base URL with an extra path) stays an error with --allow-missing", async () => {
	server.setFallback({ status: 404, body: '{"error":"no such route: /api/v1/profiles/latest"}' });
	const r = await run(["pull", ...conn(), "--latest-of", "main", "--allow-missing", "-o", path.join(dir, "x.pb.gz")]);
	expectExit(r, 2, "pull");
	assert.match(r.stderr, /no archive API at/);
});

test("pull: a missing profile on a branch whose name holds 'no such route' is missing, not a wrong URL", async () => {
	const branch = "release/no such route";
	server.setFallback({ status: 404, body: JSON.stringify({ error: `no profile on branch ${branch} in project default` }) });
	const out = path.join(dir, "odd-branch.pb.gz");
	const r = await run(["pull", ...conn(), "--latest-of", branch, "--allow-missing", "-o", out]);
	expectExit(r, 0, "pull --allow-missing");
	assert.match(r.stderr, /note: no profile for branch release\/no such route/);
	assert.ok(!fs.existsSync(out), "nothing written");
});

test("a slow server: exit 2 once --timeout has passed, retries included", async () => {
	server.setFallback({ delayMs: 30000, status: 200, body: profile.bytes });
	const r = await run(["pull", ...conn(), "--sha", SHA, "--timeout", "2", "--retries", "5", "-o", path.join(dir, "slow.pb.gz")]);
	expectExit(r, 2, "pull");
	assert.match(r.stderr, /timed out/);
	assert.ok(r.ms < 2000 + 5000, `took ${r.ms.toFixed(0)} ms with --timeout 2`);
	assert.ok(r.ms >= 1900, `gave up after ${r.ms.toFixed(0)} ms, before the 2 s timeout`);
	assert.ok(!fs.existsSync(path.join(dir, "slow.pb.gz")));
});

test("an unreachable host: exit 2 quickly, naming the endpoint", async () => {
	const port = await closedPort();
	const endpoint = `http://127.0.0.1:${port}`;
	const r = await run(["upload", "--endpoint", endpoint, "--token", TOKEN, "--commit-sha", SHA, "--branch", "main", profile.file]);
	expectExit(r, 2, "upload to a closed port");
	assert.match(r.stderr, new RegExp(`cannot reach the archive at ${endpoint}.*\\(4 attempt\\(s\\)\\)`), "a refused connection is retried");
	// Default retries back off about 0.5 + 1 + 2 s at most.
	assert.ok(r.ms < 15000, `took ${r.ms.toFixed(0)} ms`);
});

test("the connection options come from the environment", async () => {
	server.plan.push(answer201());
	const r = await run(["upload", profile.file], {
		env: { CULPERT_ARCHIVE: server.url, CULPERT_TOKEN: TOKEN, CULPERT_PROJECT: "envproj", GITHUB_SHA: SHA, GITHUB_REF_NAME: "42/merge" },
	});
	expectExit(r, 0, "upload from the environment");
	assert.equal(server.requests[0].url, `/v1/profiles/${SHA}?branch=42%2Fmerge&project=envproj`);
	assert.equal(server.requests[0].headers.authorization, `Bearer ${TOKEN}`);
});

test("flags override the environment", async () => {
	server.plan.push(answer201());
	const r = await run(["upload", "--token", TOKEN, "--branch", "flag-branch", "--commit-sha", SHA, profile.file], {
		env: { CULPERT_ARCHIVE: server.url, CULPERT_TOKEN: "env-token-unused", GITHUB_SHA: randomSha(), GITHUB_REF_NAME: "env-branch" },
	});
	expectExit(r, 0, "upload");
	assert.equal(server.requests[0].url, `/v1/profiles/${SHA}?branch=flag-branch`);
	assert.equal(server.requests[0].headers.authorization, `Bearer ${TOKEN}`);
});

test("TLS is verified: a self-signed server is refused, and accepted with --cacert", async (t) => {
	const key = path.join(dir, "tls.key");
	const cert = path.join(dir, "tls.pem");
	const made = spawnSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], { stdio: "ignore" });
	if (made.error || made.status !== 0) {
		t.skip("openssl cannot make a test certificate here");
		return;
	}
	const tls = await startServer({ tls: { key: fs.readFileSync(key), cert: fs.readFileSync(cert) } });
	try {
		tls.setFallback({ status: 200, body: profile.bytes });
		const args = ["pull", "--endpoint", tls.url, "--token", TOKEN, "--sha", SHA, "--retries", "3"];
		let r = await run(args);
		expectExit(r, 2, "pull from a self-signed server");
		assert.match(r.stderr, /TLS with the archive at https:\/\/127\.0\.0\.1:\d+ failed.*--cacert/);
		assert.equal(tls.requests.length, 0, "no request went out over an unverified connection");

		r = await run([...args, "--cacert", cert]);
		expectExit(r, 0, "pull with --cacert");
		assert.ok(r.stdout.equals(profile.bytes));
		r = await run(args, { env: { CULPERT_CACERT: cert } });
		expectExit(r, 0, "pull with CULPERT_CACERT");
		assert.equal(tls.requests[0].headers.authorization, `Bearer ${TOKEN}`);
	} finally {
		await tls.close();
	}
});
