/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_profile: the loader's promises that the golden files cannot show
 * directly. Profiles are built here with protobuf-c so each test can shape
 * exactly the field it is about: inline frames (innermost first), function
 * name fallbacks, sparse location ids, values picked by name whatever their
 * position, concatenated gzip members, damaged gzip trailers, comments split
 * into props, metadata and notes, duplicate label key strings.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "profile.h"
#include "profile.pb-c.h"

/* ---- a tiny profile builder --------------------------------------------- */

#define MAXN 16

struct pbuild {
  Perftools__Profiles__Profile prof;
  char *strings[64];
  Perftools__Profiles__ValueType types[MAXN], *typep[MAXN], period_type;
  Perftools__Profiles__Function fn[MAXN], *fnp[MAXN];
  Perftools__Profiles__Location loc[MAXN], *locp[MAXN];
  Perftools__Profiles__Line line[MAXN][4], *linep[MAXN][4];
  Perftools__Profiles__Mapping map[MAXN], *mapp[MAXN];
  Perftools__Profiles__Sample smp[MAXN], *smpp[MAXN];
  Perftools__Profiles__Label lab[MAXN][4], *labp[MAXN][4];
  uint64_t locids[MAXN][8];
  int64_t vals[MAXN][8];
  int64_t comments[MAXN];
};

static int64_t str(struct pbuild *b, const char *s)
{
  for (size_t i = 0; i < b->prof.n_string_table; i++)
    if (strcmp(b->strings[i], s) == 0)
      return (int64_t)i;
  b->strings[b->prof.n_string_table] = (char *)s;
  return (int64_t)b->prof.n_string_table++;
}

/* A new string even if an equal one exists (duplicate table entries). */
static int64_t str_dup(struct pbuild *b, const char *s)
{
  b->strings[b->prof.n_string_table] = (char *)s;
  return (int64_t)b->prof.n_string_table++;
}

static void pb_init(struct pbuild *b)
{
  memset(b, 0, sizeof *b);
  perftools__profiles__profile__init(&b->prof);
  b->prof.string_table = b->strings;
  str(b, "");
  perftools__profiles__value_type__init(&b->period_type);
  b->period_type.type = str(b, "space");
  b->period_type.unit = str(b, "bytes");
  b->prof.period_type = &b->period_type;
  b->prof.period = 65536;
  b->prof.sample_type = b->typep;
  b->prof.function = b->fnp;
  b->prof.location = b->locp;
  b->prof.mapping = b->mapp;
  b->prof.sample = b->smpp;
  b->prof.comment = b->comments;
}

static void add_type(struct pbuild *b, const char *type, const char *unit)
{
  size_t i = b->prof.n_sample_type++;
  perftools__profiles__value_type__init(&b->types[i]);
  b->types[i].type = str(b, type);
  b->types[i].unit = str(b, unit);
  b->typep[i] = &b->types[i];
}

static uint64_t add_function(struct pbuild *b, uint64_t id, const char *name, const char *sys,
                             const char *file)
{
  size_t i = b->prof.n_function++;
  perftools__profiles__function__init(&b->fn[i]);
  b->fn[i].id = id;
  b->fn[i].name = str(b, name);
  b->fn[i].system_name = str(b, sys);
  b->fn[i].filename = str(b, file);
  b->fnp[i] = &b->fn[i];
  return id;
}

/* A location with `n` lines: funcs[0] innermost ... funcs[n-1] outermost. */
static void add_location(struct pbuild *b, uint64_t id, uint64_t addr, uint64_t mapping, size_t n,
                         const uint64_t *funcs)
{
  size_t i = b->prof.n_location++;
  perftools__profiles__location__init(&b->loc[i]);
  b->loc[i].id = id;
  b->loc[i].address = addr;
  b->loc[i].mapping_id = mapping;
  for (size_t j = 0; j < n; j++) {
    perftools__profiles__line__init(&b->line[i][j]);
    b->line[i][j].function_id = funcs[j];
    b->line[i][j].line = (int64_t)(10 * (j + 1));
    b->linep[i][j] = &b->line[i][j];
  }
  b->loc[i].line = b->linep[i];
  b->loc[i].n_line = n;
  b->locp[i] = &b->loc[i];
}

static void add_mapping(struct pbuild *b, uint64_t id, const char *file)
{
  size_t i = b->prof.n_mapping++;
  perftools__profiles__mapping__init(&b->map[i]);
  b->map[i].id = id;
  b->map[i].filename = str(b, file);
  b->mapp[i] = &b->map[i];
}

/* A sample with the given leaf-first location ids and values. */
static Perftools__Profiles__Sample *add_sample(struct pbuild *b, size_t nloc, const uint64_t *locs,
                                               size_t nval, const int64_t *vals)
{
  size_t i = b->prof.n_sample++;
  Perftools__Profiles__Sample *s = &b->smp[i];
  perftools__profiles__sample__init(s);
  if (nloc)
    memcpy(b->locids[i], locs, nloc * sizeof *locs);
  memcpy(b->vals[i], vals, nval * sizeof *vals);
  s->location_id = b->locids[i];
  s->n_location_id = nloc;
  s->value = b->vals[i];
  s->n_value = nval;
  s->label = b->labp[i];
  b->smpp[i] = s;
  return s;
}

static void add_label(struct pbuild *b, Perftools__Profiles__Sample *s, int64_t key, int64_t strv,
                      int64_t num)
{
  size_t i = (size_t)(s - b->smp), j = s->n_label++;
  perftools__profiles__label__init(&b->lab[i][j]);
  b->lab[i][j].key = key;
  b->lab[i][j].str = strv;
  b->lab[i][j].num = num;
  b->labp[i][j] = &b->lab[i][j];
}

static uint8_t *pack(struct pbuild *b, size_t *len)
{
  *len = perftools__profiles__profile__get_packed_size(&b->prof);
  uint8_t *buf = malloc(*len ? *len : 1);
  assert_non_null(buf);
  perftools__profiles__profile__pack(&b->prof, buf);
  return buf;
}

/* gzip `in` as one member into out (malloc'd). */
static uint8_t *gzip(const uint8_t *in, size_t len, size_t *outlen)
{
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  size_t cap = deflateBound(&zs, (uLong)len) + 64;
  uint8_t *out = malloc(cap);
  assert_non_null(out);
  zs.next_in = (Bytef *)(uintptr_t)in;
  zs.avail_in = (uInt)len;
  zs.next_out = out;
  zs.avail_out = (uInt)cap;
  assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
  *outlen = cap - zs.avail_out;
  deflateEnd(&zs);
  return out;
}

static struct culpert__profile *load(const uint8_t *buf, size_t len)
{
  struct culpert__profile *p = NULL;
  char err[512] = "";
  int rc = culpert__profile_load_buffer(buf, len, "t.pb", &p, err, sizeof err);
  if (rc)
    fail_msg("load failed: %s", err);
  return p;
}

static void culpert_types(struct pbuild *b)
{
  add_type(b, "alloc_objects", "count");
  add_type(b, "alloc_space", "bytes");
  add_type(b, "inuse_objects", "count");
  add_type(b, "inuse_space", "bytes");
  add_type(b, "samples", "count");
}

/* ---- tests --------------------------------------------------------------- */

/* An inlined location expands innermost first; a frame keeps its file,
 * line, address and mapping; a sample's frames follow its locations. */
static void test_profile_inline_frames_innermost_first(void **state)
{
  (void)state;
  struct pbuild b;
  pb_init(&b);
  culpert_types(&b);
  add_mapping(&b, 1, "/usr/bin/app");
  uint64_t inner = add_function(&b, 1, "inlined_helper", "", "helper.h");
  uint64_t outer = add_function(&b, 2, "caller", "", "caller.c");
  uint64_t main_fn = add_function(&b, 3, "main", "", "main.c");
  add_location(&b, 1, 0x1000, 1, 2, (uint64_t[]){inner, outer});
  add_location(&b, 2, 0x2000, 0, 1, (uint64_t[]){main_fn});
  add_sample(&b, 2, (uint64_t[]){1, 2}, 5, (int64_t[]){1, 100, 0, 0, 1});
  size_t len;
  uint8_t *buf = pack(&b, &len);
  struct culpert__profile *p = load(buf, len);

  assert_int_equal(p->nsamples, 1);
  const struct culpert__sample *s = &p->samples[0];
  assert_int_equal(s->nframes, 3);
  const char *want[] = {"inlined_helper", "caller", "main"};
  const char *files[] = {"helper.h", "caller.c", "main.c"};
  for (uint32_t i = 0; i < 3; i++) {
    const struct culpert__frame *f = &p->frames[s->frames[i]];
    assert_string_equal(f->function, want[i]);
    assert_string_equal(f->file, files[i]);
  }
  assert_int_equal(p->frames[s->frames[0]].line, 10);
  assert_int_equal(p->frames[s->frames[1]].line, 20);
  assert_int_equal(p->frames[s->frames[1]].address, 0x1000);
  assert_string_equal(p->frames[s->frames[1]].mapping, "/usr/bin/app");
  assert_null(p->frames[s->frames[2]].mapping);
  culpert__profile_free(p);
  free(buf);
}

/* name "" falls back to system_name, then to "0x<addr>"; a location
 * without lines is one address frame; no file is NULL. */
static void test_profile_function_name_fallbacks(void **state)
{
  (void)state;
  struct pbuild b;
  pb_init(&b);
  culpert_types(&b);
  uint64_t sys_only = add_function(&b, 1, "", "_Z3foov", "");
  uint64_t nothing = add_function(&b, 2, "", "", "");
  add_location(&b, 1, 0xabc, 0, 1, (uint64_t[]){sys_only});
  add_location(&b, 2, 0xdef, 0, 1, (uint64_t[]){nothing});
  add_location(&b, 3, 0x123, 0, 0, NULL);
  add_sample(&b, 3, (uint64_t[]){1, 2, 3}, 5, (int64_t[]){0, 1, 0, 0, 1});
  size_t len;
  uint8_t *buf = pack(&b, &len);
  struct culpert__profile *p = load(buf, len);
  const struct culpert__sample *s = &p->samples[0];
  assert_int_equal(s->nframes, 3);
  assert_string_equal(p->frames[s->frames[0]].function, "_Z3foov");
  assert_null(p->frames[s->frames[0]].file);
  assert_string_equal(p->frames[s->frames[1]].function, "0xdef");
  assert_string_equal(p->frames[s->frames[2]].function, "0x123");
  assert_int_equal(p->frames[s->frames[2]].line, 0);
  culpert__profile_free(p);
  free(buf);
}

/* Location ids need not be 1..n: sparse, out-of-order ids resolve. */
static void test_profile_sparse_location_ids(void **state)
{
  (void)state;
  struct pbuild b;
  pb_init(&b);
  culpert_types(&b);
  uint64_t f1 = add_function(&b, 900, "leaf", "", "");
  uint64_t f2 = add_function(&b, 7, "root", "", "");
  add_location(&b, 1000000007, 0x10, 0, 1, (uint64_t[]){f1});
  add_location(&b, 42, 0x20, 0, 1, (uint64_t[]){f2});
  add_sample(&b, 2, (uint64_t[]){1000000007, 42}, 5, (int64_t[]){0, 1, 0, 0, 1});
  size_t len;
  uint8_t *buf = pack(&b, &len);
  struct culpert__profile *p = load(buf, len);
  const struct culpert__sample *s = &p->samples[0];
  assert_string_equal(p->frames[s->frames[0]].function, "leaf");
  assert_string_equal(p->frames[s->frames[1]].function, "root");
  culpert__profile_free(p);
  free(buf);
}

/* Values are picked by type name, not position. */
static void test_profile_values_by_name(void **state)
{
  (void)state;
  struct pbuild b;
  pb_init(&b);
  add_type(&b, "samples", "count");
  add_type(&b, "inuse_space", "bytes");
  add_type(&b, "alloc_space", "bytes");
  add_type(&b, "inuse_objects", "count");
  add_type(&b, "alloc_objects", "count");
  add_sample(&b, 0, NULL, 5, (int64_t[]){3, 200, 1000, 2, 9});
  add_sample(&b, 0, NULL, 5, (int64_t[]){1, 0, 24, 0, 1});
  size_t len;
  uint8_t *buf = pack(&b, &len);
  struct culpert__profile *p = load(buf, len);
  assert_int_equal(p->producer, CULPERT_PRODUCER_CULPERT);
  assert_int_equal(p->samples[0].samples, 3);
  assert_int_equal(p->samples[0].inuse_bytes, 200);
  assert_int_equal(p->samples[0].bytes, 1000);
  assert_int_equal(p->samples[0].inuse_objects, 2);
  assert_int_equal(p->samples[0].objects, 9);
  assert_int_equal(p->total_bytes, 1024);
  assert_int_equal(p->total_samples, 4);
  assert_int_equal(p->rate, 65536);
  culpert__profile_free(p);
  free(buf);
}

/* The Rust culpert: allocations/count + space/bytes; no objects/in-use. */
static void test_profile_rust_producer(void **state)
{
  (void)state;
  struct pbuild b;
  pb_init(&b);
  add_type(&b, "space", "bytes");
  add_type(&b, "allocations", "count");
  add_sample(&b, 0, NULL, 2, (int64_t[]){4096, 2});
  size_t len;
  uint8_t *buf = pack(&b, &len);
  struct culpert__profile *p = load(buf, len);
  assert_int_equal(p->producer, CULPERT_PRODUCER_RUST);
  assert_false(p->has_inuse);
  assert_false(p->has_objects);
  assert_true(p->has_samples);
  assert_int_equal(p->samples[0].bytes, 4096);
  assert_int_equal(p->samples[0].samples, 2);
  culpert__profile_free(p);
  free(buf);
}

/* Concatenated gzip members are one profile (as gzip -d reads them). */
static void test_profile_concatenated_gzip_members(void **state)
{
  (void)state;
  struct pbuild b;
  pb_init(&b);
  culpert_types(&b);
  add_sample(&b, 0, NULL, 5, (int64_t[]){1, 10, 0, 0, 1});
  size_t len, half = 0, n1, n2;
  uint8_t *buf = pack(&b, &len);
  /* Split the protobuf bytes at a field boundary: the first sample type. */
  half = 2 + buf[1];
  uint8_t *g1 = gzip(buf, half, &n1), *g2 = gzip(buf + half, len - half, &n2);
  uint8_t *cat = malloc(n1 + n2);
  assert_non_null(cat);
  memcpy(cat, g1, n1);
  memcpy(cat + n1, g2, n2);
  struct culpert__profile *p = load(cat, n1 + n2);
  assert_int_equal(p->nsamples, 1);
  assert_int_equal(p->total_bytes, 10);
  culpert__profile_free(p);
  free(buf);
  free(g1);
  free(g2);
  free(cat);
}

/* A one-member gzip file that the whole-buffer path cannot take goes
 * through zlib: bytes after the member are refused (as Go's reader
 * refuses them), and a damaged trailer is named as zlib names it. */
static void test_profile_gzip_trailer_cases(void **state)
{
  (void)state;
  static const struct {
    const char *what;
    size_t trailer_byte; /* from the end of the member; 0: append junk */
    const char *err;     /* NULL: loads */
  } cases[] = {
      {"junk after the member", 0, "t.pb: 3 bytes after the end of the gzip data"},
      {"CRC damaged", 8, "t.pb: corrupt gzip data (incorrect data check)"},
      {"ISIZE changed", 4, "t.pb: corrupt gzip data (incorrect length check)"},
      {"ISIZE too small", 1, "t.pb: corrupt gzip data (incorrect length check)"},
  };
  struct pbuild b;
  pb_init(&b);
  culpert_types(&b);
  add_sample(&b, 0, NULL, 5, (int64_t[]){1, 10, 0, 0, 1});
  size_t len, glen;
  uint8_t *buf = pack(&b, &len);
  uint8_t *g = gzip(buf, len, &glen);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t *copy = malloc(glen + 3);
    assert_non_null(copy);
    memcpy(copy, g, glen);
    size_t n = glen;
    if (cases[i].trailer_byte == 0) {
      memcpy(copy + n, "\0\1\2", 3);
      n += 3;
    } else if (cases[i].trailer_byte == 1) {
      copy[n - 4] = 1; /* the real size is larger */
      copy[n - 3] = copy[n - 2] = copy[n - 1] = 0;
    } else {
      copy[n - cases[i].trailer_byte] ^= 0x40;
    }
    struct culpert__profile *p = NULL;
    char err[256] = "";
    int rc = culpert__profile_load_buffer(copy, n, "t.pb", &p, err, sizeof err);
    if (cases[i].err) {
      assert_int_equal(rc, -EINVAL);
      assert_null(p);
      assert_string_equal(err, cases[i].err);
    } else {
      if (rc)
        fail_msg("%s: %s", cases[i].what, err);
      assert_int_equal(p->total_bytes, 10);
      culpert__profile_free(p);
    }
    free(copy);
  }
  free(buf);
  free(g);
}

/* culpert.* comments are props, key=value are metadata, the rest notes;
 * props and metadata are sorted by key. */
static void test_profile_comments_split_and_sorted(void **state)
{
  (void)state;
  struct pbuild b;
  pb_init(&b);
  culpert_types(&b);
  const char *c[] = {"zone=eu",      "culpert.stack=fp", "just a note",
                     "app=checkout", "culpert.pid=7",    "=odd"};
  for (size_t i = 0; i < 6; i++)
    b.comments[b.prof.n_comment++] = str(&b, c[i]);
  size_t len;
  uint8_t *buf = pack(&b, &len);
  struct culpert__profile *p = load(buf, len);
  assert_int_equal(p->nprops, 2);
  assert_string_equal(p->props[0].key, "culpert.pid");
  assert_string_equal(p->props[0].value, "7");
  assert_string_equal(p->props[1].key, "culpert.stack");
  assert_int_equal(p->nmetadata, 2);
  assert_string_equal(p->metadata[0].key, "app");
  assert_string_equal(p->metadata[1].value, "eu");
  assert_int_equal(p->nnotes, 2);
  assert_string_equal(p->notes[0], "just a note");
  assert_string_equal(p->notes[1], "=odd");
  assert_string_equal(culpert__profile_prop(p, "culpert.stack"), "fp");
  assert_null(culpert__profile_prop(p, "culpert.exe"));
  culpert__profile_free(p);
  free(buf);
}

/* Comments written one varint per field (wire type 0, as an encoder that
 * does not pack repeated fields writes them), even as the first field of
 * the message, load like packed ones. */
static void test_profile_unpacked_comments(void **state)
{
  (void)state;
  struct pbuild b;
  pb_init(&b);
  culpert_types(&b);
  int64_t note = str(&b, "a note"), app = str(&b, "app=checkout");
  b.comments[b.prof.n_comment++] = str(&b, "culpert.pid=7");
  size_t len;
  uint8_t *packed = pack(&b, &len);
  /* Field 13 (comment), wire type 0, before the packed message's fields. */
  uint8_t *buf = malloc(len + 4);
  assert_non_null(buf);
  const uint8_t head[4] = {13 << 3, (uint8_t)note, 13 << 3, (uint8_t)app};
  memcpy(buf, head, sizeof head);
  memcpy(buf + 4, packed, len);
  struct culpert__profile *p = load(buf, len + 4);
  assert_int_equal(p->nnotes, 1);
  assert_string_equal(p->notes[0], "a note");
  assert_int_equal(p->nmetadata, 1);
  assert_string_equal(p->metadata[0].value, "checkout");
  assert_string_equal(culpert__profile_prop(p, "culpert.pid"), "7");
  culpert__profile_free(p);
  free(buf);
  free(packed);
}

/* Span labels are found by key string, even when the string table holds
 * the key twice and a label uses the second copy; "" span names count as
 * no span, as pprof drops them. */
static void test_profile_span_labels_by_string(void **state)
{
  (void)state;
  struct pbuild b;
  pb_init(&b);
  culpert_types(&b);
  int64_t k1 = str(&b, "span_name"), k2 = str_dup(&b, "span_name");
  int64_t kid = str(&b, "span_id"), kpar = str_dup(&b, "span_parent_id");
  Perftools__Profiles__Sample *s1 = add_sample(&b, 0, NULL, 5, (int64_t[]){0, 1, 0, 0, 1});
  add_label(&b, s1, k2, str(&b, "parse"), 0);
  add_label(&b, s1, kid, 0, 5);
  add_label(&b, s1, kpar, 0, 4);
  Perftools__Profiles__Sample *s2 = add_sample(&b, 0, NULL, 5, (int64_t[]){0, 1, 0, 0, 1});
  add_label(&b, s2, k1, 0, 0);
  size_t len;
  uint8_t *buf = pack(&b, &len);
  struct culpert__profile *p = load(buf, len);
  assert_string_equal(p->samples[0].span_name, "parse");
  assert_int_equal(p->samples[0].span_id, 5);
  assert_int_equal(p->samples[0].span_parent_id, 4);
  assert_null(p->samples[1].span_name);
  culpert__profile_free(p);
  free(buf);
}

/* Samples that carry the same labels each get them (labels are decoded once
 * per distinct encoding), and a bad label is still found when it first
 * appears after good ones. */
static void test_profile_repeated_labels(void **state)
{
  (void)state;
  for (int bad = 0; bad <= 1; bad++) {
    struct pbuild b;
    pb_init(&b);
    culpert_types(&b);
    int64_t kn = str(&b, "span_name"), kid = str(&b, "span_id");
    int64_t parse = str(&b, "parse"), emit = str(&b, "emit");
    for (int i = 0; i < 4; i++) {
      Perftools__Profiles__Sample *s = add_sample(&b, 0, NULL, 5, (int64_t[]){0, i + 1, 0, 0, 1});
      add_label(&b, s, kn, i % 2 ? emit : parse, 0);
      add_label(&b, s, kid, 0, i % 2 ? 2 : 1);
    }
    if (bad)
      b.lab[3][0].str = 99; /* sample 4: span_name value out of the table */
    size_t len;
    uint8_t *buf = pack(&b, &len);
    if (!bad) {
      struct culpert__profile *p = load(buf, len);
      assert_int_equal(p->nsamples, 4);
      for (size_t i = 0; i < 4; i++) {
        assert_string_equal(p->samples[i].span_name, i % 2 ? "emit" : "parse");
        assert_int_equal(p->samples[i].span_id, i % 2 ? 2 : 1);
        assert_int_equal(p->samples[i].bytes, (int64_t)i + 1);
      }
      culpert__profile_free(p);
    } else {
      struct culpert__profile *p = NULL;
      char err[256] = "";
      assert_int_equal(culpert__profile_load_buffer(buf, len, "t.pb", &p, err, sizeof err),
                       -EINVAL);
      assert_null(p);
      assert_string_equal(err, "t.pb: a sample label value refers to string 99, but the string "
                               "table has 13 entries");
    }
    free(buf);
  }
}

/* Nothing of one sample leaks into the next (samples are decoded one after
 * the other into reused memory): a bare sample after a full one has no
 * frames, no span and only its own values. */
static void test_profile_bare_sample_after_full_one(void **state)
{
  (void)state;
  struct pbuild b;
  pb_init(&b);
  culpert_types(&b);
  add_location(&b, 1, 0x1000, 0, 0, NULL);
  Perftools__Profiles__Sample *s =
      add_sample(&b, 2, (uint64_t[]){1, 1}, 5, (int64_t[]){1, 10, 1, 10, 1});
  add_label(&b, s, str(&b, "span_name"), str(&b, "parse"), 0);
  add_label(&b, s, str(&b, "span_id"), 0, 7);
  add_sample(&b, 0, NULL, 5, (int64_t[]){0, 0, 0, 0, 0});
  size_t len;
  uint8_t *buf = pack(&b, &len);
  struct culpert__profile *p = load(buf, len);
  assert_int_equal(p->nsamples, 2);
  assert_int_equal(p->samples[0].nframes, 2);
  assert_string_equal(p->samples[0].span_name, "parse");
  assert_int_equal(p->samples[1].nframes, 0);
  assert_null(p->samples[1].span_name);
  assert_int_equal(p->samples[1].span_id, 0);
  assert_int_equal(p->samples[1].bytes, 0);
  culpert__profile_free(p);
  free(buf);
}

/* A sample whose decoding fails after one of its labels was read (here a
 * label field with the varint wire type) is a decoding error, not a crash
 * (regression: protobuf-c's cleanup took the label bytes for messages). */
static void test_profile_bad_label_after_good_one(void **state)
{
  (void)state;
  static const uint8_t bad_sample[] = {0x12, 0x06, 0x1a, 0x02, 0x08, 0x01, 0x18, 0x05};
  struct pbuild b;
  pb_init(&b);
  culpert_types(&b);
  add_sample(&b, 0, NULL, 5, (int64_t[]){0, 1, 0, 0, 1});
  size_t len;
  uint8_t *buf = pack(&b, &len);
  uint8_t *all = malloc(len + sizeof bad_sample);
  assert_non_null(all);
  memcpy(all, buf, len);
  memcpy(all + len, bad_sample, sizeof bad_sample);
  struct culpert__profile *p = NULL;
  char err[256] = "";
  assert_int_equal(
      culpert__profile_load_buffer(all, len + sizeof bad_sample, "t.pb", &p, err, sizeof err),
      -EINVAL);
  assert_null(p);
  assert_string_equal(err, "t.pb: not a pprof profile (protobuf decoding failed in a sample)");
  free(all);
  free(buf);
}

/* Errors name the file and the problem; out stays NULL. */
static void test_profile_error_names_file(void **state)
{
  (void)state;
  struct pbuild b;
  pb_init(&b);
  culpert_types(&b);
  add_sample(&b, 1, (uint64_t[]){3}, 5, (int64_t[]){0, 1, 0, 0, 1});
  size_t len;
  uint8_t *buf = pack(&b, &len);
  struct culpert__profile *p = (struct culpert__profile *)1;
  char err[256];
  assert_int_equal(culpert__profile_load_buffer(buf, len, "x.pb", &p, err, sizeof err), -EINVAL);
  assert_null(p);
  assert_string_equal(err, "x.pb: sample 1 refers to location id 3, which does not exist");
  free(buf);
}

/* A profile of one span tree for the merge test: root span 1 named `root`,
 * span 2 `parse` under it; one sample in span 2 whose stack is `leaf`, one
 * synthetic sample for span 1, and with `extra` one outside every span. */
static uint8_t *merge_part(const char *root, const char *leaf, int64_t rate, int inuse, int extra,
                           size_t *len)
{
  struct pbuild b;
  pb_init(&b);
  b.prof.period = rate;
  add_type(&b, "alloc_objects", "count");
  add_type(&b, "alloc_space", "bytes");
  if (inuse) {
    add_type(&b, "inuse_objects", "count");
    add_type(&b, "inuse_space", "bytes");
  }
  add_type(&b, "samples", "count");
  size_t nv = inuse ? 5 : 3;
  int64_t kname = str(&b, "span_name"), kid = str(&b, "span_id"), kpar = str(&b, "span_parent_id");
  add_function(&b, 1, leaf, "", "");
  add_location(&b, 1, 0x1000, 0, 1, (uint64_t[]){1});
  Perftools__Profiles__Sample *s = add_sample(
      &b, 1, (uint64_t[]){1}, nv, inuse ? (int64_t[]){2, 200, 1, 100, 2} : (int64_t[]){3, 300, 3});
  add_label(&b, s, kname, str(&b, "parse"), 0);
  add_label(&b, s, kid, 0, 2);
  add_label(&b, s, kpar, 0, 1);
  s = add_sample(&b, 0, NULL, nv, (int64_t[]){0, 0, 0, 0, 0});
  add_label(&b, s, kname, str(&b, root), 0);
  add_label(&b, s, kid, 0, 1);
  if (extra)
    add_sample(&b, 0, NULL, nv, inuse ? (int64_t[]){1, 1000, 0, 0, 1} : (int64_t[]){1, 1000, 1});
  return pack(&b, len);
}

/* Merging: samples and totals add up; span ids of different files never
 * collide (both files use ids 1 and 2), while parents stay within their
 * file; frames resolve to each file's own functions; a value kind one file
 * lacks is absent; differing rates are flagged. */
static void test_profile_merge(void **state)
{
  (void)state;
  size_t la, lb;
  uint8_t *a = merge_part("handle", "leaf_a", 65536, 1, 0, &la);
  uint8_t *b = merge_part("other", "leaf_b", 4096, 0, 1, &lb);
  struct culpert__profile *in[2] = {NULL, NULL}, *m = NULL;
  char err[512] = "";
  assert_int_equal(culpert__profile_load_buffer(a, la, "a.pb", &in[0], err, sizeof err), 0);
  assert_int_equal(culpert__profile_load_buffer(b, lb, "b.pb", &in[1], err, sizeof err), 0);
  assert_int_equal(culpert__profile_merge(in, 2, &m, err, sizeof err), 0);

  assert_int_equal(m->nsamples, 5);
  assert_int_equal(m->total_bytes, 200 + 300 + 1000);
  assert_int_equal(m->total_samples, 2 + 3 + 1);
  assert_false(m->has_inuse);
  assert_true(m->has_objects && m->has_samples);
  assert_true(m->mixed_rates);
  assert_int_equal(m->rate, 65536);
  assert_int_equal(m->nparts, 2);
  assert_string_equal(m->part_paths[0], "a.pb");
  assert_string_equal(m->part_paths[1], "b.pb");
  assert_string_equal(m->path, "a.pb, b.pb");

  const struct culpert__sample *pa = &m->samples[0], *ra = &m->samples[1];
  const struct culpert__sample *pb = &m->samples[2], *rb = &m->samples[3];
  assert_string_equal(ra->span_name, "handle");
  assert_string_equal(rb->span_name, "other");
  assert_int_equal(pa->span_parent_id, ra->span_id);
  assert_int_equal(pb->span_parent_id, rb->span_id);
  assert_int_not_equal(ra->span_id, rb->span_id);
  assert_int_not_equal(pa->span_id, pb->span_id);
  assert_int_not_equal(pa->span_id, rb->span_id);
  assert_int_equal(ra->span_parent_id, 0);
  assert_int_equal(m->samples[4].span_id, 0);
  assert_null(m->samples[4].span_name);
  assert_int_equal(pa->nframes, 1);
  assert_int_equal(pb->nframes, 1);
  assert_string_equal(m->frames[pa->frames[0]].function, "leaf_a");
  assert_string_equal(m->frames[pb->frames[0]].function, "leaf_b");
  culpert__profile_free(m);
  free(a);
  free(b);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_profile_inline_frames_innermost_first),
      cmocka_unit_test(test_profile_function_name_fallbacks),
      cmocka_unit_test(test_profile_sparse_location_ids),
      cmocka_unit_test(test_profile_values_by_name),
      cmocka_unit_test(test_profile_rust_producer),
      cmocka_unit_test(test_profile_concatenated_gzip_members),
      cmocka_unit_test(test_profile_gzip_trailer_cases),
      cmocka_unit_test(test_profile_comments_split_and_sorted),
      cmocka_unit_test(test_profile_unpacked_comments),
      cmocka_unit_test(test_profile_span_labels_by_string),
      cmocka_unit_test(test_profile_repeated_labels),
      cmocka_unit_test(test_profile_bad_label_after_good_one),
      cmocka_unit_test(test_profile_bare_sample_after_full_one),
      cmocka_unit_test(test_profile_error_names_file),
      cmocka_unit_test(test_profile_merge),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
