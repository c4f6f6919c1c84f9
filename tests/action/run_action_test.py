#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Runs the culpert-diff composite action's steps the way a GitHub runner
would (inputs and env expanded, GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files,
`if:` conditions), against a local directory archive, and checks what a
workflow author would see: first run without a baseline, a clean run, a
regression that fails the job, the same regression with failing turned
off, and a profile that is a directory (diffed and uploaded merged).

usage: run_action_test.py ACTION_YML CULPERT MKPROFILE FIXTURE_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

action_yml, culpert, mkprofile, fixtures = sys.argv[1:5]
with open(action_yml, encoding="utf-8") as f:
    action = yaml.safe_load(f)

failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run_action(tmp, inputs, sha, ref):
    """Run every step; return (exit status of the failing step or 0,
    outputs of all steps, summary text)."""
    values = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    values.update(inputs)
    outputs = {}
    summary = os.path.join(tmp, "summary.md")
    open(summary, "w").close()

    def expand(text):
        def sub(m):
            expr = m.group(1).strip()
            if expr.startswith("inputs."):
                return values[expr[len("inputs."):]]
            s = re.fullmatch(r"steps\.(\w+)\.outputs\.([\w-]+)", expr)
            if s:
                return outputs.get(s.group(1), {}).get(s.group(2), "")
            raise ValueError("unsupported expression " + expr)
        return re.sub(r"\$\{\{(.*?)\}\}", sub, text)

    def condition(cond):
        # The action only uses `a != ''` and `a == 'true'` comparisons.
        m = re.fullmatch(r"(.+?)\s*(==|!=)\s*'(.*)'", cond.strip())
        if not m:
            raise ValueError("unsupported condition " + cond)
        left = expand("${{ " + m.group(1) + " }}")
        return (left == m.group(3)) == (m.group(2) == "==")

    for step in action["runs"]["steps"]:
        if "if" in step and not condition(step["if"]):
            continue
        out_file = os.path.join(tmp, "out-" + step.get("id", "x"))
        open(out_file, "w").close()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CULPERT_")}
        env.update({k: expand(str(v)) for k, v in step.get("env", {}).items()})
        env.update(GITHUB_OUTPUT=out_file, GITHUB_STEP_SUMMARY=summary, RUNNER_TEMP=tmp,
                   GITHUB_SHA=sha, GITHUB_REF_NAME=ref)
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", expand(step["run"])], env=env,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        with open(out_file) as f:
            outputs[step.get("id", "")] = dict(
                line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        if proc.returncode != 0:
            with open(summary) as f:
                return proc.returncode, outputs, f.read(), proc.stdout + proc.stderr
    with open(summary) as f:
        return 0, outputs, f.read(), ""


with tempfile.TemporaryDirectory() as tmp:
    archive = os.path.join(tmp, "archive")
    os.mkdir(archive)  # a directory archive must exist; upload fills it
    before = os.path.join(tmp, "before.pb.gz")
    after = os.path.join(tmp, "after.pb.gz")
    subprocess.run([mkprofile, os.path.join(fixtures, "spec_before.txt"), before], check=True)
    subprocess.run([mkprofile, os.path.join(fixtures, "spec_after.txt"), after], check=True)
    common = {"culpert": culpert, "endpoint": archive, "token": "unused-for-directories",
              "base-branch": "main", "noise-sigma": ""}

    # 1. First push to main: no baseline yet, the profile is uploaded.
    rc, out, summary, log = run_action(tmp, dict(common, profile=before, upload="true"),
                                       "a" * 40, "main")
    check(rc == 0, "first run without a baseline succeeds: " + log)
    check("no baseline yet for branch `main`" in summary, "summary says there is no baseline")
    check(any(files for _, _, files in os.walk(archive)),
          "the profile was uploaded to the archive")

    # 2. A pull request with the same profile: no regression.
    rc, out, summary, log = run_action(tmp, dict(common, profile=before), "b" * 40, "pr-1")
    check(rc == 0, "identical profile passes: " + log)
    check(out.get("diff", {}).get("regressions") == "false", "output regressions=false")
    check("### culpert: allocation diff" in summary, "markdown diff is in the job summary")

    # 3. A pull request that allocates more in parse_input: the job fails.
    rc, out, summary, log = run_action(tmp, dict(common, profile=after), "c" * 40, "pr-2")
    check(rc == 1, "regression fails the step (exit %d)" % rc)
    check("| `parse_input` | 512.00 KB | 768.00 KB | +256.00 KB | +50.00% |" in summary,
          "summary shows the parse_input regression row")
    flame = out.get("diff", {}).get("flamegraph", "")
    check(flame != "" and os.path.exists(flame), "output flamegraph names the differential SVG")
    if flame and os.path.exists(flame):
        svg = open(flame, encoding="utf-8").read()
        check("before 512.00 KB, +256.00 KB (+50.0%)" in svg and 'height="15" fill="#ff6060"' in svg,
              "the differential flame graph shows parse_input's growth in the deepest red")

    # 4. Same, with fail-on-regression off: reported, not failed.
    rc, out, summary, log = run_action(tmp, dict(common, profile=after, **{"fail-on-regression": "false"}),
                                       "d" * 40, "pr-3")
    check(rc == 0, "fail-on-regression=false does not fail: " + log)
    check(out.get("diff", {}).get("regressions") == "true", "output regressions=true")

    # 5. The noise gate (the action's default) hides a change within sampling noise.
    rc, out, summary, log = run_action(tmp, dict(common, profile=after, **{"noise-sigma": "3"}),
                                       "e" * 40, "pr-4")
    check(rc in (0, 1) and "±" in summary, "noise gate shows the ± column")

    # 6. A profile that is a directory (the processes of one run): diffed
    #    merged, and uploaded as one merged profile.
    run_dir = os.path.join(tmp, "run")
    os.mkdir(run_dir)
    shutil.copy(before, os.path.join(run_dir, "p.pb.gz"))
    shutil.copy(after, os.path.join(run_dir, "p.pb.gz.4242"))
    rc, out, summary, log = run_action(tmp, dict(common, profile=run_dir, upload="true",
                                                 **{"fail-on-regression": "false"}), "f" * 40, "main")
    check(rc == 0, "a directory profile is diffed and uploaded: " + log)
    check("(2 profiles merged)" in summary, "the diff names the merged directory: " + summary)
    pulled = os.path.join(tmp, "pulled.pb.gz")
    subprocess.run([culpert, "pull", "--endpoint", archive, "--sha", "f" * 40, "-o", pulled], check=True,
                   capture_output=True)
    report = lambda *paths: subprocess.run([culpert, "report", *paths], capture_output=True,
                                           text=True).stdout.split("\n", 1)[1]
    check(report(pulled) == report(run_dir), "the archive holds the directory's profiles merged")

print("%d passed, %d failed" % (checks - len(failures), len(failures)))
sys.exit(1 if failures else 0)
