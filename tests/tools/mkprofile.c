/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * mkprofile: write a pprof profile from a line-based text description, so
 * the CLI tests use synthetic profiles with known numbers.
 *
 *   mkprofile IN.txt OUT.pb.gz [--plain]
 *
 * The format is described in tests/README.md ("mkprofile"). Identical
 * function names share one Function and identical frames one Location. The
 * `bad` directive breaks one rule of the format on purpose, for the
 * bad-file corpus. A test tool: it exits on the first error with a message
 * naming the input line.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__ValueType pb_value_type;

static const char *in_path;
static size_t lineno;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "mkprofile: %s:%zu: ", in_path ? in_path : "", lineno);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(2);
}

static void *xcalloc(size_t n, size_t size)
{
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p)
    die("out of memory");
  return p;
}

static void *xrealloc(void *p, size_t size)
{
  p = realloc(p, size ? size : 1);
  if (!p)
    die("out of memory");
  return p;
}

static char *xstrdup(const char *s)
{
  char *p = strdup(s);
  if (!p)
    die("out of memory");
  return p;
}

/* Append one pointer to a growing array (capacity doubles at powers of 2). */
#define PUSH(arr, n, item)                                                                         \
  do {                                                                                             \
    if (((n) & ((n)-1)) == 0)                                                                      \
      (arr) = xrealloc((arr), ((n) ? (n)*2 : 1) * sizeof *(arr));                                  \
    (arr)[(n)++] = (item);                                                                         \
  } while (0)

/* ---- interning: string -> index, hashed ---------------------------------- */

struct intern {
  char **keys;
  size_t *vals;
  size_t mask, used;
};

static uint64_t hash(const char *s)
{
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
  return h;
}

/* Returns the stored value for key, or inserts `val` and returns it. */
static size_t intern_get(struct intern *t, const char *key, size_t val, bool *inserted)
{
  if (!t->keys || (t->used + 1) * 2 > t->mask + 1) {
    size_t cap = t->keys ? (t->mask + 1) * 2 : 1024;
    char **keys = xcalloc(cap, sizeof *keys);
    size_t *vals = xcalloc(cap, sizeof *vals);
    for (size_t i = 0; t->keys && i <= t->mask; i++) {
      if (!t->keys[i])
        continue;
      size_t j = (size_t)hash(t->keys[i]) & (cap - 1);
      while (keys[j])
        j = (j + 1) & (cap - 1);
      keys[j] = t->keys[i];
      vals[j] = t->vals[i];
    }
    free(t->keys);
    free(t->vals);
    t->keys = keys;
    t->vals = vals;
    t->mask = cap - 1;
  }
  size_t j = (size_t)hash(key) & t->mask;
  while (t->keys[j]) {
    if (strcmp(t->keys[j], key) == 0) {
      *inserted = false;
      return t->vals[j];
    }
    j = (j + 1) & t->mask;
  }
  t->keys[j] = xstrdup(key);
  t->vals[j] = val;
  t->used++;
  *inserted = true;
  return val;
}

/* ---- the profile under construction ------------------------------------- */

static pb_profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
static struct intern strings, functions, locations;

static int64_t str_index(const char *s)
{
  bool ins;
  size_t idx = intern_get(&strings, s, prof.n_string_table, &ins);
  if (ins)
    PUSH(prof.string_table, prof.n_string_table, xstrdup(s));
  return (int64_t)idx;
}

static pb_value_type *value_type(const char *type, const char *unit)
{
  pb_value_type *vt = xcalloc(1, sizeof *vt);
  perftools__profiles__value_type__init(vt);
  vt->type = str_index(type);
  vt->unit = str_index(unit);
  return vt;
}

struct span {
  int64_t id, parent;
  char *name;
  bool sampled; /* some sample used span=ID */
};
static struct span *spans;
static size_t nspans;

static struct span *find_span(int64_t id)
{
  for (size_t i = 0; i < nspans; i++)
    if (spans[i].id == id)
      return &spans[i];
  return NULL;
}

static uint64_t mapping_id; /* 0: locations have no mapping */

static uint64_t function_id(const char *name, const char *file)
{
  bool ins;
  size_t idx = intern_get(&functions, name, prof.n_function, &ins);
  if (ins) {
    pb_function *f = xcalloc(1, sizeof *f);
    perftools__profiles__function__init(f);
    f->id = prof.n_function + 1;
    f->name = str_index(name);
    f->system_name = f->name;
    f->filename = str_index(file ? file : "");
    PUSH(prof.function, prof.n_function, f);
  }
  return prof.function[idx]->id;
}

/* Location id of one frame, `func` or `func@file:line`. */
static uint64_t location_id(const char *frame)
{
  bool ins;
  size_t idx = intern_get(&locations, frame, prof.n_location, &ins);
  if (!ins)
    return prof.location[idx]->id;

  char *copy = xstrdup(frame);
  char *file = NULL;
  int64_t line = 0;
  char *at = strrchr(copy, '@');
  if (at) {
    *at = '\0';
    file = at + 1;
    char *colon = strrchr(file, ':');
    if (colon) {
      *colon = '\0';
      line = strtoll(colon + 1, NULL, 10);
    }
  }
  pb_location *l = xcalloc(1, sizeof *l);
  perftools__profiles__location__init(l);
  l->id = prof.n_location + 1;
  l->mapping_id = mapping_id;
  l->address = 0x401000 + 0x10 * (uint64_t)prof.n_location;
  pb_line *ln = xcalloc(1, sizeof *ln);
  perftools__profiles__line__init(ln);
  ln->function_id = function_id(copy, file);
  ln->line = line;
  l->line = xcalloc(1, sizeof *l->line);
  l->line[0] = ln;
  l->n_line = 1;
  PUSH(prof.location, prof.n_location, l);
  free(copy);
  return l->id;
}

static pb_label *label(const char *key, const char *str, int64_t num)
{
  pb_label *l = xcalloc(1, sizeof *l);
  perftools__profiles__label__init(l);
  l->key = str_index(key);
  if (str)
    l->str = str_index(str);
  l->num = num;
  return l;
}

enum producer { CULPERT, RUST, GO, CUSTOM };
static enum producer producer = CULPERT;
static bool types_set;

/* Which value each sample key fills, per producer (-1 = none). */
struct slots {
  int bytes, objects, inuse_bytes, inuse_objects, samples;
};

static struct slots producer_slots(void)
{
  switch (producer) {
  case RUST:
    return (struct slots){1, -1, -1, -1, 0};
  case GO:
    return (struct slots){1, 0, 3, 2, -1};
  case CUSTOM:
    return (struct slots){-1, -1, -1, -1, -1};
  case CULPERT:
  default:
    return (struct slots){1, 0, 3, 2, 4};
  }
}

static void set_types(void)
{
  if (types_set)
    return;
  types_set = true;
  switch (producer) {
  case RUST:
    PUSH(prof.sample_type, prof.n_sample_type, value_type("allocations", "count"));
    PUSH(prof.sample_type, prof.n_sample_type, value_type("space", "bytes"));
    break;
  case GO:
  case CULPERT:
    PUSH(prof.sample_type, prof.n_sample_type, value_type("alloc_objects", "count"));
    PUSH(prof.sample_type, prof.n_sample_type, value_type("alloc_space", "bytes"));
    PUSH(prof.sample_type, prof.n_sample_type, value_type("inuse_objects", "count"));
    PUSH(prof.sample_type, prof.n_sample_type, value_type("inuse_space", "bytes"));
    if (producer == CULPERT) {
      PUSH(prof.sample_type, prof.n_sample_type, value_type("samples", "count"));
      prof.default_sample_type = str_index("alloc_space");
    }
    break;
  case CUSTOM:
    break;
  }
}

static int64_t parse_int(const char *s, const char *what)
{
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end)
    die("bad number '%s' for %s", s, what);
  return v;
}

static void add_sample(char *rest)
{
  set_types();
  struct slots sl = producer_slots();
  pb_sample *s = xcalloc(1, sizeof *s);
  perftools__profiles__sample__init(s);
  s->n_value = prof.n_sample_type;
  s->value = xcalloc(s->n_value, sizeof *s->value);

  char *save = NULL;
  for (char *tok = strtok_r(rest, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
    if (strncmp(tok, "stack=", 6) == 0 && save && *save) {
      /* stack= is last and takes the rest of the line: C++ frames have
       * spaces. Undo strtok's cut. */
      tok[strlen(tok)] = ' ';
      save += strlen(save);
    }
    char *eq = strchr(tok, '=');
    if (!eq)
      die("sample field '%s' is not key=value", tok);
    *eq = '\0';
    const char *key = tok, *val = eq + 1;
    int slot = -2;
    if (strcmp(key, "bytes") == 0)
      slot = sl.bytes;
    else if (strcmp(key, "objects") == 0)
      slot = sl.objects;
    else if (strcmp(key, "inuse_bytes") == 0)
      slot = sl.inuse_bytes;
    else if (strcmp(key, "inuse_objects") == 0)
      slot = sl.inuse_objects;
    else if (strcmp(key, "samples") == 0)
      slot = sl.samples;
    if (slot != -2) {
      int64_t v = parse_int(val, key);
      if (slot >= 0 && (size_t)slot < s->n_value)
        s->value[slot] = v;
      continue;
    }
    if (strcmp(key, "values") == 0) {
      /* Raw values, comma separated, in sample_type order. */
      char *vs = NULL;
      size_t i = 0;
      for (char *v = strtok_r((char *)val, ",", &vs); v; v = strtok_r(NULL, ",", &vs), i++)
        if (i < s->n_value)
          s->value[i] = parse_int(v, "values");
    } else if (strcmp(key, "span") == 0) {
      struct span *sp = find_span(parse_int(val, "span"));
      if (!sp)
        die("span %s is not declared", val);
      sp->sampled = true;
      PUSH(s->label, s->n_label, label("span_name", sp->name, 0));
      PUSH(s->label, s->n_label, label("span_id", NULL, sp->id));
      if (sp->parent)
        PUSH(s->label, s->n_label, label("span_parent_id", NULL, sp->parent));
    } else if (strcmp(key, "span_name") == 0) {
      PUSH(s->label, s->n_label, label("span_name", val, 0));
    } else if (strcmp(key, "span_id") == 0) {
      PUSH(s->label, s->n_label, label("span_id", NULL, parse_int(val, key)));
    } else if (strcmp(key, "span_parent_id") == 0) {
      PUSH(s->label, s->n_label, label("span_parent_id", NULL, parse_int(val, key)));
    } else if (strcmp(key, "stack") == 0) {
      /* Root first in the text; leaf first in the profile. */
      char **frames = NULL;
      size_t n = 0;
      char *fs = NULL;
      for (char *f = strtok_r((char *)val, ";", &fs); f; f = strtok_r(NULL, ";", &fs))
        PUSH(frames, n, f);
      s->n_location_id = n;
      s->location_id = xcalloc(n, sizeof *s->location_id);
      for (size_t i = 0; i < n; i++)
        s->location_id[i] = location_id(frames[n - 1 - i]);
      free(frames);
    } else {
      die("unknown sample field '%s'", key);
    }
  }
  PUSH(prof.sample, prof.n_sample, s);
}

/* Like culpert's writer: every declared span that is the parent of a
 * declared span but has no sample of its own gets one synthetic sample with
 * zero values, no stack and its span labels, so its name resolves. */
static void add_synthetic_ancestors(void)
{
  for (size_t i = 0; i < nspans; i++) {
    if (spans[i].sampled)
      continue;
    bool is_parent = false;
    for (size_t j = 0; j < nspans && !is_parent; j++)
      is_parent = spans[j].parent == spans[i].id;
    if (!is_parent)
      continue;
    char line[64];
    snprintf(line, sizeof line, "span=%" PRId64, spans[i].id);
    add_sample(line);
  }
}

/* `bad WHAT`: break one rule of the format, after everything else is built. */
static char **bads;
static size_t nbads;

static void apply_bad(const char *what)
{
  if (strcmp(what, "string0") == 0) {
    prof.string_table[0] = xstrdup("not-empty");
  } else if (strcmp(what, "location_id0") == 0) {
    if (!prof.n_location)
      die("bad location_id0 needs a location");
    prof.location[0]->id = 0;
  } else if (strcmp(what, "dangling_location") == 0) {
    if (!prof.n_sample)
      die("bad dangling_location needs a sample");
    pb_sample *s = prof.sample[0];
    s->location_id = xrealloc(s->location_id, (s->n_location_id + 1) * sizeof *s->location_id);
    s->location_id[s->n_location_id++] = 999999;
  } else if (strcmp(what, "dangling_function") == 0) {
    if (!prof.n_location)
      die("bad dangling_function needs a location");
    prof.location[0]->line[0]->function_id = 999999;
  } else if (strcmp(what, "dangling_mapping") == 0) {
    if (!prof.n_location)
      die("bad dangling_mapping needs a location");
    prof.location[0]->mapping_id = 999999;
  } else if (strcmp(what, "value_count") == 0) {
    if (!prof.n_sample || !prof.sample[0]->n_value)
      die("bad value_count needs a sample");
    prof.sample[0]->n_value--;
  } else if (strcmp(what, "extra_value") == 0) {
    if (!prof.n_sample)
      die("bad extra_value needs a sample");
    pb_sample *s = prof.sample[0];
    s->value = xrealloc(s->value, (s->n_value + 1) * sizeof *s->value);
    s->value[s->n_value++] = 0;
  } else if (strcmp(what, "mapping_id0") == 0) {
    if (!prof.n_mapping)
      die("bad mapping_id0 needs a mapping");
    prof.mapping[0]->id = 0;
  } else if (strcmp(what, "duplicate_mapping") == 0) {
    if (!prof.n_mapping)
      die("bad duplicate_mapping needs a mapping");
    pb_mapping *copy = xcalloc(1, sizeof *copy);
    *copy = *prof.mapping[0];
    PUSH(prof.mapping, prof.n_mapping, copy);
  } else if (strcmp(what, "function_id0") == 0) {
    if (!prof.n_function)
      die("bad function_id0 needs a function");
    prof.function[0]->id = 0;
  } else if (strcmp(what, "duplicate_function") == 0) {
    if (prof.n_function < 2)
      die("bad duplicate_function needs two functions");
    prof.function[1]->id = prof.function[0]->id;
  } else if (strcmp(what, "string_index") == 0) {
    if (!prof.n_sample || !prof.sample[0]->n_label)
      die("bad string_index needs a sample with a label");
    prof.sample[0]->label[0]->key = (int64_t)prof.n_string_table + 1000;
  } else if (strcmp(what, "duplicate_location") == 0) {
    if (prof.n_location < 2)
      die("bad duplicate_location needs two locations");
    prof.location[1]->id = prof.location[0]->id;
  } else if (strcmp(what, "duplicate_label_keys") == 0) {
    /* Not a broken rule: the format allows a string twice. The labels of
     * every sample after the first use a second copy of their key. */
    size_t n = prof.n_string_table;
    int64_t *copy = xcalloc(n, sizeof *copy);
    for (size_t i = 1; i < prof.n_sample; i++)
      for (size_t j = 0; j < prof.sample[i]->n_label; j++) {
        pb_label *l = prof.sample[i]->label[j];
        if (!copy[l->key]) {
          copy[l->key] = (int64_t)prof.n_string_table;
          PUSH(prof.string_table, prof.n_string_table, xstrdup(prof.string_table[l->key]));
        }
        l->key = copy[l->key];
      }
    free(copy);
  } else {
    die("unknown bad '%s'", what);
  }
}

static void directive(char *line)
{
  char *p = line + strspn(line, " \t");
  if (*p == '#' || *p == '\0')
    return;
  char *end = p + strlen(p);
  while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
    *--end = '\0';
  char *rest = p + strcspn(p, " \t");
  if (*rest)
    *rest++ = '\0';
  rest += strspn(rest, " \t");

  if (strcmp(p, "producer") == 0) {
    if (types_set)
      die("producer must come before samples and sample_types");
    if (strcmp(rest, "culpert") == 0)
      producer = CULPERT;
    else if (strcmp(rest, "rust") == 0)
      producer = RUST;
    else if (strcmp(rest, "go") == 0)
      producer = GO;
    else
      die("unknown producer '%s'", rest);
  } else if (strcmp(p, "sample_types") == 0) {
    /* Raw type/unit pairs; samples then take values=... only. */
    if (types_set)
      die("sample_types must come before samples");
    producer = CUSTOM;
    types_set = true;
    char *save = NULL;
    for (char *t = strtok_r(rest, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
      char *slash = strchr(t, '/');
      if (!slash)
        die("sample type '%s' is not type/unit", t);
      *slash = '\0';
      PUSH(prof.sample_type, prof.n_sample_type, value_type(t, slash + 1));
    }
  } else if (strcmp(p, "rate") == 0) {
    prof.period = parse_int(rest, "rate");
  } else if (strcmp(p, "time_nanos") == 0) {
    prof.time_nanos = parse_int(rest, "time_nanos");
  } else if (strcmp(p, "duration_nanos") == 0) {
    prof.duration_nanos = parse_int(rest, "duration_nanos");
  } else if (strcmp(p, "comment") == 0) {
    PUSH(prof.comment, prof.n_comment, str_index(rest));
  } else if (strcmp(p, "mapping") == 0) {
    if (mapping_id)
      die("only one mapping is supported");
    pb_mapping *m = xcalloc(1, sizeof *m);
    perftools__profiles__mapping__init(m);
    m->id = mapping_id = 1;
    m->memory_start = 0x400000;
    m->memory_limit = 0x800000;
    m->filename = str_index(rest);
    m->has_functions = true;
    PUSH(prof.mapping, prof.n_mapping, m);
  } else if (strcmp(p, "span") == 0) {
    char *save = NULL;
    char *id = strtok_r(rest, " \t", &save);
    char *parent = id ? strtok_r(NULL, " \t", &save) : NULL;
    char *name = parent ? save + strspn(save, " \t") : NULL;
    if (!name || !*name)
      die("span needs: ID PARENT NAME");
    struct span sp = {parse_int(id, "span id"),
                      strcmp(parent, "-") == 0 ? 0 : parse_int(parent, "span parent"),
                      xstrdup(name), false};
    PUSH(spans, nspans, sp);
  } else if (strcmp(p, "sample") == 0) {
    add_sample(rest);
  } else if (strcmp(p, "bad") == 0) {
    PUSH(bads, nbads, xstrdup(rest));
  } else {
    die("unknown directive '%s'", p);
  }
}

static void write_out(const char *path, const uint8_t *buf, size_t len, bool plain)
{
  FILE *f = fopen(path, "wb");
  if (!f)
    die("cannot open %s: %s", path, strerror(errno));
  if (plain) {
    if (fwrite(buf, 1, len, f) != len)
      die("cannot write %s", path);
  } else {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      die("deflateInit2 failed");
    uint8_t out[65536];
    zs.next_in = (Bytef *)(uintptr_t)buf;
    zs.avail_in = (uInt)len;
    int z;
    do {
      zs.next_out = out;
      zs.avail_out = sizeof out;
      z = deflate(&zs, Z_FINISH);
      size_t n = sizeof out - zs.avail_out;
      if (fwrite(out, 1, n, f) != n)
        die("cannot write %s", path);
    } while (z == Z_OK || z == Z_BUF_ERROR);
    if (z != Z_STREAM_END)
      die("deflate failed");
    deflateEnd(&zs);
  }
  if (fclose(f) != 0)
    die("cannot write %s", path);
}

int main(int argc, char **argv)
{
  bool plain = false;
  if (argc == 4 && strcmp(argv[3], "--plain") == 0)
    plain = true;
  else if (argc != 3) {
    fprintf(stderr, "usage: mkprofile IN.txt OUT.pb.gz [--plain]\n");
    return 2;
  }
  in_path = argv[1];
  FILE *in = strcmp(in_path, "-") == 0 ? stdin : fopen(in_path, "r");
  if (!in)
    die("cannot open: %s", strerror(errno));

  str_index(""); /* string_table[0] */

  prof.period_type = value_type("space", "bytes");
  prof.period = 524288;

  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, in) != -1) {
    lineno++;
    line[strcspn(line, "\n")] = '\0';
    directive(line);
  }
  free(line);
  if (in != stdin)
    fclose(in);
  set_types();
  lineno = 0;
  add_synthetic_ancestors();
  for (size_t i = 0; i < nbads; i++)
    apply_bad(bads[i]);

  size_t len = perftools__profiles__profile__get_packed_size(&prof);
  uint8_t *buf = xcalloc(len, 1);
  perftools__profiles__profile__pack(&prof, buf);
  write_out(argv[2], buf, len, plain);
  free(buf);
  return 0;
}
