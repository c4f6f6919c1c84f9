/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * fuzz_flamegraph: libFuzzer target for `culpert flamegraph` as a whole
 * (cmd_flamegraph.c builds the tree and the folded text, flame_svg.c the
 * SVG). Each input is cut into a profile, a base profile and, for three
 * parts, a second profile merged with the first (fuzz_split.h); they are
 * drawn folded and as SVG, each also against the base (--diff-base), and
 * with the other weights, --inuse, --span and --annotate-spans=false.
 * stdout goes to /dev/null. Exit status 0 or 2 only; a crash, leak, hang
 * or sanitizer report is a bug. Build and run: tests/README.md ("Fuzzing").
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "fuzz_split.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* main.c is not linked: errors are expected and not interesting here. */
const char *culpert__argv0 = "culpert";
void culpert__error(const char *fmt, ...)
{
  (void)fmt;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char paths[FUZZ_PARTS_MAX][32];
  fuzz_quiet_stdout();
  size_t n = fuzz_inputs(data, size, paths);
  if (n == 0)
    return 0;
  char *file = paths[0], *base = paths[1], *more = n > 2 ? paths[2] : NULL;
  char *views[][12] = {
      {"flamegraph", file, more},
      {"flamegraph", "--format", "svg", "--title", "<t&'\">", file, more},
      {"flamegraph", "--diff-base", base, file, more},
      {"flamegraph", "--format=svg", "--diff-base", base, file, more},
      {"flamegraph", "--weight", "objects", "--inuse", "--span", "parse_input", file, more},
      {"flamegraph", "--format", "svg", "--weight", "samples", "--annotate-spans=false",
       "--diff-base", base, file, more},
  };
  for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
    int argc = 0;
    while (views[i][argc])
      argc++;
    int rc = culpert__cmd_flamegraph(argc, views[i]);
    if (rc != CULPERT_EXIT_OK && rc != CULPERT_EXIT_ERROR)
      abort();
  }
  return 0;
}
