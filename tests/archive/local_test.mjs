// SPDX-License-Identifier: MIT OR Apache-2.0
// culpert upload / pull with a local directory as the archive: the same
// semantics as the worker (replace on re-upload, latest by upload time with
// ties to the greater SHA, projects kept apart, --allow-missing), atomic
// files, and concurrent uploads. Usage: node local_test.mjs PATH/TO/culpert

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { expectExit, listDir, makeProfile, randomSha, run, tempDir } from "./lib.mjs";

const dir = tempDir("local");
let n = 0;
const fresh = () => path.join(dir, `archive-${++n}`);
const up = (archive, sha, branch, file, ...extra) => run(["upload", "--endpoint", archive, "--commit-sha", sha, "--branch", branch, ...extra, file]);
const pullTo = async (archive, out, ...sel) => {
	const r = await run(["pull", "--endpoint", archive, "-o", out, ...sel]);
	return r;
};

test("upload then pull by SHA and latest-of returns the same bytes; the answer has the worker's shape", async () => {
	const archive = fresh();
	const p = makeProfile(dir, "a.pb.gz");
	const sha = randomSha();
	const r = await up(archive, sha.toUpperCase(), "feature/x", p.file);
	expectExit(r, 0, "upload");
	const answer = JSON.parse(r.stdout.toString());
	assert.deepEqual(Object.keys(answer), ["project", "sha", "branch", "size", "uploaded_at"]);
	assert.equal(answer.project, "default");
	assert.equal(answer.sha, sha, "stored in lowercase");
	assert.equal(answer.branch, "feature/x");
	assert.equal(answer.size, p.bytes.length);
	assert.match(answer.uploaded_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
	assert.match(r.stderr, new RegExp(`uploaded .*a\\.pb\\.gz as commit ${sha} on branch feature/x`));

	const out = path.join(dir, "pulled.pb.gz");
	expectExit(await pullTo(archive, out, "--sha", sha), 0, "pull --sha");
	assert.ok(fs.readFileSync(out).equals(p.bytes));
	const s = await run(["pull", "--endpoint", `file://${archive}`, "--latest-of", "feature/x"]);
	expectExit(s, 0, "pull --latest-of through a file:// URL");
	assert.ok(s.stdout.equals(p.bytes));
});

test("latest-of follows upload order, and a re-upload replaces the SHA (bytes and branch)", async () => {
	const archive = fresh();
	const a = makeProfile(dir, "la.pb.gz");
	const b = makeProfile(dir, "lb.pb.gz");
	const c = makeProfile(dir, "lc.pb.gz");
	// "fff..." sorts after "000...": order must come from time, not the SHA.
	const [s1, s2] = ["f".repeat(40), "0".repeat(40)];
	expectExit(await up(archive, s1, "main", a.file), 0, "upload 1");
	expectExit(await up(archive, s2, "main", b.file), 0, "upload 2");
	const out = path.join(dir, "latest.pb.gz");
	expectExit(await pullTo(archive, out, "--latest-of", "main"), 0, "pull latest");
	assert.ok(fs.readFileSync(out).equals(b.bytes), "the newer upload wins");

	// Re-upload s1 with other bytes on another branch: it leaves main.
	expectExit(await up(archive, s1, "other", c.file), 0, "re-upload");
	expectExit(await pullTo(archive, out, "--sha", s1), 0, "pull s1");
	assert.ok(fs.readFileSync(out).equals(c.bytes), "the re-upload replaced the bytes");
	expectExit(await pullTo(archive, out, "--latest-of", "other"), 0, "pull latest of other");
	assert.ok(fs.readFileSync(out).equals(c.bytes));
	expectExit(await up(archive, s1, "main", a.file), 0, "re-upload to main");
	expectExit(await pullTo(archive, out, "--latest-of", "main"), 0, "pull latest of main");
	assert.ok(fs.readFileSync(out).equals(a.bytes), "a re-upload is a new upload time");
	assert.deepEqual(listDir(path.join(archive, "default", "index")).length, 2);
});

test("latest-of matches the whole branch name, in its case", async () => {
	const archive = fresh();
	const mine = makeProfile(dir, "br1.pb.gz");
	expectExit(await up(archive, randomSha(), "release/1", mine.file), 0, "upload release/1");
	for (const branch of ["release/10", "Release/1"]) {
		const other = makeProfile(dir, "br-other.pb.gz");
		expectExit(await up(archive, randomSha(), branch, other.file), 0, `upload ${branch}`);
	}
	const out = path.join(dir, "br-out.pb.gz");
	expectExit(await pullTo(archive, out, "--latest-of", "release/1"), 0, "pull latest of release/1");
	assert.ok(fs.readFileSync(out).equals(mine.bytes), "release/1's own profile, not a newer release/10's");
	const r = await pullTo(archive, out, "--latest-of", "release/");
	expectExit(r, 2, "pull latest of release/");
	assert.match(r.stderr, /no profile for branch release\//);
});

test("equal upload times go to the greater SHA, as on the worker", async () => {
	const archive = fresh();
	const a = makeProfile(dir, "ta.pb.gz");
	const b = makeProfile(dir, "tb.pb.gz");
	const [lo, hi] = ["1111111", "eeeeeee"];
	expectExit(await up(archive, hi, "main", b.file), 0, "upload hi");
	expectExit(await up(archive, lo, "main", a.file), 0, "upload lo");
	// Give both records the same time: the index is per-SHA JSON.
	const index = path.join(archive, "default", "index");
	const recHi = JSON.parse(fs.readFileSync(path.join(index, `${hi}.json`), "utf8"));
	for (const sha of [lo, hi]) {
		const file = path.join(index, `${sha}.json`);
		const rec = JSON.parse(fs.readFileSync(file, "utf8"));
		rec.uploaded_at_ns = recHi.uploaded_at_ns;
		rec.uploaded_at = recHi.uploaded_at;
		fs.writeFileSync(file, JSON.stringify(rec));
	}
	const out = path.join(dir, "tie.pb.gz");
	expectExit(await pullTo(archive, out, "--latest-of", "main"), 0, "pull latest");
	assert.ok(fs.readFileSync(out).equals(b.bytes), "the greater SHA wins the tie");
});

test("projects are kept apart, and the token is not needed (nor used) locally", async () => {
	const archive = fresh();
	const p = makeProfile(dir, "proj.pb.gz");
	const sha = randomSha(12);
	expectExit(await up(archive, sha, "main", p.file, "--project", "alpha"), 0, "upload to alpha");
	const out = path.join(dir, "proj-out.pb.gz");
	let r = await pullTo(archive, out, "--sha", sha, "--project", "beta");
	expectExit(r, 2, "pull from beta");
	assert.match(r.stderr, /no profile for commit .* in project beta/);
	r = await run(["pull", "--endpoint", archive, "--sha", sha, "-o", out], { env: { CULPERT_PROJECT: "alpha", CULPERT_TOKEN: "ignored" } });
	expectExit(r, 0, "pull from alpha via CULPERT_PROJECT");
	assert.ok(fs.readFileSync(out).equals(p.bytes));
	r = await pullTo(archive, out, "--sha", sha);
	expectExit(r, 2, "pull from the default project");
});

test("--allow-missing: a missing SHA or branch writes nothing and exits 0", async () => {
	const archive = fresh();
	const p = makeProfile(dir, "m.pb.gz");
	expectExit(await up(archive, randomSha(), "main", p.file), 0, "upload");
	const out = path.join(dir, "missing-out.pb.gz");
	for (const sel of [["--sha", "1234567"], ["--latest-of", "nobranch"]]) {
		let r = await pullTo(archive, out, ...sel);
		expectExit(r, 2, `pull ${sel.join(" ")}`);
		assert.match(r.stderr, /no profile for/);
		r = await pullTo(archive, out, ...sel, "--allow-missing");
		expectExit(r, 0, `pull ${sel.join(" ")} --allow-missing`);
		assert.match(r.stderr, /note: no profile for/);
		assert.ok(!fs.existsSync(out));
	}
	// A project never uploaded to is missing, not an error.
	const r = await pullTo(archive, out, "--latest-of", "main", "--project", "empty", "--allow-missing");
	expectExit(r, 0, "pull from an empty project");
});

test("an archive directory that does not exist is an error, even with --allow-missing", async () => {
	const r = await run(["pull", "--endpoint", path.join(dir, "no-such-archive"), "--sha", "1234567", "--allow-missing", "-o", path.join(dir, "x")]);
	expectExit(r, 2, "pull from a missing directory");
	assert.match(r.stderr, /no archive directory at/);
});

test("a corrupt index record is reported, naming the file", async () => {
	const archive = fresh();
	const p = makeProfile(dir, "c.pb.gz");
	const sha = randomSha();
	expectExit(await up(archive, sha, "main", p.file), 0, "upload");
	const rec = path.join(archive, "default", "index", `${sha}.json`);
	fs.writeFileSync(rec, "{not json");
	const r = await pullTo(archive, path.join(dir, "c-out"), "--latest-of", "main");
	expectExit(r, 2, "pull with a corrupt record");
	assert.match(r.stderr, new RegExp(`corrupt index record '.*${sha}\\.json'`));
});

test("20 concurrent uploads to one branch: all stored intact, latest well defined, no temporaries", async () => {
	const archive = fresh();
	const uploads = Array.from({ length: 20 }, (_, i) => ({ sha: randomSha(), ...makeProfile(dir, `par-${i}.pb.gz`, 20000 + i) }));
	const results = await Promise.all(uploads.map((u) => up(archive, u.sha, "release/2", u.file)));
	results.forEach((r, i) => expectExit(r, 0, `concurrent upload ${i}`));

	const index = path.join(archive, "default", "index");
	const profiles = path.join(archive, "default", "profiles");
	assert.deepEqual(listDir(index), uploads.map((u) => `${u.sha}.json`).sort(), "one record per upload, no temporaries");
	assert.deepEqual(listDir(profiles), uploads.map((u) => `${u.sha}.pb.gz`).sort());

	const out = path.join(dir, "par-out.pb.gz");
	for (const u of uploads) {
		expectExit(await pullTo(archive, out, "--sha", u.sha), 0, `pull ${u.sha}`);
		assert.ok(fs.readFileSync(out).equals(u.bytes), `upload ${u.sha} intact`);
	}
	// The newest by the upload times printed in the answers, ties to the greater SHA.
	const answers = results.map((r) => JSON.parse(r.stdout.toString()));
	answers.sort((x, y) => (x.uploaded_at === y.uploaded_at ? (x.sha < y.sha ? 1 : -1) : x.uploaded_at < y.uploaded_at ? 1 : -1));
	const newest = uploads.find((u) => u.sha === answers[0].sha);
	expectExit(await pullTo(archive, out, "--latest-of", "release/2"), 0, "pull latest");
	assert.ok(fs.readFileSync(out).equals(newest.bytes), "latest is the upload with the newest time");
});

test("-o - writes the profile to stdout", async () => {
	const archive = fresh();
	const p = makeProfile(dir, "so.pb.gz");
	const sha = randomSha();
	expectExit(await up(archive, sha, "main", p.file), 0, "upload");
	const r = await run(["pull", "--endpoint", archive, "--sha", sha, "-o", "-"]);
	expectExit(r, 0, "pull -o -");
	assert.ok(r.stdout.equals(p.bytes));
});

test("-o through a symbolic link replaces the file it names and keeps the link; -o a FIFO or /dev/null writes through", async () => {
	const archive = fresh();
	const p = makeProfile(dir, "special.pb.gz");
	const sha = randomSha();
	expectExit(await up(archive, sha, "main", p.file), 0, "upload");

	const target = path.join(dir, "link-target.pb.gz");
	const link = path.join(dir, "link.pb.gz");
	fs.writeFileSync(target, "old");
	fs.symlinkSync(target, link);
	expectExit(await pullTo(archive, link, "--sha", sha), 0, "pull -o LINK");
	assert.ok(fs.lstatSync(link).isSymbolicLink(), "the link is still a link");
	assert.ok(fs.readFileSync(target).equals(p.bytes), "its target holds the profile");

	const fifo = path.join(dir, "out.fifo");
	execFileSync("mkfifo", [fifo]);
	const reader = spawn("cat", [fifo]);
	const chunks = [];
	reader.stdout.on("data", (c) => chunks.push(c));
	const closed = new Promise((resolve) => reader.on("close", resolve));
	expectExit(await pullTo(archive, fifo, "--sha", sha), 0, "pull -o FIFO");
	await closed;
	assert.ok(Buffer.concat(chunks).equals(p.bytes), "the reader got the profile");
	assert.ok(fs.statSync(fifo).isFIFO(), "the FIFO is still a FIFO");

	// As root, renaming over /dev/null replaced the device with a file.
	expectExit(await pullTo(archive, "/dev/null", "--sha", sha), 0, "pull -o /dev/null");
	assert.ok(fs.statSync("/dev/null").isCharacterDevice(), "/dev/null is still a device");
});
