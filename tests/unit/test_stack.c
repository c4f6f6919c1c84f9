/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_stack.c: the frame-pointer walk follows a good chain and stops,
 * without reading outside the stack, at anything suspicious; stack capture
 * starts at the caller, never inside culpert; the bounds of a stack are
 * those of its mapping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"

/* A fake stack: frame i sits at words[2*i] as [saved fp, return address]. */
static uintptr_t words[64];

static uintptr_t at(int i)
{
  return (uintptr_t)&words[i];
}

static uint32_t walk(uintptr_t start, uintptr_t *ips, uint32_t max)
{
  return culpert__stack_walk_fp(start, at(0), at(64), ips, max);
}

static void test_stack_fp_good_chain(void **state)
{
  (void)state;
  uintptr_t ips[16];
  memset(words, 0, sizeof words);
  for (int i = 0; i < 5; i++) {
    words[2 * i * 4] = at(2 * (i + 1) * 4); /* frames every 8 words */
    words[2 * i * 4 + 1] = 0x1000 + (uintptr_t)i;
  }
  words[2 * 5 * 4] = 0; /* end of chain: saved fp 0 */
  words[2 * 5 * 4 + 1] = 0x1005;
  assert_int_equal(walk(at(0), ips, 16), 6);
  for (int i = 0; i < 6; i++)
    assert_int_equal(ips[i], 0x1000 + i);
  /* max is respected */
  assert_int_equal(walk(at(0), ips, 3), 3);
}

static void test_stack_fp_stops_on_bad_frames(void **state)
{
  (void)state;
  uintptr_t ips[16];
  /* The first frame is fine (return address 0x2000); its saved fp is bad.
   * Every case records exactly that one frame. */
  const struct {
    const char *what;
    uintptr_t next;
  } cases[] = {
      {"loop to itself", at(0)},
      {"goes down", at(0) - 16},
      {"misaligned", at(8) + 3},
      {"beyond the stack", at(64)},
      {"return address outside the stack", at(63)},
      {"null", 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    memset(words, 0, sizeof words);
    words[0] = cases[c].next;
    words[1] = 0x2000;
    words[63] = at(63); /* would chain on if at(63) were accepted */
    uint32_t n = walk(at(0), ips, 16);
    if (n != 1)
      fail_msg("%s: %u frames", cases[c].what, n);
    assert_int_equal(ips[0], 0x2000);
  }
  /* a start outside the stack records nothing */
  assert_int_equal(walk(at(0) - 64, ips, 16), 0);
  assert_int_equal(walk(0, ips, 16), 0);
  /* a zero return address ends the walk */
  memset(words, 0, sizeof words);
  words[0] = at(4);
  assert_int_equal(walk(at(0), ips, 16), 0);
}

__attribute__((noinline)) static uint32_t capture_here(uintptr_t *ips, uint32_t max)
{
  uint32_t n = culpert__stack_capture(ips, max);
  __asm__ volatile("" ::: "memory"); /* keep this frame */
  return n;
}

/* Captured stacks start in the caller of culpert__stack_capture: here the
 * test executable links culpert_core, so its own text counts as
 * "culpert" and every frame up to main's caller is skipped; in the shared
 * library only libculpert's frames are. Either way nothing crashes and
 * depth limits hold. */
static void test_stack_capture_modes(void **state)
{
  (void)state;
  uintptr_t ips[CULPERT__MAX_DEPTH + CULPERT__STACK_SLACK];
  for (int mode = 0; mode < 2; mode++) {
    culpert__stack_init(mode == 0 ? CULPERT__STACK_FP : CULPERT__STACK_LIBUNWIND);
    uint32_t n = capture_here(ips, 64);
    assert_true(n <= 64);
    assert_int_equal(capture_here(ips, 0), 0);
  }
  assert_true(strcmp(culpert__stack_mode_name(), "libunwind") == 0 ||
              strcmp(culpert__stack_mode_name(), "fp") == 0);
}

/* The mapping of an address: a stack variable's holds it and the current
 * frame; a page between two inaccessible ones is exactly that page. */
static void test_stack_mapping(void **state)
{
  (void)state;
  uintptr_t lo = 0, hi = 0;
  int local = 0;
  assert_true(culpert__stack_mapping((uintptr_t)&local, &lo, &hi));
  assert_true(lo <= (uintptr_t)&local && (uintptr_t)&local < hi);
  uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
  assert_true(lo <= fp && fp < hi);
  long page = sysconf(_SC_PAGESIZE);
  char *m = mmap(NULL, (size_t)page * 3, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(m != MAP_FAILED);
  assert_int_equal(mprotect(m + page, (size_t)page, PROT_READ | PROT_WRITE), 0);
  assert_true(culpert__stack_mapping((uintptr_t)m + (uintptr_t)page + 100, &lo, &hi));
  assert_int_equal(lo, (uintptr_t)m + (uintptr_t)page);
  assert_int_equal(hi, (uintptr_t)m + 2 * (uintptr_t)page);
  munmap(m, (size_t)page * 3);
  /* nothing is mapped at 0 */
  assert_false(culpert__stack_mapping(16, &lo, &hi));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stack_fp_good_chain),
      cmocka_unit_test(test_stack_fp_stops_on_bad_frames),
      cmocka_unit_test(test_stack_capture_modes),
      cmocka_unit_test(test_stack_mapping),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
