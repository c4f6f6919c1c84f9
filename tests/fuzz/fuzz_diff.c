/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * fuzz_diff: libFuzzer target for `culpert diff` as a whole (cmd_diff.c
 * classifies the rows, spantree.c merges the two span trees for --tree).
 * Each input is cut into a before and an after profile (fuzz_split.h; a
 * third part, when there is one, is diffed against the first too) and
 * compared in every view: text, markdown and JSON, flat and --tree, with
 * --top, --min-span-bytes, --noise-sigma and --inuse. stdout goes to
 * /dev/null. Exit status 0, 1 or 2 only; a crash, leak, hang or sanitizer
 * report is a bug. Build and run: tests/README.md ("Fuzzing").
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

static void diff_views(char *before, char *after)
{
  char *views[][12] = {
      {"diff", before, after},
      {"diff", "--format", "markdown", before, after},
      {"diff", "--format=json", before, after},
      {"diff", "--tree", before, after},
      {"diff", "--tree", "--format", "markdown", "--top", "2", before, after},
      {"diff", "--tree", "--format", "json", "--noise-sigma", "3", before, after},
      {"diff", "--top", "1", "--min-span-bytes", "1k", "--threshold-pct", "0", before, after},
      {"diff", "--inuse", "--tree", "--threshold-bytes", "0", before, after},
      {"diff", "--inuse", "--format", "markdown", "--noise-sigma", "0.5", before, after},
  };
  for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
    int argc = 0;
    while (views[i][argc])
      argc++;
    int rc = culpert__cmd_diff(argc, views[i]);
    if (rc != CULPERT_EXIT_OK && rc != CULPERT_EXIT_REGRESSION && rc != CULPERT_EXIT_ERROR)
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char paths[FUZZ_PARTS_MAX][32];
  fuzz_quiet_stdout();
  size_t n = fuzz_inputs(data, size, paths);
  if (n == 0)
    return 0;
  diff_views(paths[0], paths[1]);
  if (n > 2)
    diff_views(paths[0], paths[2]);
  return 0;
}
