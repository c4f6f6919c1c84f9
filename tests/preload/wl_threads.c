/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_threads: work handed to threads under the submitting span, and thread
 * churn while other threads allocate. With CULPERT_SAMPLE_RATE=0:
 *   pool/job   4 workers x 50 x 2000 bytes = 200 objects, 400000 bytes
 *   churn      200 short threads x 10 x 100 bytes = 2000 objects, 200000 bytes
 * With "--relay" it then allocates one block of 777 bytes in span "end"
 * under a chain of RELAYS spans "relay", each a child of the one before,
 * entered and left on this thread as a pool's tasks handing work on would.
 * With "--hang" it then starts SPINNERS threads that allocate and free
 * without end under the span "spin", prints "done 1" and waits for a
 * signal to end it. With "--grow MS" it then runs SPINNERS threads for MS
 * milliseconds that allocate 48-byte blocks, never freed, from 4096
 * different stacks (new buckets at first, old ones after), 1024 at a time
 * with a 5 ms pause, so that profiles rewritten meanwhile race with their
 * samples; it prints "growing" when they have started. A SIGUSR1 ends the
 * growth before MS.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "culpert.h"

#define SPINNERS 2
#define RELAYS   5000

static uint64_t pool_id;

__attribute__((noinline)) static void *job_alloc(size_t n)
{
  return malloc(n);
}

static void *worker(void *arg)
{
  (void)arg;
  culpert_span_enter_child_of("job", pool_id);
  for (int i = 0; i < 50; i++)
    free(job_alloc(2000));
  culpert_span_exit();
  return NULL;
}

static void *short_lived(void *arg)
{
  (void)arg;
  CULPERT_SPAN("churn");
  for (int i = 0; i < 10; i++)
    free(malloc(100));
  return NULL;
}

static void *churner(void *arg)
{
  (void)arg;
  for (int i = 0; i < 200; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, short_lived, NULL) != 0)
      return (void *)1;
    pthread_join(t, NULL);
  }
  return NULL;
}

static void *spinner(void *arg)
{
  (void)arg;
  CULPERT_SPAN("spin");
  for (;;)
    free(job_alloc(64));
  return NULL;
}

static atomic_int growing;
static volatile sig_atomic_t stop_growing;

static void end_growth(int sig)
{
  (void)sig;
  stop_growing = 1;
}

/* A 48-byte block allocated DEPTH levels down, each set bit of PATH
 * adding a frame of lvl1 above its level's lvl0: 2^DEPTH stacks. */
__attribute__((noinline)) static void leaf48(void)
{
  void *volatile p = malloc(48);
  (void)p;
}

__attribute__((noinline)) static void lvl0(unsigned path, int depth);
__attribute__((noinline)) static void lvl1(unsigned path, int depth)
{
  lvl0(path, depth);
  __asm__ volatile("");
}

__attribute__((noinline)) static void lvl0(unsigned path, int depth)
{
  if (depth == 0)
    leaf48();
  else if (path & 1)
    lvl1(path >> 1, depth - 1);
  else
    lvl0(path >> 1, depth - 1);
  __asm__ volatile("");
}

static void *grower(void *arg)
{
  unsigned path = (unsigned)(uintptr_t)arg * 7919u;
  while (atomic_load(&growing)) {
    for (int i = 0; i < 1024; i++)
      lvl0(path++, 12);
    usleep(5000);
  }
  return NULL;
}

static int relay(void)
{
  uint64_t id = 0;
  for (int i = 0; i < RELAYS; i++) {
    culpert_span_enter_child_of("relay", id);
    id = culpert_span_current();
    culpert_span_exit();
  }
  culpert_span_enter_child_of("end", id);
  void *p = job_alloc(777);
  culpert_span_exit();
  free(p);
  return p != NULL;
}

int main(int argc, char **argv)
{
  pthread_t w[4], c;
  culpert_span_enter("pool");
  pool_id = culpert_span_current();
  if (pthread_create(&c, NULL, churner, NULL) != 0)
    return 1;
  for (int i = 0; i < 4; i++)
    if (pthread_create(&w[i], NULL, worker, NULL) != 0)
      return 1;
  for (int i = 0; i < 4; i++)
    pthread_join(w[i], NULL);
  void *rc;
  pthread_join(c, &rc);
  culpert_span_exit();
  if (argc == 2 && strcmp(argv[1], "--hang") == 0) {
    for (int i = 0; i < SPINNERS; i++)
      if (pthread_create(&c, NULL, spinner, NULL) != 0)
        return 1;
    printf("done %d\n", rc == NULL);
    fflush(stdout);
    for (;;)
      pause();
  }
  if (argc == 3 && strcmp(argv[1], "--grow") == 0) {
    pthread_t g[SPINNERS];
    signal(SIGUSR1, end_growth);
    atomic_store(&growing, 1);
    for (int i = 0; i < SPINNERS; i++)
      if (pthread_create(&g[i], NULL, grower, (void *)(uintptr_t)i) != 0)
        return 1;
    printf("growing\n");
    fflush(stdout);
    /* signals (the test's USR2s) cut sleeps short: sleep to a deadline */
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += atoi(argv[2]) / 1000;
    end.tv_nsec += (long)(atoi(argv[2]) % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) {
      end.tv_sec++;
      end.tv_nsec -= 1000000000L;
    }
    while (!stop_growing && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL) != 0)
      ;
    atomic_store(&growing, 0);
    for (int i = 0; i < SPINNERS; i++)
      pthread_join(g[i], NULL);
  }
  if (argc == 2 && strcmp(argv[1], "--relay") == 0 && !relay())
    return 1;
  printf("done %d\n", rc == NULL);
  return 0;
}
