/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_livetable.c: the free() filter flags every live sampled pointer and
 * almost nothing else; the table finds, updates and forgets pointers through
 * growth and deletions.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "internal.h"

static void *fake(uintptr_t i)
{
  return (void *)(uintptr_t)(0x7f0000000000u + i * 48u);
}

static void test_livetable_insert_remove(void **state)
{
  (void)state;
  struct culpert__live v = {7, 1000, 524.5}, got;
  void *p = fake(1);
  assert_false(culpert__live_remove(p, &got));
  assert_int_equal(culpert__live_insert(p, &v), 0);
  assert_true(culpert__filter_test(p));
  assert_int_equal(culpert__live_count(), 1);
  assert_true(culpert__live_remove(p, &got));
  assert_int_equal(got.bucket, 7);
  assert_int_equal(got.size, 1000);
  assert_true(got.weight == 524.5);
  assert_false(culpert__filter_test(p)); /* only pointer in its slot: byte cleared */
  assert_false(culpert__live_remove(p, &got));
  assert_int_equal(culpert__live_count(), 0);
}

/* Many pointers: growth keeps them all, removing every other one keeps the
 * rest reachable (backward-shift deletion), and the filter flags exactly
 * the slots still in use. */
static void test_livetable_many_pointers(void **state)
{
  (void)state;
  const uintptr_t n = 200000;
  struct culpert__live v, got;
  for (uintptr_t i = 0; i < n; i++) {
    v.bucket = (uint32_t)i;
    v.size = i;
    v.weight = 1.0;
    assert_int_equal(culpert__live_insert(fake(i + 10), &v), 0);
  }
  assert_int_equal(culpert__live_count(), n);
  for (uintptr_t i = 0; i < n; i += 2) {
    assert_true(culpert__live_remove(fake(i + 10), &got));
    assert_int_equal(got.bucket, i);
  }
  for (uintptr_t i = 1; i < n; i += 2) {
    assert_true(culpert__filter_test(fake(i + 10)));
    assert_true(culpert__live_remove(fake(i + 10), &got));
    assert_int_equal(got.size, i);
  }
  assert_int_equal(culpert__live_count(), 0);
  size_t flagged = 0;
  for (uintptr_t i = 0; i < n; i++)
    flagged += (size_t)culpert__filter_test(fake(i + 10));
  assert_int_equal(flagged, 0);
}

/* Re-inserting a live pointer updates it instead of duplicating it. */
static void test_livetable_reinsert_updates(void **state)
{
  (void)state;
  struct culpert__live a = {1, 10, 2.0}, b = {2, 20, 3.0}, got;
  assert_int_equal(culpert__live_insert(fake(5), &a), 0);
  assert_int_equal(culpert__live_insert(fake(5), &b), 0);
  assert_int_equal(culpert__live_count(), 1);
  assert_true(culpert__live_remove(fake(5), &got));
  assert_int_equal(got.bucket, 2);
  assert_false(culpert__filter_test(fake(5)));
}

/* The filter's granule and the window after which slots repeat. */
#define GRANULE ((uintptr_t)1 << CULPERT__FILTER_SHIFT)
#define WINDOW  ((uintptr_t)1 << (CULPERT__FILTER_SHIFT + CULPERT__FILTER_BITS))

/* Unsampled pointers rarely hit the filter: with 1000 live sampled
 * pointers, under 1% of 100000 other pointers are flagged. The others lie
 * half the filter's window away from the first sampled one, so that they
 * never share its granules, wherever ASLR put the heap (a fixed range
 * overlapped the heap's granules in about one run in 200). */
static void test_livetable_filter_false_positives_rare(void **state)
{
  (void)state;
  struct culpert__live v = {0, 1, 1.0};
  void *held[1000];
  for (int i = 0; i < 1000; i++) {
    held[i] = malloc(64);
    assert_int_equal(culpert__live_insert(held[i], &v), 0);
  }
  uintptr_t far = (uintptr_t)held[0] + WINDOW / 2;
  int hits = 0;
  for (uintptr_t i = 0; i < 100000; i++)
    hits += culpert__filter_test((void *)(far + i * 48u));
  assert_true(hits < 1000);
  for (int i = 0; i < 1000; i++) {
    struct culpert__live got;
    assert_true(culpert__live_remove(held[i], &got));
    free(held[i]);
  }
}

/* Pointers that differ only in their high bits share a filter slot: the
 * filter must keep flagging each one while it is live, however the others
 * come and go; and a neighbour one granule away is not flagged. */
static void test_livetable_filter_high_bits(void **state)
{
  (void)state;
  static const uintptr_t high[] = {0, WINDOW, UINT64_C(1) << 33, UINT64_C(1) << 46,
                                   (UINT64_C(1) << 46) + WINDOW};
  const size_t n = sizeof high / sizeof high[0];
  struct culpert__live v = {9, 90, 1.0}, got;
  uintptr_t base = 0x100000u + 0x12340u;
  for (size_t i = 0; i < n; i++)
    assert_int_equal(culpert__live_insert((void *)(base + high[i]), &v), 0);
  assert_false(culpert__filter_test((void *)(base + GRANULE)));
  assert_false(culpert__filter_test((void *)(base - GRANULE)));
  for (size_t i = 0; i < n; i++) {
    assert_true(culpert__live_remove((void *)(base + high[i]), &got));
    assert_false(culpert__live_remove((void *)(base + high[i]), &got));
    for (size_t k = i + 1; k < n; k++)
      assert_true(culpert__filter_test((void *)(base + high[k])));
  }
  assert_false(culpert__filter_test((void *)base));
  assert_int_equal(culpert__live_count(), 0);
}

/* Many live pointers on one granule bit (1 GiB apart): the filter keeps
 * flagging every one of them while it is live, every one is found and
 * forgotten exactly once, and the bit clears with the last of them. A
 * neighbouring granule is unaffected. */
static void test_livetable_filter_saturated_slot(void **state)
{
  (void)state;
  enum { N = 300 };
  const uintptr_t base = 0x200000u + 0x4560u;
  struct culpert__live v = {4, 40, 1.0}, got;
  for (uintptr_t i = 0; i < N; i++)
    assert_int_equal(culpert__live_insert((void *)(base + i * WINDOW), &v), 0);
  assert_int_equal(culpert__live_count(), N);
  for (uintptr_t i = 0; i < N; i++) {
    assert_true(culpert__filter_test((void *)(base + i * WINDOW)));
    assert_true(culpert__live_remove((void *)(base + i * WINDOW), &got));
    assert_false(culpert__live_remove((void *)(base + i * WINDOW), &got));
  }
  for (uintptr_t i = 0; i < N; i++)
    assert_false(culpert__live_remove((void *)(base + i * WINDOW), &got));
  assert_int_equal(culpert__live_count(), 0);
  assert_false(culpert__filter_test((void *)base));
  assert_false(culpert__filter_test((void *)(base + GRANULE)));
  assert_int_equal(culpert__live_insert((void *)(base + GRANULE), &v), 0);
  assert_true(culpert__live_remove((void *)(base + GRANULE), &got));
  assert_false(culpert__filter_test((void *)(base + GRANULE)));
}

/* The summary in front of the filter: set for the 32 KiB region of a live
 * sampled pointer (and, by aliasing, the same region 1 GiB further), clear
 * for the regions around it and again once the pointer is forgotten; the
 * filter answers inside the region. */
static void test_livetable_summary_regions(void **state)
{
  (void)state;
  const uintptr_t region = (uintptr_t)1 << CULPERT__SUMMARY_SHIFT;
  const uintptr_t window = (uintptr_t)1 << (CULPERT__SUMMARY_SHIFT + CULPERT__SUMMARY_BITS);
  const uintptr_t base = 0x7e1230000000u + 5 * region + 0x1040u;
  struct culpert__live v = {6, 60, 1.0}, got;
  assert_false(culpert__summary_test((void *)base));
  assert_int_equal(culpert__live_insert((void *)base, &v), 0);
  assert_true(culpert__summary_test((void *)base));
  assert_true(culpert__summary_test((void *)(base - 0x1040u)));
  assert_true(culpert__summary_test((void *)(base + window)));
  assert_false(culpert__summary_test((void *)(base + region)));
  assert_false(culpert__summary_test((void *)(base - region)));
  assert_true(culpert__filter_test((void *)base));
  assert_false(culpert__filter_test((void *)(base + 4 * GRANULE)));
  assert_false(culpert__filter_test((void *)(base + region)));
  /* A second pointer in the same region keeps it flagged after the first
   * one goes. */
  assert_int_equal(culpert__live_insert((void *)(base + 8 * GRANULE), &v), 0);
  assert_true(culpert__live_remove((void *)base, &got));
  assert_true(culpert__summary_test((void *)base));
  assert_true(culpert__filter_test((void *)(base + 8 * GRANULE)));
  assert_true(culpert__live_remove((void *)(base + 8 * GRANULE), &got));
  assert_false(culpert__summary_test((void *)base));
  assert_false(culpert__filter_test((void *)(base + 8 * GRANULE)));
}

static void test_livetable_reset_forgets(void **state)
{
  (void)state;
  struct culpert__live v = {3, 30, 1.0}, got;
  assert_int_equal(culpert__live_insert(fake(77), &v), 0);
  culpert__live_reset();
  assert_int_equal(culpert__live_count(), 0);
  assert_false(culpert__filter_test(fake(77)));
  assert_false(culpert__live_remove(fake(77), &got));
}

/* Threads inserting and removing at once, through the table's growth,
 * with pointers of different threads on the same granules and filter
 * words: nothing is lost, nothing is found twice, and once every pointer
 * is gone no filter bit is left set. */
#define THREADS    4
#define PER_THREAD 40000u

struct worker {
  uintptr_t t;
  int failures;
};

static void *insert_remove(void *arg)
{
  struct worker *w = arg;
  struct culpert__live v, got;
  for (uintptr_t i = 0; i < PER_THREAD; i++) {
    v.bucket = (uint32_t)w->t;
    v.size = i;
    v.weight = 1.0;
    if (culpert__live_insert(fake(i * THREADS + w->t + 1), &v) != 0)
      w->failures++;
  }
  for (uintptr_t i = 0; i < PER_THREAD; i += 2) {
    void *p = fake(i * THREADS + w->t + 1);
    if (!culpert__filter_test(p) || !culpert__live_remove(p, &got) || got.bucket != w->t ||
        got.size != i)
      w->failures++;
  }
  return NULL;
}

/* The peak of the in-use estimate (the live samples' weighted bytes at
 * their highest): a removal lowers the current sum, never the peak; a
 * pointer inserted again replaces its old contribution; reset (a fork
 * child) starts again from zero. */
static void test_livetable_peak(void **state)
{
  (void)state;
  struct culpert__live a = {1, 1000, 1.0}, b = {2, 2000, 2.0}, c = {3, 10000, 1.0};
  struct culpert__live d = {4, 5000, 1.0}, got;
  culpert__live_reset();
  assert_true(culpert__live_peak_bytes() == 0);
  assert_int_equal(culpert__live_insert(fake(101), &a), 0);
  assert_true(culpert__live_peak_bytes() == 1000);
  assert_int_equal(culpert__live_insert(fake(102), &b), 0);
  assert_true(culpert__live_peak_bytes() == 5000);
  assert_true(culpert__live_remove(fake(101), &got));
  assert_true(culpert__live_peak_bytes() == 5000);
  assert_int_equal(culpert__live_insert(fake(103), &c), 0); /* 4000 + 10000 */
  assert_true(culpert__live_peak_bytes() == 14000);
  assert_true(culpert__live_remove(fake(102), &got));
  assert_true(culpert__live_remove(fake(103), &got));
  assert_true(culpert__live_peak_bytes() == 14000);
  assert_int_equal(culpert__live_insert(fake(104), &a), 0);
  assert_int_equal(culpert__live_insert(fake(104), &c), 0); /* 10000, not 11000 */
  assert_int_equal(culpert__live_insert(fake(105), &d), 0);
  assert_true(culpert__live_peak_bytes() == 15000);
  assert_true(culpert__live_remove(fake(104), &got));
  assert_true(culpert__live_remove(fake(105), &got));
  culpert__live_reset();
  assert_true(culpert__live_peak_bytes() == 0);
}

/* CULPERT_PEAK: the samples live at the highest in-use estimate, exactly,
 * whatever was freed or re-inserted since. */
static int64_t sum_peak(struct culpert__bucket *b, size_t nb)
{
  uint64_t lost = 1;
  for (size_t i = 0; i < nb; i++)
    b[i] = (struct culpert__bucket){0};
  double peak = -1, sum = 0;
  int64_t when = culpert__live_add_peak(b, nb, &lost, &peak);
  assert_int_equal(lost, 0);
  for (size_t i = 0; i < nb; i++)
    sum += b[i].inuse_bytes;
  assert_true(sum == peak); /* the samples and the value of one moment */
  return when;
}

static void test_livetable_peak_samples(void **state)
{
  (void)state;
  struct culpert__bucket b[3];
  struct culpert__live got;
  culpert__live_reset();
  culpert__live_keep_peak();
  assert_int_equal(sum_peak(b, 3), 0); /* no peak yet */
  struct culpert__live a = {0, 1000, 1.0}, big = {1, 50000, 2.0}, mid = {2, 50000, 1.0};
  assert_int_equal(culpert__live_insert(fake(201), &a), 0);
  assert_int_equal(culpert__live_insert(fake(202), &big), 0); /* 101000: the peak */
  assert_true(culpert__live_remove(fake(202), &got));
  assert_int_equal(culpert__live_insert(fake(203), &mid), 0); /* 51000 */
  assert_true(culpert__live_remove(fake(201), &got));         /* 50000 */
  assert_true(sum_peak(b, 3) > 0);
  assert_true(b[0].inuse_bytes == 1000 && b[0].inuse_objects == 1);
  assert_true(b[1].inuse_bytes == 100000 && b[1].inuse_objects == 2);
  assert_true(b[2].inuse_bytes == 0); /* after the peak */

  /* 50000 + 51001 passes 101000 by one byte: the new peak. */
  struct culpert__live higher = {1, 51001, 1.0};
  assert_int_equal(culpert__live_insert(fake(204), &higher), 0);
  assert_true(culpert__live_peak_bytes() == 101001);
  assert_true(culpert__live_remove(fake(203), &got));
  sum_peak(b, 3);
  assert_true(b[0].inuse_bytes == 0);
  assert_true(b[1].inuse_bytes == 51001 && b[1].inuse_objects == 1);
  assert_true(b[2].inuse_bytes == 50000);
  /* Bucket 2 is beyond nb: left out, the others added. */
  uint64_t lost;
  double peak;
  b[1].inuse_bytes = 0;
  b[2].inuse_bytes = -1;
  assert_true(culpert__live_add_peak(b, 2, &lost, &peak) > 0);
  assert_true(b[1].inuse_bytes == 51001);
  assert_true(b[2].inuse_bytes == -1);

  /* A pointer inserted again (freed where culpert did not see it): the
   * peak keeps what it was. */
  struct culpert__live again = {0, 10, 1.0};
  assert_int_equal(culpert__live_insert(fake(204), &again), 0);
  sum_peak(b, 3);
  assert_true(b[1].inuse_bytes == 51001);
  assert_true(b[0].inuse_bytes == 0);
  assert_true(culpert__live_remove(fake(204), &got));

  /* Many samples freed after the peak ("gone" grows past its first 256). */
  culpert__live_reset(); /* a fork child starts again */
  assert_int_equal(sum_peak(b, 3), 0);
  struct culpert__live one = {2, 100, 1.0};
  for (uintptr_t i = 0; i < 1000; i++)
    assert_int_equal(culpert__live_insert(fake(300 + i), &one), 0);
  for (uintptr_t i = 0; i < 1000; i++)
    assert_true(culpert__live_remove(fake(300 + i), &got));
  struct culpert__live small = {0, 50, 1.0};
  assert_int_equal(culpert__live_insert(fake(2000), &small), 0);
  sum_peak(b, 3);
  assert_true(b[2].inuse_bytes == 100000 && b[2].inuse_objects == 1000);
  assert_true(b[0].inuse_bytes == 0);
  assert_true(culpert__live_remove(fake(2000), &got));
  culpert__live_reset();
}

static void test_livetable_threads(void **state)
{
  (void)state;
  pthread_t th[THREADS];
  struct worker w[THREADS];
  for (uintptr_t t = 0; t < THREADS; t++) {
    w[t] = (struct worker){t, 0};
    assert_int_equal(pthread_create(&th[t], NULL, insert_remove, &w[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) {
    pthread_join(th[t], NULL);
    assert_int_equal(w[t].failures, 0);
  }
  assert_int_equal(culpert__live_count(), THREADS * PER_THREAD / 2);
  struct culpert__live got;
  for (uintptr_t i = 0; i < PER_THREAD * THREADS; i++) {
    uintptr_t t = i % THREADS, k = i / THREADS;
    void *p = fake(i + 1);
    if (k % 2 == 0) {
      assert_false(culpert__live_remove(p, &got));
      continue;
    }
    assert_true(culpert__filter_test(p));
    assert_true(culpert__live_remove(p, &got));
    assert_int_equal(got.bucket, t);
    assert_int_equal(got.size, k);
  }
  assert_int_equal(culpert__live_count(), 0);
  for (uintptr_t i = 0; i < PER_THREAD * THREADS; i++)
    assert_false(culpert__filter_test(fake(i + 1)));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_livetable_insert_remove),
      cmocka_unit_test(test_livetable_many_pointers),
      cmocka_unit_test(test_livetable_reinsert_updates),
      cmocka_unit_test(test_livetable_filter_false_positives_rare),
      cmocka_unit_test(test_livetable_filter_high_bits),
      cmocka_unit_test(test_livetable_filter_saturated_slot),
      cmocka_unit_test(test_livetable_summary_regions),
      cmocka_unit_test(test_livetable_reset_forgets),
      cmocka_unit_test(test_livetable_peak),
      cmocka_unit_test(test_livetable_peak_samples),
      cmocka_unit_test(test_livetable_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
