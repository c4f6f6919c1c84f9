/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_unwind.c: culpert's call-frame walk gives exactly libunwind's
 * stack through frames of every common shape (no frame pointer, frame
 * pointer, alloca, a large frame, libc's qsort calling back, a thread),
 * and while other threads flush its cache, gives up (-1) where libunwind
 * must do it (a signal frame, code without call-frame information, a
 * stack outside the bounds), and never reads outside the bounds it is
 * given, whatever the stack or the call-frame data holds.
 */
#include <alloca.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"

#define MAX_FRAMES 128

static int (*unw_backtrace_fn)(void **, int);

struct capture {
  uintptr_t ours[MAX_FRAMES], theirs[MAX_FRAMES];
  int n_ours, n_theirs;
  uintptr_t caller; /* return address into the caller of compare_here */
};

static void stack_bounds(uintptr_t *lo, uintptr_t *hi)
{
  pthread_attr_t attr;
  void *addr;
  size_t size;
  assert_int_equal(pthread_getattr_np(pthread_self(), &attr), 0);
  assert_int_equal(pthread_attr_getstack(&attr, &addr, &size), 0);
  pthread_attr_destroy(&attr);
  *lo = (uintptr_t)addr;
  *hi = (uintptr_t)addr + size;
}

/* The walk from this function's own registers, as stack.c starts it. */
__attribute__((noinline)) static int walk_here(uintptr_t *ips, uint32_t max)
{
  uintptr_t lo, hi;
  stack_bounds(&lo, &hi);
  struct culpert__regs regs;
  CULPERT__READ_REGS(regs);
  int n = culpert__unwind_walk(regs, lo, hi, ips, max, &culpert__tls.unwind);
  __asm__ volatile("" ::: "memory"); /* no tail call: keep this frame */
  return n;
}

/* Both walks from here, and where this function returns to. */
__attribute__((noinline)) static void compare_here(struct capture *c)
{
  c->caller = (uintptr_t)__builtin_return_address(0);
  c->n_ours = walk_here(c->ours, MAX_FRAMES);
  c->n_theirs = unw_backtrace_fn((void **)c->theirs, MAX_FRAMES);
  __asm__ volatile("" ::: "memory");
}

static int index_of(const uintptr_t *ips, int n, uintptr_t ip)
{
  for (int i = 0; i < n; i++)
    if (ips[i] == ip)
      return i;
  return -1;
}

static void print_stack(const char *who, const uintptr_t *ips, int n)
{
  fprintf(stderr, "%s (%d frames):\n", who, n);
  for (int i = 0; i < n; i++) {
    Dl_info info;
    const char *name = dladdr((void *)ips[i], &info) && info.dli_sname ? info.dli_sname : "?";
    fprintf(stderr, "  %#lx %s\n", (unsigned long)ips[i], name);
  }
}

/* Whether, from compare_here's caller outwards, the two stacks are equal. */
static int same_stack(const struct capture *c)
{
  int a = c->n_ours < 0 ? -1 : index_of(c->ours, c->n_ours, c->caller);
  int b = index_of(c->theirs, c->n_theirs, c->caller);
  return a >= 0 && b >= 0 && c->n_ours - a == c->n_theirs - b &&
         memcmp(c->ours + a, c->theirs + b, (size_t)(c->n_ours - a) * sizeof(uintptr_t)) == 0;
}

static void assert_same_stack(const struct capture *c, const char *what)
{
  if (!same_stack(c)) {
    print_stack("culpert", c->ours, c->n_ours);
    print_stack("libunwind", c->theirs, c->n_theirs);
    fail_msg("%s: the stacks differ", what);
  }
  int a = index_of(c->ours, c->n_ours, c->caller);
  assert_true(c->n_ours - a >= 3); /* the shape's frames, main, and more */
}

/* ---------------------------------------------------------------- frame shapes */

#define KEEP(x) __asm__ volatile("" : : "r"(x) : "memory")

__attribute__((noinline)) static void leaf(struct capture *c)
{
  compare_here(c);
  KEEP(c);
}

__attribute__((noinline)) static void recurse(struct capture *c, int depth)
{
  if (depth == 0)
    leaf(c);
  else
    recurse(c, depth - 1);
  KEEP(c);
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void with_fp(struct capture *c,
                                                                                 int depth)
{
  if (depth == 0)
    leaf(c);
  else
    with_fp(c, depth - 1);
  KEEP(c);
}

__attribute__((noinline)) static void with_alloca(struct capture *c, size_t n)
{
  char *buf = alloca(n);
  memset(buf, 1, n);
  KEEP(buf);
  leaf(c);
  KEEP(buf);
}

__attribute__((noinline)) static void with_big_frame(struct capture *c)
{
  volatile char buf[40000];
  buf[0] = 1;
  buf[sizeof buf - 1] = 2;
  leaf(c);
  KEEP(&buf[0]);
}

/* Many values live across the call: callee-saved registers pushed, rbp
 * among them but not first. */
__attribute__((noinline)) static uint64_t with_saved_regs(struct capture *c, uint64_t a, uint64_t b)
{
  uint64_t x1 = a * 3, x2 = b * 5, x3 = a ^ b, x4 = a + b, x5 = a - b, x6 = a * b;
  KEEP(x1);
  KEEP(x2);
  KEEP(x3);
  KEEP(x4);
  KEEP(x5);
  KEEP(x6);
  leaf(c);
  return x1 + x2 + x3 + x4 + x5 + x6;
}

static jmp_buf noreturn_escape;

/* Never returns: compares the stacks, then jumps back to the test. */
__attribute__((noinline, noreturn)) static void no_return(struct capture *c)
{
  compare_here(c);
  longjmp(noreturn_escape, 1);
}

/* Ends with the call to a function that never returns: the return address
 * lies past this function's last instruction (in the padding after it, or
 * the next function), so its frame is found by the call's own address. */
__attribute__((noinline)) static void ends_in_noreturn(struct capture *c)
{
  KEEP(c);
  no_return(c);
}

static struct capture *sort_capture;

static int compare_ints(const void *a, const void *b)
{
  if (sort_capture != NULL) {
    leaf(sort_capture);
    sort_capture = NULL;
  }
  return *(const int *)a - *(const int *)b;
}

static void test_unwind_matches_libunwind(void **state)
{
  (void)state;
  struct capture c;
  recurse(&c, 10);
  assert_same_stack(&c, "no frame pointer");
  with_fp(&c, 5);
  assert_same_stack(&c, "frame pointer");
  with_alloca(&c, 1000);
  assert_same_stack(&c, "alloca");
  with_big_frame(&c);
  assert_same_stack(&c, "40 KB frame");
  assert_true(with_saved_regs(&c, 7, 9) != 0);
  assert_same_stack(&c, "callee-saved registers");
  int v[64];
  for (int i = 0; i < 64; i++)
    v[i] = (i * 37) % 64;
  sort_capture = &c;
  qsort(v, 64, sizeof v[0], compare_ints);
  assert_same_stack(&c, "called back by qsort");
  static struct capture nr; /* static: written between setjmp and longjmp */
  if (setjmp(noreturn_escape) == 0)
    ends_in_noreturn(&nr);
  assert_same_stack(&nr, "a call to a function that never returns, last in its caller");
  /* Twice more: the second and third walks read cached rules. */
  for (int i = 0; i < 2; i++) {
    recurse(&c, 3);
    assert_same_stack(&c, "cached rules");
  }
  culpert__unwind_flush();
  with_fp(&c, 2);
  assert_same_stack(&c, "after a flush");
}

/* Deeper than max: exactly max frames. */
static void test_unwind_stops_at_max(void **state)
{
  (void)state;
  struct capture c;
  recurse(&c, 200);
  assert_int_equal(c.n_ours, MAX_FRAMES);
  assert_int_equal(c.n_theirs, MAX_FRAMES);
  int a = index_of(c.ours, c.n_ours, c.caller), b = index_of(c.theirs, c.n_theirs, c.caller);
  assert_true(a >= 0 && b >= 0);
  int n = MAX_FRAMES - (a > b ? a : b);
  assert_memory_equal(c.ours + a, c.theirs + b, (size_t)n * sizeof(uintptr_t));
}

static void *thread_main(void *arg)
{
  recurse(arg, 2);
  return NULL;
}

static void test_unwind_thread(void **state)
{
  (void)state;
  struct capture c;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, thread_main, &c), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_same_stack(&c, "a thread");
}

/* Four threads compare walks with libunwind's while the main thread
 * flushes the rule cache over and over: fills, hits and flushes race, and
 * every stack must still be libunwind's. Each thread walks until it has
 * done RACE_ROUNDS walks and the main thread has flushed RACE_FLUSHES
 * times, so the flushes always fall among the walks: on a busy machine
 * the threads could otherwise finish before the main thread's first
 * flush. */
#define RACE_ROUNDS  300
#define RACE_FLUSHES 50

struct racer {
  pthread_t thread;
  int mismatches, walked;
};

static atomic_int racing, flushed;

static void *race_main(void *arg)
{
  struct racer *r = arg;
  struct capture c;
  for (int i = 0; i < RACE_ROUNDS || atomic_load(&flushed) < RACE_FLUSHES; i++) {
    if (i % 3 == 0)
      recurse(&c, i % 7);
    else if (i % 3 == 1)
      with_fp(&c, i % 5);
    else
      with_alloca(&c, 64 + (size_t)(i % RACE_ROUNDS));
    if (!same_stack(&c))
      r->mismatches++;
    r->walked++;
  }
  atomic_fetch_sub(&racing, 1);
  return NULL;
}

static void test_unwind_threads_and_flushes(void **state)
{
  (void)state;
  struct racer r[4];
  memset(r, 0, sizeof r);
  atomic_store(&racing, 4);
  atomic_store(&flushed, 0);
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&r[i].thread, NULL, race_main, &r[i]), 0);
  while (atomic_load(&racing) > 0) {
    culpert__unwind_flush();
    atomic_fetch_add(&flushed, 1);
    sched_yield();
  }
  for (int i = 0; i < 4; i++) {
    assert_int_equal(pthread_join(r[i].thread, NULL), 0);
    assert_true(r[i].walked >= RACE_ROUNDS);
    if (r[i].mismatches != 0)
      fail_msg("thread %d: %d of %d stacks differ from libunwind's", i, r[i].mismatches,
               r[i].walked);
  }
}

static volatile int handler_result = -2;

static void on_signal(int sig)
{
  (void)sig;
  uintptr_t ips[MAX_FRAMES];
  handler_result = walk_here(ips, MAX_FRAMES);
}

/* A signal frame is libunwind's: the walk gives up there. */
static void test_unwind_gives_up_on_signal_frames(void **state)
{
  (void)state;
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
  raise(SIGUSR1);
  assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
  assert_int_equal(handler_result, -1);
}

/* Code without call-frame information, and stacks outside the bounds:
 * -1 before any read. */
static void test_unwind_gives_up_without_rules(void **state)
{
  (void)state;
  uintptr_t ips[8], lo, hi;
  stack_bounds(&lo, &hi);
  void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(page != MAP_FAILED);
  uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  struct culpert__regs regs = {(uintptr_t)page + 64, sp, sp};
  assert_int_equal(culpert__unwind_walk(regs, lo, hi, ips, 8, &culpert__tls.unwind), -1);
  regs.ip = (uintptr_t)leaf;
  regs.sp = lo - 64;
  assert_int_equal(culpert__unwind_walk(regs, lo, hi, ips, 8, &culpert__tls.unwind), -1);
  regs.sp = hi;
  assert_int_equal(culpert__unwind_walk(regs, lo, hi, ips, 8, &culpert__tls.unwind), -1);
  munmap(page, 4096);
}

/* Random words on a stack between two inaccessible pages, walked from
 * real code addresses with random registers: every walk ends (a fault
 * would kill the test) with -1 or at most max frames. */
static void test_unwind_never_reads_outside(void **state)
{
  (void)state;
  long page = sysconf(_SC_PAGESIZE);
  uint8_t *m = mmap(NULL, (size_t)page * 4, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(m != MAP_FAILED);
  uint8_t *stack = m + page;
  assert_int_equal(mprotect(stack, (size_t)page * 2, PROT_READ | PROT_WRITE), 0);
  uintptr_t lo = (uintptr_t)stack, hi = lo + (uintptr_t)page * 2;
  /* Addresses with call-frame rules: inside this file's functions and libc's. */
  const uintptr_t code[] = {(uintptr_t)leaf + 4,        (uintptr_t)recurse + 8,
                            (uintptr_t)with_fp + 12,    (uintptr_t)with_alloca + 20,
                            (uintptr_t)with_saved_regs, (uintptr_t)qsort + 16};
  uint64_t s = 0x9E3779B97F4A7C15u;
  int walked = 0, gave_up = 0, deepest = 0;
  for (int round = 0; round < 20000; round++) {
    uintptr_t *w = (uintptr_t *)stack;
    for (size_t i = 0; i < (size_t)page * 2 / sizeof *w; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      /* Pointers into the stack, code addresses, zeros (a zero return
       * address ends a walk) and noise. */
      switch (s % 5) {
      case 0:
        w[i] = lo + (s >> 8) % ((uintptr_t)page * 2 + 256) - 128;
        break;
      case 1:
        w[i] = code[(s >> 8) % (sizeof code / sizeof code[0])] + 1;
        break;
      case 2:
        w[i] = 0;
        break;
      default:
        w[i] = s;
      }
    }
    struct culpert__regs regs = {code[round % 6], lo + (s >> 4) % ((uintptr_t)page * 2),
                                 lo + (s >> 20) % ((uintptr_t)page * 2)};
    uintptr_t ips[32];
    int n = culpert__unwind_walk(regs, lo, hi, ips, 32, &culpert__tls.unwind);
    assert_true(n == -1 || (n >= 1 && n <= 32));
    if (n > 0)
      walked++;
    else
      gave_up++;
    if (n > deepest)
      deepest = n;
  }
  assert_true(walked > 0 && deepest >= 3); /* some walks stepped through random frames */
  assert_true(gave_up > 0);
  munmap(m, (size_t)page * 4);
}

/* Walks that start in the top words of a stack below an inaccessible page,
 * from every address of the first 64 bytes of functions with call-frame
 * rules (so from rules with the frame address sp + 8, sp + 16, rbp + 16
 * and more), with rbp in the top word too: a frame address above the
 * stack is refused, never read at (a fault would kill the test). */
static void test_unwind_top_of_stack(void **state)
{
  (void)state;
  long page = sysconf(_SC_PAGESIZE);
  uint8_t *m = mmap(NULL, (size_t)page * 3, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(m != MAP_FAILED);
  uint8_t *stack = m + page;
  assert_int_equal(mprotect(stack, (size_t)page, PROT_READ | PROT_WRITE), 0);
  memset(stack, 0, (size_t)page); /* a zero return address ends a walk */
  uintptr_t lo = (uintptr_t)stack, hi = lo + (uintptr_t)page;
  const uintptr_t code[] = {(uintptr_t)leaf,        (uintptr_t)recurse,         (uintptr_t)with_fp,
                            (uintptr_t)with_alloca, (uintptr_t)with_saved_regs, (uintptr_t)qsort};
  int refused = 0;
  for (size_t f = 0; f < sizeof code / sizeof code[0]; f++) {
    for (uintptr_t off = 0; off < 64; off++) {
      for (uintptr_t top = 1; top <= 3; top++) {
        struct culpert__regs regs = {code[f] + off, hi - top * sizeof(uintptr_t),
                                     hi - sizeof(uintptr_t)};
        uintptr_t ips[8];
        int n = culpert__unwind_walk(regs, lo, hi, ips, 8, &culpert__tls.unwind);
        assert_true(n == -1 || (n >= 1 && n <= 8));
        refused += n == -1;
      }
    }
  }
  assert_true(refused > 0); /* some frame addresses lay above the stack */
  munmap(m, (size_t)page * 3);
}

/* The extent of the call-frame data of the object holding `code`: its
 * .eh_frame_hdr (with the sorted table) and the .eh_frame it points to, up
 * to the zero terminator. */
static void frame_data(uintptr_t code, const uint8_t **hdr, const uint8_t **start,
                       const uint8_t **end)
{
  struct dl_find_object obj;
  assert_int_equal(_dl_find_object((void *)code, &obj), 0);
  const uint8_t *h = obj.dlfo_eh_frame;
  assert_non_null(h);
  /* version 1, eh_frame_ptr pcrel|sdata4, count udata4, table datarel|sdata4 */
  assert_int_equal(h[0], 1);
  assert_int_equal(h[1], 0x1b);
  assert_int_equal(h[2], 0x03);
  assert_int_equal(h[3], 0x3b);
  int32_t rel;
  uint32_t count;
  memcpy(&rel, h + 4, 4);
  memcpy(&count, h + 8, 4);
  const uint8_t *frames = h + 4 + rel;
  const uint8_t *p = frames;
  for (uint32_t len; memcpy(&len, p, 4), len != 0; p += 4 + len)
    assert_true(len != 0xffffffffu);
  const uint8_t *table_end = h + 12 + (size_t)count * 8;
  *hdr = h;
  *start = h < frames ? h : frames;
  *end = table_end > p + 4 ? table_end : p + 4;
}

/* The call-frame data of this test, copied between two inaccessible pages
 * (flush against the upper one, then against the lower one) and read back:
 * unchanged, it gives the same rules as in place; with random bytes
 * changed, no read leaves the copy (it would fault) whatever it holds. */
static void test_unwind_corrupt_call_frame_data(void **state)
{
  (void)state;
  const uint8_t *hdr, *start, *end;
  frame_data((uintptr_t)leaf, &hdr, &start, &end);
  size_t len = (size_t)(end - start);
  long page = sysconf(_SC_PAGESIZE);
  size_t inner = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
  uint8_t *m = mmap(NULL, inner + 2 * (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(m != MAP_FAILED);
  assert_int_equal(mprotect(m + page, inner, PROT_READ | PROT_WRITE), 0);
  const uintptr_t code[] = {
      (uintptr_t)leaf + 4,         (uintptr_t)recurse + 8,         (uintptr_t)with_fp + 12,
      (uintptr_t)with_alloca + 20, (uintptr_t)with_saved_regs + 1, (uintptr_t)compare_ints + 2};
  const size_t ncode = sizeof code / sizeof code[0];
  const uint64_t rule_bits = ~((UINT64_C(1) << 36) - 1); /* the word without its tag */
  uint64_t s = 0x2545F4914F6CDD1Du;
  for (int placement = 0; placement < 2; placement++) {
    uint8_t *copy = placement == 0 ? m + page + inner - len : m + page;
    intptr_t delta = copy - start;
    const uint8_t *lo = copy, *hi = copy + len;
    memcpy(copy, start, len);
    for (size_t i = 0; i < ncode; i++) {
      uint64_t want = culpert__unwind_rule_word(hdr, start, end, code[i]);
      uint64_t got = culpert__unwind_rule_word(hdr + delta, lo, hi, code[i] + (uintptr_t)delta);
      assert_int_equal(got & rule_bits, want & rule_bits);
      assert_int_equal((want >> 36) & 3u, 0); /* a step, not a give-up */
    }
    for (int round = 0; round < 3000; round++) {
      memcpy(copy, start, len);
      for (int k = 0; k < 1 + round % 4; k++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        copy[s % len] = (uint8_t)(s >> 32);
      }
      for (size_t i = 0; i < ncode; i++)
        (void)culpert__unwind_rule_word(hdr + delta, lo, hi, code[i] + (uintptr_t)delta);
    }
  }
  munmap(m, inner + 2 * (size_t)page);
}

static int setup(void **state)
{
  (void)state;
  void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL)
    return -1;
  *(void **)&unw_backtrace_fn = dlsym(h, "unw_backtrace");
  return unw_backtrace_fn == NULL ? -1 : 0;
}

int main(void)
{
  if (!culpert__unwind_available()) {
    fprintf(stderr, "culpert's call-frame walk is not built on this platform\n");
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unwind_matches_libunwind),
      cmocka_unit_test(test_unwind_stops_at_max),
      cmocka_unit_test(test_unwind_thread),
      cmocka_unit_test(test_unwind_threads_and_flushes),
      cmocka_unit_test(test_unwind_gives_up_on_signal_frames),
      cmocka_unit_test(test_unwind_gives_up_without_rules),
      cmocka_unit_test(test_unwind_never_reads_outside),
      cmocka_unit_test(test_unwind_top_of_stack),
      cmocka_unit_test(test_unwind_corrupt_call_frame_data),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
