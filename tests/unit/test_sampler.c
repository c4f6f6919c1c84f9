/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_sampler.c: sampling intervals are exponential with the configured
 * mean, weights are 1/p(s), estimates built from them are unbiased, and a
 * seed makes the sequence reproducible.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

/* The mean of many intervals is the rate, and about 1/e of them exceed it
 * (what an exponential distribution promises). */
static void test_sampler_interval_mean(void **state)
{
  (void)state;
  const uint64_t rates[] = {4096, 524288, 1u << 30};
  for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
    struct culpert__thread t;
    memset(&t, 0, sizeof t);
    culpert__sampler_setup(rates[r], 42);
    culpert__sampler_thread_init(&t);
    const int n = 200000;
    double sum = 0;
    int above = 0;
    for (int i = 0; i < n; i++) {
      int64_t v = culpert__sampler_next(&t);
      assert_true(v >= 0);
      sum += (double)v;
      above += (uint64_t)v > rates[r];
    }
    double mean = sum / n;
    /* standard error of the mean is R/sqrt(n) = 0.22% of R */
    assert_true(fabs(mean - (double)rates[r]) < 0.01 * (double)rates[r]);
    assert_true(fabs((double)above / n - exp(-1.0)) < 0.01);
  }
}

static void test_sampler_rate_zero_samples_everything(void **state)
{
  (void)state;
  struct culpert__thread t;
  memset(&t, 0, sizeof t);
  culpert__sampler_setup(0, 1);
  culpert__sampler_thread_init(&t);
  for (int i = 0; i < 100; i++)
    assert_int_equal(culpert__sampler_next(&t), 0);
  assert_true(culpert__sampler_weight(1, 0) == 1.0);
  assert_true(culpert__sampler_weight(1u << 20, 0) == 1.0);
  assert_true(culpert__sampler_weight(0, 0) == 1.0); /* malloc(0) counts as one object too */
}

static void test_sampler_weights(void **state)
{
  (void)state;
  const uint64_t R = 524288;
  const uint64_t sizes[] = {1, 16, 1000, 524288, 10u << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    double p = 1.0 - exp(-(double)sizes[i] / (double)R);
    double w = culpert__sampler_weight(sizes[i], R);
    assert_true(fabs(w * p - 1.0) < 1e-9);
  }
  /* small allocations weigh about R/s, huge ones about 1 */
  assert_true(fabs(culpert__sampler_weight(1, R) - (double)R) < 1.0);
  assert_true(fabs(culpert__sampler_weight(100u << 20, R) - 1.0) < 1e-12);
}

/* Same seed and thread order: the same intervals, run after run. Another
 * thread order or another seed: another sequence. */
static void test_sampler_seed_reproducible(void **state)
{
  (void)state;
  int64_t first[3][32];
  const uint64_t seeds[3][2] = {{1234, 0}, {1234, 1}, {1235, 0}}; /* (seed, order) */
  culpert__sampler_setup(524288, 1234);
  for (int k = 0; k < 3; k++) {
    struct culpert__thread t;
    memset(&t, 0, sizeof t);
    t.rng = culpert__sampler_stream(seeds[k][0], seeds[k][1]);
    for (int i = 0; i < 32; i++)
      first[k][i] = culpert__sampler_next(&t);
  }
  /* a second "run" gives the same sequence */
  struct culpert__thread again;
  memset(&again, 0, sizeof again);
  again.rng = culpert__sampler_stream(1234, 0);
  for (int i = 0; i < 32; i++)
    assert_int_equal(culpert__sampler_next(&again), first[0][i]);
  for (int k = 1; k < 3; k++) {
    int differ = 0;
    for (int i = 0; i < 32; i++)
      differ += first[k][i] != first[0][i];
    assert_true(differ > 28);
  }
  /* threads that start in order get consecutive streams */
  struct culpert__thread t1, t2;
  memset(&t1, 0, sizeof t1);
  memset(&t2, 0, sizeof t2);
  culpert__sampler_thread_init(&t1);
  culpert__sampler_thread_init(&t2);
  assert_true(t1.ready && t2.ready);
  assert_true(t1.rng != t2.rng);
}

/*
 * The estimate is unbiased. A known workload (a mix of sizes) is fed
 * through the countdown exactly as the malloc wrapper does; over 400 seeds
 * the mean estimated byte total is within 1% of the truth, and every
 * single run is within 4 standard errors (sqrt(R*B)) of it.
 */
static void test_sampler_estimate_unbiased(void **state)
{
  (void)state;
  const uint64_t R = 65536;
  const uint64_t sizes[] = {16, 48, 256, 1000, 4096, 70000, 300000};
  const int per_size = 2000;
  double truth = 0;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
    truth += (double)sizes[k] * per_size;
  double se = sqrt((double)R * truth);
  double sum = 0;
  const int seeds = 400;
  for (int seed = 1; seed <= seeds; seed++) {
    struct culpert__thread t;
    memset(&t, 0, sizeof t);
    culpert__sampler_setup(R, (uint64_t)seed * 7919);
    culpert__sampler_thread_init(&t);
    t.countdown = culpert__sampler_next(&t);
    double est = 0;
    for (int i = 0; i < per_size; i++) {
      for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        t.countdown -= (int64_t)sizes[k];
        if (t.countdown < 0) {
          t.countdown = culpert__sampler_next(&t);
          est += culpert__sampler_weight(sizes[k], R) * (double)sizes[k];
        }
      }
    }
    assert_true(fabs(est - truth) < 4 * se);
    sum += est;
  }
  assert_true(fabs(sum / seeds - truth) < 0.01 * truth);
}

/* Runs last: stopping for good. Stopped at exit (no reason), sampling
 * ends but nothing failed; stopped by an internal failure, it says so
 * from then on (snapshots then refuse with -EAGAIN and no exit profile is
 * written). */
static void test_sampler_stop(void **state)
{
  (void)state;
  atomic_store(&culpert__running, 1);
  culpert__sampler_stop(NULL);
  assert_int_equal(atomic_load(&culpert__running), 0);
  assert_int_equal(culpert__sampler_failed(), 0);
  atomic_store(&culpert__running, 1);
  culpert__sampler_stop("test");
  assert_int_equal(atomic_load(&culpert__running), 0);
  assert_int_equal(culpert__sampler_failed(), 1);
  culpert__sampler_stop(NULL);
  assert_int_equal(culpert__sampler_failed(), 1);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sampler_interval_mean),
      cmocka_unit_test(test_sampler_rate_zero_samples_everything),
      cmocka_unit_test(test_sampler_weights),
      cmocka_unit_test(test_sampler_seed_reproducible),
      cmocka_unit_test(test_sampler_estimate_unbiased),
      cmocka_unit_test(test_sampler_stop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
