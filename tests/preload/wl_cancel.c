/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_cancel: threads cancelled (deferred, the default) while inside
 * culpert, which must never let a cancellation act there.
 *
 *   wl_cancel snapshots PATH   20 times: a thread calls
 *                              culpert_snapshot_write(PATH) without end,
 *                              and pthread_testcancel between calls, and
 *                              is cancelled; then the program exits. Prints
 *                              "snapshots cancelled 20".
 *   wl_cancel fibers           200 times: a thread allocates on a stack of
 *                              its own (makecontext), where a sample looks
 *                              up the stack's bounds, and is cancelled.
 *                              Prints "cancelled inside malloc N of 200"
 *                              (a cleanup handler sees the flag the thread
 *                              sets around malloc/free).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "culpert.h"

#define FIBER_STACK (256u << 10)

static atomic_int started;

static void *snapshotter(void *path)
{
  atomic_store(&started, 1);
  for (;;) {
    culpert_snapshot_write(path);
    pthread_testcancel(); /* culpert_snapshot_write is not a cancellation point */
  }
  return NULL;
}

/* Start a thread running fn(arg), let it run `us` microseconds once it
 * says it has started, then cancel it and wait for it to end. */
static int run_and_cancel(void *(*fn)(void *), void *arg, useconds_t us)
{
  pthread_t t;
  atomic_store(&started, 0);
  if (pthread_create(&t, NULL, fn, arg) != 0)
    return -1;
  while (!atomic_load(&started))
    usleep(50);
  usleep(us);
  pthread_cancel(t);
  pthread_join(t, NULL);
  return 0;
}

static int snapshots(const char *path)
{
  for (int i = 0; i < 20; i++)
    if (run_and_cancel(snapshotter, (void *)path, 2000) != 0)
      return 1;
  printf("snapshots cancelled 20\n");
  return 0;
}

/* One thread's fiber: a stack of its own, allocating between switches. */
struct fiber {
  ucontext_t home, self;
  void *stack;
  volatile int inside; /* between malloc's call and free's return */
  atomic_int *caught;
};

static _Thread_local struct fiber *current;

static void fiber_body(void)
{
  struct fiber *f = current;
  for (;;) {
    f->inside = 1;
    void *volatile p = malloc(64);
    free(p);
    f->inside = 0;
    swapcontext(&f->self, &f->home);
  }
}

static void fiber_cleanup(void *arg)
{
  struct fiber *f = arg;
  if (f->inside)
    atomic_fetch_add(f->caught, 1);
  munmap(f->stack, FIBER_STACK);
}

static void *fiber_thread(void *arg)
{
  struct fiber f = {.caught = arg};
  f.stack = mmap(NULL, FIBER_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (f.stack == MAP_FAILED)
    return NULL;
  current = &f;
  getcontext(&f.self);
  f.self.uc_stack.ss_sp = f.stack;
  f.self.uc_stack.ss_size = FIBER_STACK;
  f.self.uc_link = NULL;
  makecontext(&f.self, fiber_body, 0);
  pthread_cleanup_push(fiber_cleanup, &f);
  atomic_store(&started, 1);
  for (;;) {
    swapcontext(&f.home, &f.self);
    pthread_testcancel();
  }
  pthread_cleanup_pop(0);
  return NULL;
}

static int fibers(void)
{
  atomic_int caught = 0;
  for (int i = 0; i < 200; i++)
    if (run_and_cancel(fiber_thread, &caught, 200) != 0)
      return 1;
  printf("cancelled inside malloc %d of 200\n", atomic_load(&caught));
  return 0;
}

int main(int argc, char **argv)
{
  if (argc == 3 && strcmp(argv[1], "snapshots") == 0)
    return snapshots(argv[2]);
  if (argc == 2 && strcmp(argv[1], "fibers") == 0)
    return fibers();
  fprintf(stderr, "usage: wl_cancel snapshots PATH | fibers\n");
  return 2;
}
