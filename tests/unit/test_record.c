/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_record.c: samples aggregate per (stack, span), in-use totals are
 * what the live table still holds (they drop when blocks are freed), and
 * snapshots copy without resetting anything.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "internal.h"

static void test_record_aggregates_by_stack_and_span(void **state)
{
  (void)state;
  uintptr_t a[3] = {0x1000, 0x2000, 0x3000};
  uintptr_t b[3] = {0x1000, 0x2000, 0x3001};
  int64_t k1 = culpert__record_sample(a, 3, 0, 100, 2.0);
  int64_t k2 = culpert__record_sample(a, 3, 0, 50, 4.0);
  int64_t k3 = culpert__record_sample(b, 3, 0, 100, 1.0);
  int64_t k4 = culpert__record_sample(a, 3, 5, 100, 1.0);
  int64_t k5 = culpert__record_sample(a, 2, 0, 100, 1.0);
  assert_true(k1 >= 0);
  assert_int_equal(k1, k2);
  assert_true(k3 != k1 && k4 != k1 && k5 != k1 && k4 != k3);

  /* Both samples of k1 are live blocks; the first one is freed. */
  struct culpert__live first = {(uint32_t)k1, 100, 2.0}, second = {(uint32_t)k1, 50, 4.0}, got;
  assert_int_equal(culpert__live_insert((void *)0x7f0000001000u, &first), 0);
  assert_int_equal(culpert__live_insert((void *)0x7f0000002000u, &second), 0);
  assert_true(culpert__live_remove((void *)0x7f0000001000u, &got));

  struct culpert__bucket *bk;
  uintptr_t *ips;
  size_t nips;
  long n = culpert__record_copy(&bk, &ips, &nips, 0, NULL, NULL);
  culpert__live_add_inuse(bk, (size_t)n);
  assert_int_equal(n, 4);
  assert_int_equal(nips, 11);
  assert_int_equal(bk[k1].samples, 2);
  assert_true(bk[k1].alloc_objects == 6.0);
  assert_true(bk[k1].alloc_bytes == 400.0);
  assert_true(bk[k1].inuse_objects == 4.0);
  assert_true(bk[k1].inuse_bytes == 200.0);
  assert_int_equal(bk[k4].span, 5);
  assert_int_equal(ips[bk[k3].ip_off + 2], 0x3001);
  free(bk);
  free(ips);

  /* a second copy still has everything */
  n = culpert__record_copy(&bk, &ips, &nips, 0, NULL, NULL);
  assert_int_equal(n, 4);
  assert_int_equal(bk[k1].samples, 2);
  assert_true(bk[k1].inuse_objects == 0.0); /* summed only on request */
  free(bk);
  free(ips);
  assert_true(culpert__live_remove((void *)0x7f0000002000u, &got));
}

static void test_record_empty_stack_and_reset(void **state)
{
  (void)state;
  int64_t k = culpert__record_sample(NULL, 0, 0, 8, 1.0);
  assert_true(k >= 0);
  culpert__record_reset();
  struct culpert__bucket *bk;
  uintptr_t *ips;
  size_t nips;
  assert_int_equal(culpert__record_copy(&bk, &ips, &nips, 0, NULL, NULL), 0);
  free(bk);
  free(ips);
  assert_int_equal(culpert__record_sample(NULL, 0, 0, 8, 1.0), 0);
}

/* Runs last: more distinct stacks than buckets. Samples beyond capacity
 * are dropped and counted; known stacks still aggregate; a reset clears
 * the count. */
static void test_record_full_drops_and_counts(void **state)
{
  (void)state;
  culpert__record_reset();
  uintptr_t ip = 1;
  int64_t first = culpert__record_sample(&ip, 1, 0, 8, 1.0);
  assert_true(first >= 0);
  uint64_t dropped0 = culpert__record_dropped();
  int64_t last = 0;
  for (ip = 2; last >= 0 && ip < 4000000; ip++)
    last = culpert__record_sample(&ip, 1, 0, 8, 1.0);
  assert_true(last < 0);
  assert_int_equal(culpert__record_dropped() - dropped0, 1);
  ip = 1;
  assert_int_equal(culpert__record_sample(&ip, 1, 0, 8, 1.0), first);
  ip = 99999999;
  assert_true(culpert__record_sample(&ip, 1, 0, 8, 1.0) < 0);
  assert_int_equal(culpert__record_dropped() - dropped0, 2);
  /* a fork child starts with no samples and nothing dropped */
  culpert__record_reset();
  assert_int_equal(culpert__record_dropped(), 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_record_aggregates_by_stack_and_span),
      cmocka_unit_test(test_record_empty_stack_and_reset),
      cmocka_unit_test(test_record_full_drops_and_counts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
