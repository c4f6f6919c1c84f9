/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_writer.c: culpert__writer_encode against profile-format.md.
 *
 * Builds a snapshot by hand, encodes it, then reads it back with two
 * independent decoders: protobuf-c (generated from proto/profile.proto) for
 * field-level checks, and `go tool pprof`, the reference reader, for "pprof
 * accepts this file and shows the labels and names". Stacks use the
 * addresses of real functions of this test binary so symbolization has
 * known answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "symcache.h"
#include "writer.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Sample Sample;

/* Functions whose addresses make the stacks: writer_fixture_root() calls
 * middle, which calls leaf, and each records its real return address, so
 * the stacks hold the addresses an unwinder would report. noinline and
 * some body so each is a few dozen bytes long. */
static volatile unsigned sink;
static uintptr_t return_into_middle; /* recorded by leaf */
static uintptr_t return_into_root;   /* recorded by middle */
static int root_call_line;           /* the line of root's call to middle */

enum { FIXTURE_LEAF_LINE = __LINE__ + 1 };
__attribute__((noinline)) static void writer_fixture_leaf(void)
{
  return_into_middle = (uintptr_t)__builtin_return_address(0);
  for (int i = 0; i < 8; i++)
    sink += (unsigned)i * sink + 3;
}

__attribute__((noinline)) static void writer_fixture_middle(void)
{
  return_into_root = (uintptr_t)__builtin_return_address(0);
  writer_fixture_leaf();
  for (int i = 0; i < 8; i++)
    sink ^= (unsigned)i + sink * 7;
}

__attribute__((noinline)) static void writer_fixture_root(void)
{
  root_call_line = __LINE__ + 1;
  writer_fixture_middle();
  for (int i = 0; i < 8; i++)
    sink -= (unsigned)i * 5 + sink;
}

/* An inlined call at a known line: writer_fixture_inlined() calls the
 * helper, which gcc inlines (always_inline beats -fno-inline), and the
 * helper calls leaf, recording a return address inside the inlined code. */
static uintptr_t return_into_helper;
static int helper_call_line, inlined_call_line;

__attribute__((noinline)) static void writer_fixture_record(void)
{
  return_into_helper = (uintptr_t)__builtin_return_address(0);
  sink++;
}

static inline __attribute__((always_inline)) void writer_fixture_helper(void)
{
  helper_call_line = __LINE__ + 1;
  writer_fixture_record();
  sink++;
}

__attribute__((noinline)) static void writer_fixture_inlined(void)
{
  inlined_call_line = __LINE__ + 1;
  writer_fixture_helper();
  sink++;
}

/* Group setup: runs the fixture chains once so the return addresses are set. */
static int record_return_addresses(void **state)
{
  (void)state;
  writer_fixture_root();
  writer_fixture_inlined();
  return return_into_middle && return_into_root && return_into_helper ? 0 : -1;
}

/* ---------------------------------------------------------------------- */

static unsigned char *gunzip(const unsigned char *in, size_t inlen, size_t *outlen)
{
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
  size_t cap = 1 << 20;
  unsigned char *out = malloc(cap);
  assert_non_null(out);
  zs.next_in = (unsigned char *)in;
  zs.avail_in = (uInt)inlen;
  zs.next_out = out;
  zs.avail_out = (uInt)cap;
  assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
  *outlen = zs.total_out;
  inflateEnd(&zs);
  return out;
}

static Profile *decode(const unsigned char *gz, size_t len)
{
  size_t rawlen;
  unsigned char *raw = gunzip(gz, len, &rawlen);
  Profile *pr = perftools__profiles__profile__unpack(NULL, rawlen, raw);
  free(raw);
  assert_non_null(pr);
  return pr;
}

static Profile *encode_decode(const struct culpert__wprofile *p)
{
  unsigned char *gz = NULL;
  size_t len = 0;
  assert_int_equal(culpert__writer_encode(p, &gz, &len), 0);
  assert_non_null(gz);
  assert_true(len > 18);
  assert_int_equal(gz[0], 0x1f); /* gzip magic */
  assert_int_equal(gz[1], 0x8b);
  Profile *pr = decode(gz, len);
  free(gz);
  return pr;
}

static const char *str(const Profile *pr, int64_t i)
{
  assert_true(i >= 0 && (size_t)i < pr->n_string_table);
  return pr->string_table[i];
}

/* Value of label `key` on sample s: string in *sv or number in *nv.
 * Returns 0 when the sample has no such label. */
static int label(const Profile *pr, const Sample *s, const char *key, const char **sv, int64_t *nv)
{
  for (size_t i = 0; i < s->n_label; i++) {
    if (strcmp(str(pr, s->label[i]->key), key) != 0)
      continue;
    if (sv)
      *sv = str(pr, s->label[i]->str);
    if (nv)
      *nv = s->label[i]->num;
    return 1;
  }
  return 0;
}

static const Perftools__Profiles__Location *location(const Profile *pr, uint64_t id)
{
  for (size_t i = 0; i < pr->n_location; i++)
    if (pr->location[i]->id == id)
      return pr->location[i];
  fail_msg("location %llu does not resolve", (unsigned long long)id);
  return NULL;
}

static const Perftools__Profiles__Function *function(const Profile *pr, uint64_t id)
{
  for (size_t i = 0; i < pr->n_function; i++)
    if (pr->function[i]->id == id)
      return pr->function[i];
  fail_msg("function %llu does not resolve", (unsigned long long)id);
  return NULL;
}

static const Perftools__Profiles__Mapping *mapping(const Profile *pr, uint64_t id)
{
  for (size_t i = 0; i < pr->n_mapping; i++)
    if (pr->mapping[i]->id == id)
      return pr->mapping[i];
  fail_msg("mapping %llu does not resolve", (unsigned long long)id);
  return NULL;
}

/* Function name of the first line of location `id`. */
static const char *location_function(const Profile *pr, uint64_t id)
{
  const Perftools__Profiles__Location *l = location(pr, id);
  assert_true(l->n_line >= 1);
  return str(pr, function(pr, l->line[0]->function_id)->name);
}

/* ---------------------------------------------------------------------- */
/* The fixture snapshot                                                    */

/* Span nodes: two instances each of handle_request and
 * handle_request -> parse (same path, one id), and outer -> middle -> inner
 * where only inner has samples. */
static const struct culpert__wspan fixture_spans[] = {
    {"", 0},               /* 0: unused */
    {"handle_request", 0}, /* 1 */
    {"parse", 1},          /* 2 */
    {"handle_request", 0}, /* 3: same path as 1 */
    {"parse", 3},          /* 4: same path as 2 */
    {"outer", 0},          /* 5: no samples */
    {"middle", 5},         /* 6: no samples */
    {"inner", 6},          /* 7 */
    {"parse", 5},          /* 8: different path from 2 */
};

static uintptr_t ips_full[3];
static uintptr_t ips_short[2];
static const uintptr_t ips_unknown[2] = {0x10, 0x21};

static const char *const fixture_comments[] = {
    "culpert.version=0.1.0", "zz.user=last", "culpert.dropped_samples=0", "app=demo",
    "culpert.rate=524288",
};

static struct culpert__wsample fixture_samples[5];

static struct culpert__wprofile fixture(void)
{
  /* A leaf ip inside the leaf, then real return addresses. */
  ips_full[0] = (uintptr_t)writer_fixture_leaf + 4;
  ips_full[1] = return_into_middle;
  ips_full[2] = return_into_root;
  ips_short[0] = (uintptr_t)writer_fixture_middle + 4;
  ips_short[1] = return_into_root;

  fixture_samples[0] = (struct culpert__wsample){ips_full, 3, 2, 2.4, 1000.6, 1.5, 10.49, 3};
  fixture_samples[1] = (struct culpert__wsample){ips_full, 3, 4, 1.0, 64.0, 0.0, 0.0, 1};
  fixture_samples[2] = (struct culpert__wsample){ips_short, 2, 0, 5.0, 500.0, 5.0, 500.0, 5};
  fixture_samples[3] = (struct culpert__wsample){ips_short, 2, 7, 1.0, 32.0, 1.0, 32.0, 1};
  fixture_samples[4] = (struct culpert__wsample){ips_unknown, 2, 8, 1.0, 8.0, 0.0, 0.0, 1};
  return (struct culpert__wprofile){
      .samples = fixture_samples,
      .nsamples = 5,
      .spans = fixture_spans,
      .nspans = sizeof fixture_spans / sizeof fixture_spans[0],
      .rate = 524288,
      .time_nanos = 1700000000123456789LL,
      .duration_nanos = 2500000000LL,
      .comments = fixture_comments,
      .ncomments = sizeof fixture_comments / sizeof fixture_comments[0],
  };
}

/* ---------------------------------------------------------------------- */

static void test_writer_header_fields(void **state)
{
  (void)state;
  struct culpert__wprofile p = fixture();
  Profile *pr = encode_decode(&p);

  assert_true(pr->n_string_table > 0);
  assert_string_equal(pr->string_table[0], "");
  static const char *const types[][2] = {{"alloc_objects", "count"},
                                         {"alloc_space", "bytes"},
                                         {"inuse_objects", "count"},
                                         {"inuse_space", "bytes"},
                                         {"samples", "count"}};
  assert_int_equal(pr->n_sample_type, 5);
  for (size_t i = 0; i < 5; i++) {
    assert_string_equal(str(pr, pr->sample_type[i]->type), types[i][0]);
    assert_string_equal(str(pr, pr->sample_type[i]->unit), types[i][1]);
  }
  assert_string_equal(str(pr, pr->default_sample_type), "alloc_space");
  assert_non_null(pr->period_type);
  assert_string_equal(str(pr, pr->period_type->type), "space");
  assert_string_equal(str(pr, pr->period_type->unit), "bytes");
  assert_int_equal(pr->period, 524288);
  assert_int_equal(pr->time_nanos, 1700000000123456789LL);
  assert_int_equal(pr->duration_nanos, 2500000000LL);

  /* Strings are deduplicated. */
  for (size_t i = 0; i < pr->n_string_table; i++)
    for (size_t j = i + 1; j < pr->n_string_table; j++)
      assert_string_not_equal(pr->string_table[i], pr->string_table[j]);
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

static void test_writer_comments_sorted_by_key(void **state)
{
  (void)state;
  struct culpert__wprofile p = fixture();
  Profile *pr = encode_decode(&p);
  static const char *const want[] = {"app=demo", "culpert.dropped_samples=0", "culpert.rate=524288",
                                     "culpert.version=0.1.0", "zz.user=last"};
  assert_int_equal(pr->n_comment, 5);
  for (size_t i = 0; i < 5; i++)
    assert_string_equal(str(pr, pr->comment[i]), want[i]);
  perftools__profiles__profile__free_unpacked(pr, NULL);

  /* By key first: a key that another one starts with comes before it,
   * though '.' and '-' sort before '='; the same key, by value. */
  static const char *const mixed[] = {"b=1", "a.b=2", "a=3", "a-b=4", "a=0"};
  static const char *const by_key[] = {"a=0", "a=3", "a-b=4", "a.b=2", "b=1"};
  p.comments = mixed;
  p.ncomments = sizeof mixed / sizeof mixed[0];
  pr = encode_decode(&p);
  assert_int_equal(pr->n_comment, 5);
  for (size_t i = 0; i < 5; i++)
    assert_string_equal(str(pr, pr->comment[i]), by_key[i]);
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

static void test_writer_ids_unique_and_resolvable(void **state)
{
  (void)state;
  struct culpert__wprofile p = fixture();
  Profile *pr = encode_decode(&p);

  for (size_t i = 0; i < pr->n_mapping; i++) {
    assert_true(pr->mapping[i]->id != 0);
    for (size_t j = i + 1; j < pr->n_mapping; j++)
      assert_true(pr->mapping[i]->id != pr->mapping[j]->id);
  }
  for (size_t i = 0; i < pr->n_location; i++) {
    const Perftools__Profiles__Location *l = pr->location[i];
    assert_true(l->id != 0);
    for (size_t j = i + 1; j < pr->n_location; j++)
      assert_true(l->id != pr->location[j]->id);
    if (l->mapping_id)
      mapping(pr, l->mapping_id);
    assert_int_equal(l->n_line, 1);
    function(pr, l->line[0]->function_id);
  }
  for (size_t i = 0; i < pr->n_function; i++) {
    assert_true(pr->function[i]->id != 0);
    for (size_t j = i + 1; j < pr->n_function; j++)
      assert_true(pr->function[i]->id != pr->function[j]->id);
  }
  for (size_t i = 0; i < pr->n_sample; i++) {
    assert_int_equal(pr->sample[i]->n_value, pr->n_sample_type);
    for (size_t k = 0; k < pr->sample[i]->n_location_id; k++)
      location(pr, pr->sample[i]->location_id[k]);
  }
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

static void test_writer_values_rounded_samples_raw(void **state)
{
  (void)state;
  struct culpert__wprofile p = fixture();
  Profile *pr = encode_decode(&p);
  assert_true(pr->n_sample >= 5);
  /* Real samples come first, in input order. */
  const int64_t *v = pr->sample[0]->value;
  assert_int_equal(v[0], 2);    /* 2.4 */
  assert_int_equal(v[1], 1001); /* 1000.6 */
  assert_int_equal(v[2], 2);    /* 1.5 rounds away from zero */
  assert_int_equal(v[3], 10);   /* 10.49 */
  assert_int_equal(v[4], 3);
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

static void test_writer_span_labels_per_path(void **state)
{
  (void)state;
  struct culpert__wprofile p = fixture();
  Profile *pr = encode_decode(&p);
  const char *name;
  int64_t id0, id1, parent0, parent1, id4;

  /* Nodes 2 and 4 are the same path handle_request -> parse: one id. */
  assert_true(label(pr, pr->sample[0], "span_name", &name, NULL));
  assert_string_equal(name, "parse");
  assert_true(label(pr, pr->sample[0], "span_id", NULL, &id0));
  assert_true(label(pr, pr->sample[1], "span_id", NULL, &id1));
  assert_true(id0 >= 1);
  assert_int_equal(id0, id1);
  assert_true(label(pr, pr->sample[0], "span_parent_id", NULL, &parent0));
  assert_true(label(pr, pr->sample[1], "span_parent_id", NULL, &parent1));
  assert_int_equal(parent0, parent1);
  assert_true(parent0 != id0);

  /* Outside every span: no span labels at all. */
  assert_int_equal(pr->sample[2]->n_label, 0);

  /* outer -> parse is a different path from handle_request -> parse. */
  assert_true(label(pr, pr->sample[4], "span_name", &name, NULL));
  assert_string_equal(name, "parse");
  assert_true(label(pr, pr->sample[4], "span_id", NULL, &id4));
  assert_true(id4 != id0);
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

/* go tool pprof drops samples whose values are all 0 when it merges, so
 * these are for culpert's own reader and other tools.
 * Finds the sample whose span_id is `id`, with no locations and all values
 * 0; fails unless there is exactly one. */
static const Sample *synthetic_sample(const Profile *pr, int64_t id)
{
  const Sample *found = NULL;
  for (size_t i = 0; i < pr->n_sample; i++) {
    int64_t sid;
    if (!label(pr, pr->sample[i], "span_id", NULL, &sid) || sid != id)
      continue;
    assert_null(found);
    found = pr->sample[i];
  }
  assert_non_null(found);
  assert_int_equal(found->n_location_id, 0);
  for (size_t k = 0; k < found->n_value; k++)
    assert_int_equal(found->value[k], 0);
  return found;
}

static void test_writer_synthetic_ancestor_samples(void **state)
{
  (void)state;
  struct culpert__wprofile p = fixture();
  Profile *pr = encode_decode(&p);
  const char *name;
  int64_t inner_parent, middle_parent, handle_id, parse_parent;

  /* inner (sample 3) -> middle -> outer, neither with samples of its own. */
  assert_true(label(pr, pr->sample[3], "span_name", &name, NULL));
  assert_string_equal(name, "inner");
  assert_true(label(pr, pr->sample[3], "span_parent_id", NULL, &inner_parent));
  const Sample *middle = synthetic_sample(pr, inner_parent);
  assert_true(label(pr, middle, "span_name", &name, NULL));
  assert_string_equal(name, "middle");
  assert_true(label(pr, middle, "span_parent_id", NULL, &middle_parent));
  const Sample *outer = synthetic_sample(pr, middle_parent);
  assert_true(label(pr, outer, "span_name", &name, NULL));
  assert_string_equal(name, "outer");
  assert_false(label(pr, outer, "span_parent_id", NULL, NULL));

  /* handle_request has no samples either: one synthetic sample for it. */
  assert_true(label(pr, pr->sample[0], "span_parent_id", NULL, &parse_parent));
  const Sample *handle = synthetic_sample(pr, parse_parent);
  assert_true(label(pr, handle, "span_name", &name, NULL));
  assert_string_equal(name, "handle_request");
  assert_true(label(pr, handle, "span_id", NULL, &handle_id));
  assert_false(label(pr, handle, "span_parent_id", NULL, NULL));

  /* 5 real samples + handle_request, outer, middle. */
  assert_int_equal(pr->n_sample, 8);
  perftools__profiles__profile__free_unpacked(pr, NULL);

  /* handle_request with a sample of its own: that one is its only sample,
   * no synthetic one beside it. */
  struct culpert__wsample more[6];
  memcpy(more, p.samples, 5 * sizeof more[0]);
  more[5] = (struct culpert__wsample){ips_short, 2, 1, 2.0, 200.0, 0.0, 0.0, 2};
  p.samples = more;
  p.nsamples = 6;
  pr = encode_decode(&p);
  int own = 0;
  for (size_t i = 0; i < pr->n_sample; i++) {
    int64_t sid;
    if (label(pr, pr->sample[i], "span_id", NULL, &sid) && sid == handle_id) {
      own++;
      assert_int_equal(pr->sample[i]->value[1], 200);
    }
  }
  assert_int_equal(own, 1);
  /* 6 real samples + outer, middle. */
  assert_int_equal(pr->n_sample, 8);
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

static void test_writer_locations_symbolized(void **state)
{
  (void)state;
  struct culpert__wprofile p = fixture();
  Profile *pr = encode_decode(&p);
  const Sample *s = pr->sample[0];

  assert_int_equal(s->n_location_id, 3);
  /* Leaf as given, callers at return address - 1. */
  assert_int_equal(location(pr, s->location_id[0])->address, ips_full[0]);
  assert_int_equal(location(pr, s->location_id[1])->address, ips_full[1] - 1);
  assert_int_equal(location(pr, s->location_id[2])->address, ips_full[2] - 1);
  assert_string_equal(location_function(pr, s->location_id[0]), "writer_fixture_leaf");
  assert_string_equal(location_function(pr, s->location_id[1]), "writer_fixture_middle");
  assert_string_equal(location_function(pr, s->location_id[2]), "writer_fixture_root");

  /* Same address in two samples: one location. */
  assert_int_equal(pr->sample[1]->location_id[0], s->location_id[0]);

  /* The main executable is mapping 1 and has function names. */
  const Perftools__Profiles__Location *leaf = location(pr, s->location_id[0]);
  assert_int_equal(leaf->mapping_id, 1);
  const Perftools__Profiles__Mapping *m = mapping(pr, 1);
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  assert_true(n > 0);
  exe[n] = '\0';
  assert_string_equal(str(pr, m->filename), exe);
  assert_true(m->has_functions);
  assert_true(m->memory_start <= leaf->address && leaf->address < m->memory_limit);
  assert_true(strlen(str(pr, m->build_id)) >= 2);
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

static void test_writer_unknown_address(void **state)
{
  (void)state;
  struct culpert__wprofile p = fixture();
  Profile *pr = encode_decode(&p);
  const Sample *s = pr->sample[4];
  assert_int_equal(s->n_location_id, 2);
  const Perftools__Profiles__Location *l = location(pr, s->location_id[0]);
  assert_int_equal(l->mapping_id, 0);
  assert_int_equal(l->address, 0x10);
  assert_int_equal(location(pr, s->location_id[1])->address, 0x20);
  assert_string_equal(location_function(pr, s->location_id[0]), "[unknown]");
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

static int ends_with(const char *s, const char *suffix)
{
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* File and line numbers from DWARF: the function's file and definition
 * line, the location's own line. */
static void test_writer_file_and_line(void **state)
{
  (void)state;
  uintptr_t ips[2] = {(uintptr_t)writer_fixture_leaf, return_into_root};
  struct culpert__wsample s = {ips, 2, 0, 1, 1, 1, 1, 1};
  struct culpert__wprofile p = {.samples = &s, .nsamples = 1};
  Profile *pr = encode_decode(&p);
  const Perftools__Profiles__Location *l = location(pr, pr->sample[0]->location_id[0]);
  const Perftools__Profiles__Function *f = function(pr, l->line[0]->function_id);
  assert_string_equal(str(pr, f->name), "writer_fixture_leaf");
  if (!ends_with(str(pr, f->filename), "tests/writer/test_writer.c"))
    fail_msg("filename %s", str(pr, f->filename));
  /* gcc puts a function's first row on its signature or its brace. */
  assert_in_range(f->start_line, FIXTURE_LEAF_LINE, FIXTURE_LEAF_LINE + 1);
  assert_int_equal(l->line[0]->line, f->start_line);
  /* The caller's return address - 1 is in its call instruction. */
  const Perftools__Profiles__Location *caller = location(pr, pr->sample[0]->location_id[1]);
  assert_string_equal(location_function(pr, caller->id), "writer_fixture_root");
  assert_int_equal(caller->line[0]->line, root_call_line);
  const Perftools__Profiles__Mapping *m = mapping(pr, 1);
  assert_true(m->has_filenames);
  assert_true(m->has_line_numbers);
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

/* CULPERT__WRITER_NAMES_ONLY: names, but no files, lines or inline frames. */
static void test_writer_names_only(void **state)
{
  (void)state;
  uintptr_t ips[2] = {(uintptr_t)writer_fixture_record, return_into_helper};
  struct culpert__wsample s = {ips, 2, 0, 1, 1, 1, 1, 1};
  struct culpert__wprofile p = {.samples = &s, .nsamples = 1, .flags = CULPERT__WRITER_NAMES_ONLY};
  Profile *pr = encode_decode(&p);
  const Perftools__Profiles__Location *l = location(pr, pr->sample[0]->location_id[1]);
  assert_int_equal(l->n_line, 1);
  assert_int_equal(l->line[0]->line, 0);
  const Perftools__Profiles__Function *f = function(pr, l->line[0]->function_id);
  assert_string_equal(str(pr, f->name), "writer_fixture_inlined");
  assert_int_equal(f->filename, 0);
  const Perftools__Profiles__Mapping *m = mapping(pr, l->mapping_id);
  assert_true(m->has_functions);
  assert_false(m->has_filenames);
  assert_false(m->has_line_numbers);
  assert_false(m->has_inline_frames);
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

/* An inlined call is one more Line of the location, innermost first, each
 * with its own function, file and line; the mapping says it has inline
 * frames. */
static void test_writer_inline_frames(void **state)
{
  (void)state;
  uintptr_t ips[2] = {(uintptr_t)writer_fixture_record, return_into_helper};
  struct culpert__wsample s = {ips, 2, 0, 1, 1, 1, 1, 1};
  struct culpert__wprofile p = {.samples = &s, .nsamples = 1};
  Profile *pr = encode_decode(&p);
  const Perftools__Profiles__Location *l = location(pr, pr->sample[0]->location_id[1]);
  assert_int_equal(l->n_line, 2);
  const Perftools__Profiles__Function *inner = function(pr, l->line[0]->function_id);
  const Perftools__Profiles__Function *outer = function(pr, l->line[1]->function_id);
  assert_string_equal(str(pr, inner->name), "writer_fixture_helper");
  assert_string_equal(str(pr, outer->name), "writer_fixture_inlined");
  assert_int_equal(l->line[0]->line, helper_call_line);
  assert_int_equal(l->line[1]->line, inlined_call_line);
  assert_true(ends_with(str(pr, inner->filename), "tests/writer/test_writer.c"));
  assert_true(ends_with(str(pr, outer->filename), "tests/writer/test_writer.c"));
  assert_true(mapping(pr, l->mapping_id)->has_inline_frames);
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

/* Code unloaded with dlclose before the snapshot: its frames are in no
 * mapping and get an "[unknown]" function; the rest of the stack keeps
 * its names. */
static void test_writer_dlclosed_code(void **state)
{
  (void)state;
  void *h = dlopen(CULPERT_FIXTURE_DWARF4, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    fail_msg("dlopen %s: %s", CULPERT_FIXTURE_DWARF4, dlerror());
  void *fn = dlsym(h, "fixture_dwarf4_work");
  assert_non_null(fn);
  uintptr_t ips[2] = {(uintptr_t)fn + 4, return_into_root};
  assert_int_equal(dlclose(h), 0);

  struct culpert__wsample s = {ips, 2, 0, 1, 1, 1, 1, 1};
  struct culpert__wprofile p = {.samples = &s, .nsamples = 1};
  Profile *pr = encode_decode(&p);
  const Perftools__Profiles__Location *l = location(pr, pr->sample[0]->location_id[0]);
  if (l->mapping_id != 0) {
    perftools__profiles__profile__free_unpacked(pr, NULL);
    print_message("SKIPPED: dlclose kept the fixture loaded\n");
    skip();
  }
  assert_string_equal(location_function(pr, l->id), "[unknown]");
  assert_string_equal(location_function(pr, pr->sample[0]->location_id[1]), "writer_fixture_root");
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

/* Frames inside the writer's own shared object (libculpert.so) are dropped,
 * at the top of a stack and deeper in it (a wrapper such as dlclose's runs
 * the program's code). */
static void test_writer_drops_self_frames(void **state)
{
  (void)state;
  void *h = dlopen(CULPERT_FIXTURE_SELFSO, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    fail_msg("dlopen %s: %s", CULPERT_FIXTURE_SELFSO, dlerror());
  void *enc_addr = dlsym(h, "fixture_self_encode");
  void *self_addr = dlsym(h, "fixture_self_address");
  assert_non_null(enc_addr);
  assert_non_null(self_addr);
  int (*encode)(const struct culpert__wprofile *, unsigned char **, size_t *);
  uintptr_t (*address)(void);
  memcpy(&encode, &enc_addr, sizeof encode);
  memcpy(&address, &self_addr, sizeof address);
  uintptr_t self = address();

  uintptr_t top[3] = {self, self + 2, return_into_root};
  uintptr_t deep[2] = {(uintptr_t)writer_fixture_leaf + 4, self + 2};
  struct culpert__wsample s[2] = {{top, 3, 0, 1, 1, 1, 1, 1}, {deep, 2, 0, 1, 1, 1, 1, 1}};
  struct culpert__wprofile p = {.samples = s, .nsamples = 2};
  unsigned char *gz = NULL;
  size_t len = 0;
  assert_int_equal(encode(&p, &gz, &len), 0);
  Profile *pr = decode(gz, len);
  free(gz);
  assert_int_equal(pr->sample[0]->n_location_id, 1);
  assert_string_equal(location_function(pr, pr->sample[0]->location_id[0]), "writer_fixture_root");
  assert_int_equal(pr->sample[1]->n_location_id, 1);
  assert_string_equal(location_function(pr, pr->sample[1]->location_id[0]), "writer_fixture_leaf");
  perftools__profiles__profile__free_unpacked(pr, NULL);
  dlclose(h);
}

/* A libc function, to check shared-library mappings and names. */
static void test_writer_shared_library_names(void **state)
{
  (void)state;
  uintptr_t ips[2] = {(uintptr_t)&strtoul + 1, return_into_root};
  struct culpert__wsample s = {ips, 2, 0, 1, 1, 1, 1, 1};
  struct culpert__wprofile p = {.samples = &s, .nsamples = 1};
  Profile *pr = encode_decode(&p);
  const Perftools__Profiles__Location *l = location(pr, pr->sample[0]->location_id[0]);
  assert_true(l->mapping_id > 1);
  const Perftools__Profiles__Mapping *m = mapping(pr, l->mapping_id);
  assert_non_null(strstr(str(pr, m->filename), "libc.so"));
  assert_true(m->has_functions);
  const char *name = location_function(pr, l->id);
  assert_non_null(strstr(name, "strtoul"));
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

/* Frames where a process or a thread starts (libc's __libc_start_*,
 * start_thread, clone3; _start) keep their names but get no file or line,
 * whatever debug information libc has; the frames above them keep theirs. */
struct entry_stack {
  void *ips[64];
  int n;
};

static void __attribute__((noinline)) take_backtrace(struct entry_stack *st)
{
  st->n = backtrace(st->ips, 64);
}

static void *entry_thread(void *arg)
{
  take_backtrace(arg);
  return NULL;
}

static void check_entry_frames(const struct entry_stack *st, int *entries)
{
  assert_true(st->n > 2);
  uintptr_t ips[64];
  for (int i = 0; i < st->n; i++)
    ips[i] = (uintptr_t)st->ips[i];
  struct culpert__wsample s = {ips, (uint32_t)st->n, 0, 1, 1, 1, 1, 1};
  struct culpert__wprofile p = {.samples = &s, .nsamples = 1};
  Profile *pr = encode_decode(&p);
  static const char *const entry[] = {"__libc_start_main",
                                      "__libc_start_main_impl",
                                      "__libc_start_call_main",
                                      "start_thread",
                                      "clone3",
                                      "__clone3",
                                      "clone",
                                      "__clone",
                                      "_start"};
  int with_file = 0;
  for (size_t k = 0; k < pr->sample[0]->n_location_id; k++) {
    const Perftools__Profiles__Location *l = location(pr, pr->sample[0]->location_id[k]);
    const Perftools__Profiles__Function *f = function(pr, l->line[l->n_line - 1]->function_id);
    const char *name = str(pr, f->name);
    int is_entry = 0;
    for (size_t i = 0; i < sizeof entry / sizeof entry[0]; i++)
      is_entry |= strcmp(name, entry[i]) == 0;
    if (is_entry) {
      (*entries)++;
      assert_int_equal(l->n_line, 1);
      assert_int_equal(f->filename, 0);
      assert_int_equal(l->line[0]->line, 0);
    }
    if (strcmp(name, "take_backtrace") == 0 && ends_with(str(pr, f->filename), "test_writer.c"))
      with_file = 1;
  }
  assert_true(with_file);
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

static void test_writer_entry_points_without_lines(void **state)
{
  (void)state;
  struct entry_stack main_stack, thread_stack;
  int entries = 0;
  take_backtrace(&main_stack);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, entry_thread, &thread_stack), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  check_entry_frames(&main_stack, &entries);
  int below_main = entries;
  check_entry_frames(&thread_stack, &entries);
  assert_true(below_main >= 2);           /* __libc_start_call_main, __libc_start_main */
  assert_true(entries - below_main >= 1); /* start_thread */
}

/* Encode p and check the bytes are `want`'s. */
static void encode_same(const struct culpert__wprofile *p, const unsigned char *want, size_t len)
{
  unsigned char *got = NULL;
  size_t got_len;
  assert_int_equal(culpert__writer_encode(p, &got, &got_len), 0);
  assert_int_equal(got_len, len);
  assert_memory_equal(got, want, len);
  free(got);
}

/* Snapshots are repeated: a second call gives the same bytes, its
 * answers about addresses from the cache (symcache.c); with the cache
 * busy, or after an object was loaded, they are found again, the same. */
static void test_writer_repeatable(void **state)
{
  (void)state;
  struct culpert__wprofile p = fixture();
  unsigned char *a = NULL;
  size_t alen;
  assert_int_equal(culpert__writer_encode(&p, &a, &alen), 0);
  uint64_t hits = culpert__symcache_hits();
  encode_same(&p, a, alen);
  assert_true(culpert__symcache_hits() > hits);

  hits = culpert__symcache_hits();
  assert_true(culpert__symcache_begin()); /* held elsewhere */
  encode_same(&p, a, alen);
  assert_int_equal(culpert__symcache_hits(), hits);
  culpert__symcache_end();

  /* A load empties the cache: the next profile (which has one mapping
   * more) finds every answer again, the one after takes them from the
   * cache. */
  void *h = dlopen("libutil.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h != NULL) {
    unsigned char *b = NULL;
    size_t blen;
    assert_int_equal(culpert__writer_encode(&p, &b, &blen), 0);
    assert_int_equal(culpert__symcache_hits(), hits);
    encode_same(&p, b, blen);
    assert_true(culpert__symcache_hits() > hits);
    free(b);
  }
  free(a);
}

/* A mark goes into the gzip header's extra field as subfield "Cu", where
 * the collector reads it back to tell its own files (output.c), a run id
 * as "Cr" (culpert run), and the profile behind them reads as without. */
static void test_writer_gzip_mark(void **state)
{
  (void)state;
  static const char mark[] = "pid=7 start=99 pidns=4026531836 boot=x";
  const size_t n = sizeof mark - 1;
  uintptr_t ips[1] = {(uintptr_t)writer_fixture_leaf};
  struct culpert__wsample s = {ips, 1, 0, 1, 10, 1, 10, 1};
  struct culpert__wprofile p = {.samples = &s, .nsamples = 1, .mark = mark, .mark_len = n};
  unsigned char *gz = NULL;
  size_t len = 0;
  assert_int_equal(culpert__writer_encode(&p, &gz, &len), 0);
  assert_true(len > 16 + n);
  assert_int_equal(gz[3] & 4, 4);                /* FEXTRA */
  assert_int_equal(gz[10] | gz[11] << 8, 4 + n); /* XLEN */
  assert_memory_equal(gz + 12, "Cu", 2);
  assert_int_equal(gz[14] | gz[15] << 8, n);
  assert_memory_equal(gz + 16, mark, n);
  size_t found = 0;
  const unsigned char *m = culpert__gzmark_find(gz, len, "Cu", &found);
  assert_non_null(m);
  assert_int_equal(found, n);
  assert_null(culpert__gzmark_find(gz, len, "Cr", &found)); /* no run id given */
  Profile *pr = decode(gz, len);
  assert_int_equal(pr->n_sample, 1);
  assert_int_equal(pr->sample[0]->value[1], 10);
  perftools__profiles__profile__free_unpacked(pr, NULL);
  free(gz);
  /* a run id too: subfield "Cr" after the mark, and the profile the same */
  p.run = "0123456789abcdef";
  p.run_len = 16;
  assert_int_equal(culpert__writer_encode(&p, &gz, &len), 0);
  assert_int_equal(gz[10] | gz[11] << 8, 4 + n + 4 + 16);
  m = culpert__gzmark_find(gz, len, "Cr", &found);
  assert_non_null(m);
  assert_int_equal(found, 16);
  assert_memory_equal(m, "0123456789abcdef", 16);
  pr = decode(gz, len);
  assert_int_equal(pr->sample[0]->value[1], 10);
  perftools__profiles__profile__free_unpacked(pr, NULL);
  free(gz);
  /* without a mark, no extra field */
  p.mark = NULL;
  p.mark_len = 0;
  assert_int_equal(culpert__writer_encode(&p, &gz, &len), 0);
  assert_int_equal(gz[3] & 4, 0);
  free(gz);
}

static void test_writer_empty_profile(void **state)
{
  (void)state;
  struct culpert__wprofile p = {.rate = 0};
  Profile *pr = encode_decode(&p);
  assert_int_equal(pr->n_sample, 0);
  assert_int_equal(pr->n_sample_type, 5);
  assert_int_equal(pr->period, 0);
  assert_string_equal(pr->string_table[0], "");
  perftools__profiles__profile__free_unpacked(pr, NULL);
}

/* Hostile input: parent indices out of range and a parent cycle make
 * roots; non-finite and negative estimates become 0. */
static void test_writer_odd_input(void **state)
{
  (void)state;
  static const struct culpert__wspan spans[] = {{"", 0}, {"a", 2}, {"b", 1}, {"c", 99}};
  struct culpert__wsample s[3] = {
      {NULL, 0, 1, -1.0, 0.0 / 0.0, 1e300, 5, 1},
      {NULL, 0, 3, 1, 1, 1, 1, 1},
      {NULL, 0, 42, 1, 1, 1, 1, 1},
  };
  struct culpert__wprofile p = {.samples = s, .nsamples = 3, .spans = spans, .nspans = 4};
  Profile *pr = encode_decode(&p);
  assert_int_equal(pr->sample[0]->value[0], 0);
  assert_int_equal(pr->sample[0]->value[1], 0);
  assert_int_equal(pr->sample[0]->value[2], INT64_MAX);
  assert_false(label(pr, pr->sample[1], "span_parent_id", NULL, NULL));
  assert_int_equal(pr->sample[2]->n_label, 0);
  perftools__profiles__profile__free_unpacked(pr, NULL);

  unsigned char *out = (unsigned char *)1;
  size_t len = 1;
  assert_int_equal(culpert__writer_encode(NULL, &out, &len), -EINVAL);
  assert_null(out);
}

/* ---------------------------------------------------------------------- */
/* go tool pprof                                                           */

static int have_go(void)
{
  return system("go version >/dev/null 2>&1") == 0;
}

/* Runs `go tool pprof <args> <file>` offline with private caches and
 * returns its stdout (malloc'd). */
static char *run_pprof(const char *args, const char *file, int *status)
{
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "d=$(mktemp -d) && HOME=$d GOCACHE=$d/cache GOFLAGS= GOPROXY=off GOTOOLCHAIN=local "
           "PPROF_TMPDIR=$d go tool pprof %s %s 2>&1; rc=$?; rm -rf \"$d\"; exit $rc",
           args, file);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  size_t r;
  while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (cap - n < 2) {
      cap *= 2;
      buf = realloc(buf, cap);
      assert_non_null(buf);
    }
  }
  buf[n] = '\0';
  *status = pclose(f);
  return buf;
}

static void test_writer_go_pprof_reads_it(void **state)
{
  (void)state;
  if (!have_go()) {
    print_message("SKIPPED: go is not installed, go tool pprof checks not run\n");
    skip();
  }
  struct culpert__wprofile p = fixture();
  unsigned char *gz = NULL;
  size_t len;
  assert_int_equal(culpert__writer_encode(&p, &gz, &len), 0);
  char path[] = "/tmp/culpert-test-writer-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, gz, len), (ssize_t)len);
  close(fd);
  free(gz);

  int status;
  char *raw = run_pprof("-raw", path, &status);
  if (status != 0)
    fail_msg("go tool pprof -raw failed:\n%s", raw);
  assert_non_null(strstr(raw, "alloc_objects/count alloc_space/bytes[dflt] inuse_objects/count "
                              "inuse_space/bytes samples/count"));
  assert_non_null(strstr(raw, "PeriodType: space bytes"));
  assert_non_null(strstr(raw, "[unknown]"));
  assert_non_null(strstr(raw, "writer_fixture_leaf"));
  assert_non_null(strstr(raw, "writer_fixture_root"));
  assert_non_null(strstr(raw, "span_name:[parse]"));
  assert_non_null(strstr(raw, "span_name:[inner]"));
  assert_non_null(strstr(raw, "span_parent_id:["));
  assert_non_null(strstr(raw, "culpert.rate=524288"));
  free(raw);

  char *tags = run_pprof("-tags -sample_index=samples", path, &status);
  if (status != 0)
    fail_msg("go tool pprof -tags failed:\n%s", tags);
  assert_non_null(strstr(tags, "span_name"));
  assert_non_null(strstr(tags, "parse"));
  assert_non_null(strstr(tags, "inner"));
  assert_non_null(strstr(tags, "span_parent_id"));
  assert_non_null(strstr(tags, "span_id"));
  free(tags);
  unlink(path);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_writer_header_fields),
      cmocka_unit_test(test_writer_comments_sorted_by_key),
      cmocka_unit_test(test_writer_ids_unique_and_resolvable),
      cmocka_unit_test(test_writer_values_rounded_samples_raw),
      cmocka_unit_test(test_writer_span_labels_per_path),
      cmocka_unit_test(test_writer_synthetic_ancestor_samples),
      cmocka_unit_test(test_writer_locations_symbolized),
      cmocka_unit_test(test_writer_unknown_address),
      cmocka_unit_test(test_writer_drops_self_frames),
      cmocka_unit_test(test_writer_shared_library_names),
      cmocka_unit_test(test_writer_file_and_line),
      cmocka_unit_test(test_writer_entry_points_without_lines),
      cmocka_unit_test(test_writer_inline_frames),
      cmocka_unit_test(test_writer_names_only),
      cmocka_unit_test(test_writer_dlclosed_code),
      cmocka_unit_test(test_writer_repeatable),
      cmocka_unit_test(test_writer_gzip_mark),
      cmocka_unit_test(test_writer_empty_profile),
      cmocka_unit_test(test_writer_odd_input),
      cmocka_unit_test(test_writer_go_pprof_reads_it),
  };
  return cmocka_run_group_tests(tests, record_return_addresses, NULL);
}
