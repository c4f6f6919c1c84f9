// SPDX-License-Identifier: MIT OR Apache-2.0
// culpert upload / pull refuse bad input before any network traffic: each
// case exits 2, names the flag (and variable) at fault, and the listening
// test server sees no request at all. Usage: node validation_test.mjs PATH/TO/culpert

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import zlib from "node:zlib";

import { CF_ID, CF_SECRET, TOKEN, expectExit, makeProfile, run, tempDir } from "./lib.mjs";
import { startServer } from "./misbehaving_server.mjs";

let server;
const dir = tempDir("validation");
const good = makeProfile(dir, "good.pb.gz");
const notGzip = path.join(dir, "plain.txt");
fs.writeFileSync(notGzip, "not a profile\n");
const empty = path.join(dir, "empty.pb.gz");
fs.writeFileSync(empty, "");
const truncated = path.join(dir, "truncated.pb.gz");
fs.writeFileSync(truncated, good.bytes.subarray(0, good.bytes.length - 8));
const notProfile = path.join(dir, "random.pb.gz");
fs.writeFileSync(notProfile, zlib.gzipSync(randomBytes(2000)));
const emptyDir = path.join(dir, "nothing");
fs.mkdirSync(emptyDir);
const SHA = "0123456789abcdef0123456789abcdef01234567";

before(async () => {
	server = await startServer();
	server.setFallback({ status: 201, body: "{}" });
});
after(async () => {
	await server.close();
});

const up = (...a) => ["upload", "--endpoint", server?.url, "--token", TOKEN, ...a];
const pull = (...a) => ["pull", "--endpoint", server?.url, "--token", TOKEN, ...a];

// [what, args (a function, since the server URL is known late), env, message pattern]
const cases = [
	["missing FILE", () => up("--commit-sha", SHA, "--branch", "main", path.join(dir, "nope.pb.gz")), {}, /cannot open profile '.*nope\.pb\.gz'/],
	["FILE is not gzip", () => up("--commit-sha", SHA, "--branch", "main", notGzip), {}, /'.*plain\.txt' is not a gzip file/],
	["FILE is a cut-short gzip", () => up("--commit-sha", SHA, "--branch", "main", truncated), {}, /'.*truncated\.pb\.gz' is not a complete gzip stream/],
	["FILE is empty", () => up("--commit-sha", SHA, "--branch", "main", empty), {}, /'.*empty\.pb\.gz' is not a gzip file/],
	// A directory, or several FILEs, are merged first: every file is loaded
	// and validated as a profile before any request.
	["FILE is a directory with a damaged profile", () => up("--commit-sha", SHA, "--branch", "main", dir), {}, /empty\.pb\.gz: file is empty, not a profile/],
	["FILE is an empty directory", () => up("--commit-sha", SHA, "--branch", "main", emptyDir), {}, /a directory with no profile in it/],
	["FILE is standard input", () => up("--commit-sha", SHA, "--branch", "main", "-"), {}, /standard input \('-'\) cannot be uploaded/],
	["no FILE", () => up("--commit-sha", SHA, "--branch", "main"), {}, /no FILE given/],
	["FILE is gzip but not a profile", () => up("--commit-sha", SHA, "--branch", "main", notProfile), {}, /random\.pb\.gz: not a pprof profile \(protobuf decoding failed after gunzip\); not uploaded/],
	["two FILEs, one not a profile", () => up("--commit-sha", SHA, "--branch", "main", good.file, notProfile), {}, /random\.pb\.gz: not a pprof profile/],
	["no SHA", () => up("--branch", "main", good.file), {}, /--commit-sha or set GITHUB_SHA/],
	["short SHA", () => up("--commit-sha", "abc123", "--branch", "main", good.file), {}, /bad --commit-sha .*7 to 64 hex/],
	["non-hex SHA", () => up("--commit-sha", "abcdefg", "--branch", "main", good.file), {}, /bad --commit-sha/],
	["65-digit SHA", () => up("--commit-sha", "a".repeat(65), "--branch", "main", good.file), {}, /bad --commit-sha/],
	["bad GITHUB_SHA", () => up("--branch", "main", good.file), { GITHUB_SHA: "zz" }, /GITHUB_SHA/],
	["no branch", () => up("--commit-sha", SHA, good.file), {}, /--branch or set GITHUB_REF_NAME/],
	["empty branch", () => up("--commit-sha", SHA, "--branch", "", good.file), {}, /bad --branch .*: empty/],
	["long branch", () => up("--commit-sha", SHA, "--branch", "b".repeat(256), good.file), {}, /bad --branch .*255 bytes/],
	["control in branch", () => up("--commit-sha", SHA, "--branch", "a\tb", good.file), {}, /bad --branch .*control/],
	["bad project", () => up("--commit-sha", SHA, "--branch", "main", "--project", "../x", good.file), {}, /bad --project/],
	["bad CULPERT_PROJECT", () => up("--commit-sha", SHA, "--branch", "main", good.file), { CULPERT_PROJECT: "a b" }, /CULPERT_PROJECT/],
	["Access id alone", () => up("--commit-sha", SHA, "--branch", "main", "--cf-access-client-id", CF_ID, good.file), {}, /--cf-access-client-id and --cf-access-client-secret .*only the id/],
	["Access secret alone", () => up("--commit-sha", SHA, "--branch", "main", good.file), { CF_ACCESS_CLIENT_SECRET: CF_SECRET }, /CF_ACCESS_CLIENT_SECRET.*only the secret/],
	["no endpoint", () => ["upload", "--token", TOKEN, "--commit-sha", SHA, "--branch", "main", good.file], {}, /--endpoint URL or set CULPERT_ARCHIVE/],
	["no token", () => ["upload", "--endpoint", server.url, "--commit-sha", SHA, "--branch", "main", good.file], {}, /--token or set CULPERT_TOKEN/],
	["endpoint with another scheme", () => ["upload", "--endpoint", "htp://archive.example", "--token", TOKEN, "--commit-sha", SHA, "--branch", "main", good.file], {}, /bad --endpoint .*'htp:\/\/archive\.example': not an http:\/\/, https:\/\/ or file:\/\/ URL/],
	["endpoint missing its colon", () => ["pull", "--endpoint", "https//archive.example", "--token", TOKEN, "--sha", SHA], {}, /bad --endpoint .*'https\/\/archive\.example'/],
	["endpoint with a query", () => ["pull", "--endpoint", `${server.url}/?a=b`, "--token", TOKEN, "--sha", SHA], {}, /bad --endpoint/],
	["unreadable --cacert", () => up("--commit-sha", SHA, "--branch", "main", "--cacert", path.join(dir, "none.pem"), good.file), {}, /cannot read --cacert/],
	// A directory (a CA path rather than a bundle) would fail only in the
	// TLS handshake: refused up front.
	["--cacert is a directory", () => up("--commit-sha", SHA, "--branch", "main", "--cacert", emptyDir, good.file), {}, /--cacert \/ CULPERT_CACERT '.*nothing' is a directory: give a CA bundle file \(PEM\)/],
	["bad --timeout", () => up("--commit-sha", SHA, "--branch", "main", "--timeout", "0", good.file), {}, /--timeout expects seconds/],
	["bad --connect-timeout", () => pull("--sha", SHA, "--connect-timeout", "soon"), {}, /--connect-timeout expects seconds/],
	["bad --retries", () => pull("--sha", SHA, "--retries", "99"), {}, /--retries expects a whole number/],
	["unknown option", () => pull("--sha", SHA, "--frobnicate"), {}, /unknown option '--frobnicate'/],
	["option without value", () => pull("--sha"), {}, /--sha needs a value/],
	["--sha and --latest-of", () => pull("--sha", SHA, "--latest-of", "main"), {}, /exactly one of --sha SHA and --latest-of BRANCH/],
	["neither --sha nor --latest-of", () => pull(), {}, /exactly one of --sha SHA and --latest-of BRANCH/],
	["bad --sha", () => pull("--sha", "xyz"), {}, /bad --sha 'xyz'/],
	["bad --latest-of", () => pull("--latest-of", ""), {}, /bad --latest-of: empty/],
	["-o is a directory", () => pull("--sha", SHA, "-o", dir), {}, /-o '.*' is a directory/],
	["-o in a missing directory", () => pull("--sha", SHA, "-o", path.join(dir, "no", "x.pb.gz")), {}, /-o '.*': cannot create files in/],
	["empty --token", () => ["pull", "--endpoint", server.url, "--token", "", "--sha", SHA], { CULPERT_TOKEN: TOKEN }, /--token is empty/],
	["pull: stray argument", () => pull("--sha", SHA, "extra"), {}, /unexpected argument 'extra'/],
];

for (const [what, args, env, pattern] of cases) {
	test(`refused before any request: ${what}`, async () => {
		const before = server.requests.length;
		const r = await run(args(), { env });
		expectExit(r, 2, what);
		assert.match(r.stderr, /^culpert: error: /);
		assert.match(r.stderr, pattern);
		assert.equal(r.stdout.length, 0, "nothing on stdout");
		assert.equal(server.requests.length, before, "no request was sent");
	});
}

test("--help (and -h) of both commands lists every option", async () => {
	for (const cmd of ["upload", "pull"]) {
		const short = await run([cmd, "-h"]);
		expectExit(short, 0, `${cmd} -h`);
		const r = await run([cmd, "--help"]);
		expectExit(r, 0, `${cmd} --help`);
		assert.equal(short.stdout.toString(), r.stdout.toString(), `${cmd} -h is --help`);
		const text = r.stdout.toString();
		for (const flag of ["--endpoint", "--token", "--project", "--cf-access-client-id", "--cf-access-client-secret", "--cacert", "--timeout", "--connect-timeout", "--retries", "--verbose"])
			assert.ok(text.includes(flag), `${cmd} --help lacks ${flag}`);
		const own = cmd === "upload" ? ["--commit-sha", "--branch", "GITHUB_SHA", "GITHUB_REF_NAME"] : ["--sha", "--latest-of", "-o", "--allow-missing"];
		for (const flag of own) assert.ok(text.includes(flag), `${cmd} --help lacks ${flag}`);
	}
});

test("the token given only as a flag is accepted and the good case goes through", async () => {
	const before = server.requests.length;
	const r = await run(up("--commit-sha", SHA, "--branch", "main", good.file));
	expectExit(r, 0, "a valid upload");
	assert.equal(server.requests.length, before + 1);
});
