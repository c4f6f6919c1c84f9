/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_unbiased: a known mix of allocation sizes inside span "mix", nearly
 * all freed at once, plus a known set kept live in span "live". Prints the
 * true totals ("truth ALLOC_BYTES LIVE_BYTES") for the test to compare
 * with the profile's estimates. With "--snapshots" it instead takes 200
 * snapshots (culpert_snapshot, whose own allocations are culpert's, not
 * the program's), each followed by 50 blocks of 16 bytes in span "small",
 * and prints "truth ALLOC_BYTES". With "--threads" it starts 400 threads
 * one after another, each of which allocates one block of 64 KiB in span
 * "first" (its first allocation) and ends, and prints "truth
 * ALLOC_BYTES". With "--shrink" it allocates 100 blocks of 1 MiB in span
 * "shrunk" and reallocs each to 16 bytes, keeping them, and prints "truth
 * ALLOC_BYTES LIVE_BYTES".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "culpert.h"

static void *live[4096];

static int snapshots(void)
{
  unsigned long long total = 0;
  culpert_span_enter("small");
  for (int r = 0; r < 200; r++) {
    unsigned char *buf = NULL;
    size_t len = 0;
    culpert_snapshot(&buf, &len);
    free(buf);
    for (int i = 0; i < 50; i++) {
      void *p = malloc(16);
      if (p == NULL)
        return 1;
      ((volatile char *)p)[0] = 1;
      free(p);
      total += 16;
    }
  }
  culpert_span_exit();
  printf("truth %llu\n", total);
  return 0;
}

static void *first_allocation(void *arg)
{
  culpert_span_enter("first");
  void *p = malloc(65536);
  culpert_span_exit();
  if (p != NULL)
    ((volatile char *)p)[0] = 1;
  free(p);
  *(int *)arg = p != NULL;
  return NULL;
}

static int threads(void)
{
  unsigned long long total = 0;
  for (int i = 0; i < 400; i++) {
    pthread_t t;
    int ok = 0;
    if (pthread_create(&t, NULL, first_allocation, &ok) != 0 || pthread_join(t, NULL) != 0 || !ok)
      return 1;
    total += 65536;
  }
  printf("truth %llu\n", total);
  return 0;
}

/* Blocks almost surely sampled, each shrunk by a realloc whose new size
 * almost never runs the count out: the old blocks are no longer in use. */
static int shrink(void)
{
  static void *kept[100];
  culpert_span_enter("shrunk");
  for (int i = 0; i < 100; i++) {
    char *p = malloc(1u << 20);
    if (p == NULL)
      return 1;
    p[0] = 1;
    kept[i] = realloc(p, 16);
    if (kept[i] == NULL)
      return 1;
  }
  culpert_span_exit();
  printf("truth %llu %llu\n", 100ull * ((1u << 20) + 16), 100ull * 16);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc == 2 && strcmp(argv[1], "--snapshots") == 0)
    return snapshots();
  if (argc == 2 && strcmp(argv[1], "--threads") == 0)
    return threads();
  if (argc == 2 && strcmp(argv[1], "--shrink") == 0)
    return shrink();
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
