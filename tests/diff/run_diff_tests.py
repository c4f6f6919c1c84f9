#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Tests of `culpert diff`: golden files, the threshold table, bad input.

Each group is one ctest entry:
  golden      every format (text, markdown, json; flat and tree) against
              golden/<case>.txt, byte for byte, and the exit status
  thresholds  table of boundary cases: the kind of one span and the exit
              status, from synthetic profiles written for each case
  errors      bad flag values, bad environment, missing or broken files:
              exit 2 and a message naming the flag or file
  structure   JSON is valid with sorted keys and every row; tree columns
              line up at every depth (display width)
  hostile     control characters, invalid UTF-8, self-parenting spans and
              a 300-deep chain: no raw bytes reach the output, no hang

Profiles are written by mkprofile from fixtures/*.txt. culpert runs in the
work directory with relative paths, so the goldens hold no absolute paths.
`--update` rewrites the golden files (review the diff before committing).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))

# name, arguments after "diff", expected exit status
GOLDEN = [
    ("spec_text", ["spec_before.pb.gz", "spec_after.pb.gz"], 1),
    ("spec_markdown", ["--format", "markdown", "spec_before.pb.gz", "spec_after.pb.gz"], 1),
    ("spec_json", ["--format", "json", "spec_before.pb.gz", "spec_after.pb.gz"], 1),
    ("spec_tree_text", ["--tree", "spec_before.pb.gz", "spec_after.pb.gz"], 1),
    ("spec_tree_markdown", ["--tree", "--format", "markdown", "spec_before.pb.gz", "spec_after.pb.gz"], 1),
    ("mixed_text", ["mixed_before.pb.gz", "mixed_after.pb.gz"], 1),
    ("mixed_markdown", ["--format=markdown", "mixed_before.pb.gz", "mixed_after.pb.gz"], 1),
    ("mixed_json", ["--format", "json", "mixed_before.pb.gz", "mixed_after.pb.gz"], 1),
    ("mixed_tree_text", ["--tree", "mixed_before.pb.gz", "mixed_after.pb.gz"], 1),
    ("mixed_tree_markdown", ["--tree", "--format", "markdown", "mixed_before.pb.gz", "mixed_after.pb.gz"], 1),
    ("mixed_top1_text", ["--top", "1", "mixed_before.pb.gz", "mixed_after.pb.gz"], 1),
    ("mixed_top1_markdown", ["--top", "1", "--format", "markdown", "mixed_before.pb.gz", "mixed_after.pb.gz"], 1),
    # --top hides every regression of the tree here; the exit status stays 1
    ("mixed_tree_top1_text", ["--tree", "--top", "1", "mixed_before.pb.gz", "mixed_after.pb.gz"], 1),
    # wide characters in the flat tables; new and gone just at 1 KiB
    ("mixed_1k_text", ["--threshold-bytes", "1K", "mixed_before.pb.gz", "mixed_after.pb.gz"], 1),
    ("mixed_1k_markdown", ["--threshold-bytes", "1024", "--format", "markdown", "mixed_before.pb.gz",
                           "mixed_after.pb.gz"], 1),
    ("mixed_min_text", ["--min-span-bytes", "128K", "mixed_before.pb.gz", "mixed_after.pb.gz"], 1),
    ("mixed_tree_min_text", ["--tree", "--min-span-bytes", "128K", "mixed_before.pb.gz", "mixed_after.pb.gz"], 1),
    ("mixed_inuse_text", ["--inuse", "mixed_before.pb.gz", "mixed_after.pb.gz"], 1),
    ("mixed_nofail_text", ["--no-fail", "mixed_before.pb.gz", "mixed_after.pb.gz"], 0),
    ("reversed_text", ["mixed_after.pb.gz", "mixed_before.pb.gz"], 1),
    ("rates_text", ["spec_before.pb.gz", "rates_after.pb.gz"], 1),
    ("rates_markdown", ["--format", "markdown", "spec_before.pb.gz", "rates_after.pb.gz"], 1),
    ("noise_text", ["--noise-sigma", "2", "noise_before.pb.gz", "noise_after.pb.gz"], 1),
    ("noise_markdown", ["--noise-sigma", "2", "--format", "markdown", "noise_before.pb.gz", "noise_after.pb.gz"], 1),
    ("noise_json", ["--noise-sigma", "2", "--format", "json", "noise_before.pb.gz", "noise_after.pb.gz"], 1),
    ("noise_tree_text", ["--noise-sigma", "2", "--tree", "noise_before.pb.gz", "noise_after.pb.gz"], 1),
    ("noise_off_text", ["noise_before.pb.gz", "noise_after.pb.gz"], 1),
    ("same_text", ["spec_before.pb.gz", "spec_before.pb.gz"], 0),
]

FIXTURES = ["spec_before", "spec_after", "mixed_before", "mixed_after", "rates_after",
            "noise_before", "noise_after", "rust"]

# Threshold table: (case, before bytes of span "s", after bytes, flags, env,
# expected kind of "s", expected exit). None = the span is absent on that
# side. Every profile also holds a steady 1 MiB span "steady" (quiet), so the
# whole-profile totals are never just "s".
KIB = 1024
MIB = 1024 * KIB
THRESHOLDS = [
    ("quiet_under_bytes", 100000, 104095, [], {}, "quiet", 0),
    ("at_bytes_and_pct", 81920, 86016, [], {}, "regression", 1),
    ("at_bytes_under_pct", 81921, 86017, [], {}, "quiet", 0),
    ("pct_gate_large_span", 100 * MIB, 104 * MIB, [], {}, "quiet", 0),
    ("pct_gate_large_span_pct_off", 100 * MIB, 104 * MIB, ["--threshold-pct", "0"], {}, "regression", 1),
    ("improvement_at_gates", 81920, 77824, [], {}, "improvement", 0),
    ("improvement_under_bytes", 81920, 77825, [], {}, "quiet", 0),
    ("new_at_bytes", None, 4096, [], {}, "new", 1),
    ("new_under_bytes", None, 4095, [], {}, "quiet", 0),
    ("new_ignores_pct", None, 4096, ["--threshold-pct", "1000"], {}, "new", 1),
    ("gone_at_bytes", 4096, None, [], {}, "gone", 0),
    ("gone_under_bytes", 4095, None, [], {}, "quiet", 0),
    ("threshold_bytes_flag", 81920, 86016, ["--threshold-bytes", "4097"], {}, "quiet", 0),
    ("threshold_bytes_suffix", 81920, 86016, ["--threshold-bytes=4K"], {}, "regression", 1),
    ("threshold_pct_flag", 81920, 86016, ["--threshold-pct", "5.01"], {}, "quiet", 0),
    ("zero_thresholds", 100000, 100001, ["--threshold-bytes", "0", "--threshold-pct", "0"], {}, "regression", 1),
    ("unchanged_zero_thresholds", 100000, 100000, ["--threshold-bytes", "0", "--threshold-pct", "0"], {},
     "quiet", 0),
    # --min-span-bytes 65536: just under, at and over the minimum on either side
    ("min_both_under", 60000, 65535, ["--min-span-bytes", "65536"], {}, "quiet", 0),
    ("min_at_after", 60000, 65536, ["--min-span-bytes", "65536"], {}, "regression", 1),
    ("min_over_after", 60000, 65537, ["--min-span-bytes", "65536"], {}, "regression", 1),
    ("min_at_before", 65536, 60000, ["--min-span-bytes", "65536"], {}, "improvement", 0),
    ("min_under_before", 65535, 60000, ["--min-span-bytes", "65536"], {}, "quiet", 0),
    ("min_over_before", 70000, 60000, ["--min-span-bytes", "65536"], {}, "improvement", 0),
    ("min_new_at", None, 65536, ["--min-span-bytes", "65536"], {}, "new", 1),
    ("min_new_under", None, 65535, ["--min-span-bytes", "65536"], {}, "quiet", 0),
    ("min_gone_at", 65536, None, ["--min-span-bytes", "65536"], {}, "gone", 0),
    ("min_gone_under", 65535, None, ["--min-span-bytes", "65536"], {}, "quiet", 0),
    ("min_zero_flag_is_off", 60000, 65535, ["--min-span-bytes", "0"], {}, "regression", 1),
    # the environment variable, and the flag overriding it
    ("env_min_applies", 60000, 65535, [], {"CULPERT_MIN_SPAN_BYTES": "65536"}, "quiet", 0),
    ("env_min_suffix", 60000, 65535, [], {"CULPERT_MIN_SPAN_BYTES": "64K"}, "quiet", 0),
    ("env_min_at", 60000, 65536, [], {"CULPERT_MIN_SPAN_BYTES": "65536"}, "regression", 1),
    ("env_overridden_by_zero", 60000, 65535, ["--min-span-bytes", "0"], {"CULPERT_MIN_SPAN_BYTES": "65536"},
     "regression", 1),
    ("env_overridden_by_flag", 60000, 65535, ["--min-span-bytes", "1000"], {"CULPERT_MIN_SPAN_BYTES": "65536"},
     "regression", 1),
    ("env_bad_but_flag_given", 60000, 65535, ["--min-span-bytes", "1000"], {"CULPERT_MIN_SPAN_BYTES": "lots"},
     "regression", 1),
    ("env_empty_is_unset", 60000, 65535, [], {"CULPERT_MIN_SPAN_BYTES": ""}, "regression", 1),
    # the exit status
    ("no_fail", 81920, 86016, ["--no-fail"], {}, "regression", 0),
    ("no_fail_new", None, 8192, ["--no-fail"], {}, "new", 0),
    # the noise gate at rate 64 KiB: SE of 1 MiB -> 1.25 MiB is sqrt(64Ki * 2.25Mi) = 384 KiB
    ("noise_off_rules_only", 1 * MIB, 1 * MIB + 256 * KIB, [], {}, "regression", 1),
    ("noise_within_2sigma", 1 * MIB, 1 * MIB + 256 * KIB, ["--noise-sigma", "2"], {}, "quiet", 0),
    ("noise_beyond_0_5sigma", 1 * MIB, 1 * MIB + 256 * KIB, ["--noise-sigma", "0.5"], {}, "regression", 1),
    ("noise_new_single_sample", None, 64 * KIB, ["--noise-sigma", "1"], {}, "quiet", 0),
    ("noise_new_many_samples", None, 4 * MIB, ["--noise-sigma", "3"], {}, "new", 1),
]

# Bad input: (case, arguments, environment, text the message must contain)
ERRORS = [
    ("threshold_bytes_negative", ["--threshold-bytes", "-1"], {}, "--threshold-bytes"),
    ("threshold_bytes_not_numeric", ["--threshold-bytes", "lots"], {}, "--threshold-bytes"),
    ("threshold_bytes_trailing", ["--threshold-bytes", "12x"], {}, "--threshold-bytes"),
    ("threshold_bytes_overflow", ["--threshold-bytes", "99999999999999999999"], {}, "--threshold-bytes"),
    ("threshold_bytes_missing", ["A", "B", "--threshold-bytes"], {}, "--threshold-bytes"),
    ("threshold_bytes_empty", ["--threshold-bytes="], {}, "--threshold-bytes"),
    ("threshold_pct_negative", ["--threshold-pct", "-5"], {}, "--threshold-pct"),
    ("threshold_pct_not_numeric", ["--threshold-pct", "five"], {}, "--threshold-pct"),
    ("threshold_pct_nan", ["--threshold-pct", "nan"], {}, "--threshold-pct"),
    ("threshold_pct_inf", ["--threshold-pct", "inf"], {}, "--threshold-pct"),
    ("threshold_pct_hex", ["--threshold-pct", "0x10"], {}, "--threshold-pct"),
    ("threshold_pct_huge", ["--threshold-pct", "1e400"], {}, "--threshold-pct"),
    ("threshold_pct_missing", ["A", "B", "--threshold-pct"], {}, "--threshold-pct"),
    ("min_span_negative", ["--min-span-bytes", "-1"], {}, "--min-span-bytes"),
    ("min_span_not_numeric", ["--min-span-bytes", "big"], {}, "--min-span-bytes"),
    ("min_span_missing", ["A", "B", "--min-span-bytes"], {}, "--min-span-bytes"),
    ("env_min_not_numeric", [], {"CULPERT_MIN_SPAN_BYTES": "lots"}, "CULPERT_MIN_SPAN_BYTES"),
    ("env_min_negative", [], {"CULPERT_MIN_SPAN_BYTES": "-4096"}, "CULPERT_MIN_SPAN_BYTES"),
    ("noise_negative", ["--noise-sigma", "-2"], {}, "--noise-sigma"),
    ("noise_not_numeric", ["--noise-sigma", "two"], {}, "--noise-sigma"),
    ("top_negative", ["--top", "-1"], {}, "--top"),
    ("top_not_numeric", ["--top", "ten"], {}, "--top"),
    ("top_suffix", ["--top", "1K"], {}, "--top"),
    ("format_unknown", ["--format", "xml"], {}, "--format"),
    ("format_missing", ["A", "B", "--format"], {}, "--format"),
    ("unknown_option", ["--bogus"], {}, "--bogus"),
]


def run(args, cwd, env=None):
    e = dict(os.environ)
    e.pop("CULPERT_MIN_SPAN_BYTES", None)
    if env:
        e.update(env)
    p = subprocess.run(args, cwd=cwd, env=e, capture_output=True)
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8")


class Checker:
    def __init__(self):
        self.failures = 0
        self.passed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failures += 1
            print("FAIL: " + what)
        return ok


def mkprofile(opts, txt, out):
    p = subprocess.run([opts.mkprofile, txt, out], capture_output=True)
    if p.returncode != 0:
        sys.exit("mkprofile %s failed: %s" % (txt, p.stderr.decode()))


def build_fixtures(opts):
    for name in FIXTURES:
        mkprofile(opts, os.path.join(HERE, "fixtures", name + ".txt"), os.path.join(opts.work, name + ".pb.gz"))
    with open(os.path.join(HERE, "fixtures", "not_a_profile.bin"), "rb") as f:
        data = f.read()
    with open(os.path.join(opts.work, "not_a_profile.pb.gz"), "wb") as f:
        f.write(data)


def group_golden(opts, c):
    for name, args, want_rc in GOLDEN:
        rc, out, err = run([opts.culpert, "diff"] + args, opts.work)
        path = os.path.join(HERE, "golden", name + ".txt")
        # stderr: golden/NAME.err when culpert adds a note (the noise
        # hint), else nothing at all.
        err_path = os.path.join(HERE, "golden", name + ".err")
        if opts.update:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(out)
            if err:
                with open(err_path, "w", encoding="utf-8", newline="") as f:
                    f.write(err)
            elif os.path.exists(err_path):
                os.remove(err_path)
        c.check(rc == want_rc, "%s: exit %d, want %d (stderr: %s)" % (name, rc, want_rc, err.strip()))
        try:
            with open(err_path, encoding="utf-8", newline="") as f:
                want_err = f.read()
        except FileNotFoundError:
            want_err = ""
        c.check(err == want_err, "%s: stderr %r, want %r" % (name, err, want_err))
        try:
            with open(path, encoding="utf-8", newline="") as f:
                want = f.read()
        except FileNotFoundError:
            c.check(False, "%s: golden file missing (run with --update)" % name)
            continue
        if not c.check(out == want, "%s: output differs from golden/%s.txt" % (name, name)):
            import difflib
            sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), out.splitlines(True),
                                                       "golden/" + name + ".txt", "culpert diff"))


def write_case(opts, name, value):
    lines = ["rate 65536", "span 1 - steady", "span 2 - s",
             "sample span=1 bytes=%d samples=16" % MIB]
    if value is not None:
        lines.append("sample span=2 bytes=%d samples=1" % value)
    txt = os.path.join(opts.work, name + ".txt")
    with open(txt, "w") as f:
        f.write("\n".join(lines) + "\n")
    out = os.path.join(opts.work, name + ".pb.gz")
    mkprofile(opts, txt, out)
    return out


def group_thresholds(opts, c):
    for name, before, after, flags, env, want_kind, want_rc in THRESHOLDS:
        b = write_case(opts, "t_%s_before" % name, before)
        a = write_case(opts, "t_%s_after" % name, after)
        rc, out, err = run([opts.culpert, "diff", "--format", "json"] + flags + [b, a], opts.work, env)
        c.check(rc == want_rc, "%s: exit %d, want %d (stderr: %s)" % (name, rc, want_rc, err.strip()))
        try:
            doc = json.loads(out)
        except ValueError:
            c.check(False, "%s: output is not JSON: %r" % (name, out[:200]))
            continue
        kinds = {r["name"]: r["kind"] for r in doc["rows"]}
        c.check(kinds.get("s") == want_kind, "%s: kind %s, want %s" % (name, kinds.get("s"), want_kind))
        c.check(kinds.get("steady") == "quiet", "%s: steady span is %s" % (name, kinds.get("steady")))
        # The summary counts the rows of each kind, and had_regressions is
        # what fails the gate (a new span as much as a regression).
        summary = doc["summary"]
        for kind, key in (("regression", "regressions"), ("new", "new"), ("improvement", "improvements"),
                          ("gone", "gone"), ("quiet", "quiet")):
            want = sum(1 for k in kinds.values() if k == kind)
            c.check(summary[key] == want, "%s: summary %s %s, want %d" % (name, key, summary[key], want))
        c.check(summary["had_regressions"] == (want_kind in ("regression", "new")),
                "%s: had_regressions %s" % (name, summary["had_regressions"]))
        # The text view gives the same exit status as JSON.
        rc_text, _, _ = run([opts.culpert, "diff"] + flags + [b, a], opts.work, env)
        c.check(rc_text == want_rc, "%s: text exit %d, want %d" % (name, rc_text, want_rc))


def group_errors(opts, c):
    good = ["spec_before.pb.gz", "spec_after.pb.gz"]
    for name, args, env, needle in ERRORS:
        full = args if "A" in args else args + good
        full = [good[0] if x == "A" else good[1] if x == "B" else x for x in full]
        rc, out, err = run([opts.culpert, "diff"] + full, opts.work, env)
        c.check(rc == 2, "%s: exit %d, want 2" % (name, rc))
        c.check(err.startswith("culpert: error: ") and needle in err,
                "%s: message %r does not name %s" % (name, err.strip(), needle))
        c.check(out == "", "%s: wrote to stdout on error" % name)
    # A directory side: empty, or holding something that is not a profile.
    for d in ("empty_dir", "junk_dir"):
        shutil.rmtree(os.path.join(opts.work, d), ignore_errors=True)
        os.mkdir(os.path.join(opts.work, d))
    shutil.copy(os.path.join(opts.work, "spec_before.pb.gz"), os.path.join(opts.work, "junk_dir"))
    shutil.copy(os.path.join(opts.work, "not_a_profile.pb.gz"), os.path.join(opts.work, "junk_dir", "z.pb.gz"))
    files = [
        ("empty_directory", ["empty_dir", "spec_after.pb.gz"], [], "empty_dir: a directory with no profile in it"),
        ("directory_with_junk", ["spec_before.pb.gz", "junk_dir"], [], "junk_dir/z.pb.gz"),
        ("missing_before", ["no_such_file.pb.gz", "spec_after.pb.gz"], [], "no_such_file.pb.gz"),
        ("missing_after", ["spec_before.pb.gz", "missing_after.pb.gz"], [], "missing_after.pb.gz"),
        ("not_a_profile", ["not_a_profile.pb.gz", "spec_after.pb.gz"], [], "not_a_profile.pb.gz"),
        ("one_profile", ["spec_before.pb.gz"], [], "two profiles"),
        ("both_stdin", ["-", "-"], [], "standard input"),
        ("three_profiles", ["spec_before.pb.gz", "spec_after.pb.gz", "rust.pb.gz"], [], "rust.pb.gz"),
        ("inuse_without_inuse", ["rust.pb.gz", "spec_after.pb.gz"], ["--inuse"], "--inuse"),
    ]
    for name, paths, flags, needle in files:
        rc, out, err = run([opts.culpert, "diff"] + flags + paths, opts.work)
        c.check(rc == 2, "%s: exit %d, want 2" % (name, rc))
        c.check(err.startswith("culpert: error: ") and needle in err,
                "%s: message %r does not name %s" % (name, err.strip(), needle))
    rc, out, err = run([opts.culpert, "diff", "--help"], opts.work)
    c.check(rc == 0 and "--noise-sigma" in out and "--min-span-bytes" in out, "--help")


def display_width(s):
    w = 0
    for ch in s:
        if unicodedata.combining(ch):
            continue
        w += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return w


def sorted_keys_hook(pairs):
    keys = [k for k, _ in pairs]
    if keys != sorted(keys):
        raise ValueError("keys not sorted: %s" % keys)
    if len(set(keys)) != len(keys):
        raise ValueError("a key repeated: %s" % keys)
    return dict(pairs)


def group_directories(opts, c):
    # A directory side merges every profile in it (hidden files and a
    # profile being written, NAME.tmp.PID, are left out): its totals add
    # up, and the header names the directory and the count.
    d = os.path.join(opts.work, "two_dir")
    shutil.rmtree(d, ignore_errors=True)
    os.mkdir(d)
    for name in ("a.pb.gz", "a.pb.gz.4242"):
        shutil.copy(os.path.join(opts.work, "spec_before.pb.gz"), os.path.join(d, name))
    for junk in (".hidden", "a.pb.gz.tmp.77"):
        shutil.copy(os.path.join(opts.work, "not_a_profile.pb.gz"), os.path.join(d, junk))
    rc, out, err = run([opts.culpert, "diff", "--format", "json", "spec_before.pb.gz", "two_dir"], opts.work)
    c.check(rc in (0, 1), "directory: exit %d: %s" % (rc, err.strip()))
    try:
        doc = json.loads(out)
    except ValueError as e:
        c.check(False, "directory json: %s" % e)
        return
    c.check(doc["after"]["total_bytes"] == 2 * doc["before"]["total_bytes"] > 0,
            "directory: the two copies add up: %s" % doc["after"])
    c.check(doc["after"]["path"] == "two_dir", "directory: JSON path %r" % doc["after"]["path"])
    for r in doc["rows"]:
        c.check(r["after"] == 2 * r["before"], "directory: row %s" % r)
    rc, out, err = run([opts.culpert, "diff", "two_dir", "spec_before.pb.gz"], opts.work)
    c.check("  before:  two_dir (2 profiles merged)\n" in out, "directory: text header: %s" % out)
    rc, out, err = run([opts.culpert, "diff", "--format", "markdown", "two_dir", "two_dir"], opts.work)
    c.check(rc == 0 and "`two_dir (2 profiles merged)`" in out, "directory: markdown header: %s" % out)

    # A directory of profiles taken at different rates (64 KiB and 512 KiB):
    # no one rate in the header or the JSON, and each change's standard
    # error sums R * B over the files its bytes came from.
    import math
    d = os.path.join(opts.work, "rates_dir")
    shutil.rmtree(d, ignore_errors=True)
    os.mkdir(d)
    shutil.copy(os.path.join(opts.work, "spec_after.pb.gz"), os.path.join(d, "a.pb.gz"))
    shutil.copy(os.path.join(opts.work, "rates_after.pb.gz"), os.path.join(d, "b.pb.gz"))
    ra = {}
    for name, rate in (("spec_after", 65536), ("rates_after", 524288)):
        _, out, _ = run([opts.culpert, "diff", "--format", "json", name + ".pb.gz", name + ".pb.gz"], opts.work)
        for r in json.loads(out)["rows"]:
            ra[r["name"]] = ra.get(r["name"], 0) + rate * r["after"]
    rc, out, err = run([opts.culpert, "diff", "--format", "json", "spec_before.pb.gz", "rates_dir"], opts.work)
    doc = json.loads(out)
    c.check(doc["after"]["rate_bytes"] is None and doc["rate_bytes"] is None and doc["rates_differ"],
            "mixed-rate directory: JSON rates %s %s %s" % (doc["after"]["rate_bytes"], doc["rate_bytes"],
                                                          doc["rates_differ"]))
    for r in doc["rows"]:
        want = round(math.sqrt(65536 * r["before"] + ra.get(r["name"], 0)))
        c.check(abs(r["stderr"] - want) <= 1,
                "mixed-rate directory: stderr of %s: %s, want %s" % (r["name"], r["stderr"], want))
    rc, out, err = run([opts.culpert, "diff", "spec_before.pb.gz", "rates_dir"], opts.work)
    c.check("  rate:    before 64.00 KB/alloc, after differs between its 2 profiles (differ: "
            "compared on unbiased estimates)\n" in out, "mixed-rate directory: text header: %s" % out)


def group_structure(opts, c):
    # JSON: valid, keys sorted at every level, every span a row, pct null
    # exactly when before is 0, summary consistent with the rows.
    for args, want_names in [
        (["mixed_before.pb.gz", "mixed_after.pb.gz"],
         {"handle_request", "parse_input", "build_response", "render_json", "compress", "legacy_cache",
          "background_gc", "日本語スパン", "weird|name `tick`", "tiny_gone", "tiny_new", "(no span)"}),
        (["--noise-sigma", "2", "noise_before.pb.gz", "noise_after.pb.gz"],
         {"big_stable", "noisy_small", "real_growth", "one_sample"}),
    ]:
        rc, out, err = run([opts.culpert, "diff", "--format", "json", "--top", "1"] + args, opts.work)
        try:
            doc = json.loads(out, object_pairs_hook=sorted_keys_hook)
        except ValueError as e:
            c.check(False, "json %s: %s" % (args, e))
            continue
        c.check(doc["schema_version"] == 1, "schema_version")
        names = [r["name"] for r in doc["rows"]]
        c.check(set(names) == want_names and len(names) == len(want_names),
                "json rows (not limited by --top): %s" % names)
        for r in doc["rows"]:
            c.check((r["pct"] is None) == (r["before"] == 0), "pct null iff before 0: %s" % r)
            c.check(r["delta"] == r["after"] - r["before"], "delta: %s" % r)
            c.check(isinstance(r["stderr"], (int, float)) and r["stderr"] >= 0, "stderr: %s" % r)
        s = doc["summary"]
        kinds = [r["kind"] for r in doc["rows"]]
        c.check(s["regressions"] == kinds.count("regression") and s["quiet"] == kinds.count("quiet")
                and s["improvements"] == kinds.count("improvement"), "summary counts: %s" % s)
        c.check(s["had_regressions"] == (rc == 1), "had_regressions vs exit status")
        c.check(s["total_delta_bytes"] == doc["after"]["total_bytes"] - doc["before"]["total_bytes"],
                "total_delta_bytes")
        c.check(sum(r["after"] for r in doc["rows"]) == doc["after"]["total_bytes"],
                "whole-profile total includes every span")
    # The standard error of each change uses each side's own rate:
    # sqrt(R_before * before + R_after * after), in bytes.
    import math
    rc, out, _ = run([opts.culpert, "diff", "--format", "json", "spec_before.pb.gz", "rates_after.pb.gz"],
                     opts.work)
    doc = json.loads(out)
    rb, ra = doc["before"]["rate_bytes"], doc["after"]["rate_bytes"]
    c.check((rb, ra, doc["rates_differ"]) == (65536, 524288, True), "rates: %s %s" % (rb, ra))
    for r in doc["rows"]:
        want = round(math.sqrt(rb * r["before"] + ra * r["after"]))
        c.check(abs(r["stderr"] - want) <= 1, "stderr of %s: %s, want %s" % (r["name"], r["stderr"], want))
    # Escaping: the markdown metacharacters survive in JSON as data.
    rc, out, _ = run([opts.culpert, "diff", "--format", "json", "mixed_before.pb.gz", "mixed_after.pb.gz"],
                     opts.work)
    doc = json.loads(out)
    c.check(doc["before"]["metadata"] == {"branch": "main", "build": "1234"}, "metadata: %s" % doc["before"])
    # A metadata key the file repeats keeps one value: one key in JSON.
    txt = os.path.join(opts.work, "repeated_key.txt")
    with open(txt, "w") as f:
        f.write("rate 65536\ncomment env=staging\ncomment env=prod\nsample bytes=65536 samples=1\n")
    mkprofile(opts, txt, os.path.join(opts.work, "repeated_key.pb.gz"))
    rc, out, _ = run([opts.culpert, "diff", "--format", "json", "repeated_key.pb.gz", "repeated_key.pb.gz"], opts.work)
    try:
        doc = json.loads(out, object_pairs_hook=sorted_keys_hook)
        c.check(doc["before"]["metadata"] in ({"env": "staging"}, {"env": "prod"}), "repeated key: %s" % doc["before"])
    except ValueError as e:
        c.check(False, "repeated metadata key: %s" % e)

    # Tree: every row (header included) has the same display width, so the
    # right-aligned columns line up at every depth.
    for args in (["mixed_before.pb.gz", "mixed_after.pb.gz"],
                 ["--noise-sigma", "1", "mixed_before.pb.gz", "mixed_after.pb.gz"],
                 ["--inuse", "mixed_before.pb.gz", "mixed_after.pb.gz"]):
        rc, out, _ = run([opts.culpert, "diff", "--tree"] + args, opts.work)
        lines = out.split("\n")
        start = next(i for i, l in enumerate(lines) if l.startswith("span "))
        rows = []
        for l in lines[start:]:
            if l == "":
                break
            if "more children hidden" not in l:
                rows.append(l)
        widths = {display_width(l) for l in rows}
        c.check(len(rows) > 3 and len(widths) == 1, "tree columns misaligned %s: %s" % (args, widths))
    # Flat text tables: every line of a table has the same display width.
    for args in (["--threshold-bytes", "1K", "mixed_before.pb.gz", "mixed_after.pb.gz"],
                 ["--noise-sigma", "0", "--threshold-bytes", "0", "mixed_before.pb.gz", "mixed_after.pb.gz"]):
        rc, out, _ = run([opts.culpert, "diff"] + args, opts.work)
        tables = out.split("\n\n")
        checked = 0
        for t in tables:
            lines = [l for l in t.split("\n") if l.startswith("  ") and "more rows hidden" not in l]
            if t.startswith(("Regressions:", "Improvements:")) and lines:
                widths = {display_width(l) for l in lines}
                c.check(len(widths) == 1, "flat table misaligned %s: %s" % (args, widths))
                checked += 1
        c.check(checked == 2, "flat tables found: %d" % checked)
    # Markdown tables: in GFM only "\|" keeps a pipe inside a cell (code
    # spans do not), so every row must split into as many cells as the
    # header. (The rendering was also checked once with markdown-it.)
    import re
    for args in (["--threshold-bytes", "1K", "mixed_before.pb.gz", "mixed_after.pb.gz"],
                 ["--noise-sigma", "2", "noise_before.pb.gz", "noise_after.pb.gz"]):
        rc, out, _ = run([opts.culpert, "diff", "--format", "markdown", "--threshold-pct", "0"] + args, opts.work)
        rows = [l for l in out.split("\n") if l.startswith("|")]
        counts = {len(re.split(r"(?<!\\)\|", l)) for l in rows}
        c.check(len(rows) >= 3 and len(counts) == 1, "markdown table cells %s: %s" % (args, counts))
    # Siblings by |subtree delta| descending: background_gc (-512 KiB) before
    # handle_request (+125 KiB net); under handle_request parse_input first.
    rc, out, _ = run([opts.culpert, "diff", "--tree", "mixed_before.pb.gz", "mixed_after.pb.gz"], opts.work)
    order = [l.split()[0] for l in out.split("\n") if l and not l.startswith(("├", "└", "│", " "))]
    roots = [o for o in order if o and o not in ("span", "Allocation", "Flat")]
    c.check(roots[:3] == ["background_gc", "handle_request", "(no"], "tree root order: %s" % roots)

    # --top defaults to 20 rows per table (and children per tree node):
    # 25 spans that each double show 20 rows and count the other 5.
    for side, scale in (("before", 1), ("after", 2)):
        lines = ["rate 65536"]
        for i in range(25):
            lines += ["span %d - grow_%02d" % (i + 1, i), "sample span=%d bytes=%d samples=1" % (i + 1, scale * (i + 1) * MIB)]
        txt = os.path.join(opts.work, "top25_%s.txt" % side)
        with open(txt, "w") as f:
            f.write("\n".join(lines) + "\n")
        mkprofile(opts, txt, os.path.join(opts.work, "top25_%s.pb.gz" % side))
    paths = ["top25_before.pb.gz", "top25_after.pb.gz"]
    rc, out, _ = run([opts.culpert, "diff"] + paths, opts.work)
    shown = [l for l in out.split("\n") if l.startswith("  grow_")]
    c.check(rc == 1 and len(shown) == 20 and shown[0].startswith("  grow_24 ") and shown[-1].startswith("  grow_05 ")
            and "  ... (5 more rows hidden)\n" in out, "default --top, text: %s" % out)
    rc, out, _ = run([opts.culpert, "diff", "--format", "markdown"] + paths, opts.work)
    c.check(out.count("| `grow_") == 20 and "_5 more row(s) hidden (--top 20)._" in out,
            "default --top, markdown: %s" % out)
    rc, out, _ = run([opts.culpert, "diff", "--tree"] + paths, opts.work)
    c.check(out.count("\ngrow_") == 20 and "\n... (5 more children hidden)\n" in out, "default --top, tree: %s" % out)


def group_hostile(opts, c):
    # Names from a profile never reach the terminal raw: escape sequences,
    # control characters and invalid UTF-8 become '?' in text and markdown
    # and are escaped in JSON. Self-parenting spans and a chain deeper than
    # the tree view shows neither hang nor misalign anything.
    evil = b"evil\x1b[31mred\x07\tname\xff|`"
    lines = [b"rate 65536", b"span 1 - " + evil, b"span 2 2 self_parent", b"span 3 1 child",
             b"sample span=1 bytes=65536 samples=1", b"sample span=2 bytes=65536 samples=1",
             b"sample span=3 bytes=8192 samples=1", b"span 4 - long_" + b"x" * 150]
    prev = "-"
    for i in range(100, 400):
        lines.append(("span %d %s deep_%d" % (i, prev, i)).encode())
        lines.append(("sample span=%d bytes=4096 samples=1" % i).encode())
        prev = str(i)
    for side, extra in (("before", b"\nsample span=4 bytes=65536 samples=1"),
                        ("after", b"\nsample span=399 bytes=1048576 samples=16\nsample span=4 bytes=131072 samples=2")):
        txt = os.path.join(opts.work, "hostile_%s.txt" % side)
        with open(txt, "wb") as f:
            f.write(b"\n".join(lines) + extra + b"\n")
        mkprofile(opts, txt, os.path.join(opts.work, "hostile_%s.pb.gz" % side))
    paths = ["hostile_before.pb.gz", "hostile_after.pb.gz"]
    for flags in ([], ["--format", "markdown"], ["--tree"], ["--tree", "--format", "markdown"],
                  ["--threshold-bytes", "0", "--threshold-pct", "0"]):
        p = subprocess.run([opts.culpert, "diff"] + flags + paths, cwd=opts.work, capture_output=True,
                           timeout=60)
        c.check(p.returncode == 1, "hostile %s: exit %d (%s)" % (flags, p.returncode, p.stderr))
        raw = p.stdout
        c.check(not any(b in raw for b in (b"\x1b", b"\x07", b"\t", b"\xff")),
                "hostile %s: raw control bytes in output" % flags)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            c.check(False, "hostile %s: output is not UTF-8" % flags)
        if "--tree" in flags:
            text = raw.decode("utf-8", "replace").split("\n")
            start = next(i for i, l in enumerate(text) if l.startswith("span "))
            rows = [l for l in text[start:] if l and not l.startswith(("Flat", "```", "<sub>"))
                    and "hidden" not in l and "not shown" not in l]
            widths = {display_width(l) for l in rows}
            c.check(len(rows) > 20 and len(widths) == 1, "hostile tree misaligned: %s" % widths)
            c.check(any("deeper spans not shown" in l for l in text), "hostile tree: depth cut not said")
    # A long name is cut to 80 columns with an ellipsis in text and markdown.
    for fmt in ("text", "markdown"):
        rc, out, _ = run([opts.culpert, "diff", "--format", fmt] + paths, opts.work)
        cut = [w for l in out.split("\n") for w in l.replace("`", " ").split() if w.startswith("long_")]
        c.check(len(cut) == 1 and cut[0].endswith("…") and display_width(cut[0]) == 80,
                "long name in %s: %s" % (fmt, cut))
    rc, out, _ = run([opts.culpert, "diff", "--format", "json"] + paths, opts.work)
    doc = json.loads(out)
    names = {r["name"] for r in doc["rows"]}
    c.check("long_" + "x" * 150 in names, "json keeps the long name whole")
    c.check("evil\x1b[31mred\x07\tname\ufffd|`" in names, "hostile json names: %s" % sorted(names)[:3])
    c.check("\\u001b" in out and "\x1b" not in out, "json escapes control characters")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--culpert", required=True)
    ap.add_argument("--mkprofile", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--update", action="store_true")
    ap.add_argument("group", choices=["golden", "thresholds", "errors", "directories", "structure", "hostile",
                                      "all"])
    opts = ap.parse_args()
    opts.culpert = os.path.abspath(opts.culpert)
    opts.mkprofile = os.path.abspath(opts.mkprofile)
    opts.work = os.path.abspath(opts.work)
    os.makedirs(opts.work, exist_ok=True)
    build_fixtures(opts)
    c = Checker()
    groups = {"golden": group_golden, "thresholds": group_thresholds, "errors": group_errors,
              "directories": group_directories, "structure": group_structure, "hostile": group_hostile}
    for g in (groups if opts.group == "all" else [opts.group]):
        groups[g](opts, c)
    print("%d checks passed, %d failed" % (c.passed, c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
