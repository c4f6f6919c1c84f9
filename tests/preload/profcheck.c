/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * profcheck: print a culpert profile as plain lines for the preload tests.
 *
 *   profcheck FILE
 *
 * One line per comment ("comment key=value"), the period ("period N"), when
 * the profile was taken and how long it covers ("time NANOS", "duration
 * NANOS"), then one line per sample:
 *   sample AO AS IO IS N span=PATH frames=F1;F2;... leaf_line=L
 * where AO/AS/IO/IS are alloc_objects, alloc_space, inuse_objects and
 * inuse_space picked by type name, N the samples value, PATH the span
 * names from the root joined by '/' ("-" outside every span), and F the
 * function names of the stack, leaf first (inlined frames included), L
 * the source line of the leaf location's innermost function (0: none).
 * Last, "lines N": how many location lines carry a source line number.
 * Exit status 2 when the file is not a readable profile.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"

#define MAX_FILE (256u << 20)

static unsigned char *read_gz(const char *path, size_t *len)
{
  gzFile f = gzopen(path, "rb");
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  if (f == NULL || buf == NULL)
    goto fail;
  for (;;) {
    if (n == cap) {
      if (cap >= MAX_FILE)
        goto fail;
      unsigned char *nb = realloc(buf, cap * 2);
      if (nb == NULL)
        goto fail;
      buf = nb;
      cap *= 2;
    }
    int r = gzread(f, buf + n, (unsigned)(cap - n));
    if (r < 0)
      goto fail;
    if (r == 0)
      break;
    n += (size_t)r;
  }
  gzclose(f);
  *len = n;
  return buf;
fail:
  if (f != NULL)
    gzclose(f);
  free(buf);
  return NULL;
}

static const Perftools__Profiles__Profile *prof;

static const char *str(int64_t i)
{
  if (i < 0 || (size_t)i >= prof->n_string_table)
    return "?";
  return prof->string_table[i];
}

static int value_index(const char *type)
{
  for (size_t i = 0; i < prof->n_sample_type; i++)
    if (strcmp(str(prof->sample_type[i]->type), type) == 0)
      return (int)i;
  return -1;
}

static long long value(const Perftools__Profiles__Sample *s, int idx)
{
  return idx >= 0 && (size_t)idx < s->n_value ? (long long)s->value[idx] : 0;
}

/* span id -> (name, parent id), collected from all samples' labels */
struct span {
  int64_t id, parent;
  const char *name;
};
static struct span *spans;
static size_t nspans;

static void label_span(const Perftools__Profiles__Sample *s, int64_t *id, int64_t *parent,
                       const char **name)
{
  *id = 0;
  *parent = 0;
  *name = NULL;
  for (size_t i = 0; i < s->n_label; i++) {
    const char *k = str(s->label[i]->key);
    if (strcmp(k, "span_id") == 0)
      *id = s->label[i]->num;
    else if (strcmp(k, "span_parent_id") == 0)
      *parent = s->label[i]->num;
    else if (strcmp(k, "span_name") == 0)
      *name = str(s->label[i]->str);
  }
}

static int by_id(const void *a, const void *b)
{
  int64_t x = ((const struct span *)a)->id, y = ((const struct span *)b)->id;
  return (x > y) - (x < y);
}

/* spans is sorted by id once collected: paths thousands of spans deep
 * (thread-pool hand-offs) stay quick to print. */
static const struct span *find_span(int64_t id)
{
  struct span key = {.id = id};
  return bsearch(&key, spans, nspans, sizeof *spans, by_id);
}

static void print_path(int64_t id, int depth)
{
  const struct span *s = find_span(id);
  if (s == NULL || (size_t)depth > nspans) { /* a cycle */
    printf("?");
    return;
  }
  if (s->parent != 0) {
    print_path(s->parent, depth + 1);
    printf("/");
  }
  printf("%s", s->name);
}

static const char *function_name(uint64_t id)
{
  for (size_t i = 0; i < prof->n_function; i++)
    if (prof->function[i]->id == id)
      return str(prof->function[i]->name);
  return "?";
}

static void print_frames(const Perftools__Profiles__Sample *s)
{
  int first = 1;
  for (size_t i = 0; i < s->n_location_id; i++) {
    const Perftools__Profiles__Location *loc = NULL;
    for (size_t j = 0; j < prof->n_location; j++)
      if (prof->location[j]->id == s->location_id[i])
        loc = prof->location[j];
    if (loc == NULL) {
      printf("%s<bad location>", first ? "" : ";");
      first = 0;
      continue;
    }
    if (loc->n_line == 0) {
      printf("%s0x%llx", first ? "" : ";", (unsigned long long)loc->address);
      first = 0;
    }
    for (size_t l = 0; l < loc->n_line; l++) {
      const char *n = function_name(loc->line[l]->function_id);
      printf("%s%s", first ? "" : ";", *n ? n : "?");
      first = 0;
    }
  }
}

/* The source line of the innermost function at the leaf location. */
static int64_t leaf_line(const Perftools__Profiles__Sample *s)
{
  if (s->n_location_id == 0)
    return 0;
  for (size_t j = 0; j < prof->n_location; j++)
    if (prof->location[j]->id == s->location_id[0])
      return prof->location[j]->n_line > 0 ? prof->location[j]->line[0]->line : 0;
  return 0;
}

int main(int argc, char **argv)
{
  size_t len;
  if (argc != 2) {
    fprintf(stderr, "usage: profcheck FILE\n");
    return 2;
  }
  unsigned char *buf = read_gz(argv[1], &len);
  if (buf == NULL) {
    fprintf(stderr, "profcheck: cannot read %s\n", argv[1]);
    return 2;
  }
  prof = perftools__profiles__profile__unpack(NULL, len, buf);
  if (prof == NULL) {
    fprintf(stderr, "profcheck: %s is not a pprof profile\n", argv[1]);
    return 2;
  }
  for (size_t i = 0; i < prof->n_comment; i++)
    printf("comment %s\n", str(prof->comment[i]));
  printf("period %lld\n", (long long)prof->period);
  printf("time %lld\n", (long long)prof->time_nanos);
  printf("duration %lld\n", (long long)prof->duration_nanos);
  spans = calloc(prof->n_sample + 1, sizeof *spans);
  for (size_t i = 0; i < prof->n_sample; i++) {
    struct span sp;
    label_span(prof->sample[i], &sp.id, &sp.parent, &sp.name);
    if (sp.id != 0 && sp.name != NULL)
      spans[nspans++] = sp;
  }
  qsort(spans, nspans, sizeof *spans, by_id);
  size_t kept = 0;
  for (size_t i = 0; i < nspans; i++)
    if (kept == 0 || spans[kept - 1].id != spans[i].id)
      spans[kept++] = spans[i];
  nspans = kept;
  int ao = value_index("alloc_objects"), as = value_index("alloc_space");
  int io = value_index("inuse_objects"), is = value_index("inuse_space");
  int ns = value_index("samples");
  for (size_t i = 0; i < prof->n_sample; i++) {
    const Perftools__Profiles__Sample *s = prof->sample[i];
    struct span sp;
    label_span(s, &sp.id, &sp.parent, &sp.name);
    printf("sample %lld %lld %lld %lld %lld span=", value(s, ao), value(s, as), value(s, io),
           value(s, is), value(s, ns));
    if (sp.id == 0)
      printf("-");
    else
      print_path(sp.id, 0);
    printf(" frames=");
    print_frames(s);
    printf(" leaf_line=%lld\n", (long long)leaf_line(s));
  }
  size_t numbered = 0;
  for (size_t i = 0; i < prof->n_location; i++)
    for (size_t l = 0; l < prof->location[i]->n_line; l++)
      numbered += prof->location[i]->line[l]->line != 0;
  printf("lines %zu\n", numbered);
  perftools__profiles__profile__free_unpacked((Perftools__Profiles__Profile *)prof, NULL);
  free(spans);
  free(buf);
  return 0;
}
