/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_span.c: span stacks nest and stay balanced, every enter gets a new
 * id, spans aggregate by path, ids cross threads, and overflow, underflow
 * and a full path table are counted rather than failing.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <cmocka.h>

#include "internal.h"

static const char *node_name(uint32_t node, uint32_t *parent)
{
  const char *n = culpert__span_name(node, parent);
  assert_non_null(n);
  return n;
}

static void test_span_nesting(void **state)
{
  (void)state;
  uint32_t parent;
  assert_int_equal(culpert_span_current(), 0);
  assert_int_equal(culpert__span_current_node(), 0);
  culpert_span_enter("request");
  uint64_t outer = culpert_span_current();
  assert_true(outer != 0);
  culpert_span_enter("parse");
  uint64_t inner = culpert_span_current();
  assert_true(inner != outer);
  uint32_t node = culpert__span_current_node();
  assert_string_equal(node_name(node, &parent), "parse");
  assert_int_equal(parent, culpert__span_node_of(outer));
  assert_string_equal(node_name(parent, &parent), "request");
  assert_int_equal(parent, 0);
  culpert_span_exit();
  assert_true(culpert_span_current() == outer);
  culpert_span_exit();
  assert_int_equal(culpert_span_current(), 0);
}

/* Each enter gets a new id; the same path always maps to one node; the same
 * name under another parent is another node. */
static void test_span_ids_and_paths(void **state)
{
  (void)state;
  uint64_t ids[100];
  for (int i = 0; i < 100; i++) {
    culpert_span_enter("loop");
    ids[i] = culpert_span_current();
    culpert_span_exit();
  }
  for (int i = 0; i < 100; i++) {
    assert_int_equal(culpert__span_node_of(ids[i]), culpert__span_node_of(ids[0]));
    for (int j = 0; j < i; j++)
      assert_true(ids[i] != ids[j]);
  }
  /* name content, not pointer, decides */
  char copy[] = "loop";
  culpert_span_enter(copy);
  assert_int_equal(culpert__span_current_node(), culpert__span_node_of(ids[0]));
  culpert_span_exit();
  culpert_span_enter("outer");
  culpert_span_enter("loop");
  assert_true(culpert__span_current_node() != culpert__span_node_of(ids[0]));
  culpert_span_exit();
  culpert_span_exit();
}

static void test_span_overflow_balanced(void **state)
{
  (void)state;
  uint64_t before = culpert__span_overflows();
  for (int i = 0; i < CULPERT_SPAN_MAX_DEPTH + 10; i++)
    culpert_span_enter("deep");
  assert_int_equal(culpert__span_overflows() - before, 10);
  uint64_t deepest = culpert_span_current();
  culpert_span_enter("deeper still");
  assert_true(culpert_span_current() == deepest); /* attributed to the deepest recorded */
  culpert_span_exit();
  for (int i = 0; i < 10; i++)
    culpert_span_exit();
  assert_true(culpert_span_current() == deepest); /* back at the deepest recorded span */
  for (int i = 0; i < CULPERT_SPAN_MAX_DEPTH; i++)
    culpert_span_exit();
  assert_int_equal(culpert_span_current(), 0);
}

static void test_span_underflow_counted(void **state)
{
  (void)state;
  uint64_t before = culpert__span_underflows();
  culpert_span_exit();
  culpert_span_exit();
  assert_int_equal(culpert__span_underflows() - before, 2);
  assert_int_equal(culpert_span_current(), 0);
  culpert_span_enter("after underflow");
  assert_true(culpert_span_current() != 0);
  culpert_span_exit();
  assert_int_equal(culpert_span_current(), 0);
}

struct child_arg {
  uint64_t parent_id;
  uint32_t node;
  uint32_t node_parent;
  uint64_t unknown_parent_node;
};

static void *worker(void *p)
{
  struct child_arg *a = p;
  culpert_span_enter_child_of("task", a->parent_id);
  a->node = culpert__span_current_node();
  (void)culpert__span_name(a->node, &a->node_parent);
  culpert_span_exit();
  culpert_span_enter_child_of("task", UINT64_C(0xFFFF0000FFFF)); /* unknown id */
  uint32_t parent = 99;
  (void)culpert__span_name(culpert__span_current_node(), &parent);
  a->unknown_parent_node = parent;
  culpert_span_exit();
  return NULL;
}

static void test_span_enter_child_of_across_threads(void **state)
{
  (void)state;
  struct child_arg a = {0};
  pthread_t th;
  culpert_span_enter("submit");
  a.parent_id = culpert_span_current();
  assert_int_equal(pthread_create(&th, NULL, worker, &a), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  culpert_span_exit();
  assert_true(a.node != 0);
  assert_int_equal(a.node_parent, culpert__span_node_of(a.parent_id));
  assert_int_equal(a.unknown_parent_node, 0); /* root span */
}

static void test_span_long_name_cut(void **state)
{
  (void)state;
  char name[400];
  uint32_t parent;
  memset(name, 'x', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  culpert_span_enter(name);
  const char *stored = node_name(culpert__span_current_node(), &parent);
  assert_int_equal(strlen(stored), CULPERT__SPAN_NAME_MAX);
  culpert_span_exit();
}

/* An id this process never issued makes a root span, also when its low
 * bits name a real path node: a sequence number not handed out yet, 0, or
 * one another process numbering its spans the same way would have issued
 * (ids are keyed per process). */
static void test_span_unknown_parent_is_root(void **state)
{
  (void)state;
  culpert_span_enter("issued");
  uint64_t real = culpert_span_current();
  uint32_t node = culpert__span_node_of(real);
  assert_true(node != 0);
  culpert_span_exit();
  const uint64_t bogus[] = {
      (UINT64_C(1) << 40) | node, /* a sequence number far beyond any issued */
      node,                       /* sequence number 0 */
      (UINT64_C(4096) << CULPERT__SPAN_NODE_BITS) | node, /* another process's first */
      (UINT64_C(4097) << CULPERT__SPAN_NODE_BITS) | node,
      (UINT64_C(1) << CULPERT__SPAN_NODE_BITS) | node,
  };
  for (size_t i = 0; i < sizeof bogus / sizeof bogus[0]; i++) {
    assert_int_equal(culpert__span_node_of(bogus[i]), 0);
    culpert_span_enter_child_of("orphan", bogus[i]);
    uint32_t parent = 99;
    assert_string_equal(node_name(culpert__span_current_node(), &parent), "orphan");
    assert_int_equal(parent, 0);
    culpert_span_exit();
  }
  culpert_span_enter_child_of("child", real);
  uint32_t parent = 0;
  node_name(culpert__span_current_node(), &parent);
  assert_int_equal(parent, node);
  culpert_span_exit();
}

/* Made-up ids whose node bits, once decoded, name a real path node, with a
 * sequence number this process never handed out (0, or beyond every
 * block given to a thread): still a root span. The ids are built with this
 * process's key, read from an id it issued and the raw one the thread
 * keeps, so only the sequence number is wrong. */
static void test_span_unissued_sequence_is_root(void **state)
{
  (void)state;
  culpert_span_enter("issued_here");
  uint64_t real = culpert_span_current();
  uint64_t raw = culpert__tls.spans[culpert__tls.span_depth - 1];
  uint32_t node = culpert__span_current_node();
  assert_true(node != 0);
  culpert_span_exit();
  uint64_t key = real ^ raw;
  const uint64_t made_up[] = {
      key ^ node,                                                    /* sequence number 0 */
      key ^ ((UINT64_C(1) << 40) << CULPERT__SPAN_NODE_BITS | node), /* never reached */
  };
  for (size_t i = 0; i < sizeof made_up / sizeof made_up[0]; i++) {
    assert_int_equal(culpert__span_node_of(made_up[i]), 0);
    culpert_span_enter_child_of("orphan", made_up[i]);
    uint32_t parent = 99;
    assert_string_equal(node_name(culpert__span_current_node(), &parent), "orphan");
    assert_int_equal(parent, 0);
    culpert_span_exit();
  }
  /* the same construction with the issued sequence number finds the node */
  assert_int_equal(culpert__span_node_of(key ^ raw), node);
}

/* Spans entered by a signal handler while the thread enters its own: every
 * id is still new (a handler between the read and the write of the
 * thread's counter got the id the thread then got too), and the thread's
 * current span is its own (the handler's landed in its slot). */
#define MAIN_SPANS    400000
#define HANDLER_SPANS 65536
static uint64_t handler_ids[HANDLER_SPANS];
static volatile sig_atomic_t handler_n;

static void on_alarm(int sig)
{
  (void)sig;
  culpert_span_enter("handler");
  if (handler_n < HANDLER_SPANS)
    handler_ids[handler_n++] = culpert_span_current();
  culpert_span_exit();
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static void test_span_ids_unique_with_signal_handlers(void **state)
{
  (void)state;
  uint64_t *ids = malloc((MAIN_SPANS + HANDLER_SPANS) * sizeof *ids);
  assert_non_null(ids);
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
  struct itimerval every = {{0, 20}, {0, 20}}, off = {{0, 0}, {0, 0}};
  handler_n = 0;
  assert_int_equal(setitimer(ITIMER_REAL, &every, NULL), 0);
  size_t n = 0;
  for (; n < MAIN_SPANS; n++) {
    culpert_span_enter("main_loop");
    ids[n] = culpert_span_current();
    culpert_span_exit();
  }
  assert_int_equal(setitimer(ITIMER_REAL, &off, NULL), 0);
  assert_int_equal(sigaction(SIGALRM, &old, NULL), 0);
  assert_true(handler_n > 0);
  memcpy(ids + n, handler_ids, (size_t)handler_n * sizeof *ids);
  n += (size_t)handler_n;
  qsort(ids, n, sizeof *ids, cmp_u64);
  size_t dup = 0;
  for (size_t i = 1; i < n; i++)
    dup += ids[i] == ids[i - 1];
  free(ids);
  if (dup != 0)
    fail_msg("%zu duplicate span ids among %zu (%d from signal handlers)", dup, n, (int)handler_n);
}

/* A NULL or empty name is stored as "(unnamed)": pprof drops labels
 * whose value is empty, so the span would lose its name. */
static void test_span_empty_name(void **state)
{
  (void)state;
  uint32_t parent;
  culpert_span_enter("");
  assert_string_equal(node_name(culpert__span_current_node(), &parent), "(unnamed)");
  culpert_span_exit();
  culpert_span_enter(NULL);
  assert_string_equal(node_name(culpert__span_current_node(), &parent), "(unnamed)");
  culpert_span_exit();
}

/* Threads creating the same new paths at the same time: every thread
 * always sees a published node with the right name and parent. */
static void *racer(void *arg)
{
  int *bad = arg;
  char name[32];
  for (int i = 0; i < 2000; i++) {
    snprintf(name, sizeof name, "race_inner_%d", i % 300);
    culpert_span_enter("race_outer");
    culpert_span_enter(name);
    uint32_t parent = 0;
    const char *got = culpert__span_name(culpert__span_current_node(), &parent);
    uint32_t grand = 0;
    const char *pname = culpert__span_name(parent, &grand);
    if (got == NULL || strcmp(got, name) != 0 || pname == NULL ||
        strcmp(pname, "race_outer") != 0 || grand != 0)
      (*bad)++;
    culpert_span_exit();
    culpert_span_exit();
  }
  return NULL;
}

static void test_span_concurrent_paths(void **state)
{
  (void)state;
  pthread_t th[8];
  int bad[8] = {0};
  for (int i = 0; i < 8; i++)
    assert_int_equal(pthread_create(&th[i], NULL, racer, &bad[i]), 0);
  for (int i = 0; i < 8; i++) {
    assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(bad[i], 0);
  }
}

/* Runs last: fills the path table. New names then attribute to their
 * parent and are counted; known names still resolve. */
static void test_span_table_full_counted(void **state)
{
  (void)state;
  char name[32];
  culpert_span_enter("known");
  uint32_t known = culpert__span_current_node();
  culpert_span_exit();
  for (unsigned i = 0; i < CULPERT__SPAN_NODES; i++) {
    snprintf(name, sizeof name, "n%u", i);
    (void)culpert__span_lookup(0, name);
  }
  uint64_t before = culpert__span_table_full();
  culpert_span_enter("parent of the overflow");
  culpert_span_enter("known");
  uint64_t outer = culpert_span_current();
  culpert_span_enter("a brand new name");
  assert_true(culpert__span_table_full() > before);
  assert_int_equal(culpert__span_current_node(), culpert__span_node_of(outer));
  assert_true(culpert_span_current() != outer); /* still a new id */
  culpert_span_exit();
  culpert_span_exit();
  culpert_span_exit();
  culpert_span_enter("known");
  assert_int_equal(culpert__span_current_node(), known);
  culpert_span_exit();
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_span_nesting),
      cmocka_unit_test(test_span_ids_and_paths),
      cmocka_unit_test(test_span_overflow_balanced),
      cmocka_unit_test(test_span_underflow_counted),
      cmocka_unit_test(test_span_enter_child_of_across_threads),
      cmocka_unit_test(test_span_long_name_cut),
      cmocka_unit_test(test_span_unknown_parent_is_root),
      cmocka_unit_test(test_span_unissued_sequence_is_root),
      cmocka_unit_test(test_span_ids_unique_with_signal_handlers),
      cmocka_unit_test(test_span_empty_name),
      cmocka_unit_test(test_span_concurrent_paths),
      cmocka_unit_test(test_span_table_full_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
