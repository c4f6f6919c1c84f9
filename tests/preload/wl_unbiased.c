/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_unbiased: a known mix of allocation sizes inside span "mix", nearly
 * all freed at once, plus a known set kept live in span "live". Prints the
 * true totals ("truth ALLOC_BYTES LIVE_BYTES") for the test to compare
 * with the profile's estimates.
 */
#include <stdio.h>
#include <stdlib.h>

#include "culpert.h"

static void *live[4096];

int main(void)
{
  static const size_t sizes[] = {8, 24, 64, 200, 1000, 4096, 20000, 100000, 700000};
  const int rounds = 2000;
  unsigned long long total = 0, live_total = 0;
  culpert_span_enter("mix");
  for (int r = 0; r < rounds; r++) {
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      void *p = malloc(sizes[k]);
      if (p == NULL)
        return 1;
      ((volatile char *)p)[0] = 1;
      free(p);
      total += sizes[k];
    }
  }
  culpert_span_exit();
  culpert_span_enter("live");
  for (int i = 0; i < 4096; i++) {
    size_t n = (size_t)(i % 16 + 1) * 1024;
    live[i] = malloc(n);
    live_total += n;
  }
  culpert_span_exit();
  printf("truth %llu %llu\n", total, live_total);
  return 0;
}
