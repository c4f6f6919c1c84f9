/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_teardown: blocks that are freed only as the process ends, by a
 * linked library's destructor (wl_teardown_lib), by this program's own
 * destructor and atexit handler, or by an at_quick_exit handler. Run as
 * `wl_teardown exit` (returns from main) or `wl_teardown quick` (ends
 * with quick_exit(3)). One block stays allocated for good, so the
 * profile's in-use total is exactly that one: 7000 bytes in span
 * "kept".
 */
#include <stdlib.h>
#include <string.h>

#include "culpert.h"

void teardown_lib_setup(void);

static void *by_dtor, *by_atexit, *by_quick, *kept;

__attribute__((destructor)) static void own_fini(void)
{
  free(by_dtor);
}

static void on_exit_free(void)
{
  free(by_atexit);
}

static void on_quick_exit_free(void)
{
  free(by_quick);
}

static void *alloc_in(const char *span, size_t n)
{
  culpert_span_enter(span);
  void *p = malloc(n);
  culpert_span_exit();
  return p;
}

int main(int argc, char **argv)
{
  int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  teardown_lib_setup();
  by_dtor = alloc_in("dtor", 1000);
  by_atexit = alloc_in("atexit", 2000);
  by_quick = alloc_in("quick", 3000);
  kept = alloc_in("kept", 7000);
  atexit(on_exit_free);
  at_quick_exit(on_quick_exit_free);
  if (quick)
    quick_exit(3);
  free(by_quick);
  return 0;
}
