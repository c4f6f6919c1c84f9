/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_stacks: stacks that are hard to walk or to bound.
 *  - 777 bytes allocated in a signal handler (raised synchronously from
 *    raise_it(), called by main): the stack crosses a signal frame, which
 *    culpert's own call-frame walk leaves to libunwind; the sample must
 *    still reach main. Then 555 bytes in main_alloc().
 *  - 999 bytes allocated in a handler running on an alternate signal
 *    stack (sigaltstack), away from the thread's stack: the stack's bounds
 *    must be found there too.
 *  - pthread_getattr_np on the main thread and on a new thread: glibc
 *    allocates inside it while holding the thread's lock, so a sample
 *    taken there must not need that lock (at rate 0 every allocation is
 *    sampled). Prints "getattr=2" when both calls returned.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile kept[3];

__attribute__((noinline)) static void *handler_alloc(size_t n)
{
  void *p = malloc(n);
  __asm__ volatile("" ::: "memory");
  return p;
}

static void on_signal(int sig)
{
  (void)sig;
  kept[0] = handler_alloc(777);
}

__attribute__((noinline)) static void *alt_alloc(size_t n)
{
  void *p = malloc(n);
  __asm__ volatile("" ::: "memory");
  return p;
}

static void on_alt_signal(int sig)
{
  (void)sig;
  kept[2] = alt_alloc(999);
}

__attribute__((noinline)) static void raise_it(void)
{
  raise(SIGUSR1);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void *main_alloc(size_t n)
{
  void *p = malloc(n);
  __asm__ volatile("" ::: "memory");
  return p;
}

static int getattr_self(void)
{
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0)
    return 0;
  pthread_attr_destroy(&attr);
  return 1;
}

static void *thread_main(void *arg)
{
  *(int *)arg = getattr_self();
  return NULL;
}

int main(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0)
    return 1;
  raise_it();
  kept[1] = main_alloc(555);
  printf("handled=%d\n", kept[0] != NULL);
  size_t alt_size = 256 * 1024;
  stack_t alt = {
      .ss_sp = mmap(NULL, alt_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
      .ss_size = alt_size};
  if (alt.ss_sp == MAP_FAILED || sigaltstack(&alt, NULL) != 0)
    return 1;
  sa.sa_handler = on_alt_signal;
  sa.sa_flags = SA_ONSTACK;
  if (sigaction(SIGUSR2, &sa, NULL) != 0)
    return 1;
  raise(SIGUSR2);
  printf("alt=%d\n", kept[2] != NULL);
  int on_thread = 0;
  pthread_t t;
  if (pthread_create(&t, NULL, thread_main, &on_thread) != 0 || pthread_join(t, NULL) != 0)
    return 1;
  printf("getattr=%d\n", getattr_self() + on_thread);
  return 0;
}
