/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_small_stack: threads with 16 KiB stacks whose first allocations come
 * 6 KiB deep, as a program sizing its threads tightly does. glibc keeps
 * the thread's descriptor and static TLS (libculpert's 1.1 KiB included)
 * in those 16 KiB too, and the loader's lazy binding of malloc saves the
 * vector registers (about 2.7 KiB with AVX-512) on it, so some 3 KiB are
 * left for culpert's slow path (a thread's first allocation always takes
 * it) and a sample. Prints "ok N" and exits 0.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define STACK_BYTES (16 * 1024)
#define USED_BYTES  (6 * 1024)

static long deep(const char *top, int depth)
{
  volatile char pad[256];
  pad[0] = (char)depth;
  if (top - (const char *)pad < USED_BYTES)
    return deep(top, depth + 1) + pad[0];
  long sum = 0;
  for (int i = 0; i < 200; i++) {
    char *p = malloc((size_t)i * 30 + 1);
    if (p == NULL)
      return -1;
    p[0] = 1;
    sum += p[0];
    char *q = realloc(p, 5000);
    if (q == NULL) {
      free(p);
      return -1;
    }
    free(q);
  }
  return sum;
}

static void *thread_main(void *arg)
{
  char top = 0;
  (void)arg;
  return (void *)deep(&top, 0);
}

int main(void)
{
  long total = 0;
  for (int i = 0; i < 40; i++) {
    pthread_attr_t attr;
    pthread_t t;
    void *res;
    pthread_attr_init(&attr);
    if (pthread_attr_setstacksize(&attr, STACK_BYTES < PTHREAD_STACK_MIN ? PTHREAD_STACK_MIN
                                                                         : STACK_BYTES) != 0 ||
        pthread_create(&t, &attr, thread_main, NULL) != 0 || pthread_join(t, &res) != 0)
      return 1;
    pthread_attr_destroy(&attr);
    if ((long)res < 0)
      return 1;
    total += (long)res;
  }
  printf("ok %ld\n", total);
  return 0;
}
