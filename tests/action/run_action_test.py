#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Runs the culpert-diff composite action's steps the way a GitHub runner
would (inputs and env expanded, GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files,
`if:` conditions with status functions and step outcomes, later steps
skipped after a failure unless their condition says otherwise), against a
local directory archive, and checks what a workflow author would see.
Then checks the parts of ci.yml a runner would act on: permissions, the
Node.js the test job gets, the upload's concurrency group and the archive
step's conditions for a fork's pull request.

usage: run_action_test.py ACTION_YML CI_YML CULPERT MKPROFILE FIXTURE_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

action_yml, ci_yml, culpert, mkprofile, fixtures = map(os.path.abspath, sys.argv[1:6])
with open(action_yml, encoding="utf-8") as f:
    action = yaml.safe_load(f)
with open(ci_yml, encoding="utf-8") as f:
    ci = yaml.safe_load(f)

failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    # A failure's message may carry a log: its end is what explains it.
    print(("ok   " + what.split(":")[0]) if cond else "FAIL " + what[:200] +
          ("\n  ...\n" + what[-1500:] if len(what) > 1700 else what[200:]))
    if not cond:
        failures.append(what)


# --- GitHub expressions: the subset workflows and actions here use --------

TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|"
                   r"(?P<op>==|!=|&&|\|\||!|\(|\)|,)|(?P<name>[A-Za-z_][\w.-]*))")
STATUS_FUNCTIONS = ("success", "failure", "always", "cancelled")


def number(v):
    """GitHub's coercion of a value to a number for == and !=."""
    if v is None:
        return 0.0
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, float):
        return v
    try:
        return float(v.strip()) if v.strip() else 0.0
    except ValueError:
        return float("nan")


def equal(a, b):
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()  # GitHub compares strings ignoring case
    return number(a) == number(b)


def truthy(v):
    if isinstance(v, float):
        return v == v and v != 0.0  # NaN and 0 are false
    return not (v is None or v is False or v == "")


def evaluate(expr, lookup, status="success"):
    """Evaluate expr; lookup(dotted name) gives a context value or None."""
    tokens, pos = [], 0
    expr = expr.strip()
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise ValueError("cannot parse expression %r at %d" % (expr, pos))
        pos = m.end()
        tokens.append((m.lastgroup, m.group(m.lastgroup)))
    at = [0]

    def peek():
        return tokens[at[0]] if at[0] < len(tokens) else (None, None)

    def take(want=None):
        tok = peek()
        if want is not None and tok[1] != want:
            raise ValueError("expected %s in %r" % (want, expr))
        at[0] += 1
        return tok

    def primary():
        kind, text = take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text)
        if kind == "op" and text == "(":
            v = disjunction()
            take(")")
            return v
        if kind == "op" and text == "!":
            return not truthy(primary())
        if kind == "name":
            if text in ("true", "false"):
                return text == "true"
            if text == "null":
                return None
            if peek()[1] == "(":
                take("(")
                take(")")
                if text == "always":
                    return True
                if text == "success":
                    return status == "success"
                if text == "failure":
                    return status == "failure"
                if text == "cancelled":
                    return False
                raise ValueError("unsupported function " + text)
            return lookup(text)
        raise ValueError("unexpected %r in %r" % (text, expr))

    def comparison():
        v = primary()
        while peek()[1] in ("==", "!="):
            op = take()[1]
            w = primary()
            v = equal(v, w) == (op == "==")
        return v

    def conjunction():
        v = comparison()
        while peek()[1] == "&&":
            take()
            w = comparison()
            v = w if truthy(v) else v
        return v

    def disjunction():
        v = conjunction()
        while peek()[1] == "||":
            take()
            w = conjunction()
            v = v if truthy(v) else w
        return v

    v = disjunction()
    if at[0] != len(tokens):
        raise ValueError("trailing tokens in %r" % expr)
    return v


def as_text(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return str(int(v)) if v == int(v) else str(v)
    return v


def expand(text, lookup):
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: as_text(evaluate(m.group(1), lookup)), text)


def condition(cond, lookup, status):
    """A step's `if:`: implicitly success() && (...) unless it names a
    status function, as the runner does."""
    if isinstance(cond, bool):  # `if: false` in YAML
        cond = "true" if cond else "false"
    cond = str(cond).strip()
    m = re.fullmatch(r"\$\{\{(.*)\}\}", cond, re.S)
    if m:
        cond = m.group(1)
    if not re.search(r"\b(%s)\s*\(" % "|".join(STATUS_FUNCTIONS), cond):
        cond = "success() && (%s)" % cond
    return truthy(evaluate(cond, lookup, status))


# --- The composite action ---------------------------------------------------

class Run:
    """What one use of the action left: rc (first failing step's status, or
    0), outputs and outcome per step id, the names of the steps that ran,
    the job summary and the log of every step."""


def run_action(tmp, inputs, sha, ref, cwd=None):
    values = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    values.update(inputs)
    r = Run()
    r.rc, r.outputs, r.outcome, r.ran, r.log = 0, {}, {}, [], ""
    summary = os.path.join(tmp, "summary.md")
    open(summary, "w").close()
    workspace = cwd or os.path.join(tmp, "workspace")
    os.makedirs(workspace, exist_ok=True)

    def lookup(name):
        parts = name.split(".")
        if parts[0] == "inputs" and len(parts) == 2:
            return values[parts[1]]
        if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
            return r.outputs.get(parts[1], {}).get(parts[3])
        if parts[0] == "steps" and len(parts) == 3 and parts[2] in ("outcome", "conclusion"):
            if not any(s.get("id") == parts[1] for s in action["runs"]["steps"]):
                raise ValueError("no step with id " + parts[1])
            return r.outcome.get(parts[1], "")
        raise ValueError("unsupported context " + name)

    for n, step in enumerate(action["runs"]["steps"]):
        sid = step.get("id", "step%d" % n)
        if not condition(step.get("if", "success()"), lookup, "failure" if r.rc else "success"):
            r.outcome[sid] = "skipped"
            continue
        r.ran.append(step["name"])
        out_file = os.path.join(tmp, "out-" + sid)
        open(out_file, "w").close()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CULPERT_", "CF_ACCESS_", "GIT_"))}
        env.update({k: expand(str(v), lookup) for k, v in step.get("env", {}).items()})
        env.update(GITHUB_OUTPUT=out_file, GITHUB_STEP_SUMMARY=summary, RUNNER_TEMP=tmp,
                   GITHUB_SHA=sha, GITHUB_REF_NAME=ref, GIT_CEILING_DIRECTORIES=tmp)
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               expand(step["run"], lookup)], env=env, cwd=workspace,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        r.log += "[%s]\n%s%s" % (step["name"], proc.stdout, proc.stderr)
        with open(out_file) as f:
            r.outputs[sid] = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        r.outcome[sid] = "success" if proc.returncode == 0 else "failure"
        if proc.returncode != 0 and not r.rc:
            r.rc = proc.returncode
    with open(summary) as f:
        r.summary = f.read()
    return r


def wrapper(tmp, name, script):
    """A stand-in for the culpert binary: script, then the real culpert."""
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n%s\nexec '%s' \"$@\"\n" % (script, culpert))
    os.chmod(path, 0o755)
    return path


with tempfile.TemporaryDirectory() as tmp:
    # not made here: the action's first run, with no baseline, creates it
    archive = os.path.join(tmp, "archive", "culpert")
    before = os.path.join(tmp, "before.pb.gz")
    after = os.path.join(tmp, "after.pb.gz")
    subprocess.run([mkprofile, os.path.join(fixtures, "spec_before.txt"), before], check=True)
    subprocess.run([mkprofile, os.path.join(fixtures, "spec_after.txt"), after], check=True)
    common = {"culpert": culpert, "endpoint": archive, "token": "unused-for-directories",
              "base-branch": "main", "noise-sigma": ""}

    def uploaded(sha, project="default", where=archive):
        return os.path.exists(os.path.join(where, project, "profiles", sha + ".pb.gz"))

    def newest(where, branch="main"):
        """What pull --latest-of BRANCH gives now, as a report."""
        out = os.path.join(tmp, "newest.pb.gz")
        subprocess.run([culpert, "pull", "--endpoint", where, "--latest-of", branch, "-o", out],
                       check=True, capture_output=True)
        return report(out)

    def seeded(name):
        """A new archive whose main has one profile, `before`."""
        where = os.path.join(tmp, name)
        os.mkdir(where)
        subprocess.run([culpert, "upload", "--endpoint", where, "--commit-sha", "0" * 40,
                        "--branch", "main", before], check=True, capture_output=True)
        return where

    def report(*paths):
        return subprocess.run([culpert, "report", *paths], capture_output=True,
                              text=True).stdout.split("\n", 1)[1]

    # 1. First push to main: no baseline yet, the profile is uploaded.
    r = run_action(tmp, dict(common, profile=before, upload="true"), "a" * 40, "main")
    check(r.rc == 0, "first run without a baseline succeeds: " + r.log)
    check("no baseline yet for branch `main`" in r.summary, "summary says there is no baseline")
    check(uploaded("a" * 40), "the profile was uploaded to the archive")
    check(r.outputs.get("diff", {}).get("regressions") is None,
          "output regressions is empty when no diff ran")

    # 2. A pull request with the same profile: no regression.
    r = run_action(tmp, dict(common, profile=before), "b" * 40, "pr-1")
    check(r.rc == 0, "identical profile passes: " + r.log)
    check(r.outputs.get("diff", {}).get("regressions") == "false", "output regressions=false")
    check("### culpert: allocation diff" in r.summary, "markdown diff is in the job summary")

    # 3. A pull request that allocates more in parse_input: the job fails.
    r = run_action(tmp, dict(common, profile=after), "c" * 40, "pr-2")
    check(r.rc == 1, "regression fails the step (exit %d)" % r.rc)
    check("| `parse_input` | 512.00 KB | 768.00 KB | +256.00 KB | +50.00% |" in r.summary,
          "summary shows the parse_input regression row")
    flame3 = r.outputs.get("diff", {}).get("flamegraph", "")
    check(flame3 != "" and os.path.exists(flame3), "output flamegraph names the differential SVG")
    svg3 = open(flame3, encoding="utf-8").read() if flame3 and os.path.exists(flame3) else ""
    check("before 512.00 KB, +256.00 KB (+50.0%)" in svg3 and 'height="15" fill="#ff6060"' in svg3,
          "the differential flame graph shows parse_input's growth in the deepest red")
    # Without --noise-sigma the diff notes on stderr that the change is
    # within the noise: once in the log, not once per diff run.
    notes = r.log.count("culpert: note:")
    check(notes == 1, "the diff's stderr note is in the log once (%d): %s" % (notes, r.log))

    # 4. Same, with fail-on-regression off: reported, not failed.
    r = run_action(tmp, dict(common, profile=after, **{"fail-on-regression": "false"}),
                   "d" * 40, "pr-3")
    check(r.rc == 0, "fail-on-regression=false does not fail: " + r.log)
    check(r.outputs.get("diff", {}).get("regressions") == "true", "output regressions=true")

    # 5. The noise gate (the action's default) hides a change within sampling
    #    noise: +256 KiB against a standard error of about 286 KiB at 64 KiB.
    r = run_action(tmp, dict(common, profile=after, **{"noise-sigma": "3"}), "e" * 40, "pr-4")
    check(r.rc == 0 and r.outputs.get("diff", {}).get("regressions") == "false",
          "noise-sigma 3 leaves the +50%% within the noise quiet (exit %d): %s" % (r.rc, r.log))
    check("±" in r.summary, "noise gate shows the ± column")
    r = run_action(tmp, {k: v for k, v in dict(common, profile=after).items() if k != "noise-sigma"},
                   "e" * 40, "pr-4")
    check(r.rc == 0, "the action's default noise-sigma is on: " + r.log)

    # 6. A profile that is a directory (the processes of one run): diffed
    #    merged, and uploaded as one merged profile.
    run_dir = os.path.join(tmp, "run")
    os.mkdir(run_dir)
    shutil.copy(before, os.path.join(run_dir, "p.pb.gz"))
    shutil.copy(after, os.path.join(run_dir, "p.pb.gz.4242"))
    r = run_action(tmp, dict(common, profile=run_dir, upload="true",
                             **{"fail-on-regression": "false"}), "f" * 40, "main")
    check(r.rc == 0, "a directory profile is diffed and uploaded: " + r.log)
    check("(2 profiles merged)" in r.summary, "the diff names the merged directory: " + r.summary)
    pulled = os.path.join(tmp, "pulled.pb.gz")
    subprocess.run([culpert, "pull", "--endpoint", archive, "--sha", "f" * 40, "-o", pulled], check=True,
                   capture_output=True)
    check(report(pulled) == report(run_dir), "the archive holds the directory's profiles merged")

    # 7. The gates reach the diff: each non-default value turns the
    #    parse_input regression (+256 KiB, +50%) quiet on its own.
    common["endpoint"] = seeded("archive7")
    for name, value in (("threshold-pct", "60"), ("threshold-bytes", "300K"),
                        ("min-span-bytes", "1M")):
        r = run_action(tmp, dict(common, profile=after, **{name: value}), "7" * 40, "pr-7")
        check(r.rc == 0 and r.outputs.get("diff", {}).get("regressions") == "false",
              "%s %s leaves parse_input quiet (exit %d): %s" % (name, value, r.rc, r.log))

    # 8. A profile path with a space in it, diffed and uploaded.
    common["endpoint"] = archive8 = seeded("archive8")
    spaced_dir = os.path.join(tmp, "my run")
    os.mkdir(spaced_dir)
    spaced = os.path.join(spaced_dir, "after profile.pb.gz")
    shutil.copy(after, spaced)
    r = run_action(tmp, dict(common, profile=spaced, upload="true", **{"fail-on-regression": "false"}),
                   "8" * 40, "main")
    check(r.rc == 0 and r.outputs.get("diff", {}).get("regressions") == "true",
          "a profile path with a space is diffed (exit %d): %s" % (r.rc, r.log))
    check("after:   %s\n" % spaced in r.log, "the log has the text diff of it: " + r.log)
    check("after profile.pb.gz` — total" in r.summary, "the summary has the markdown diff of it")
    flame = r.outputs.get("diff", {}).get("flamegraph", "")
    check(flame != "" and os.path.exists(flame), "and its differential flame graph: " + r.log)
    check(uploaded("8" * 40, where=archive8), "a profile path with a space is uploaded")

    # 9. A regression pushed to main fails the job and is still uploaded: it
    #    is main's baseline from now on, and the next push compares with it.
    common["endpoint"] = archive9 = seeded("archive9")
    r = run_action(tmp, dict(common, profile=after, upload="true"), "9" * 40, "main")
    check(r.rc == 1, "a regression on a push to main fails the step (exit %d)" % r.rc)
    check(r.outputs.get("diff", {}).get("regressions") == "true", "output regressions=true on main")
    check(uploaded("9" * 40, where=archive9), "the regressed profile is uploaded anyway: " + r.log)
    check(newest(archive9) == report(after), "main's newest profile is the regressed one")
    r = run_action(tmp, dict(common, profile=after, upload="true"), "9a" + "0" * 38, "main")
    check(r.rc == 0, "the next push to main compares with the accepted regression: " + r.log)

    # 10. Errors are not uploaded and exit 2: a diff that fails (here a bad
    #     threshold), a pull that fails, a profile without a baseline that
    #     culpert cannot read.
    common["endpoint"] = archive10 = seeded("archive10")
    r = run_action(tmp, dict(common, profile=before, upload="true", **{"threshold-bytes": "lots"}),
                   "10" * 20, "main")
    check(r.rc == 2, "a failing diff exits 2 (exit %d): %s" % (r.rc, r.log))
    check(r.outputs.get("diff", {}).get("regressions") is None, "output regressions empty after exit 2")
    check("Upload the profile" not in r.ran and not uploaded("10" * 20, where=archive10),
          "a failing diff uploads nothing: " + " / ".join(r.ran))
    flaky = wrapper(tmp, "culpert-no-network",
                    '[ "$1" = pull ] && { echo "culpert: error: cannot reach the archive" >&2; exit 2; }')
    r = run_action(tmp, dict(common, culpert=flaky, profile=before, upload="true"), "11" * 20, "main")
    check(r.rc == 2 and "::error::" in r.log, "a failing pull exits 2 with an error (exit %d)" % r.rc)
    check("Upload the profile" not in r.ran and not uploaded("11" * 20, where=archive10),
          "a failing pull uploads nothing: " + " / ".join(r.ran))
    empty_archive = os.path.join(tmp, "archive-none")
    os.mkdir(empty_archive)
    bad = os.path.join(tmp, "bad profile.pb.gz")
    shutil.copy(os.path.join(fixtures, "not_a_profile.bin"), bad)
    for what, path in (("corrupt", bad), ("missing", os.path.join(tmp, "none.pb.gz"))):
        r = run_action(tmp, dict(common, endpoint=empty_archive, profile=path, upload="true"),
                       "12" * 20, "main")
        check(r.rc == 2 and "::error::culpert cannot read the profile" in r.log,
              "a %s profile without a baseline fails clearly (exit %d): %s" % (what, r.rc, r.log))
        check("Upload the profile" not in r.ran
              and not os.path.exists(os.path.join(empty_archive, "default", "profiles")),
              "a %s profile is not uploaded" % what)
    r = run_action(tmp, dict(common, endpoint=empty_archive, profile=spaced), "12" * 20, "pr-12")
    check(r.rc == 0, "a readable profile with a space in its path passes without a baseline: " + r.log)
    check("no baseline yet for branch `main`" in r.summary,
          "the summary names the base branch, not the pull request's: " + r.summary)

    # 11. A project keeps its own baselines in a shared archive, and the
    #     connection settings reach pull and upload.
    common["endpoint"] = archive11 = seeded("archive11")
    seen = os.path.join(tmp, "seen.txt")
    spy = wrapper(tmp, "culpert-spy",
                  'printf "%%s project=%%s id=%%s secret=%%s token=%%s\\n" "$1" "$CULPERT_PROJECT" '
                  '"$CF_ACCESS_CLIENT_ID" "$CF_ACCESS_CLIENT_SECRET" "$CULPERT_TOKEN" >> \'%s\'' % seen)
    access = {"culpert": spy, "cf-access-client-id": "id-1.access", "cf-access-client-secret": "s3cret"}
    r = run_action(tmp, dict(common, profile=after, upload="true", project="other", **access),
                   "13" * 20, "main")
    check(r.rc == 0 and "no baseline yet" in r.summary,
          "project other has no baseline though default has: " + r.log)
    check(uploaded("13" * 20, "other", archive11) and not uploaded("13" * 20, where=archive11),
          "the upload goes to project other")
    r = run_action(tmp, dict(common, profile=after, project="other"), "14" * 20, "pr-14")
    check(r.rc == 0 and r.outputs.get("diff", {}).get("regressions") == "false",
          "project other compares with its own baseline (exit %d): %s" % (r.rc, r.log))
    with open(seen) as f:
        calls = f.read().split("\n")
    for verb in ("pull", "upload"):
        check(verb + " project=other id=id-1.access secret=s3cret token=unused-for-directories" in calls,
              "%s gets the project, the Access pair and the token: %s" % (verb, calls))

    # 12. Two uses in one job (one RUNNER_TEMP) keep their own files.
    common["endpoint"] = seeded("archive12")
    r1 = run_action(tmp, dict(common, profile=after, **{"fail-on-regression": "false"}), "15" * 20, "pr-15")
    svg1 = open(r1.outputs["diff"]["flamegraph"], encoding="utf-8").read()
    r2 = run_action(tmp, dict(common, profile=before), "15" * 20, "pr-15")
    f1, f2 = r1.outputs["diff"]["flamegraph"], r2.outputs["diff"]["flamegraph"]
    check(f1 != f2 and r1.outputs["base"]["path"] != r2.outputs["base"]["path"],
          "two uses get different files: %s, %s" % (f1, f2))
    check(open(f1, encoding="utf-8").read() == svg1, "the second use leaves the first one's flame graph")

    # 13. Only the head of the branch uploads: a re-run of an older push to
    #     main must not make its profile main's newest. Without a remote
    #     (the cases above) the profile is uploaded unchecked.
    common["endpoint"] = archive13 = seeded("archive13")
    git = shutil.which("git")
    check(git is not None, "git is installed (the head check needs it)")
    if git:
        origin = os.path.join(tmp, "origin.git")
        clone = os.path.join(tmp, "clone")
        genv = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                    GIT_COMMITTER_EMAIL="t@t", GIT_CEILING_DIRECTORIES=tmp,
                    GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
        g = lambda *a, cwd=clone: subprocess.run([git, *a], cwd=cwd, env=genv, check=True,
                                                 capture_output=True, text=True).stdout.strip()
        g("init", "-q", "--bare", origin, cwd=tmp)
        g("init", "-q", "-b", "main", clone, cwd=tmp)
        g("commit", "-q", "--allow-empty", "-m", "one")
        old = g("rev-parse", "HEAD")
        g("commit", "-q", "--allow-empty", "-m", "two")
        head = g("rev-parse", "HEAD")
        g("remote", "add", "origin", origin)
        g("push", "-q", "origin", "main")
        r = run_action(tmp, dict(common, profile=after, upload="true", **{"fail-on-regression": "false"}),
                       old, "main", cwd=clone)
        check(r.rc == 0 and not uploaded(old, where=archive13), "an old commit of main is not uploaded: " + r.log)
        check("::notice::" in r.log and "no longer the head of main" in r.log,
              "a notice says why: " + r.log)
        check(newest(archive13) == report(before), "main's baseline is unchanged")
        r = run_action(tmp, dict(common, profile=after, upload="true", **{"fail-on-regression": "false"}),
                       head, "main", cwd=clone)
        check(r.rc == 0 and uploaded(head, where=archive13), "the head of main is uploaded: " + r.log)
        check(newest(archive13) == report(after), "the head's profile is main's baseline")
        # A branch the remote does not have (ls-remote answers nothing) names
        # no other head: uploaded.
        r = run_action(tmp, dict(common, profile=after, upload="true", **{"fail-on-regression": "false"}),
                       old, "not-pushed", cwd=clone)
        check(r.rc == 0 and uploaded(old, where=archive13) and "::notice::" not in r.log,
              "a branch missing on the remote is uploaded unchecked: " + r.log)

    # 14. A file:// URL as the endpoint, as culpert reads one (any case,
    #     an optional localhost, percent-encoded): the first run creates the
    #     directory it names (not ./file:/...) and uploads there; the next
    #     finds it. An http(s) URL in any case is never made a directory.
    for n, (url, where) in enumerate((
            ("file://%s/archive14/new", "%s/archive14/new"),
            ("FILE://localhost%s/archive14/upper", "%s/archive14/upper"),
            ("file://%s/archive14/with%%20space%%25", "%s/archive14/with space%%"))):
        url, where = url % tmp, where % tmp
        workspace = os.path.join(tmp, "workspace14-%d" % n)
        r = run_action(tmp, dict(common, endpoint=url, profile=before, upload="true"),
                       "14a%d" % n + "0" * 36, "main", cwd=workspace)
        check(r.rc == 0 and "no baseline yet" in r.summary and uploaded("14a%d" % n + "0" * 36, where=where),
              "%s is created on the first run and uploaded to: %s" % (url, r.log))
        check(os.listdir(workspace) == [], "nothing is created in the working directory: %s" % os.listdir(workspace))
        r = run_action(tmp, dict(common, endpoint=url, profile=after), "14b%d" % n + "0" * 36, "pr-14")
        check(r.rc == 1 and r.outputs.get("diff", {}).get("regressions") == "true",
              "the next run with %s diffs against it (exit %d): %s" % (url, r.rc, r.log))
    workspace = os.path.join(tmp, "workspace14-http")
    r = run_action(tmp, dict(common, endpoint="HTTPS://", profile=before), "14c" + "0" * 37, "pr-14",
                   cwd=workspace)
    check(r.rc == 2 and os.listdir(workspace) == [],
          "HTTPS:// is a URL, not a directory to create (exit %d): %s" % (r.rc, os.listdir(workspace)))

# --- ci.yml -------------------------------------------------------------------

check(ci.get("permissions") == {"contents": "read"}, "ci.yml grants contents: read and nothing more")
for name, job in ci["jobs"].items():
    check("permissions" not in job or job["permissions"] == {"contents": "read"},
          "job %s asks for no more than contents: read" % name)


def step_index(steps, pred):
    return next((i for i, s in enumerate(steps) if pred(s)), None)


# Debian 12's nodejs is 18; the archive worker's tools need 20, and
# .ci/install-deps keeps a node already on PATH.
for name, job in ci["jobs"].items():
    steps = job["steps"]
    runs_suite = step_index(steps, lambda s: ".ci/run" in s.get("run", "") or "tests/run.sh" in s.get("run", ""))
    if runs_suite is None:
        continue
    node = step_index(steps, lambda s: str(s.get("uses", "")).startswith("actions/setup-node@")
                      and str(s.get("with", {}).get("node-version")) == "20")
    check(node is not None and node < runs_suite,
          "job %s sets up Node.js 20 before the test suite (%s, %s)" % (name, node, runs_suite))

# The archive step: runs with an archive and a token, is skipped with a note
# in the summary for a fork's pull request (no secrets), and uploads from
# one run at a time on main.
job = ci["jobs"]["allocation-diff"]
archive_step = step_index(job["steps"], lambda s: s.get("uses") == "./.github/actions/culpert-diff")


def ci_step_runs(step, event, token, archive_var="https://archive.example"):
    ref = "refs/heads/main" if event == "push" else "refs/pull/7/merge"
    github = {"event_name": event, "ref": ref, "base_ref": "" if event == "push" else "main",
              "workflow": ci.get("name", ""), "run_id": "42"}

    def ctx(secrets_env):
        def lookup(name):
            scope, _, key = name.partition(".")
            if scope == "vars":
                return {"CULPERT_ARCHIVE": archive_var}.get(key)
            if scope == "secrets":
                return {"CULPERT_TOKEN": token}.get(key)
            if scope == "github":
                return github.get(key)
            if scope == "env":
                return secrets_env.get(key)
            if scope == "steps":
                return None
            raise ValueError("unsupported context " + name)
        return lookup

    env = {}
    for k, v in job.get("env", {}).items():
        env[k] = expand(str(v), ctx({}))
    return condition(step.get("if", "success()"), ctx(env), "success")


check(archive_step is not None, "allocation-diff uses the culpert-diff action")
if archive_step is not None:
    step = job["steps"][archive_step]
    exposed = [k for k, v in job.get("env", {}).items()
               if "secrets.CULPERT_TOKEN" in str(v) and not re.search(r"[!=]=", str(v))]
    check(not exposed, "the token itself is not in every step's environment: %s" % exposed)
    check(ci_step_runs(step, "push", "t0ken") and ci_step_runs(step, "pull_request", "t0ken"),
          "the archive step runs with an archive and a token")
    check(not ci_step_runs(step, "pull_request", ""), "the archive step is skipped without the token")
    check(not ci_step_runs(step, "push", "t0ken", archive_var=""), "the archive step is skipped without an archive")
    notes = [s for s in job["steps"] if "GITHUB_STEP_SUMMARY" in s.get("run", "")
             and "CULPERT_TOKEN" in s.get("run", "")]
    check(len(notes) == 1 and ci_step_runs(notes[0], "pull_request", "")
          and not ci_step_runs(notes[0], "pull_request", "t0ken"),
          "a step notes the skip in the job summary only when the token is missing")
    group = job.get("concurrency", {})
    group = group if isinstance(group, dict) else {"group": group}
    def group_of(event, run_id):
        ref = "refs/heads/main" if event == "push" else "refs/pull/7/merge"
        values = {"github.event_name": event, "github.workflow": ci.get("name"), "github.ref": ref,
                  "github.run_id": run_id}
        return expand(str(group.get("group", "")), values.get)
    g_push1, g_push2 = group_of("push", "1"), group_of("push", "2")
    g_pr1, g_pr2 = group_of("pull_request", "3"), group_of("pull_request", "4")
    check(g_push1 != "" and g_push1 == g_push2 and g_pr1 != g_pr2 and g_pr1 != g_push1,
          "pushes to main upload one at a time; pull requests do not wait (%r, %r)" % (g_push1, g_pr1))
    check(group.get("cancel-in-progress") in (None, False), "a running upload is never cancelled")

print("%d passed, %d failed" % (checks - len(failures), len(failures)))
sys.exit(1 if failures else 0)
