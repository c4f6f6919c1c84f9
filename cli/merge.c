/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * merge.c: several pprof profiles written as one (merge.h).
 *
 * Each file is first loaded and validated by the one loader (profile.c),
 * so a damaged file is refused with the same message every command gives.
 * Then protobuf-c unpacks it whole, and its messages are renumbered in
 * place: strings into one new string table, mapping, location and function
 * ids into one sequence each, span ids by span path. The output profile
 * points at those messages and is packed and gzipped in one go.
 *
 * Span ids: culpert writes one id per span path (profile-format.md), and
 * files of one run number their paths independently, so equal ids in two
 * files mean nothing. Here a span's new id is interned by (its parent's new
 * id, its name), so the same path in two files gets one id, and different
 * paths never share one. A span whose name the file never gives (only
 * possible in a file from another producer) keeps an id of its own.
 *
 * Comments (key=value): a value every file agrees on is kept; the counters
 * (culpert.dropped_samples and the like) are summed; the peak of the
 * in-use estimate is dropped, since the peaks of several processes do not
 * add up to a peak; any other key's distinct values are joined with ",".
 * culpert.merged_files says how many files went in.
 */
#include "merge.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libdeflate.h>

#include "format.h"
#include "profile.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Function pb_function;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__ValueType pb_value_type;

/* Comment keys whose values are counts to add up across files. */
static const char *const summed_keys[] = {
    "culpert.dropped_samples", "culpert.libunwind_stacks", "culpert.span_overflow",
    "culpert.span_table_full", "culpert.span_underflow",
};
/* Comment keys left out of a merge of several files. */
static const char *const dropped_keys[] = {"culpert.peak_inuse_bytes", "culpert.merged_files"};

static uint64_t hash_u64(uint64_t x)
{
  x ^= x >> 33;
  x *= UINT64_C(0xff51afd7ed558ccd);
  x ^= x >> 33;
  x *= UINT64_C(0xc4ceb9fe1a85ec53);
  return x ^ (x >> 33);
}

static uint64_t hash_str(const char *s)
{
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
  return hash_u64(h);
}

static size_t table_size(size_t n)
{
  size_t cap = 16;
  while (cap < 2 * n + 1)
    cap *= 2;
  return cap;
}

/* ---- old id -> new id, for one file's mappings, locations, functions --- */

struct idmap {
  uint64_t *keys; /* 0: empty */
  uint64_t *vals;
  size_t mask;
};

static int idmap_init(struct idmap *m, size_t n)
{
  size_t cap = table_size(n);
  m->keys = calloc(cap, sizeof *m->keys);
  m->vals = calloc(cap, sizeof *m->vals);
  m->mask = cap - 1;
  return m->keys && m->vals ? 0 : -ENOMEM;
}

static void idmap_free(struct idmap *m)
{
  free(m->keys);
  free(m->vals);
}

/* The slot of `id`: its value, or 0 when absent (then *slot is free). */
static uint64_t *idmap_slot(const struct idmap *m, uint64_t id)
{
  size_t i = hash_u64(id) & m->mask;
  while (m->keys[i] != 0 && m->keys[i] != id)
    i = (i + 1) & m->mask;
  return &m->vals[i];
}

static void idmap_put(struct idmap *m, uint64_t id, uint64_t val)
{
  size_t i = hash_u64(id) & m->mask;
  while (m->keys[i] != 0 && m->keys[i] != id)
    i = (i + 1) & m->mask;
  m->keys[i] = id;
  m->vals[i] = val;
}

/* ---- the output string table ------------------------------------------ */

struct strtab {
  char **strs; /* the table; strings borrowed from the inputs or `owned` */
  size_t n, cap;
  uint32_t *slots; /* index + 1 into strs; 0: empty */
  size_t mask;
  char **owned; /* strings made here (merged comments), freed at the end */
  size_t nowned;
};

static int strtab_init(struct strtab *t, size_t n)
{
  size_t cap = table_size(n);
  t->slots = calloc(cap, sizeof *t->slots);
  t->strs = malloc((n + 1) * sizeof *t->strs);
  t->owned = malloc((n + 1) * sizeof *t->owned);
  t->mask = cap - 1;
  t->cap = n + 1;
  t->n = 0;
  t->nowned = 0;
  return t->slots && t->strs && t->owned ? 0 : -ENOMEM;
}

static void strtab_free(struct strtab *t)
{
  for (size_t i = 0; i < t->nowned; i++)
    free(t->owned[i]);
  free(t->owned);
  free(t->strs);
  free(t->slots);
}

/* The index of `s` in the output table, adding it (borrowed) when new.
 * The table was sized for every string of every input, so it never
 * overflows; -1 if it would. */
static int64_t intern(struct strtab *t, char *s)
{
  size_t i = hash_str(s) & t->mask;
  while (t->slots[i] != 0) {
    if (strcmp(t->strs[t->slots[i] - 1], s) == 0)
      return t->slots[i] - 1;
    i = (i + 1) & t->mask;
  }
  if (t->n == t->cap)
    return -1;
  t->strs[t->n++] = s;
  t->slots[i] = (uint32_t)t->n;
  return (int64_t)t->n - 1;
}

/* ---- span paths ---------------------------------------------------------- */

/* The spans of the merge: new id = index + 1, keyed by (parent, name). */
struct spans {
  int64_t *parent;   /* new id of the parent; 0 for a root */
  const char **name; /* NULL: a span whose name its file never gave */
  size_t n, cap;
  uint32_t *slots; /* index + 1; 0: empty */
  size_t mask;
};

static int spans_init(struct spans *s, size_t n)
{
  size_t cap = table_size(n);
  s->parent = malloc((n + 1) * sizeof *s->parent);
  s->name = malloc((n + 1) * sizeof *s->name);
  s->slots = calloc(cap, sizeof *s->slots);
  s->cap = n + 1;
  s->n = 0;
  s->mask = cap - 1;
  return s->parent && s->name && s->slots ? 0 : -ENOMEM;
}

static void spans_free(struct spans *s)
{
  free(s->parent);
  free(s->name);
  free(s->slots);
}

/* A new id of its own (no name, or a cycle in a file's parents). */
static int64_t span_fresh(struct spans *s)
{
  if (s->n == s->cap)
    return -1;
  s->parent[s->n] = 0;
  s->name[s->n] = NULL;
  return (int64_t)++s->n;
}

static int64_t span_intern(struct spans *s, int64_t parent, const char *name)
{
  size_t i = hash_u64(hash_str(name) ^ (uint64_t)parent) & s->mask;
  while (s->slots[i] != 0) {
    size_t k = s->slots[i] - 1;
    if (s->parent[k] == parent && strcmp(s->name[k], name) == 0)
      return (int64_t)k + 1;
    i = (i + 1) & s->mask;
  }
  if (s->n == s->cap)
    return -1;
  s->parent[s->n] = parent;
  s->name[s->n] = name;
  s->slots[i] = (uint32_t)++s->n;
  return (int64_t)s->n;
}

/* One file's spans: old id -> what the file says of it, then its new id. */
struct file_spans {
  struct idmap index; /* old id -> index + 1 */
  const char **name;  /* NULL until a sample names it */
  int64_t *old_parent;
  int64_t *new_id; /* 0: not resolved yet; -1: being resolved */
  size_t n;
};

static void file_spans_add(struct file_spans *f, int64_t id, const char *name, int64_t parent)
{
  uint64_t *slot = idmap_slot(&f->index, (uint64_t)id);
  size_t k;
  if (*slot == 0) {
    k = f->n++;
    idmap_put(&f->index, (uint64_t)id, k + 1);
    f->name[k] = NULL;
    f->old_parent[k] = 0;
    f->new_id[k] = 0;
  } else {
    k = *slot - 1;
  }
  if (!f->name[k] && name) {
    f->name[k] = name;
    f->old_parent[k] = parent;
  }
}

static int64_t file_span_resolve(struct spans *s, struct file_spans *f, size_t k, unsigned depth)
{
  if (f->new_id[k] > 0)
    return f->new_id[k];
  if (f->new_id[k] < 0 || depth > 4096 || !f->name[k])
    return f->new_id[k] = span_fresh(s); /* a cycle, or no name */
  f->new_id[k] = -1;
  int64_t parent = 0;
  if (f->old_parent[k] != 0) {
    uint64_t *slot = idmap_slot(&f->index, (uint64_t)f->old_parent[k]);
    parent = *slot ? file_span_resolve(s, f, *slot - 1, depth + 1) : span_fresh(s);
    if (parent < 0)
      return -1;
  }
  return f->new_id[k] = span_intern(s, parent, f->name[k]);
}

/* ---- where the unpacked inputs live ------------------------------------- */

/* protobuf-c allocates several blocks per sample; a bump arena takes them
 * at a fraction of malloc's cost and memory and frees them all at once. */
struct chunk {
  struct chunk *next;
  size_t used, size;
  max_align_t data[];
};

static void *arena_alloc(void *arg, size_t n)
{
  struct chunk **head = arg;
  n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
  struct chunk *c = *head;
  if (!c || c->size - c->used < n) {
    size_t size = n > (1u << 20) ? n : (1u << 20);
    if (!(c = malloc(sizeof *c + size)))
      return NULL;
    c->next = *head;
    c->used = 0;
    c->size = size;
    *head = c;
  }
  void *p = (char *)c->data + c->used;
  c->used += n;
  return p;
}

static void arena_no_free(void *arg, void *p)
{
  (void)arg;
  (void)p;
}

static void arena_free_all(struct chunk *c)
{
  while (c) {
    struct chunk *next = c->next;
    free(c);
    c = next;
  }
}

/* ---- the merge ------------------------------------------------------------- */

struct input {
  char *path;
  pb_profile *pb;
  int64_t rate;
};

struct merge {
  struct chunk *arena; /* the unpacked inputs */
  ProtobufCAllocator alloc;
  struct input *in;
  size_t n;
  struct strtab strs;
  struct spans spans;
  uint64_t next_mapping, next_location, next_function;
  char *err;
  size_t errlen;
};

static int fail(struct merge *m, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct merge *m, int rc, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->err, m->errlen, fmt, ap);
  va_end(ap);
  return rc;
}

static int nomem(struct merge *m)
{
  return fail(m, -ENOMEM, "out of memory merging the profiles");
}

/* How messages name an input. */
static const char *display(const struct input *in)
{
  return strcmp(in->path, "-") == 0 ? "standard input" : in->path;
}

/* `*idx`, an index into in's string table, as an index into the output's. */
static int restring(struct merge *m, const struct input *in, int64_t *idx)
{
  if (*idx < 0 || (size_t)*idx >= in->pb->n_string_table)
    return fail(m, -EINVAL, "%s: string index %" PRId64 " out of range", display(in), *idx);
  int64_t v = intern(&m->strs, in->pb->string_table[*idx]);
  if (v < 0)
    return nomem(m);
  *idx = v;
  return 0;
}

static const char *str_of(const struct input *in, int64_t idx)
{
  return idx >= 0 && (size_t)idx < in->pb->n_string_table ? in->pb->string_table[idx] : "";
}

/* Whether two files hold the same sample types and period type. */
static bool same_types(const struct input *a, const struct input *b)
{
  const pb_profile *x = a->pb, *y = b->pb;
  if (x->n_sample_type != y->n_sample_type)
    return false;
  for (size_t i = 0; i < x->n_sample_type; i++)
    if (strcmp(str_of(a, x->sample_type[i]->type), str_of(b, y->sample_type[i]->type)) != 0 ||
        strcmp(str_of(a, x->sample_type[i]->unit), str_of(b, y->sample_type[i]->unit)) != 0)
      return false;
  if (!x->period_type != !y->period_type)
    return false;
  return !x->period_type ||
         (strcmp(str_of(a, x->period_type->type), str_of(b, y->period_type->type)) == 0 &&
          strcmp(str_of(a, x->period_type->unit), str_of(b, y->period_type->unit)) == 0);
}

/* "alloc_objects/count, alloc_space/bytes, ..." for a message. */
static void describe_types(const struct input *in, char *buf, size_t len)
{
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < in->pb->n_sample_type && used < len; i++) {
    int w = snprintf(buf + used, len - used, "%s%s/%s", i ? ", " : "",
                     str_of(in, in->pb->sample_type[i]->type),
                     str_of(in, in->pb->sample_type[i]->unit));
    if (w < 0)
      break;
    used += (size_t)w;
  }
}

/* Read, validate and unpack every input. */
static int read_inputs(struct merge *m)
{
  for (size_t i = 0; i < m->n; i++) {
    struct input *in = &m->in[i];
    const char *name = display(in);
    size_t len;
    struct culpert__profile *p;
    struct culpert__load_opts opts = {.stacks = CULPERT_STACKS_NONE};
    unsigned char *plain;
    int rc = culpert__profile_read_plain(in->path, &plain, &len, &opts.inflated, m->err, m->errlen);
    if (rc)
      return rc;
    rc = culpert__profile_load_buffer_with(plain, len, name, &opts, &p, m->err, m->errlen);
    if (rc == 0) {
      in->rate = p->rate;
      culpert__profile_free(p);
      in->pb = perftools__profiles__profile__unpack(&m->alloc, len, plain);
    }
    free(plain); /* protobuf-c copied what it keeps */
    if (rc)
      return rc;
    if (!in->pb)
      return fail(m, -EINVAL,
                  "%s: cannot decode the profile for merging (out of memory, or a field the loader "
                  "skips but protobuf-c refuses)",
                  name);
    if (i > 0 && !same_types(&m->in[0], in)) {
      char a[512], b[512];
      describe_types(&m->in[0], a, sizeof a);
      describe_types(in, b, sizeof b);
      return fail(m, -EINVAL,
                  "%s holds other sample types than %s (%s against %s); only profiles of one "
                  "kind merge",
                  name, display(&m->in[0]), b, a);
    }
    if (i > 0 && in->rate != m->in[0].rate) {
      char a[CULPERT_FMT_MAX], b[CULPERT_FMT_MAX];
      return fail(m, -EINVAL,
                  "sample rates differ: %s %s, %s %s; one file holds one rate, so profiles "
                  "at different rates do not merge ('culpert diff' compares them)",
                  display(&m->in[0]), culpert__fmt_rate(a, m->in[0].rate), name,
                  culpert__fmt_rate(b, in->rate));
    }
  }
  return 0;
}

/* Renumber one file's mappings, functions and locations in place. */
static int renumber_code(struct merge *m, struct input *in)
{
  pb_profile *pb = in->pb;
  struct idmap maps = {0}, funcs = {0}, locs = {0};
  int rc = -ENOMEM;
  if (idmap_init(&maps, pb->n_mapping) || idmap_init(&funcs, pb->n_function) ||
      idmap_init(&locs, pb->n_location)) {
    rc = nomem(m);
    goto out;
  }
  for (size_t i = 0; i < pb->n_mapping; i++) {
    pb_mapping *x = pb->mapping[i];
    idmap_put(&maps, x->id, ++m->next_mapping);
    x->id = m->next_mapping;
    if ((rc = restring(m, in, &x->filename)) || (rc = restring(m, in, &x->build_id)))
      goto out;
  }
  for (size_t i = 0; i < pb->n_function; i++) {
    pb_function *x = pb->function[i];
    idmap_put(&funcs, x->id, ++m->next_function);
    x->id = m->next_function;
    if ((rc = restring(m, in, &x->name)) || (rc = restring(m, in, &x->system_name)) ||
        (rc = restring(m, in, &x->filename)))
      goto out;
  }
  for (size_t i = 0; i < pb->n_location; i++) {
    pb_location *x = pb->location[i];
    idmap_put(&locs, x->id, ++m->next_location);
    x->id = m->next_location;
    if (x->mapping_id != 0)
      x->mapping_id = *idmap_slot(&maps, x->mapping_id);
    for (size_t j = 0; j < x->n_line; j++)
      if (x->line[j]->function_id != 0)
        x->line[j]->function_id = *idmap_slot(&funcs, x->line[j]->function_id);
  }
  for (size_t i = 0; i < pb->n_sample; i++) {
    pb_sample *s = pb->sample[i];
    for (size_t j = 0; j < s->n_location_id; j++)
      s->location_id[j] = *idmap_slot(&locs, s->location_id[j]);
  }
  rc = 0;
out:
  idmap_free(&maps);
  idmap_free(&funcs);
  idmap_free(&locs);
  return rc;
}

/* Which span label `l` is, by its key's text (a table may hold the same
 * string twice, and either copy may be used). */
enum span_key { KEY_OTHER, KEY_ID, KEY_PARENT, KEY_NAME };

static enum span_key span_key(const struct input *in, const pb_label *l)
{
  const char *k = str_of(in, l->key);
  return strcmp(k, "span_id") == 0          ? KEY_ID
         : strcmp(k, "span_parent_id") == 0 ? KEY_PARENT
         : strcmp(k, "span_name") == 0      ? KEY_NAME
                                            : KEY_OTHER;
}

/* Renumber one file's span ids by path, and re-string its labels. */
static int renumber_samples(struct merge *m, struct input *in)
{
  pb_profile *pb = in->pb;
  struct file_spans f = {0};
  size_t cap = 2 * pb->n_sample + 1;
  int rc = 0;

  f.name = malloc(cap * sizeof *f.name);
  f.old_parent = malloc(cap * sizeof *f.old_parent);
  f.new_id = malloc(cap * sizeof *f.new_id);
  if (!f.name || !f.old_parent || !f.new_id || idmap_init(&f.index, cap)) {
    rc = nomem(m);
    goto out;
  }
  /* What the file says of each span: from every sample that names one.
   * A sample's span is what the loader reads: of repeated span labels, the
   * first non-zero id and parent and the first non-empty name. */
  for (size_t i = 0; i < pb->n_sample; i++) {
    const pb_sample *s = pb->sample[i];
    int64_t id = 0, parent = 0;
    const char *name = NULL;
    for (size_t j = 0; j < s->n_label; j++) {
      const pb_label *l = s->label[j];
      switch (span_key(in, l)) {
      case KEY_ID:
        if (id == 0)
          id = l->num;
        break;
      case KEY_PARENT:
        if (parent == 0)
          parent = l->num;
        break;
      case KEY_NAME:
        if (!name && str_of(in, l->str)[0])
          name = str_of(in, l->str);
        break;
      case KEY_OTHER:
        break;
      }
    }
    if (id != 0)
      file_spans_add(&f, id, name, parent);
    if (parent != 0)
      file_spans_add(&f, parent, NULL, 0);
  }
  for (size_t i = 0; i < pb->n_sample; i++) {
    pb_sample *s = pb->sample[i];
    for (size_t j = 0; j < s->n_label; j++) {
      pb_label *l = s->label[j];
      enum span_key k = span_key(in, l);
      if ((k == KEY_ID || k == KEY_PARENT) && l->num != 0) {
        uint64_t *slot = idmap_slot(&f.index, (uint64_t)l->num);
        l->num = *slot ? file_span_resolve(&m->spans, &f, *slot - 1, 0) : span_fresh(&m->spans);
        if (l->num < 0) {
          rc = nomem(m);
          goto out;
        }
      }
      if ((rc = restring(m, in, &l->key)) || (rc = restring(m, in, &l->str)) ||
          (rc = restring(m, in, &l->num_unit)))
        goto out;
    }
  }
out:
  free(f.name);
  free(f.old_parent);
  free(f.new_id);
  idmap_free(&f.index);
  return rc;
}

/* ---- comments ------------------------------------------------------------- */

struct comment {
  char *key;   /* owned; for a note (no '='), the whole text */
  char *value; /* owned; NULL for a note */
  bool summed; /* the value is a running sum */
  int64_t sum;
};

static bool in_list(const char *key, const char *const *list, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(key, list[i]) == 0)
      return true;
  return false;
}

static bool parse_count(const char *s, int64_t *v)
{
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || end == s || *end || x < 0)
    return false;
  *v = x;
  return true;
}

/* Add value `v` to the comma-joined list of distinct values in *list. */
static int join_value(char **list, const char *v)
{
  size_t vl = strlen(v);
  for (const char *p = *list; p;) {
    const char *comma = strchr(p, ',');
    size_t l = comma ? (size_t)(comma - p) : strlen(p);
    if (l == vl && memcmp(p, v, vl) == 0)
      return 0;
    p = comma ? comma + 1 : NULL;
  }
  char *next;
  if (asprintf(&next, "%s,%s", *list, v) < 0)
    return -ENOMEM;
  free(*list);
  *list = next;
  return 0;
}

static int comment_cmp(const void *a, const void *b)
{
  const struct comment *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  if (c || (!x->value && !y->value))
    return c;
  return !x->value ? -1 : !y->value ? 1 : strcmp(x->value, y->value);
}

/* The merged comments, interned and sorted by key, into *out. */
static int merge_comments(struct merge *m, int64_t **out, size_t *nout)
{
  struct comment *c = NULL;
  size_t nc = 0, cap = 0;
  int rc = 0;

  for (size_t i = 0; i < m->n && rc == 0; i++) {
    const pb_profile *pb = m->in[i].pb;
    for (size_t j = 0; j < pb->n_comment && rc == 0; j++) {
      const char *text = str_of(&m->in[i], pb->comment[j]);
      const char *eq = strchr(text, '=');
      size_t kl = eq ? (size_t)(eq - text) : strlen(text);
      if (m->n > 1 && eq && kl < 64) {
        char key[64];
        memcpy(key, text, kl);
        key[kl] = '\0';
        if (in_list(key, dropped_keys, sizeof dropped_keys / sizeof *dropped_keys))
          continue;
      }
      size_t k = 0;
      while (k < nc && !(strlen(c[k].key) == kl && strncmp(c[k].key, text, kl) == 0 &&
                         (eq != NULL) == (c[k].value != NULL)))
        k++;
      if (k == nc) {
        if (nc == cap) {
          size_t ncap = cap ? 2 * cap : 32;
          struct comment *nv = realloc(c, ncap * sizeof *nv);
          if (!nv) {
            rc = -ENOMEM;
            break;
          }
          c = nv;
          cap = ncap;
        }
        memset(&c[nc], 0, sizeof c[nc]);
        c[nc].key = strndup(text, kl);
        c[nc].value = eq ? strdup(eq + 1) : NULL;
        if (!c[nc].key || (eq && !c[nc].value)) {
          free(c[nc].key);
          free(c[nc].value);
          rc = -ENOMEM;
          break;
        }
        c[nc].summed = eq &&
                       in_list(c[nc].key, summed_keys, sizeof summed_keys / sizeof *summed_keys) &&
                       parse_count(c[nc].value, &c[nc].sum);
        nc++;
        continue;
      }
      if (!eq)
        continue; /* a note: kept once */
      int64_t v;
      if (c[k].summed && parse_count(eq + 1, &v) && !__builtin_add_overflow(c[k].sum, v, &v)) {
        c[k].sum = v;
        continue;
      }
      if (c[k].summed) { /* not a count after all: fall back to joining */
        c[k].summed = false;
        char *first = NULL;
        if (asprintf(&first, "%" PRId64, c[k].sum) < 0) {
          rc = -ENOMEM;
          break;
        }
        free(c[k].value);
        c[k].value = first;
      }
      rc = join_value(&c[k].value, eq + 1);
    }
  }
  if (rc == 0 && m->n > 1) {
    /* culpert.merged_files: the files in this one, counting those merged
     * before (a merged file stands for its own count). */
    int64_t files = 0;
    for (size_t i = 0; i < m->n; i++) {
      int64_t k = 1;
      for (size_t j = 0; j < m->in[i].pb->n_comment; j++) {
        const char *t = str_of(&m->in[i], m->in[i].pb->comment[j]);
        if (strncmp(t, "culpert.merged_files=", 21) == 0 && !parse_count(t + 21, &k))
          k = 1;
      }
      files += k;
    }
    struct comment *nv = nc == cap ? realloc(c, (cap + 1) * sizeof *nv) : c;
    if (!nv) {
      rc = -ENOMEM;
    } else {
      c = nv;
      memset(&c[nc], 0, sizeof c[nc]);
      c[nc].key = strdup("culpert.merged_files");
      if (asprintf(&c[nc].value, "%" PRId64, files) < 0)
        c[nc].value = NULL;
      nc++;
      if (!c[nc - 1].key || !c[nc - 1].value)
        rc = -ENOMEM;
    }
  }
  int64_t *idx = NULL;
  size_t ni = 0;
  if (rc == 0 && !(idx = malloc((nc + 1) * sizeof *idx)))
    rc = -ENOMEM;
  if (rc == 0) {
    if (nc > 0) /* c is NULL for a file without comments */
      qsort(c, nc, sizeof *c, comment_cmp);
    for (size_t k = 0; k < nc && rc == 0; k++) {
      char *text;
      int w = !c[k].value   ? asprintf(&text, "%s", c[k].key)
              : c[k].summed ? asprintf(&text, "%s=%" PRId64, c[k].key, c[k].sum)
                            : asprintf(&text, "%s=%s", c[k].key, c[k].value);
      if (w < 0) {
        rc = -ENOMEM;
        break;
      }
      m->strs.owned[m->strs.nowned++] = text;
      int64_t s = intern(&m->strs, text);
      if (s < 0)
        rc = -ENOMEM;
      else
        idx[ni++] = s;
    }
  }
  for (size_t k = 0; k < nc; k++) {
    free(c[k].key);
    free(c[k].value);
  }
  free(c);
  if (rc) {
    free(idx);
    return nomem(m);
  }
  *out = idx;
  *nout = ni;
  return 0;
}

/* ---- output ------------------------------------------------------------------ */

/* gzip `in` with libdeflate at level 6, gzip's default (several times
 * zlib's speed at the same level on a big profile). */
static int gzip_bytes(struct merge *m, const uint8_t *in, size_t len, struct culpert__merged *out)
{
  struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
  if (!c)
    return nomem(m);
  size_t cap = libdeflate_gzip_compress_bound(c, len);
  unsigned char *buf = malloc(cap);
  size_t used = buf ? libdeflate_gzip_compress(c, in, len, buf, cap) : 0;
  libdeflate_free_compressor(c);
  if (!buf)
    return nomem(m);
  if (used == 0) {
    free(buf);
    return fail(m, -EIO, "cannot compress the merged profile");
  }
  out->gz = buf;
  out->gzlen = used;
  return 0;
}

/* dst[*n..] = src[0..count-1] (src may be NULL when count is 0). */
static void append(void **dst, size_t *n, void *const *src, size_t count)
{
  if (count)
    memcpy(dst + *n, src, count * sizeof *src);
  *n += count;
}

/* Pack the merged profile, all inputs renumbered, and gzip it. */
static int write_out(struct merge *m, struct culpert__merged *out)
{
  pb_profile o;
  perftools__profiles__profile__init(&o);
  const pb_profile *first = m->in[0].pb;
  size_t ns = 0, nm = 0, nl = 0, nf = 0;
  for (size_t i = 0; i < m->n; i++) {
    ns += m->in[i].pb->n_sample;
    nm += m->in[i].pb->n_mapping;
    nl += m->in[i].pb->n_location;
    nf += m->in[i].pb->n_function;
  }
  int rc = 0;
  uint8_t *packed = NULL;
  o.sample = malloc((ns + 1) * sizeof *o.sample);
  o.mapping = malloc((nm + 1) * sizeof *o.mapping);
  o.location = malloc((nl + 1) * sizeof *o.location);
  o.function = malloc((nf + 1) * sizeof *o.function);
  if (!o.sample || !o.mapping || !o.location || !o.function) {
    rc = nomem(m);
    goto out;
  }
  int64_t start = 0, end = 0;
  for (size_t i = 0; i < m->n; i++) {
    const pb_profile *p = m->in[i].pb;
    append((void **)o.sample, &o.n_sample, (void *const *)p->sample, p->n_sample);
    append((void **)o.mapping, &o.n_mapping, (void *const *)p->mapping, p->n_mapping);
    append((void **)o.location, &o.n_location, (void *const *)p->location, p->n_location);
    append((void **)o.function, &o.n_function, (void *const *)p->function, p->n_function);
    /* A profile is taken at time_nanos and covers the duration before it
     * (profile-format.md). */
    if (p->time_nanos > 0) {
      int64_t s = p->time_nanos - (p->duration_nanos > 0 ? p->duration_nanos : 0);
      if (start == 0 || s < start)
        start = s;
      if (p->time_nanos > end)
        end = p->time_nanos;
    }
  }
  /* Taken when the last input was; covering from the earliest start (at
   * most INT64_MAX: hostile times and durations may span more). */
  int64_t covered;
  if (__builtin_sub_overflow(end, start, &covered))
    covered = INT64_MAX;
  o.time_nanos = m->n == 1 ? first->time_nanos : end;
  o.duration_nanos = m->n == 1 ? first->duration_nanos : covered;
  o.n_sample_type = first->n_sample_type;
  o.sample_type = first->sample_type;
  o.period_type = first->period_type;
  o.period = first->period;
  o.drop_frames = first->drop_frames;
  o.keep_frames = first->keep_frames;
  o.default_sample_type = first->default_sample_type;
  o.doc_url = first->doc_url;
  o.string_table = m->strs.strs;
  o.n_string_table = m->strs.n;
  if ((rc = merge_comments(m, &o.comment, &o.n_comment)))
    goto out;
  o.n_string_table = m->strs.n; /* with the comments */

  size_t len = protobuf_c_message_get_packed_size(&o.base);
  if (len > CULPERT_PROFILE_MAX_BYTES) {
    rc = fail(m, -EFBIG,
              "the merged profile would be %zu MiB decompressed, more than the %u MiB the "
              "culpert commands read",
              len >> 20, CULPERT_PROFILE_MAX_BYTES >> 20);
    goto out;
  }
  if (!(packed = malloc(len ? len : 1))) {
    rc = nomem(m);
    goto out;
  }
  protobuf_c_message_pack(&o.base, packed);
  rc = gzip_bytes(m, packed, len, out);
out:
  free(packed);
  free(o.comment);
  free(o.sample);
  free(o.mapping);
  free(o.location);
  free(o.function);
  return rc;
}

/* Re-string what the first file alone decides: types, frames, doc. */
static int restring_header(struct merge *m)
{
  struct input *in = &m->in[0];
  pb_profile *pb = in->pb;
  int rc = 0;
  /* Every other file's sample types were checked to be the same. */
  for (size_t i = 0; i < pb->n_sample_type && rc == 0; i++)
    if (!(rc = restring(m, in, &pb->sample_type[i]->type)))
      rc = restring(m, in, &pb->sample_type[i]->unit);
  if (rc == 0 && pb->period_type && !(rc = restring(m, in, &pb->period_type->type)))
    rc = restring(m, in, &pb->period_type->unit);
  if (rc == 0)
    rc = restring(m, in, &pb->drop_frames);
  if (rc == 0)
    rc = restring(m, in, &pb->keep_frames);
  if (rc == 0)
    rc = restring(m, in, &pb->default_sample_type);
  if (rc == 0)
    rc = restring(m, in, &pb->doc_url);
  return rc;
}

int culpert__merge_files(const char *const *paths, size_t n, struct culpert__merged *out, char *err,
                         size_t errlen)
{
  struct merge m = {.err = err, .errlen = errlen};
  m.alloc = (ProtobufCAllocator){arena_alloc, arena_no_free, &m.arena};
  char **expanded = NULL;
  size_t nexp = 0;
  int rc;

  memset(out, 0, sizeof *out);
  if (err && errlen)
    err[0] = '\0';
  rc = culpert__profile_expand_paths(paths, n, &expanded, &nexp, err, errlen);
  if (rc)
    return rc;
  m.n = nexp;
  if (!(m.in = calloc(nexp, sizeof *m.in))) {
    rc = nomem(&m);
    goto out;
  }
  for (size_t i = 0; i < nexp; i++)
    m.in[i].path = expanded[i];
  if ((rc = read_inputs(&m)))
    goto out;

  size_t nstrings = 1, nsamples = 0;
  for (size_t i = 0; i < nexp; i++) {
    nstrings += m.in[i].pb->n_string_table + m.in[i].pb->n_comment;
    nsamples += m.in[i].pb->n_sample;
  }
  if (strtab_init(&m.strs, nstrings + 1) || spans_init(&m.spans, 4 * nsamples + 16)) {
    rc = nomem(&m);
    goto out;
  }
  static char empty[] = "";
  intern(&m.strs, empty); /* string_table[0] is "" */
  if ((rc = restring_header(&m)))
    goto out;
  for (size_t i = 0; i < nexp && rc == 0; i++)
    if (!(rc = renumber_code(&m, &m.in[i])))
      rc = renumber_samples(&m, &m.in[i]);
  if (rc == 0)
    rc = write_out(&m, out);
  if (rc == 0)
    out->nfiles = nexp;
out:
  arena_free_all(m.arena);
  free(m.in);
  strtab_free(&m.strs);
  spans_free(&m.spans);
  culpert__profile_paths_free(expanded, nexp);
  if (rc)
    culpert__merged_free(out);
  return rc;
}

void culpert__merged_free(struct culpert__merged *m)
{
  free(m->gz);
  memset(m, 0, sizeof *m);
}
