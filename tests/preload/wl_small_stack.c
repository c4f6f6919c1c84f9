/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_small_stack: threads with 16 KiB stacks whose first allocations come
 * 6 KiB deep, as a program sizing its threads tightly does. glibc keeps
 * the thread's descriptor and static TLS (libculpert's 1.1 KiB included)
 * in those 16 KiB too, and the loader's lazy binding of malloc saves the
 * vector registers (about 2.7 KiB with AVX-512) on it, so some 3 KiB are
 * left for culpert's slow path (a thread's first allocation always takes
 * it) and a sample. Prints "ok N" and exits 0.
 *
 * wl_small_stack END [PATH]: then one thread more with such a stack
 * allocates and ends the program from there, where culpert writes a
 * profile: END "exit" (exit(3)), "_exit" (_exit(4)), "term" (raises
 * SIGTERM), "exec" (execs /bin/true), "snapshot" (culpert_snapshot_write
 * to PATH and culpert_snapshot, then the program exits 0 from main),
 * "wait" (sleeps 1.5 s, then the program exits 0 from main).
 */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <culpert.h>

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

static const char *end_how, *end_path;

static void *ending_thread(void *arg)
{
  (void)arg;
  for (int i = 0; i < 100; i++) {
    char *p = malloc((size_t)i * 100 + 1);
    if (p == NULL)
      return (void *)1;
    p[0] = 1;
    if (i % 2)
      free(p);
  }
  fflush(stdout);
  if (strcmp(end_how, "exit") == 0)
    exit(3);
  if (strcmp(end_how, "_exit") == 0)
    _exit(4);
  if (strcmp(end_how, "term") == 0)
    raise(SIGTERM);
  if (strcmp(end_how, "exec") == 0)
    execl("/bin/true", "true", (char *)NULL);
  if (strcmp(end_how, "wait") == 0) {
    struct timespec pause = {1, 500 * 1000 * 1000};
    nanosleep(&pause, NULL);
    return NULL;
  }
  if (strcmp(end_how, "snapshot") == 0) {
    unsigned char *buf = NULL;
    size_t len = 0;
    if (culpert_snapshot_write(end_path) != 0 || culpert_snapshot(&buf, &len) != 0 || len == 0)
      return (void *)1;
    free(buf);
    return NULL;
  }
  return (void *)1;
}

/* Run `fn` on a thread with a STACK_BYTES stack and join it: 0 with its
 * result in *res, or -1. */
static int on_small_thread(void *(*fn)(void *), void **res)
{
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  size_t size = STACK_BYTES < PTHREAD_STACK_MIN ? PTHREAD_STACK_MIN : STACK_BYTES;
  int rc = -1;
  if (pthread_attr_setstacksize(&attr, size) == 0 && pthread_create(&t, &attr, fn, NULL) == 0 &&
      pthread_join(t, res) == 0)
    rc = 0;
  pthread_attr_destroy(&attr);
  return rc;
}

static int end_program(void)
{
  void *res;
  return on_small_thread(ending_thread, &res) != 0 || res != NULL;
}

int main(int argc, char **argv)
{
  long total = 0;
  if (argc >= 2) {
    end_how = argv[1];
    end_path = argc >= 3 ? argv[2] : "";
  }
  for (int i = 0; i < 40; i++) {
    void *res;
    if (on_small_thread(thread_main, &res) != 0)
      return 1;
    if ((long)res < 0)
      return 1;
    total += (long)res;
  }
  printf("ok %ld\n", total);
  return end_how != NULL ? end_program() : 0;
}
