/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * thread_pool: work handed to worker threads stays under the span that
 * submitted it. The submitter records culpert_span_current() in each job;
 * the worker opens its span with culpert_span_enter_child_of(), so the
 * profile shows   submit_batch -> compress_chunk   although the chunk is
 * compressed on another thread.
 *
 *   culpert run -- ./thread_pool
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <culpert.h>

#define NJOBS 64

struct job {
  uint64_t parent_span; /* the submitter's span, captured at submit time */
  size_t size;
  size_t result;
};

static struct job jobs[NJOBS];
static size_t next_job;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&lock);
    size_t i = next_job < NJOBS ? next_job++ : NJOBS;
    pthread_mutex_unlock(&lock);
    if (i == NJOBS)
      return NULL;
    culpert_span_enter_child_of("compress_chunk", jobs[i].parent_span);
    unsigned char *buf = malloc(jobs[i].size);
    if (buf) {
      memset(buf, (int)i, jobs[i].size);
      jobs[i].result = jobs[i].size / 2;
      free(buf);
    }
    culpert_span_exit();
  }
}

int main(void)
{
  {
    CULPERT_SPAN("submit_batch");
    uint64_t me = culpert_span_current();
    for (size_t i = 0; i < NJOBS; i++) {
      jobs[i].parent_span = me;
      jobs[i].size = 64 * 1024 + i * 1024;
    }
  }
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    pthread_create(&t[i], NULL, worker, NULL);
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  size_t total = 0;
  for (size_t i = 0; i < NJOBS; i++)
    total += jobs[i].result;
  printf("compressed %d chunks into %zu bytes\n", NJOBS, total);
  return 0;
}
