/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * run_workload: the program `culpert run` runs end to end in the CLI tests.
 * It allocates inside two nested spans and one sibling span, in fixed
 * amounts, then exits with the status given on the command line (so the
 * test can check that culpert passes it through).
 *
 *   run_workload [STATUS]
 */
#include <stdlib.h>
#include <string.h>

#include <culpert.h>

/* Allocate and free `n` blocks of `size` bytes, touching each. */
static void churn(size_t n, size_t size)
{
  for (size_t i = 0; i < n; i++) {
    char *p = malloc(size);
    if (!p)
      abort();
    memset(p, (int)i, size);
    free(p);
  }
}

static void decode_frame(void)
{
  CULPERT_SPAN("decode_frame");
  churn(200, 4096);
}

static void handle_batch(void)
{
  CULPERT_SPAN("handle_batch");
  churn(100, 1024);
  decode_frame();
}

static void flush_output(void)
{
  CULPERT_SPAN("flush_output");
  churn(50, 8192);
}

int main(int argc, char **argv)
{
  handle_batch();
  flush_output();
  return argc > 1 ? atoi(argv[1]) : 0;
}
