/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_loader.c: culpert finds the dynamic loader's write lock, sees it
 * held while another thread is inside dl_iterate_phdr and free after, and
 * a fork child sees it held when it was forked in the middle of one (on
 * another thread, or on its own thread inside the callback).
 */
#include <link.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "loader.h"

static sem_t inside, leave;

static int wait_inside(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)info;
  (void)size;
  (void)data;
  sem_post(&inside);
  sem_wait(&leave);
  return 1;
}

static void *iterate(void *arg)
{
  (void)arg;
  dl_iterate_phdr(wait_inside, NULL);
  return NULL;
}

/* In a fork child: 10 when the lock is seen held, 20 when free. */
static int child_status(pid_t pid)
{
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static pid_t fork_and_report(void)
{
  pid_t pid = fork();
  if (pid == 0)
    _exit(culpert__loader_lock_held() ? 10 : 20);
  assert_true(pid > 0);
  return pid;
}

static void test_found_and_free(void **state)
{
  (void)state;
  assert_int_equal(culpert__loader_find_lock(), 0);
  assert_false(culpert__loader_lock_held());
  assert_int_equal(child_status(fork_and_report()), 20);
}

static void test_held_by_another_thread(void **state)
{
  (void)state;
  assert_int_equal(culpert__loader_find_lock(), 0);
  sem_init(&inside, 0, 0);
  sem_init(&leave, 0, 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, iterate, NULL), 0);
  sem_wait(&inside);
  assert_true(culpert__loader_lock_held());
  pid_t pid = fork_and_report(); /* no culpert fork handler here */
  sem_post(&leave);
  pthread_join(t, NULL);
  assert_int_equal(child_status(pid), 10);
  assert_false(culpert__loader_lock_held());
}

static int fork_inside(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)info;
  (void)size;
  *(pid_t *)data = fork_and_report();
  return 1;
}

static void test_held_by_forking_thread(void **state)
{
  (void)state;
  assert_int_equal(culpert__loader_find_lock(), 0);
  pid_t pid = 0;
  dl_iterate_phdr(fork_inside, &pid);
  assert_int_equal(child_status(pid), 10);
  assert_false(culpert__loader_lock_held());
}

static void test_usable_flag(void **state)
{
  (void)state;
  assert_true(culpert__loader_usable());
  culpert__loader_set_usable(0);
  assert_false(culpert__loader_usable());
  culpert__loader_set_usable(1);
  assert_true(culpert__loader_usable());
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_found_and_free),
      cmocka_unit_test(test_held_by_another_thread),
      cmocka_unit_test(test_held_by_forking_thread),
      cmocka_unit_test(test_usable_flag),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
