/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_profile_workers: the loader's promises about its load options.
 * Samples decoded by 1, 2, 4 or 8 workers give the same model and, for a
 * damaged file, the same message: the first error in the file. The stacks
 * options drop the stacks nobody reads and nothing else, and a file one
 * option rejects, every option rejects alike. The single header walk still
 * reports a broken wire structure before an error inside a field.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "profile.h"
#include "profile.pb-c.h"

#define NSAMPLES 3001 /* not a multiple of any worker count */
#define NLOCS    50
#define NSPANS   5
#define NTYPES   5

/* A culpert-style profile: NLOCS locations (one line each, or `inlined`
 * lines for location 7), samples with 1..9 frames, most in one of NSPANS
 * spans, every 10th outside every span. */
struct big {
  Perftools__Profiles__Profile prof;
  char *strings[128];
  Perftools__Profiles__ValueType types[NTYPES], *typep[NTYPES];
  Perftools__Profiles__Function fn[NLOCS], *fnp[NLOCS];
  Perftools__Profiles__Location loc[NLOCS], *locp[NLOCS];
  Perftools__Profiles__Line line[NLOCS][3], *linep[NLOCS][3];
  Perftools__Profiles__Sample smp[NSAMPLES], *smpp[NSAMPLES];
  Perftools__Profiles__Label lab[NSAMPLES][3], *labp[NSAMPLES][3];
  uint64_t locids[NSAMPLES][9];
  int64_t vals[NSAMPLES][NTYPES];
  char names[NLOCS][32];
};

static int64_t str(struct big *b, const char *s)
{
  for (size_t i = 0; i < b->prof.n_string_table; i++)
    if (strcmp(b->strings[i], s) == 0)
      return (int64_t)i;
  b->strings[b->prof.n_string_table] = (char *)s;
  return (int64_t)b->prof.n_string_table++;
}

static const char *const span_names[NSPANS] = {"a", "b", "c", "d", "e"};

static struct big *make_big(size_t inlined)
{
  static const char *const types[NTYPES] = {"alloc_objects", "alloc_space", "inuse_objects",
                                            "inuse_space", "samples"};
  struct big *b = calloc(1, sizeof *b);
  assert_non_null(b);
  Perftools__Profiles__Profile *p = &b->prof;
  perftools__profiles__profile__init(p);
  p->string_table = b->strings;
  str(b, "");
  for (size_t i = 0; i < NTYPES; i++) {
    perftools__profiles__value_type__init(&b->types[i]);
    b->types[i].type = str(b, types[i]);
    b->types[i].unit = str(b, i % 2 ? "bytes" : "count");
    b->typep[i] = &b->types[i];
  }
  p->sample_type = b->typep;
  p->n_sample_type = NTYPES;
  p->period = 4096;
  int64_t k_name = str(b, "span_name"), k_id = str(b, "span_id"),
          k_parent = str(b, "span_parent_id");
  int64_t span_str[NSPANS];
  for (size_t i = 0; i < NSPANS; i++)
    span_str[i] = str(b, span_names[i]);
  for (size_t i = 0; i < NLOCS; i++) {
    snprintf(b->names[i], sizeof b->names[i], "fn_%zu", i);
    perftools__profiles__function__init(&b->fn[i]);
    b->fn[i].id = i + 1;
    b->fn[i].name = str(b, b->names[i]);
    b->fnp[i] = &b->fn[i];
    perftools__profiles__location__init(&b->loc[i]);
    b->loc[i].id = i + 1;
    b->loc[i].address = 0x1000 + 16 * i;
    size_t nl = i == 7 && inlined ? inlined : 1;
    for (size_t j = 0; j < nl; j++) {
      perftools__profiles__line__init(&b->line[i][j]);
      b->line[i][j].function_id = (i + j) % NLOCS + 1;
      b->line[i][j].line = (int64_t)(i + j);
      b->linep[i][j] = &b->line[i][j];
    }
    b->loc[i].line = b->linep[i];
    b->loc[i].n_line = nl;
    b->locp[i] = &b->loc[i];
  }
  p->function = b->fnp;
  p->n_function = NLOCS;
  p->location = b->locp;
  p->n_location = NLOCS;
  for (size_t i = 0; i < NSAMPLES; i++) {
    Perftools__Profiles__Sample *s = &b->smp[i];
    perftools__profiles__sample__init(s);
    s->n_location_id = 1 + i % 9;
    for (size_t d = 0; d < s->n_location_id; d++)
      b->locids[i][d] = (i * 7 + d * 13) % NLOCS + 1;
    s->location_id = b->locids[i];
    for (size_t t = 0; t < NTYPES; t++)
      b->vals[i][t] = (int64_t)(i * (t + 1) % 1000);
    s->value = b->vals[i];
    s->n_value = NTYPES;
    s->label = b->labp[i];
    if (i % 10 != 0) {
      size_t sp = i % NSPANS;
      for (size_t j = 0; j < 3; j++) {
        perftools__profiles__label__init(&b->lab[i][j]);
        b->labp[i][j] = &b->lab[i][j];
      }
      b->lab[i][0].key = k_name;
      b->lab[i][0].str = span_str[sp];
      b->lab[i][1].key = k_id;
      b->lab[i][1].num = (int64_t)sp + 1;
      b->lab[i][2].key = k_parent;
      b->lab[i][2].num = sp ? 1 : 0;
      s->n_label = 3;
    }
    b->smpp[i] = s;
  }
  p->sample = b->smpp;
  p->n_sample = NSAMPLES;
  return b;
}

static uint8_t *pack(struct big *b, size_t *len)
{
  *len = perftools__profiles__profile__get_packed_size(&b->prof);
  uint8_t *buf = malloc(*len);
  assert_non_null(buf);
  perftools__profiles__profile__pack(&b->prof, buf);
  return buf;
}

static struct culpert__profile *load_opts(const uint8_t *buf, size_t len,
                                          const struct culpert__load_opts *o)
{
  struct culpert__profile *p = NULL;
  char err[512] = "";
  if (culpert__profile_load_buffer_with(buf, len, "w.pb", o, &p, err, sizeof err))
    fail_msg("load failed: %s", err);
  return p;
}

/* The two models are the same; stacks only for samples `keep` accepts
 * (NULL: every sample). */
static void assert_same(const struct culpert__profile *want, const struct culpert__profile *got,
                        bool (*keep)(const struct culpert__sample *, const char *),
                        const char *span)
{
  assert_int_equal(got->nsamples, want->nsamples);
  assert_int_equal(got->nframes, want->nframes);
  assert_int_equal(got->total_bytes, want->total_bytes);
  assert_int_equal(got->total_objects, want->total_objects);
  assert_int_equal(got->total_inuse_bytes, want->total_inuse_bytes);
  assert_int_equal(got->total_inuse_objects, want->total_inuse_objects);
  assert_int_equal(got->total_samples, want->total_samples);
  for (size_t i = 0; i < want->nsamples; i++) {
    const struct culpert__sample *w = &want->samples[i], *g = &got->samples[i];
    if (!keep || keep(w, span)) {
      assert_int_equal(g->nframes, w->nframes);
      assert_memory_equal(g->frames, w->frames, w->nframes * sizeof *w->frames);
    } else {
      assert_int_equal(g->nframes, 0);
    }
    if (w->span_name)
      assert_string_equal(g->span_name, w->span_name);
    else
      assert_null(g->span_name);
    assert_int_equal(g->span_id, w->span_id);
    assert_int_equal(g->span_parent_id, w->span_parent_id);
    assert_int_equal(g->bytes, w->bytes);
    assert_int_equal(g->objects, w->objects);
    assert_int_equal(g->inuse_bytes, w->inuse_bytes);
    assert_int_equal(g->inuse_objects, w->inuse_objects);
    assert_int_equal(g->samples, w->samples);
  }
}

static bool never(const struct culpert__sample *s, const char *span)
{
  (void)s;
  (void)span;
  return false;
}

static bool in_span(const struct culpert__sample *s, const char *span)
{
  return span ? s->span_name && strcmp(s->span_name, span) == 0 : s->span_name == NULL;
}

static const unsigned thread_counts[] = {2, 3, 4, 8, 0};

static void check_workers(size_t inlined)
{
  struct big *b = make_big(inlined);
  size_t len;
  uint8_t *buf = pack(b, &len);
  struct culpert__load_opts one = {.threads = 1};
  struct culpert__profile *want = load_opts(buf, len, &one);
  assert_int_equal(want->nsamples, NSAMPLES);
  assert_int_equal(want->nframes, NLOCS + (inlined ? inlined - 1 : 0));
  for (size_t t = 0; t < sizeof thread_counts / sizeof thread_counts[0]; t++) {
    struct culpert__load_opts o = {.threads = thread_counts[t]};
    struct culpert__profile *got = load_opts(buf, len, &o);
    assert_same(want, got, NULL, NULL);
    culpert__profile_free(got);

    o.stacks = CULPERT_STACKS_NONE;
    got = load_opts(buf, len, &o);
    assert_same(want, got, never, NULL);
    culpert__profile_free(got);

    o.stacks = CULPERT_STACKS_OF_SPAN;
    for (size_t sp = 0; sp <= NSPANS; sp++) {
      o.span = sp < NSPANS ? span_names[sp] : NULL;
      got = load_opts(buf, len, &o);
      assert_same(want, got, in_span, o.span);
      culpert__profile_free(got);
    }
  }
  culpert__profile_free(want);
  free(buf);
  free(b);
}

static void test_profile_workers_same_model(void **state)
{
  (void)state;
  check_workers(0);
}

/* Inlined frames: one worker whatever is asked, same model. */
static void test_profile_workers_same_model_inlined(void **state)
{
  (void)state;
  check_workers(3);
}

/* Damage sample `at` in one of several ways. */
enum damage { BAD_LOCATION, BAD_LABEL_STRING, VALUE_COUNT, NDAMAGE };

static void damage(struct big *b, size_t at, enum damage d)
{
  Perftools__Profiles__Sample *s = &b->smp[at];
  switch (d) {
  case BAD_LOCATION:
    b->locids[at][0] = 1000 + at; /* no such location */
    break;
  case BAD_LABEL_STRING:
    perftools__profiles__label__init(&b->lab[at][0]);
    b->labp[at][0] = &b->lab[at][0];
    b->lab[at][0].key = 1;
    b->lab[at][0].str = 500 + (int64_t)at; /* past the string table */
    if (s->n_label == 0)
      s->n_label = 1;
    break;
  default:
    s->n_value = NTYPES - 1;
    break;
  }
}

/*
 * For one or two damaged samples anywhere (first, last, either side of
 * worker boundaries), every worker count and every stacks option gives the
 * message of the first damaged sample.
 */
static void test_profile_workers_first_error(void **state)
{
  (void)state;
  /* Workers start at multiples of 64 samples near k * NSAMPLES / workers:
   * 320 (8 workers), 1472 (2, 4, 8), 2240 (4, 8). */
  static const size_t spots[] = {0, 319, 320, 321, 1471, 1472, 1473, 2239, 2240, NSAMPLES - 1};
  size_t nspots = sizeof spots / sizeof spots[0];
  for (size_t x = 0; x < nspots; x++) {
    for (size_t y = x; y < nspots; y++) {
      enum damage dx = (enum damage)((x + y) % NDAMAGE), dy = (enum damage)(y % NDAMAGE);
      struct big *b = make_big(0);
      damage(b, spots[y], dy);
      damage(b, spots[x], dx);
      size_t len;
      uint8_t *buf = pack(b, &len);
      char want[512] = "", got[512];
      struct culpert__profile *p = NULL;
      struct culpert__load_opts one = {.threads = 1};
      assert_true(culpert__profile_load_buffer_with(buf, len, "w.pb", &one, &p, want, sizeof want) <
                  0);
      assert_null(p);
      char sample_no[32];
      snprintf(sample_no, sizeof sample_no, "sample %zu ", spots[x] + 1);
      if (dx != BAD_LABEL_STRING && !strstr(want, sample_no))
        fail_msg("damage %d at %zu: message '%s'", (int)dx, spots[x], want);
      for (size_t t = 0; t < sizeof thread_counts / sizeof thread_counts[0]; t++) {
        for (int st = CULPERT_STACKS_ALL; st <= CULPERT_STACKS_OF_SPAN; st++) {
          struct culpert__load_opts o = {
              .threads = thread_counts[t], .stacks = (enum culpert__stacks)st, .span = "c"};
          got[0] = '\0';
          int rc = culpert__profile_load_buffer_with(buf, len, "w.pb", &o, &p, got, sizeof got);
          assert_true(rc < 0);
          assert_null(p);
          assert_string_equal(got, want);
        }
      }
      free(buf);
      free(b);
    }
  }
}

/* Totals are exact sums clamped to int64, whatever the worker count. */
static void test_profile_workers_totals_clamped_once(void **state)
{
  (void)state;
  struct big *b = make_big(0);
  /* alloc_space: INT64_MAX early, INT64_MAX late, -INT64_MAX last. */
  for (size_t i = 0; i < NSAMPLES; i++)
    b->vals[i][0] = b->vals[i][1] = b->vals[i][3] = 0;
  b->vals[1][0] = INT64_MAX; /* alloc_objects: one past the range */
  b->vals[2999][0] = 1;
  b->vals[10][1] = INT64_MAX;
  b->vals[2000][1] = INT64_MAX;
  b->vals[NSAMPLES - 1][1] = -INT64_MAX;
  b->vals[5][3] = INT64_MIN; /* inuse_space: below the range */
  b->vals[6][3] = -1;
  size_t len;
  uint8_t *buf = pack(b, &len);
  for (size_t t = 0; t < sizeof thread_counts / sizeof thread_counts[0]; t++) {
    struct culpert__load_opts o = {.threads = thread_counts[t]};
    struct culpert__profile *p = load_opts(buf, len, &o);
    assert_int_equal(p->total_bytes, INT64_MAX);
    assert_int_equal(p->total_objects, INT64_MAX);
    assert_true(p->total_inuse_bytes == INT64_MIN);
    culpert__profile_free(p);
  }
  free(buf);
  free(b);
}

/*
 * The header is read in the same walk that checks the wire structure: a
 * broken structure anywhere is still reported before an error inside an
 * earlier field, and the field's error when the structure is sound.
 */
static void test_profile_workers_wire_error_before_field_error(void **state)
{
  (void)state;
  static const uint8_t bad_location_then_group[] = {0x32, 0x00, 0x22, 0x02, 0xff, 0xff, 0x0b};
  static const uint8_t bad_location_only[] = {0x32, 0x00, 0x22, 0x02, 0xff, 0xff, 0x32, 0x00};
  static const uint8_t bad_location_then_bad_comments[] = {0x22, 0x02, 0xff, 0xff,
                                                           0x6a, 0x02, 0xff, 0xff};
  static const struct {
    const uint8_t *data;
    size_t len;
    const char *want;
  } cases[] = {
      {bad_location_then_group, sizeof bad_location_then_group,
       "w.pb: not a pprof profile (protobuf decoding failed)"},
      {bad_location_only, sizeof bad_location_only,
       "w.pb: not a pprof profile (protobuf decoding failed in a location)"},
      {bad_location_then_bad_comments, sizeof bad_location_then_bad_comments,
       "w.pb: not a pprof profile (protobuf decoding failed)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    for (size_t t = 0; t < sizeof thread_counts / sizeof thread_counts[0]; t++) {
      struct culpert__load_opts o = {.threads = thread_counts[t]};
      struct culpert__profile *p = NULL;
      char err[512] = "";
      assert_int_equal(culpert__profile_load_buffer_with(cases[i].data, cases[i].len, "w.pb", &o,
                                                         &p, err, sizeof err),
                       -EINVAL);
      assert_null(p);
      assert_string_equal(err, cases[i].want);
    }
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_profile_workers_same_model),
      cmocka_unit_test(test_profile_workers_same_model_inlined),
      cmocka_unit_test(test_profile_workers_first_error),
      cmocka_unit_test(test_profile_workers_totals_clamped_once),
      cmocka_unit_test(test_profile_workers_wire_error_before_field_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
