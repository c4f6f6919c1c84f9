/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_exit_race: the main thread exits while four threads keep allocating,
 * freeing, opening spans and starting short-lived threads. The process
 * must exit cleanly with status 0 and leave a readable profile.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "culpert.h"

static void *tiny(void *arg)
{
  free(malloc(32));
  return arg;
}

static void *spin(void *arg)
{
  unsigned n = 0;
  (void)arg;
  for (;;) {
    CULPERT_SPAN("spin");
    void *p = malloc(++n % 4096 + 1);
    p = realloc(p, n % 8192 + 1);
    free(p);
    if (n % 1024 == 0) {
      pthread_t t;
      if (pthread_create(&t, NULL, tiny, NULL) == 0)
        pthread_detach(t);
    }
  }
  return NULL;
}

int main(void)
{
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    if (pthread_create(&t[i], NULL, spin, NULL) != 0)
      return 1;
  /* some work of our own, then exit with the threads still running */
  for (int i = 0; i < 20000; i++)
    free(malloc((size_t)(i % 100 + 1) * 16));
  printf("exiting\n");
  fflush(stdout);
  exit(0);
}
