/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * workload.c: the allocation workloads the collector benchmark times, one
 * program run per measurement so every run starts from a fresh process.
 *
 *   culpert_bench_workload small  THREADS OPS   malloc/free of small sizes
 *   culpert_bench_workload mixed  THREADS OPS   small/medium/rare large,
 *                                               realloc, calloc, live blocks
 *   culpert_bench_workload pairs  THREADS OPS   malloc(32)+free pairs made
 *                                               CALL_DEPTH frames down
 *   culpert_bench_workload churn  THREADS OPS   OPS short-lived threads, one
 *                                               after another, each making
 *                                               one malloc(100)+free (at
 *                                               CULPERT_SAMPLE_RATE=0: what
 *                                               a thread's first sample
 *                                               costs)
 *
 * Every thread performs OPS operations (weak scaling: two threads do twice
 * the work of one), so "two threads scale like one" means equal ratios.
 * The pseudo-random stream is fixed per thread index: each run of a given
 * command allocates exactly the same sizes in the same order.
 *
 * Built with -fno-omit-frame-pointer so frame-pointer stacks are complete.
 * Prints the bytes it requested from the allocator (all threads), so the
 * driver can report allocation rates; exits non-zero only if an
 * allocation fails.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Frames between the thread entry and the allocation in "pairs" mode, so a
 * sampled allocation unwinds a stack of realistic depth. */
#define CALL_DEPTH 12

enum mode { MODE_SMALL, MODE_MIXED, MODE_PAIRS, MODE_CHURN };

struct job {
  enum mode mode;
  unsigned index;
  uint64_t ops;
  uint64_t bytes; /* requested from the allocator, reported at exit */
  int failed;
};

/* Keeps a pointer alive in the compiler's eyes so a malloc/free pair is
 * never folded away. */
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

/* xorshift64*: cheap, deterministic, good enough to pick sizes. */
static uint64_t next_rand(uint64_t *s)
{
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * UINT64_C(0x2545F4914F6CDD1D);
}

static uint64_t seed_for(unsigned index)
{
  return UINT64_C(0x9E3779B97F4A7C15) * (index + 1) | 1;
}

/* Small sizes only, 16..256 bytes, through a ring of 16 slots: each step
 * frees the block allocated 16 steps earlier. Almost pure allocator cost. */
static int run_small(struct job *j)
{
  void *ring[16] = {0};
  uint64_t s = seed_for(j->index);
  for (uint64_t i = 0; i < j->ops; i++) {
    size_t size = 16 + (size_t)(next_rand(&s) >> 60) * 16;
    unsigned k = (unsigned)(i & 15);
    free(ring[k]);
    ring[k] = malloc(size);
    j->bytes += size;
    if (ring[k] == NULL)
      return -1;
    *(volatile char *)ring[k] = (char)i;
  }
  for (unsigned k = 0; k < 16; k++)
    free(ring[k]);
  return 0;
}

#define MIXED_SLOTS 4096
#define MIXED_KEEP  256 /* slots 0..255 hold long-lived blocks */

/* A size for the mixed workload: 88% small (16..512), 11.9% medium
 * (1..64 KiB), 0.1% large (256 KiB..2 MiB). */
static size_t mixed_size(uint64_t r)
{
  unsigned p = (unsigned)(r % 1000);
  if (p < 880)
    return 16 + (size_t)((r >> 10) % 497);
  if (p < 999)
    return 1024 + (size_t)((r >> 10) % (63 * 1024));
  return ((size_t)256 << 10) + (size_t)((r >> 10) % (1792u << 10));
}

/* Replaces a random slot each step: 80% malloc, 10% calloc, 10% realloc
 * of the old block. Long-lived slots are replaced only 1 time in 64, so
 * they stay live across many thousands of operations. Touches the first
 * 64 bytes of each new block, as a program filling a header would. */
static int run_mixed(struct job *j)
{
  void **slot = calloc(MIXED_SLOTS, sizeof *slot);
  uint64_t s = seed_for(j->index);
  int rc = -1;
  if (slot == NULL)
    return -1;
  for (uint64_t i = 0; i < j->ops; i++) {
    uint64_t r = next_rand(&s);
    unsigned k = (unsigned)(r >> 52) % MIXED_SLOTS;
    if (k < MIXED_KEEP && (r & 63) != 0)
      k += MIXED_KEEP;
    size_t size = mixed_size(next_rand(&s));
    unsigned op = (unsigned)(r >> 8) % 10;
    void *p;
    if (op == 0) {
      p = realloc(slot[k], size);
    } else {
      free(slot[k]);
      slot[k] = NULL;
      p = op == 1 ? calloc(1, size) : malloc(size);
    }
    if (p == NULL)
      goto out;
    j->bytes += size;
    memset(p, (int)i, size < 64 ? size : 64);
    slot[k] = p;
  }
  rc = 0;
out:
  for (unsigned k = 0; k < MIXED_SLOTS; k++)
    free(slot[k]);
  free(slot);
  return rc;
}

static int pairs_leaf(uint64_t ops) __attribute__((noinline));
static int pairs_at(unsigned depth, uint64_t ops) __attribute__((noinline));

/* The measured loop of "pairs": ops times malloc(32) then free. */
static int pairs_leaf(uint64_t ops)
{
  for (uint64_t i = 0; i < ops; i++) {
    void *p = malloc(32);
    if (p == NULL)
      return -1;
    KEEP(p);
    free(p);
  }
  return 0;
}

static int pairs_at(unsigned depth, uint64_t ops)
{
  int rc = depth == 0 ? pairs_leaf(ops) : pairs_at(depth - 1, ops);
  KEEP(&rc);
  return rc;
}

/* One short-lived thread of "churn". */
static void *churn_thread(void *arg)
{
  void *p = malloc(100);
  KEEP(p);
  free(p);
  return p == NULL ? arg : NULL;
}

static int run_churn(uint64_t ops)
{
  for (uint64_t i = 0; i < ops; i++) {
    pthread_t t;
    void *failed = NULL;
    if (pthread_create(&t, NULL, churn_thread, &failed) != 0 || pthread_join(t, &failed) != 0 ||
        failed != NULL)
      return -1;
  }
  return 0;
}

static void *run_job(void *arg)
{
  struct job *j = arg;
  switch (j->mode) {
  case MODE_SMALL:
    j->failed = run_small(j);
    break;
  case MODE_MIXED:
    j->failed = run_mixed(j);
    break;
  case MODE_PAIRS:
    j->failed = pairs_at(CALL_DEPTH, j->ops);
    j->bytes = 32 * j->ops;
    break;
  case MODE_CHURN:
    j->failed = run_churn(j->ops);
    j->bytes = 100 * j->ops;
    break;
  }
  return NULL;
}

static int usage(void)
{
  fprintf(stderr, "usage: culpert_bench_workload small|mixed|pairs|churn THREADS OPS\n");
  return 2;
}

int main(int argc, char **argv)
{
  struct job jobs[64];
  pthread_t tid[64];
  enum mode mode;
  if (argc != 4)
    return usage();
  if (strcmp(argv[1], "small") == 0)
    mode = MODE_SMALL;
  else if (strcmp(argv[1], "mixed") == 0)
    mode = MODE_MIXED;
  else if (strcmp(argv[1], "pairs") == 0)
    mode = MODE_PAIRS;
  else if (strcmp(argv[1], "churn") == 0)
    mode = MODE_CHURN;
  else
    return usage();
  char *end;
  unsigned long threads = strtoul(argv[2], &end, 10);
  if (*end != '\0' || threads == 0 || threads > 64)
    return usage();
  unsigned long long ops = strtoull(argv[3], &end, 10);
  if (*end != '\0')
    return usage();

  for (unsigned i = 0; i < threads; i++)
    jobs[i] = (struct job){.mode = mode, .index = i, .ops = ops};
  /* One thread runs on the main thread, so "1 thread" creates none. */
  for (unsigned i = 1; i < threads; i++) {
    if (pthread_create(&tid[i], NULL, run_job, &jobs[i]) != 0) {
      fprintf(stderr, "culpert_bench_workload: cannot start thread %u\n", i);
      return 1;
    }
  }
  run_job(&jobs[0]);
  int failed = jobs[0].failed;
  uint64_t bytes = jobs[0].bytes;
  for (unsigned i = 1; i < threads; i++) {
    pthread_join(tid[i], NULL);
    failed |= jobs[i].failed;
    bytes += jobs[i].bytes;
  }
  if (failed) {
    fprintf(stderr, "culpert_bench_workload: allocation failed\n");
    return 1;
  }
  printf("requested %llu bytes\n", (unsigned long long)bytes);
  return 0;
}
