/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_threads: work handed to threads under the submitting span, and thread
 * churn while other threads allocate. With CULPERT_SAMPLE_RATE=0:
 *   pool/job   4 workers x 50 x 2000 bytes = 200 objects, 400000 bytes
 *   churn      200 short threads x 10 x 100 bytes = 2000 objects, 200000 bytes
 * With "--hang" it then starts SPINNERS threads that allocate and free
 * without end under the span "spin", prints "done 1" and waits for a
 * signal to end it.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "culpert.h"

#define SPINNERS 2

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
  printf("done %d\n", rc == NULL);
  return 0;
}
