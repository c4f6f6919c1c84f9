/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * fixture_dwarf4.c: a small shared object the symbolizer and writer tests
 * dlopen. Built with DWARF 4 (the executables use gcc's default, DWARF 5),
 * so both layouts are read; it has a call inlined at a known line, and it
 * is dlclose'd afterwards to check that code unloaded before a snapshot
 * costs names, never a crash.
 */
#include <stdint.h>

int fixture_dwarf4_work(int n);
void fixture_inline_outer(void);
void fixture_record_return(void);

/* The line of fixture_dwarf4_work's definition. */
const int fixture_dwarf4_line = __LINE__ + 2;

int fixture_dwarf4_work(int n)
{
  volatile int acc = 0;
  for (int i = 0; i < n; i++)
    acc += i * n;
  return acc;
}

/* Set by fixture_record_return(): its return address, which lies in the
 * code of fixture_inline_helper inlined into fixture_inline_outer. */
uintptr_t fixture_return;

__attribute__((noinline)) void fixture_record_return(void)
{
  fixture_return = (uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

/* The line in the helper that calls fixture_record_return(), and the line
 * in the outer function that calls the helper. */
const int fixture_helper_call_line = __LINE__ + 5;
const int fixture_outer_call_line = __LINE__ + 10;

static inline __attribute__((always_inline)) void fixture_inline_helper(void)
{
  fixture_record_return();
  __asm__ volatile("" ::: "memory");
}

void fixture_inline_outer(void)
{
  fixture_inline_helper();
  __asm__ volatile("" ::: "memory");
}
