/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * noise_workload.c: a deterministic program with spans, for the sampling
 * noise study (docs/noise-study.md). Every run makes exactly the same
 * allocations; only libculpert's sampling (CULPERT_SEED) differs between
 * runs, so any difference between two profiles is sampling noise.
 *
 * usage: noise_workload [--requests N] [--grow SPAN PERCENT]...
 * --grow makes SPAN allocate PERCENT% more (more allocations of the same
 * size mix), the "real change" the study tries to detect. --requests
 * (default 16, about 575 MB in all) scales the whole workload.
 *
 * Spans and their exact totals are printed on stdout (span<TAB>bytes), so
 * the study can compare the estimates with the truth.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "culpert.h"

struct span_load {
  const char *name;
  const char *parent; /* NULL: a root span; "" for no span at all */
  uint32_t count;     /* allocations per request */
  uint32_t min_size, max_size;
  double grow;    /* extra fraction from --grow */
  uint64_t exact; /* bytes allocated, for the report */
};

/* Sizes span two orders of magnitude on either side of the default
 * 512 KiB sample rate, as a service's allocations do. */
static struct span_load loads[] = {
    {"parse_input", "handle_request", 5000, 32, 1024, 0, 0},
    {"build_response", "handle_request", 400, 4096, 65536, 0, 0},
    {"render_json", "build_response", 12000, 16, 256, 0, 0},
    {"cache_fill", "handle_request", 10, 262144, 1048576, 0, 0},
    {"background_gc", NULL, 1200, 1024, 16384, 0, 0},
    {"(no span)", "", 300, 64, 4096, 0, 0},
};

#define NLOADS (sizeof loads / sizeof loads[0])

/* A fixed LCG per span: the same sizes in every run. */
static uint32_t next_rand(uint64_t *state)
{
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*state >> 33);
}

static void run_load(struct span_load *l, uint64_t *state, uint32_t request)
{
  /* Allocations per request times (1 + grow), the fraction spread evenly
   * over the requests. */
  double want = (double)l->count * (1.0 + l->grow);
  uint32_t n = (uint32_t)(want * (request + 1)) - (uint32_t)(want * request);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t size = l->min_size + next_rand(state) % (l->max_size - l->min_size + 1);
    volatile char *p = malloc(size);
    if (!p)
      abort();
    p[0] = 1;
    p[size - 1] = 2;
    l->exact += size;
    free((void *)p);
  }
}

int main(int argc, char **argv)
{
  uint32_t requests = 16;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc) {
      requests = (uint32_t)strtoul(argv[++i], NULL, 10);
      continue;
    }
    if (strcmp(argv[i], "--grow") == 0 && i + 2 < argc) {
      size_t k = 0;
      while (k < NLOADS && strcmp(loads[k].name, argv[i + 1]) != 0)
        k++;
      if (k == NLOADS) {
        fprintf(stderr, "noise_workload: no span '%s'\n", argv[i + 1]);
        return 2;
      }
      loads[k].grow = atof(argv[i + 2]) / 100.0;
      i += 2;
    } else {
      fprintf(stderr, "usage: noise_workload [--requests N] [--grow SPAN PERCENT]...\n");
      return 2;
    }
  }
  uint64_t state[NLOADS];
  for (size_t k = 0; k < NLOADS; k++)
    state[k] = 0x9E3779B97F4A7C15ull * (k + 1);

  for (uint32_t r = 0; r < requests; r++) {
    culpert_span_enter("handle_request");
    culpert_span_enter("parse_input");
    run_load(&loads[0], &state[0], r);
    culpert_span_exit();
    culpert_span_enter("build_response");
    run_load(&loads[1], &state[1], r);
    culpert_span_enter("render_json");
    run_load(&loads[2], &state[2], r);
    culpert_span_exit();
    culpert_span_exit();
    culpert_span_enter("cache_fill");
    run_load(&loads[3], &state[3], r);
    culpert_span_exit();
    culpert_span_exit();

    culpert_span_enter("background_gc");
    run_load(&loads[4], &state[4], r);
    culpert_span_exit();
    run_load(&loads[5], &state[5], r);
  }
  for (size_t k = 0; k < NLOADS; k++)
    printf("%s\t%llu\n", loads[k].name, (unsigned long long)loads[k].exact);
  return 0;
}
