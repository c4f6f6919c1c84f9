#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Every option of every subcommand is documented in its --help and in its
section of cli/README.md.

   check_options.py CULPERT CLI_SOURCE_DIR

An option is what the source accepts: the long names in getopt_long
tables ({"name", no_argument|required_argument|optional_argument, ...})
and "--name" string literals in cli/cmd_<command>.c, plus every --option the
command's --help shows. Each must appear in `culpert <command> --help`
(source options) and in the README section "## <command>" (all of them).
"""
import re
import subprocess
import sys

COMMANDS = ["report", "info", "diff", "flamegraph", "merge", "run", "upload", "pull"]
OPT_TABLE = re.compile(r'\{\s*"([a-z][a-z0-9-]*)"\s*,\s*(?:no_argument|required_argument|optional_argument)')
OPT_LITERAL = re.compile(r'"(--[a-z][a-z0-9-]*)')
OPT_TEXT = re.compile(r'(?<![\w-])(--[a-z][a-z0-9-]*)')


def section(readme, title):
    m = re.search(r'^## ' + re.escape(title) + r'\n(.*?)(?=^## |\Z)', readme, re.S | re.M)
    return m.group(1) if m else ""


def main():
    culpert, srcdir = sys.argv[1], sys.argv[2]
    readme = open(srcdir + "/README.md", encoding="utf-8").read()
    problems = []
    for cmd in COMMANDS:
        src = open("%s/cmd_%s.c" % (srcdir, cmd), encoding="utf-8").read()
        # Comments may quote options ("--name VALUE"); only code counts.
        src = re.sub(r'/\*.*?\*/|//[^\n]*', ' ', src, flags=re.S)
        from_src = {"--" + n for n in OPT_TABLE.findall(src)} | set(OPT_LITERAL.findall(src))
        res = subprocess.run([culpert, cmd, "--help"], capture_output=True, text=True)
        if res.returncode != 0:
            problems.append("culpert %s --help exits %d" % (cmd, res.returncode))
            continue
        helptext = res.stdout
        in_help = set(OPT_TEXT.findall(helptext))
        doc = section(readme, cmd)
        if not doc.strip():
            problems.append("cli/README.md has no text in section '## %s'" % cmd)
            continue
        in_doc = set(OPT_TEXT.findall(doc))
        for opt in sorted(from_src - in_help):
            problems.append("%s: %s is accepted (cmd_%s.c) but not in --help" % (cmd, opt, cmd))
        # --help is documented once for all commands, above the sections.
        for opt in sorted((from_src | in_help) - in_doc - {"--help"}):
            problems.append("%s: %s is not in cli/README.md section '## %s'" % (cmd, opt, cmd))
        print("%-11s %2d options checked" % (cmd, len(from_src | in_help)))
    for p in problems:
        print("FAIL: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
