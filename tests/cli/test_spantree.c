/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_spantree: the span tree's promises, on models built in memory:
 * same-name spans merge under the same parent (per-path and per-instance
 * ids alike), totals add up, in-use bytes are used on request, samples
 * without a span go to "(no span)", and cycles, self-parents, unknown
 * parents and very deep chains end (no hang, no stack overflow), and
 * spans of different names sharing an id stay apart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spantree.h"

static struct culpert__profile *model(struct culpert__sample *s, size_t n)
{
  static struct culpert__profile p;
  memset(&p, 0, sizeof p);
  p.samples = s;
  p.nsamples = n;
  return &p;
}

/* One sample: span name, id, parent id, bytes (in-use: half of them). */
#define S(name_, id_, parent_, bytes_)                                                             \
  (struct culpert__sample)                                                                         \
  {                                                                                                \
    .span_name = (name_), .span_id = (id_), .span_parent_id = (parent_), .bytes = (bytes_),        \
    .inuse_bytes = (bytes_) / 2, .samples = 1                                                      \
  }

static const struct culpert__span_node *path(const struct culpert__span_node *n,
                                             const char *const *names)
{
  for (; n && *names; names++)
    n = culpert__spantree_child(n, *names);
  return n;
}

/* Rust-style instance ids: three serve/query instances merge into one
 * serve -> query path; totals include children; "(no span)" is a root. */
static void test_spantree_instances_merge(void **state)
{
  (void)state;
  struct culpert__sample s[] = {
      S("serve", 10, 0, 0),    S("query", 11, 10, 100), S("serve", 12, 0, 5),
      S("query", 13, 12, 200), S("query", 15, 14, 300), S("serve", 14, 0, 0),
      S(NULL, 0, 0, 7),
  };
  struct culpert__span_node *root;
  assert_int_equal(culpert__spantree_build(model(s, 7), false, &root), 0);
  assert_int_equal(root->nchildren, 2);
  const struct culpert__span_node *serve = path(root, (const char *[]){"serve", NULL});
  const struct culpert__span_node *query = path(root, (const char *[]){"serve", "query", NULL});
  assert_non_null(query);
  assert_int_equal(serve->nchildren, 1);
  assert_int_equal(query->self_bytes, 600);
  assert_int_equal(serve->self_bytes, 5);
  assert_int_equal(serve->total_bytes, 605);
  assert_int_equal(serve->total_samples, 6);
  assert_int_equal(path(root, (const char *[]){CULPERT_NO_SPAN_NAME, NULL})->self_bytes, 7);
  assert_int_equal(root->total_bytes, 612);
  culpert__spantree_free(root);
}

/* --inuse: the tree sums in-use bytes instead. */
static void test_spantree_inuse(void **state)
{
  (void)state;
  struct culpert__sample s[] = {S("a", 1, 0, 100), S("b", 2, 1, 40)};
  struct culpert__span_node *root;
  assert_int_equal(culpert__spantree_build(model(s, 2), true, &root), 0);
  assert_int_equal(path(root, (const char *[]){"a", NULL})->total_bytes, 70);
  assert_int_equal(path(root, (const char *[]){"a", "b", NULL})->self_bytes, 20);
  culpert__spantree_free(root);
}

/* Cycles (1 <-> 2), a span that is its own parent and an unknown parent
 * all end as roots; every byte is counted once. */
static void test_spantree_cycles_cut(void **state)
{
  (void)state;
  struct culpert__sample s[] = {S("a", 1, 2, 1), S("b", 2, 1, 2), S("self", 3, 3, 4),
                                S("orphan", 4, 99, 8)};
  struct culpert__span_node *root;
  assert_int_equal(culpert__spantree_build(model(s, 4), false, &root), 0);
  assert_int_equal(root->total_bytes, 15);
  /* a's chain a -> b -> a is cut at a: b is the root, a under it. */
  assert_non_null(path(root, (const char *[]){"b", "a", NULL}));
  assert_int_equal(path(root, (const char *[]){"self", NULL})->nchildren, 0);
  assert_non_null(path(root, (const char *[]){"orphan", NULL}));
  culpert__spantree_free(root);
}

/* A name without an id goes under its parent when the parent is known. */
static void test_spantree_name_without_id(void **state)
{
  (void)state;
  struct culpert__sample s[] = {S("parent", 1, 0, 1), S("child", 0, 1, 2), S("lone", 0, 0, 4)};
  struct culpert__span_node *root;
  assert_int_equal(culpert__spantree_build(model(s, 3), false, &root), 0);
  assert_int_equal(path(root, (const char *[]){"parent", "child", NULL})->self_bytes, 2);
  assert_int_equal(path(root, (const char *[]){"lone", NULL})->self_bytes, 4);
  culpert__spantree_free(root);
}

/* Two processes' spans sharing an id (a file merged by `go tool pprof
 * -proto a b` keeps each file's ids): each sample stays with its own
 * name, and a child of the shared id goes under its first owner. */
static void test_spantree_shared_id_keeps_names(void **state)
{
  (void)state;
  struct culpert__sample s[] = {S("load", 1, 0, 100), S("index", 1, 0, 30), S("compress", 2, 1, 50),
                                S("index", 1, 0, 6)};
  struct culpert__span_node *root;
  assert_int_equal(culpert__spantree_build(model(s, 4), false, &root), 0);
  assert_int_equal(root->nchildren, 2);
  assert_int_equal(path(root, (const char *[]){"load", NULL})->self_bytes, 100);
  assert_int_equal(path(root, (const char *[]){"index", NULL})->self_bytes, 36);
  assert_int_equal(path(root, (const char *[]){"load", "compress", NULL})->self_bytes, 50);
  assert_int_equal(root->total_bytes, 186);
  culpert__spantree_free(root);
}

/* A chain 200000 spans deep builds and frees without recursion. */
static void test_spantree_deep_chain(void **state)
{
  (void)state;
  enum { N = 200000 };
  struct culpert__sample *s = calloc(N, sizeof *s);
  assert_non_null(s);
  for (size_t i = 0; i < N; i++)
    s[i] = S("level", (int64_t)i + 1, (int64_t)i, 1);
  struct culpert__span_node *root;
  assert_int_equal(culpert__spantree_build(model(s, N), false, &root), 0);
  assert_int_equal(root->total_bytes, N);
  const struct culpert__span_node *n = root;
  size_t depth = 0;
  while (n->nchildren == 1) {
    n = n->children[0];
    depth++;
  }
  assert_int_equal(depth, N);
  assert_int_equal(n->total_bytes, 1);
  culpert__spantree_free(root);
  free(s);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spantree_instances_merge),
      cmocka_unit_test(test_spantree_inuse),
      cmocka_unit_test(test_spantree_cycles_cut),
      cmocka_unit_test(test_spantree_name_without_id),
      cmocka_unit_test(test_spantree_shared_id_keeps_names),
      cmocka_unit_test(test_spantree_deep_chain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
