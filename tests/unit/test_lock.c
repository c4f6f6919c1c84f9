/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_lock.c: the slow path's futex lock excludes: threads that add to a
 * plain counter under it, hard enough to contend and sleep, lose no update.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "internal.h"

enum { THREADS = 4, ROUNDS = 200000 };

static culpert__lock_t lock;
static volatile uint64_t counter;

static void *adder(void *arg)
{
  (void)arg;
  for (int i = 0; i < ROUNDS; i++) {
    culpert__lock(&lock);
    uint64_t v = counter;
    /* Hold the lock across a few hundred cycles now and then, so that
     * waiters run out of spins and sleep on the futex. */
    if (i % 1024 == 0)
      for (volatile int k = 0; k < 2000; k++)
        ;
    counter = v + 1;
    culpert__unlock(&lock);
  }
  return NULL;
}

static void test_lock_excludes(void **state)
{
  (void)state;
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, adder, NULL), 0);
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_join(t[i], NULL), 0);
  assert_int_equal(counter, (uint64_t)THREADS * ROUNDS);
  assert_int_equal(atomic_load(&lock.state), 0);
}

static void test_lock_reinit_frees(void **state)
{
  (void)state;
  culpert__lock_t l = {0};
  culpert__lock(&l);
  culpert__lock_reinit(&l); /* what a fork child does */
  culpert__lock(&l);
  culpert__unlock(&l);
  assert_int_equal(atomic_load(&l.state), 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lock_excludes),
      cmocka_unit_test(test_lock_reinit_frees),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
