// SPDX-License-Identifier: MIT OR Apache-2.0
// Helpers shared by the archive tests: running the culpert binary, the
// secrets every run must keep out of its output, test profiles, temp dirs.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";

/** The culpert binary: first argument of the test script. */
export const CULPERT = process.argv[2];
if (!CULPERT || !fs.existsSync(CULPERT)) {
	console.error(`usage: node ${path.basename(process.argv[1])} PATH/TO/culpert [PATH/TO/mkprofile]`);
	process.exit(2);
}
/** tests/tools/mkprofile, when the suite was given it (second argument). */
export const MKPROFILE = process.argv[3] ?? null;

// Random, so that no ordinary word of a message can match them by chance.
export const TOKEN = `tok-${randomBytes(12).toString("hex")}`;
export const READ_TOKEN = `read-${randomBytes(12).toString("hex")}`;
export const CF_ID = `cfid-${randomBytes(6).toString("hex")}.access`;
export const CF_SECRET = `cfsecret-${randomBytes(12).toString("hex")}`;
const SECRETS = [TOKEN, READ_TOKEN, CF_SECRET];

/** A fresh temporary directory, removed when the process exits. */
export function tempDir(label) {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), `culpert-archive-${label}-`));
	process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
	return dir;
}

function varint(n) {
	const out = [];
	for (; n >= 0x80; n = Math.floor(n / 128)) out.push((n % 128) | 0x80);
	out.push(n);
	return Buffer.from(out);
}
// A length-delimited field `num` holding `body`.
function field(num, body) {
	return Buffer.concat([varint(num * 8 + 2), varint(body.length), body]);
}
// A varint field `num` holding `n`.
function number(num, n) {
	return Buffer.concat([varint(num * 8), varint(n)]);
}

/**
 * Writes a gzipped pprof profile with culpert's sample types, no samples,
 * and `size` random bytes in a field readers skip (number 100), so every
 * file differs and its size is about `size`; returns its path and bytes.
 * upload checks that what it sends is a profile.
 */
export function makeProfile(dir, name, size = 2000) {
	const strings = ["", "alloc_objects", "count", "alloc_space", "bytes", "inuse_objects", "inuse_space", "samples", "space"];
	const valueType = (type, unit) => Buffer.concat([number(1, type), number(2, unit)]);
	const pb = Buffer.concat([
		...[[1, 2], [3, 4], [5, 2], [6, 4], [7, 2]].map(([t, u]) => field(1, valueType(t, u))),
		...strings.map((str) => field(6, Buffer.from(str))),
		field(11, valueType(8, 4)),
		number(12, 524288),
		number(14, 3),
		field(100, randomBytes(size)),
	]);
	const bytes = zlib.gzipSync(pb);
	const file = path.join(dir, name);
	fs.writeFileSync(file, bytes);
	return { file, bytes };
}

/** A random lowercase hex SHA of `n` digits. */
export function randomSha(n = 40) {
	return randomBytes(32).toString("hex").slice(0, n);
}

/**
 * Runs culpert with `args`, no inherited archive variables, plus `env`.
 * Resolves { code, stdout (Buffer), stderr (string), ms }. Asserts that no
 * secret appears in stdout or stderr: every test checks the token promise.
 */
export function run(args, { env = {}, input = null } = {}) {
	const clean = { ...process.env };
	for (const k of [
		"CULPERT_ARCHIVE",
		"CULPERT_TOKEN",
		"CULPERT_PROJECT",
		"CULPERT_CACERT",
		"CF_ACCESS_CLIENT_ID",
		"CF_ACCESS_CLIENT_SECRET",
		"GITHUB_SHA",
		"GITHUB_REF_NAME",
	])
		delete clean[k];
	// The test servers are local: never reach them through a proxy.
	for (const k of ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]) delete clean[k];
	clean.no_proxy = clean.NO_PROXY = "127.0.0.1,localhost";
	const started = performance.now();
	return new Promise((resolve, reject) => {
		const child = spawn(CULPERT, args, { env: { ...clean, ...env }, stdio: ["pipe", "pipe", "pipe"] });
		const out = [];
		const err = [];
		child.stdout.on("data", (c) => out.push(c));
		child.stderr.on("data", (c) => err.push(c));
		// A hung client fails its test instead of the whole suite timing out.
		const watchdog = setTimeout(() => child.kill("SIGKILL"), 120000);
		child.on("error", reject);
		child.on("close", (code) => {
			clearTimeout(watchdog);
			const result = {
				code,
				stdout: Buffer.concat(out),
				stderr: Buffer.concat(err).toString("utf8"),
				ms: performance.now() - started,
			};
			const text = result.stdout.toString("latin1") + result.stderr;
			for (const s of SECRETS)
				assert.ok(!text.includes(s), `a secret leaked into the output of culpert ${args.join(" ")}:\n${result.stderr}`);
			resolve(result);
		});
		child.stdin.end(input ?? undefined);
	});
}

/** Fails with the command's stderr when the exit status is not `code`. */
export function expectExit(r, code, what) {
	assert.equal(r.code, code, `${what}: exit ${r.code}, expected ${code}; stderr:\n${r.stderr}`);
}

/** A TCP port on 127.0.0.1 with nothing listening (bound, then released). */
export async function closedPort() {
	const srv = net.createServer();
	await new Promise((resolve) => srv.listen(0, "127.0.0.1", resolve));
	const { port } = srv.address();
	await new Promise((resolve) => srv.close(resolve));
	return port;
}

/** Names in `dir` (none for a missing dir), sorted. */
export function listDir(dir) {
	return fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
}
