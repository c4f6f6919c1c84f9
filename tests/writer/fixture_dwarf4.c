/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * fixture_dwarf4.c: a small shared object the symbolizer tests dlopen. Built
 * with DWARF 4 line tables (the executables use gcc's default, DWARF 5), so
 * both header layouts are read; dlclose'd afterwards to check that code
 * unloaded before a snapshot costs names, never a crash.
 */

int fixture_dwarf4_work(int n);

/* The line of fixture_dwarf4_work's definition. */
const int fixture_dwarf4_line = __LINE__ + 2;

int fixture_dwarf4_work(int n)
{
  volatile int acc = 0;
  for (int i = 0; i < n; i++)
    acc += i * n;
  return acc;
}
