/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * fuzz_report: libFuzzer target for `culpert report` as a whole: every
 * input is written to a memfd and rendered as the tree, the flat table,
 * callsites (within a span and outside every span), tree JSON and in-use
 * tree, with stdout going to /dev/null. Hostile names (control characters,
 * invalid UTF-8, huge widths), cycles and deep nesting must not crash,
 * leak or hang. Build and run: tests/README.md ("Fuzzing").
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* main.c is not linked: errors are expected and not interesting here. */
const char *culpert__argv0 = "culpert";
void culpert__error(const char *fmt, ...)
{
  (void)fmt;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
    fd = memfd_create("profile", 0);
    if (fd < 0 || !freopen("/dev/null", "w", stdout))
      abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
    abort();
  char *views[][7] = {
      {"report", path, NULL},
      {"report", "--flat", "--top", "3", path, NULL},
      {"report", "--no-span", path, NULL},
      {"report", "--span", "parse_input", "--skip", "^main$", path, NULL},
      {"report", "--format", "json", path, NULL},
      {"report", "--inuse", "--top", "1", path, NULL},
  };
  for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
    int argc = 0;
    while (views[i][argc])
      argc++;
    int rc = culpert__cmd_report(argc, views[i]);
    if (rc != CULPERT_EXIT_OK && rc != CULPERT_EXIT_ERROR)
      abort();
  }
  return 0;
}
