/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_badfp: call malloc with a corrupt frame-pointer register (null,
 * misaligned, pointing at the heap, pointing at itself, just below the top
 * of the stack). Under CULPERT_STACK=fp the walk must stop cleanly: with
 * CULPERT_SAMPLE_RATE=0 the profile holds 5 samples of 100 bytes in span
 * "badfp", and the program exits 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "culpert.h"

/* Call malloc(n) with %rbp = fake. Built with -mno-red-zone, so pushing
 * below %rsp cannot clobber the compiler's data; push + sub keep the call
 * 16-byte aligned. */
__attribute__((noinline)) static void *malloc_with_rbp(size_t n, uintptr_t fake)
{
  void *r;
  __asm__ volatile("push %%rbp\n\t"
                   "sub $8, %%rsp\n\t"
                   "mov %[fake], %%rbp\n\t"
                   "mov %[n], %%rdi\n\t"
                   "call malloc@PLT\n\t"
                   "add $8, %%rsp\n\t"
                   "pop %%rbp\n\t"
                   : "=a"(r)
                   : [n] "r"(n), [fake] "r"(fake)
                   : "rdi", "rsi", "rdx", "rcx", "r8", "r9", "r10", "r11", "memory", "cc");
  return r;
}

int main(void)
{
  uintptr_t self_loop[2];
  self_loop[0] = (uintptr_t)&self_loop[0]; /* saved fp points at itself */
  self_loop[1] = 0x1234;
  uintptr_t *heap = malloc(64 * sizeof *heap);
  for (int i = 0; i < 64; i++)
    heap[i] = 0xdeadbeefdeadbeefu;
  uintptr_t fakes[5] = {0, 0x1001, (uintptr_t)heap, (uintptr_t)self_loop,
                        (uintptr_t)__builtin_frame_address(0) + 0x7ffff0};
  void *kept[5];
  culpert_span_enter("badfp");
  for (int i = 0; i < 5; i++)
    kept[i] = malloc_with_rbp(100, fakes[i]);
  culpert_span_exit();
  int ok = 1;
  for (int i = 0; i < 5; i++)
    ok &= kept[i] != NULL;
  printf("ok=%d\n", ok);
  return ok ? 0 : 1;
}
