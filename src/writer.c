/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * writer.c: assembles the pprof Profile of a snapshot and gzips it.
 *
 * Everything about the file format lives here (profile-format.md): the
 * sample types, span path ids and their labels, synthetic samples for span
 * ancestors without samples of their own, locations with mappings and
 * functions, the string table and the sorted comments. Runs at exit or on a
 * snapshot call, on a thread whose allocations the collector passes
 * straight through, so it allocates freely. Between calls it keeps only
 * what symcache.c holds: the answers about code addresses.
 */
#include "writer.h"

#include "demangle.h"
#include "pbenc.h"
#include "symbolize.h"
#include "symcache.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* pprof field numbers (profile.proto). */
enum {
  PROFILE_SAMPLE_TYPE = 1,
  PROFILE_SAMPLE = 2,
  PROFILE_MAPPING = 3,
  PROFILE_LOCATION = 4,
  PROFILE_FUNCTION = 5,
  PROFILE_STRING_TABLE = 6,
  PROFILE_TIME_NANOS = 9,
  PROFILE_DURATION_NANOS = 10,
  PROFILE_PERIOD_TYPE = 11,
  PROFILE_PERIOD = 12,
  PROFILE_COMMENT = 13,
  PROFILE_DEFAULT_SAMPLE_TYPE = 14,
  VALUE_TYPE_TYPE = 1,
  VALUE_TYPE_UNIT = 2,
  SAMPLE_LOCATION_ID = 1,
  SAMPLE_VALUE = 2,
  SAMPLE_LABEL = 3,
  LABEL_KEY = 1,
  LABEL_STR = 2,
  LABEL_NUM = 3,
  MAPPING_ID = 1,
  MAPPING_MEMORY_START = 2,
  MAPPING_MEMORY_LIMIT = 3,
  MAPPING_FILE_OFFSET = 4,
  MAPPING_FILENAME = 5,
  MAPPING_BUILD_ID = 6,
  MAPPING_HAS_FUNCTIONS = 7,
  MAPPING_HAS_FILENAMES = 8,
  MAPPING_HAS_LINE_NUMBERS = 9,
  MAPPING_HAS_INLINE_FRAMES = 10,
  LOCATION_ID = 1,
  LOCATION_MAPPING_ID = 2,
  LOCATION_ADDRESS = 3,
  LOCATION_LINE = 4,
  LINE_FUNCTION_ID = 1,
  LINE_LINE = 2,
  FUNCTION_ID = 1,
  FUNCTION_NAME = 2,
  FUNCTION_SYSTEM_NAME = 3,
  FUNCTION_FILENAME = 4,
  FUNCTION_START_LINE = 5,
};

#define NVALUES 5

/* Name of a function whose address is in no mapping (code unloaded with
 * dlclose before the snapshot, JIT code, garbage from a broken unwind).
 * Addresses inside a mapping but without a symbol are named
 * "<file basename>+0x<file offset>" instead, which stays meaningful across
 * runs and can be symbolized offline. */
#define UNKNOWN_FUNCTION "[unknown]"

/* ---------------------------------------------------------------------- */
/* Hash tables: open addressing, power-of-two sizes, at most half full.    */

static uint64_t mix64(uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
  uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 0x100000001b3ULL;
  }
  return mix64(h);
}

/* uint64 key -> uint32 value. */
struct u64map {
  uint64_t *keys;
  uint32_t *vals; /* 0 = empty slot; stored values are value + 1 */
  size_t cap;
  size_t n;
};

static int u64map_grow(struct u64map *m)
{
  size_t cap = m->cap ? m->cap * 2 : 64;
  uint64_t *keys = malloc(cap * sizeof *keys);
  uint32_t *vals = calloc(cap, sizeof *vals);
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return -ENOMEM;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->vals[i])
      continue;
    size_t j = mix64(m->keys[i]) & (cap - 1);
    while (vals[j])
      j = (j + 1) & (cap - 1);
    keys[j] = m->keys[i];
    vals[j] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = keys;
  m->vals = vals;
  m->cap = cap;
  return 0;
}

/* Finds `key`; when absent inserts it with value `val`. Returns the value
 * stored for key, or -ENOMEM. *found tells which happened. */
static int64_t u64map_put(struct u64map *m, uint64_t key, uint32_t val, int *found)
{
  if ((m->n + 1) * 2 > m->cap && u64map_grow(m))
    return -ENOMEM;
  size_t j = mix64(key) & (m->cap - 1);
  while (m->vals[j]) {
    if (m->keys[j] == key) {
      *found = 1;
      return m->vals[j] - 1;
    }
    j = (j + 1) & (m->cap - 1);
  }
  m->keys[j] = key;
  m->vals[j] = val + 1;
  m->n++;
  *found = 0;
  return val;
}

static void u64map_free(struct u64map *m)
{
  free(m->keys);
  free(m->vals);
}

/* The string table: owned copies, deduplicated through a hash index. */
struct strtab {
  char **strs;
  size_t *lens;
  size_t n;
  size_t cap;
  uint32_t *slots; /* index + 1, 0 = empty */
  size_t nslots;
};

static int strtab_rehash(struct strtab *t)
{
  size_t nslots = t->nslots ? t->nslots * 2 : 256;
  uint32_t *slots = calloc(nslots, sizeof *slots);
  if (!slots)
    return -ENOMEM;
  for (size_t i = 0; i < t->n; i++) {
    size_t j = hash_bytes(t->strs[i], t->lens[i]) & (nslots - 1);
    while (slots[j])
      j = (j + 1) & (nslots - 1);
    slots[j] = (uint32_t)i + 1;
  }
  free(t->slots);
  t->slots = slots;
  t->nslots = nslots;
  return 0;
}

/* Index of `s` (n bytes) in the table, adding it if new; -ENOMEM. */
static int64_t strtab_intern_n(struct strtab *t, const char *s, size_t n)
{
  if ((t->n + 1) * 2 > t->nslots && strtab_rehash(t))
    return -ENOMEM;
  size_t j = hash_bytes(s, n) & (t->nslots - 1);
  while (t->slots[j]) {
    size_t i = t->slots[j] - 1;
    if (t->lens[i] == n && memcmp(t->strs[i], s, n) == 0)
      return (int64_t)i;
    j = (j + 1) & (t->nslots - 1);
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 128;
    char **strs = realloc(t->strs, cap * sizeof *strs);
    if (!strs)
      return -ENOMEM;
    t->strs = strs;
    size_t *lens = realloc(t->lens, cap * sizeof *lens);
    if (!lens)
      return -ENOMEM;
    t->lens = lens;
    t->cap = cap;
  }
  char *copy = malloc(n + 1);
  if (!copy)
    return -ENOMEM;
  memcpy(copy, s, n);
  copy[n] = '\0';
  t->strs[t->n] = copy;
  t->lens[t->n] = n;
  t->slots[j] = (uint32_t)t->n + 1;
  return (int64_t)t->n++;
}

static int64_t strtab_intern(struct strtab *t, const char *s)
{
  return strtab_intern_n(t, s, strlen(s));
}

static void strtab_free(struct strtab *t)
{
  for (size_t i = 0; i < t->n; i++)
    free(t->strs[i]);
  free(t->strs);
  free(t->lens);
  free(t->slots);
}

/* ---------------------------------------------------------------------- */
/* The profile under construction                                          */

/* A distinct span path; its id in the file is its index + 1. */
struct path {
  uint32_t parent; /* parent path id, 0 for a root */
  int64_t name;    /* string index */
  int has_samples;
  int synthetic;
};

/* One Line of a location: a function id and a source line (0: unknown). */
struct lineref {
  uint32_t function;
  uint32_t line;
};

struct location {
  uint64_t address;
  long map;              /* mapping index, -1 when none */
  int64_t name;          /* function name (string index) */
  int64_t system_name;   /* raw symbol (string index) */
  uint64_t start;        /* address of the function's symbol, 0 when unknown */
  struct lineref *lines; /* innermost (inlined) first, the symbol's function last */
  uint32_t nlines;
};

struct function {
  int64_t name;
  int64_t system_name;
  int64_t filename; /* 0 when unknown */
  int64_t start_line;
};

/* What symbolization achieved in one mapping, and its strings. */
struct mapinfo {
  int64_t filename;
  int64_t build_id;
  unsigned char has_functions, has_filenames, has_lines, has_inline;
};

struct ctx {
  const struct culpert__wprofile *p;
  struct strtab strs;
  struct culpert__symbolizer *sym;
  int cache; /* symcache.c is ours for this profile */

  uint32_t *node_path; /* span node -> path id; 0 unresolved, UINT32_MAX visiting */
  uint32_t *chain;     /* scratch: span nodes from a node up to an ancestor */
  struct path *paths;  /* paths[id - 1] */
  size_t npaths;
  size_t cap_paths;
  struct u64map path_index; /* (parent id << 32 | name) -> path index */

  struct location *locs; /* locs[id - 1] */
  size_t nlocs;
  size_t cap_locs;
  struct u64map loc_index; /* address -> location index */

  struct function *funcs; /* funcs[id - 1] */
  size_t nfuncs;
  size_t cap_funcs;
  struct u64map func_index; /* (system_name << 32 | filename) -> index */

  uint32_t *sample_path;  /* span path id per input sample */
  uint64_t **sample_locs; /* location ids per input sample */
  uint32_t *sample_nlocs;
  struct mapinfo *maps; /* per mapping of the symbolizer */
  size_t nmaps;
  const char **comments; /* sorted by key */
  size_t ncomments;
  int64_t k_span_name, k_span_id, k_span_parent_id;
};

/* Makes room for element n of an array of `size`-byte elements: returns
 * the (possibly moved) array, or NULL when out of memory (the old array
 * is then untouched). */
static void *grow(void *arr, size_t *cap, size_t n, size_t size)
{
  if (n < *cap)
    return arr;
  size_t c = *cap ? *cap * 2 : 32;
  void *a = realloc(arr, c * size);
  if (a)
    *cap = c;
  return a;
}

/* Path id of span node `node`, assigning ids to it and its ancestors in
 * root-first order. Nodes with the same chain of names share one id. A
 * parent index out of range or a cycle makes the node a root. Returns the
 * id (>= 1), 0 for "no span", or -ENOMEM. */
static int64_t span_path(struct ctx *c, uint32_t node)
{
  const struct culpert__wprofile *p = c->p;
  if (node == 0 || node >= p->nspans)
    return 0;
  if (c->node_path[node] && c->node_path[node] != UINT32_MAX)
    return c->node_path[node];

  /* Walk up to a resolved ancestor or the root, recording the chain. */
  size_t depth = 0;
  uint32_t j = node;
  while (j != 0 && j < p->nspans && c->node_path[j] == 0) {
    c->node_path[j] = UINT32_MAX;
    c->chain[depth++] = j;
    j = p->spans[j].parent;
  }
  /* j is now 0 (root), out of range, resolved, or on the chain (a cycle). */
  uint32_t parent_id = 0;
  if (j != 0 && j < p->nspans && c->node_path[j] != UINT32_MAX)
    parent_id = c->node_path[j];

  /* Resolve from the top of the chain back down to `node`. */
  while (depth > 0) {
    uint32_t cur = c->chain[--depth];
    const char *name = p->spans[cur].name ? p->spans[cur].name : "";
    int64_t name_idx = strtab_intern(&c->strs, name);
    if (name_idx < 0)
      return -ENOMEM;
    int found;
    uint64_t key = ((uint64_t)parent_id << 32) | (uint64_t)name_idx;
    int64_t idx = u64map_put(&c->path_index, key, (uint32_t)c->npaths, &found);
    if (idx < 0)
      return -ENOMEM;
    if (!found) {
      void *g = grow(c->paths, &c->cap_paths, c->npaths, sizeof *c->paths);
      if (!g)
        return -ENOMEM;
      c->paths = g;
      c->paths[c->npaths] = (struct path){.parent = parent_id, .name = name_idx};
      c->npaths++;
    }
    c->node_path[cur] = (uint32_t)idx + 1;
    parent_id = (uint32_t)idx + 1;
  }
  return c->node_path[node];
}

/* Writes "<basename>+0x<offset>" for an address without a symbol. */
static int64_t unnamed_function(struct ctx *c, const struct culpert__smap *m, uint64_t addr)
{
  char buf[320];
  const char *base = strrchr(m->path, '/');
  base = base ? base + 1 : m->path;
  snprintf(buf, sizeof buf, "%.256s+0x%llx", base,
           (unsigned long long)(addr - m->start + m->offset));
  return strtab_intern(&c->strs, buf);
}

/* Names the function around one location. */
static int name_location(struct ctx *c, struct location *loc)
{
  struct culpert__symbol sym = {NULL, 0};
  const struct culpert__smap *m =
      loc->map >= 0 ? culpert__symbolize_map(c->sym, (size_t)loc->map) : NULL;
  int found = -ENOENT;
  if (m && !(c->cache && culpert__symcache_symbol(loc->address, &sym, &found))) {
    found = culpert__symbolize_addr(c->sym, loc->address, &sym);
    if (c->cache)
      culpert__symcache_put_symbol(loc->address, &sym, found);
  }

  if (m && found == 0) {
    /* A symbol version ("memcpy@@GLIBC_2.14" in a .symtab) stays in the
     * system name only. */
    size_t base = strcspn(sym.name, "@");
    char *plain = base > 0 && sym.name[base] ? strndup(sym.name, base) : NULL;
    char *pretty = culpert__demangle(plain ? plain : sym.name);
    loc->system_name = strtab_intern(&c->strs, sym.name);
    if (pretty)
      loc->name = strtab_intern(&c->strs, pretty);
    else if (plain)
      loc->name = strtab_intern(&c->strs, plain);
    else
      loc->name = loc->system_name;
    loc->start = sym.start;
    free(pretty);
    free(plain);
    c->maps[loc->map].has_functions = 1;
  } else if (m) {
    loc->name = loc->system_name = unnamed_function(c, m, loc->address);
  } else {
    loc->name = loc->system_name = strtab_intern(&c->strs, UNKNOWN_FUNCTION);
  }
  return loc->name < 0 || loc->system_name < 0 ? -ENOMEM : 0;
}

/* Function id of (name, system name, file), created on first use. */
static int64_t function_id(struct ctx *c, int64_t name, int64_t system_name, int64_t filename,
                           int64_t start_line)
{
  int found;
  uint64_t key = ((uint64_t)system_name << 32) | (uint64_t)filename;
  int64_t idx = u64map_put(&c->func_index, key, (uint32_t)c->nfuncs, &found);
  if (idx < 0)
    return -ENOMEM;
  if (!found) {
    void *g = grow(c->funcs, &c->cap_funcs, c->nfuncs, sizeof *c->funcs);
    if (!g)
      return -ENOMEM;
    c->funcs = g;
    c->funcs[c->nfuncs++] = (struct function){name, system_name, filename, start_line};
  }
  return idx + 1;
}

/* String indices of an inlined function's display and raw names. Only a
 * linkage name is demangled: a qualified plain name is shown as it is. */
static int inline_names(struct ctx *c, const struct culpert__inline *inl, int64_t *name,
                        int64_t *system_name)
{
  const char *raw = inl->name ? inl->name : "[inlined]";
  char *pretty = inl->name && inl->mangled ? culpert__demangle(raw) : NULL;
  *system_name = strtab_intern(&c->strs, raw);
  *name = pretty ? strtab_intern(&c->strs, pretty) : *system_name;
  free(pretty);
  return *name < 0 || *system_name < 0 ? -ENOMEM : 0;
}

static int same_file(const char *a, const char *b)
{
  return a && b && strcmp(a, b) == 0;
}

/* The Lines of one location from its source position `pos` and that of
 * its function's first instruction, `start`. Inlined calls become one Line
 * each, innermost first, each with the line it is at; the symbol's own
 * function comes last, with the line of the outermost call. A function's
 * file is where its code is; the symbol's function takes the file of its
 * first instruction. A line that lies in another file than its function's
 * is left out rather than shown against the wrong file. */
static int location_lines(struct ctx *c, struct location *loc, const struct culpert__srcpos *pos,
                          const struct culpert__srcpos *start)
{
  const char *outer_file = start->ninl ? start->inl[0].call_file : start->file;
  uint32_t outer_start = start->ninl ? 0 : start->first_line ? start->first_line : start->line;
  if (!outer_file)
    outer_file = pos->ninl ? pos->inl[0].call_file : pos->file;
  loc->lines = calloc((size_t)pos->ninl + 1, sizeof *loc->lines);
  if (!loc->lines)
    return -ENOMEM;

  /* Inlined calls, innermost first. Call k's code is at the call site of
   * call k + 1 (or at pos itself for the innermost). */
  for (uint32_t k = pos->ninl; k-- > 0;) {
    const char *file = k + 1 == pos->ninl ? pos->file : pos->inl[k + 1].call_file;
    uint32_t line = k + 1 == pos->ninl ? pos->line : pos->inl[k + 1].call_line;
    int64_t name, system_name;
    if (inline_names(c, &pos->inl[k], &name, &system_name))
      return -ENOMEM;
    int64_t filename = file ? strtab_intern(&c->strs, file) : 0;
    if (filename < 0)
      return -ENOMEM;
    int64_t id = function_id(c, name, system_name, filename, 0);
    if (id < 0)
      return -ENOMEM;
    loc->lines[loc->nlines++] = (struct lineref){(uint32_t)id, line};
  }

  const char *at_file = pos->ninl ? pos->inl[0].call_file : pos->file;
  uint32_t at_line = pos->ninl ? pos->inl[0].call_line : pos->line;
  int64_t filename = outer_file ? strtab_intern(&c->strs, outer_file) : 0;
  if (filename < 0)
    return -ENOMEM;
  int64_t id = function_id(c, loc->name, loc->system_name, filename, loc->start ? outer_start : 0);
  if (id < 0)
    return -ENOMEM;
  loc->lines[loc->nlines++] =
      (struct lineref){(uint32_t)id, same_file(at_file, outer_file) ? at_line : 0};

  if (loc->map >= 0) {
    struct mapinfo *m = &c->maps[loc->map];
    m->has_filenames |= outer_file != NULL;
    for (uint32_t k = 0; k < loc->nlines; k++)
      m->has_lines |= loc->lines[k].line != 0;
    m->has_inline |= pos->ninl != 0;
  }
  return 0;
}

/* The source positions of n addresses: from the cache, and for the rest
 * from the symbolizer in one call (then kept in the cache). */
static int source_positions(struct ctx *c, const uint64_t *addrs, size_t n,
                            struct culpert__srcpos *pos)
{
  if (!c->cache)
    return culpert__symbolize_lines(c->sym, addrs, n, pos);
  uint64_t *miss = malloc((n + 1) * sizeof *miss);
  size_t *where = malloc((n + 1) * sizeof *where);
  struct culpert__srcpos *got = calloc(n + 1, sizeof *got);
  size_t nmiss = 0;
  int rc = -ENOMEM;
  if (miss == NULL || where == NULL || got == NULL)
    goto out;
  for (size_t i = 0; i < n; i++) {
    if (!culpert__symcache_srcpos(addrs[i], &pos[i])) {
      miss[nmiss] = addrs[i];
      where[nmiss++] = i;
    }
  }
  rc = nmiss > 0 ? culpert__symbolize_lines(c->sym, miss, nmiss, got) : 0;
  for (size_t k = 0; k < nmiss && rc == 0; k++) {
    pos[where[k]] = got[k];
    culpert__symcache_put_srcpos(miss[k], &got[k]);
  }
out:
  free(miss);
  free(where);
  free(got);
  return rc;
}

/*
 * Where a process or a thread starts: below main (_start, libc's start-up
 * functions) and below each thread's start routine (libc's start_thread,
 * clone3). These frames are on every stack and nobody looks up their
 * source line, but libc's DWARF lies deep in a large, often
 * zlib-compressed debug file (libc6-dbg): finding it cost every profile
 * 1-3 ms, and 20-40 ms once threads appear. They keep their names, without
 * file and line. Only in libc, but _start, which nothing else is called.
 */
static int entry_point(const struct ctx *c, const struct location *loc)
{
  static const char *const in_libc[] = {
      "__libc_start_main",
      "__libc_start_main_impl",
      "__libc_start_call_main",
      "start_thread",
      "clone",
      "clone3",
      "__clone",
      "__clone3",
      "__clone_internal",
      "__GI___clone",
      "__GI___clone3",
      "__GI___clone_internal",
  };
  if (loc->system_name <= 0 || loc->map < 0)
    return 0;
  const char *sys = c->strs.strs[loc->system_name];
  size_t len = strcspn(sys, "@");
  if (len == 6 && strncmp(sys, "_start", 6) == 0)
    return 1;
  const char *path = culpert__symbolize_map(c->sym, (size_t)loc->map)->path;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strncmp(base, "libc.so", 7) != 0 && strncmp(base, "libc-", 5) != 0)
    return 0;
  for (size_t i = 0; i < sizeof in_libc / sizeof in_libc[0]; i++)
    if (strlen(in_libc[i]) == len && strncmp(sys, in_libc[i], len) == 0)
      return 1;
  return 0;
}

/* Names every location, finds its source position (one pass over each
 * object's DWARF, whatever the number of locations) and its Lines. */
static int resolve_locations(struct ctx *c)
{
  size_t n = c->nlocs;
  uint64_t *addrs = NULL;
  struct culpert__srcpos *pos = NULL;
  int rc = 0;

  for (size_t i = 0; i < n; i++) {
    rc = name_location(c, &c->locs[i]);
    if (rc)
      goto out;
  }
  addrs = calloc(2 * n + 1, sizeof *addrs);
  pos = calloc(2 * n + 1, sizeof *pos);
  if (!addrs || !pos) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    if (entry_point(c, &c->locs[i]))
      continue; /* address 0: no source position */
    addrs[i] = c->locs[i].address;
    addrs[n + i] = c->locs[i].start ? c->locs[i].start : c->locs[i].address;
  }
  if (!(c->p->flags & CULPERT__WRITER_NAMES_ONLY))
    rc = source_positions(c, addrs, 2 * n, pos);
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = location_lines(c, &c->locs[i], &pos[i], &pos[n + i]);

out:
  free(addrs);
  free(pos);
  return rc;
}

/* Location ids of one input sample, leaf first. The leaf keeps its ip;
 * every caller frame is a return address and gets ip - 1, so it lands in
 * the call instruction. Leading frames inside libculpert.so are dropped. */
static int sample_locations(struct ctx *c, const struct culpert__wsample *s, uint64_t *ids,
                            uint32_t *nids)
{
  uint32_t n = 0;
  for (uint32_t k = 0; k < s->depth; k++) {
    uint64_t ip = s->ips[k];
    if (ip == 0)
      continue;
    uint64_t addr = k == 0 ? ip : ip - 1;
    long map = culpert__symbolize_find_map(c->sym, addr);
    if (map >= 0 && culpert__symbolize_map(c->sym, (size_t)map)->is_self)
      continue; /* culpert's own frames: above the sample, or a wrapper
                 * (dlclose, quick_exit) that called the program's code */
    int found;
    int64_t idx = u64map_put(&c->loc_index, addr, (uint32_t)c->nlocs, &found);
    if (idx < 0)
      return -ENOMEM;
    if (!found) {
      void *g = grow(c->locs, &c->cap_locs, c->nlocs, sizeof *c->locs);
      if (!g)
        return -ENOMEM;
      c->locs = g;
      c->locs[c->nlocs++] = (struct location){.address = addr, .map = map};
    }
    ids[n++] = (uint64_t)idx + 1;
  }
  *nids = n;
  return 0;
}

/* An estimate as the nearest int64; negative or non-finite becomes 0. */
static int64_t estimate(double v)
{
  if (!(v > 0))
    return 0;
  if (v >= 9.2e18)
    return INT64_MAX;
  return (int64_t)llround(v);
}

static void encode_value_type(struct culpert__pbuf *b, uint32_t field, int64_t type, int64_t unit)
{
  size_t mark = culpert__pbenc_begin(b, field);
  culpert__pbenc_int64(b, VALUE_TYPE_TYPE, type);
  culpert__pbenc_int64(b, VALUE_TYPE_UNIT, unit);
  culpert__pbenc_end(b, mark);
}

static void encode_label(struct culpert__pbuf *b, int64_t key, int64_t str, int64_t num)
{
  size_t mark = culpert__pbenc_begin(b, SAMPLE_LABEL);
  culpert__pbenc_int64(b, LABEL_KEY, key);
  if (str)
    culpert__pbenc_int64(b, LABEL_STR, str);
  else
    culpert__pbenc_int64(b, LABEL_NUM, num);
  culpert__pbenc_end(b, mark);
}

/* A sample with its span labels (none for path id 0). */
static void encode_sample(struct ctx *c, struct culpert__pbuf *b, const uint64_t *locs,
                          uint32_t nlocs, const int64_t *values, uint32_t path_id)
{
  size_t mark = culpert__pbenc_begin(b, PROFILE_SAMPLE);
  culpert__pbenc_packed_uint64(b, SAMPLE_LOCATION_ID, locs, nlocs);
  /* Written even when all are 0: pprof needs one value per sample type. */
  size_t vmark = culpert__pbenc_begin(b, SAMPLE_VALUE);
  for (int i = 0; i < NVALUES; i++)
    culpert__pbenc_varint(b, (uint64_t)values[i]);
  culpert__pbenc_end(b, vmark);
  if (path_id) {
    const struct path *path = &c->paths[path_id - 1];
    encode_label(b, c->k_span_name, path->name, 0);
    encode_label(b, c->k_span_id, 0, path_id);
    if (path->parent)
      encode_label(b, c->k_span_parent_id, 0, path->parent);
  }
  culpert__pbenc_end(b, mark);
}

/* Orders "key=value" comments by key, then by the whole text. */
static int comment_cmp(const void *a, const void *b)
{
  const char *x = *(const char *const *)a, *y = *(const char *const *)b;
  size_t kx = strcspn(x, "="), ky = strcspn(y, "=");
  size_t k = kx < ky ? kx : ky;
  int r = memcmp(x, y, k);
  if (r)
    return r;
  if (kx != ky)
    return kx < ky ? -1 : 1;
  return strcmp(x, y);
}

static int gzip(const unsigned char *in, size_t inlen, const struct culpert__wprofile *p,
                unsigned char **out, size_t *outlen)
{
  /* A window no larger than the input, and a hash table to match: zlib's
   * defaults take 256 KiB and clear 64 KiB of it, which for the small
   * profile of a short-lived process costs more page faults than the
   * compression itself. The output is the same gzip format either way. */
  int window = 9; /* zlib's smallest for deflate */
  while (window < 15 && ((size_t)1 << window) < inlen)
    window++;
  int mem_level = window - 7 < 1 ? 1 : window - 7; /* 8 at a 32 KiB window */
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, window + 16, mem_level, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    return -ENOMEM;
  int rc = 0;
  unsigned char *buf = NULL;
  unsigned char extra[CULPERT__GZMARK_EXTRA];
  gz_header head;
  if (p->mark != NULL && p->mark_len <= CULPERT__GZMARK_MAX) {
    memset(&head, 0, sizeof head);
    head.extra = extra;
    head.extra_len = (uInt)culpert__gzmark_extra(
        extra, p->mark, p->mark_len, p->run,
        p->run != NULL && p->run_len <= CULPERT__GZMARK_RUN_MAX ? p->run_len : 0);
    head.os = 3; /* Unix, as without a header of our own */
    if (deflateSetHeader(&zs, &head) != Z_OK) {
      rc = -EINVAL;
      goto out;
    }
  }
  size_t cap = deflateBound(&zs, (uLong)inlen) + 32;
  buf = malloc(cap);
  if (!buf) {
    rc = -ENOMEM;
    goto out;
  }
  zs.next_in = (Bytef *)(uintptr_t)in;
  zs.avail_in = (uInt)inlen;
  zs.next_out = buf;
  zs.avail_out = (uInt)cap;
  if (inlen > UINT32_MAX || cap > UINT32_MAX || deflate(&zs, Z_FINISH) != Z_STREAM_END) {
    rc = -EFBIG;
    goto out;
  }
  *out = buf;
  *outlen = zs.total_out;
  buf = NULL;

out:
  deflateEnd(&zs);
  free(buf);
  return rc;
}

/* The strings every profile has ("" first: index 0) and the comments,
 * sorted by key. */
static int prepare_strings(struct ctx *c)
{
  const struct culpert__wprofile *p = c->p;
  static const char *const fixed[] = {"",      "alloc_objects", "count",       "alloc_space",
                                      "bytes", "inuse_objects", "inuse_space", "samples",
                                      "space", "span_name",     "span_id",     "span_parent_id"};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    if (strtab_intern(&c->strs, fixed[i]) < 0)
      return -ENOMEM;
  c->k_span_name = strtab_intern(&c->strs, "span_name");
  c->k_span_id = strtab_intern(&c->strs, "span_id");
  c->k_span_parent_id = strtab_intern(&c->strs, "span_parent_id");

  c->comments = calloc(p->ncomments + 1, sizeof *c->comments);
  if (!c->comments)
    return -ENOMEM;
  for (size_t i = 0; i < p->ncomments; i++)
    if (p->comments[i])
      c->comments[c->ncomments++] = p->comments[i];
  qsort(c->comments, c->ncomments, sizeof *c->comments, comment_cmp);
  for (size_t i = 0; i < c->ncomments; i++)
    if (strtab_intern(&c->strs, c->comments[i]) < 0)
      return -ENOMEM;
  return 0;
}

/* Span path ids of the samples, then synthetic samples for the ancestors
 * that have none of their own (up to the root). */
static int assign_spans(struct ctx *c)
{
  const struct culpert__wprofile *p = c->p;
  c->node_path = calloc(p->nspans + 1, sizeof *c->node_path);
  c->chain = calloc(p->nspans + 1, sizeof *c->chain);
  c->sample_path = calloc(p->nsamples + 1, sizeof *c->sample_path);
  if (!c->node_path || !c->chain || !c->sample_path)
    return -ENOMEM;
  for (size_t i = 0; i < p->nsamples; i++) {
    int64_t id = span_path(c, p->samples[i].span);
    if (id < 0)
      return -ENOMEM;
    c->sample_path[i] = (uint32_t)id;
    if (id)
      c->paths[id - 1].has_samples = 1;
  }
  for (size_t id = 1; id <= c->npaths; id++) {
    if (!c->paths[id - 1].has_samples)
      continue;
    for (uint32_t a = c->paths[id - 1].parent; a; a = c->paths[a - 1].parent) {
      struct path *anc = &c->paths[a - 1];
      if (anc->has_samples || anc->synthetic)
        break;
      anc->synthetic = 1;
    }
  }
  return 0;
}

/* Mappings of the process, the locations of every stack, their functions
 * and source positions. */
static int collect_code(struct ctx *c)
{
  const struct culpert__wprofile *p = c->p;
  int rc = culpert__symbolize_open(&c->sym);
  if (rc)
    return rc;
  c->cache = culpert__symcache_begin();
  c->nmaps = culpert__symbolize_nmaps(c->sym);
  c->maps = calloc(c->nmaps + 1, sizeof *c->maps);
  c->sample_locs = calloc(p->nsamples + 1, sizeof *c->sample_locs);
  c->sample_nlocs = calloc(p->nsamples + 1, sizeof *c->sample_nlocs);
  if (!c->maps || !c->sample_locs || !c->sample_nlocs)
    return -ENOMEM;
  for (size_t i = 0; i < c->nmaps; i++) {
    const struct culpert__smap *m = culpert__symbolize_map(c->sym, i);
    c->maps[i].filename = strtab_intern(&c->strs, m->path);
    c->maps[i].build_id = strtab_intern(&c->strs, m->build_id);
    if (c->maps[i].filename < 0 || c->maps[i].build_id < 0)
      return -ENOMEM;
  }
  for (size_t i = 0; i < p->nsamples; i++) {
    const struct culpert__wsample *s = &p->samples[i];
    if (s->depth && !s->ips)
      continue;
    c->sample_locs[i] = malloc(((size_t)s->depth + 1) * sizeof *c->sample_locs[i]);
    if (!c->sample_locs[i])
      return -ENOMEM;
    rc = sample_locations(c, s, c->sample_locs[i], &c->sample_nlocs[i]);
    if (rc)
      return rc;
  }
  return resolve_locations(c);
}

/* Encodes the Profile message; every string is interned by now. Errors
 * are left in b->err. */
static void encode_profile(struct ctx *c, struct culpert__pbuf *b)
{
  const struct culpert__wprofile *p = c->p;
  static const char *const types[NVALUES][2] = {{"alloc_objects", "count"},
                                                {"alloc_space", "bytes"},
                                                {"inuse_objects", "count"},
                                                {"inuse_space", "bytes"},
                                                {"samples", "count"}};
  for (int i = 0; i < NVALUES; i++)
    encode_value_type(b, PROFILE_SAMPLE_TYPE, strtab_intern(&c->strs, types[i][0]),
                      strtab_intern(&c->strs, types[i][1]));

  for (size_t i = 0; i < p->nsamples; i++) {
    const struct culpert__wsample *s = &p->samples[i];
    int64_t values[NVALUES] = {estimate(s->alloc_objects), estimate(s->alloc_bytes),
                               estimate(s->inuse_objects), estimate(s->inuse_bytes),
                               s->samples > INT64_MAX ? INT64_MAX : (int64_t)s->samples};
    encode_sample(c, b, c->sample_locs[i], c->sample_nlocs[i], values, c->sample_path[i]);
  }
  for (size_t id = 1; id <= c->npaths; id++) {
    static const int64_t zero[NVALUES] = {0};
    if (c->paths[id - 1].synthetic)
      encode_sample(c, b, NULL, 0, zero, (uint32_t)id);
  }

  for (size_t i = 0; i < c->nmaps; i++) {
    const struct culpert__smap *m = culpert__symbolize_map(c->sym, i);
    const struct mapinfo *mi = &c->maps[i];
    size_t mark = culpert__pbenc_begin(b, PROFILE_MAPPING);
    culpert__pbenc_uint64(b, MAPPING_ID, i + 1);
    culpert__pbenc_uint64(b, MAPPING_MEMORY_START, m->start);
    culpert__pbenc_uint64(b, MAPPING_MEMORY_LIMIT, m->limit);
    culpert__pbenc_uint64(b, MAPPING_FILE_OFFSET, m->offset);
    culpert__pbenc_int64(b, MAPPING_FILENAME, mi->filename);
    if (mi->build_id)
      culpert__pbenc_int64(b, MAPPING_BUILD_ID, mi->build_id);
    culpert__pbenc_bool(b, MAPPING_HAS_FUNCTIONS, mi->has_functions);
    culpert__pbenc_bool(b, MAPPING_HAS_FILENAMES, mi->has_filenames);
    culpert__pbenc_bool(b, MAPPING_HAS_LINE_NUMBERS, mi->has_lines);
    culpert__pbenc_bool(b, MAPPING_HAS_INLINE_FRAMES, mi->has_inline);
    culpert__pbenc_end(b, mark);
  }

  for (size_t i = 0; i < c->nlocs; i++) {
    const struct location *l = &c->locs[i];
    size_t mark = culpert__pbenc_begin(b, PROFILE_LOCATION);
    culpert__pbenc_uint64(b, LOCATION_ID, i + 1);
    if (l->map >= 0)
      culpert__pbenc_uint64(b, LOCATION_MAPPING_ID, (uint64_t)l->map + 1);
    culpert__pbenc_uint64(b, LOCATION_ADDRESS, l->address);
    for (uint32_t k = 0; k < l->nlines; k++) {
      size_t lmark = culpert__pbenc_begin(b, LOCATION_LINE);
      culpert__pbenc_uint64(b, LINE_FUNCTION_ID, l->lines[k].function);
      if (l->lines[k].line)
        culpert__pbenc_int64(b, LINE_LINE, l->lines[k].line);
      culpert__pbenc_end(b, lmark);
    }
    culpert__pbenc_end(b, mark);
  }

  for (size_t i = 0; i < c->nfuncs; i++) {
    const struct function *f = &c->funcs[i];
    size_t mark = culpert__pbenc_begin(b, PROFILE_FUNCTION);
    culpert__pbenc_uint64(b, FUNCTION_ID, i + 1);
    culpert__pbenc_int64(b, FUNCTION_NAME, f->name);
    culpert__pbenc_int64(b, FUNCTION_SYSTEM_NAME, f->system_name);
    if (f->filename)
      culpert__pbenc_int64(b, FUNCTION_FILENAME, f->filename);
    if (f->start_line)
      culpert__pbenc_int64(b, FUNCTION_START_LINE, f->start_line);
    culpert__pbenc_end(b, mark);
  }

  for (size_t i = 0; i < c->strs.n; i++)
    culpert__pbenc_bytes(b, PROFILE_STRING_TABLE, c->strs.strs[i], c->strs.lens[i]);

  if (p->time_nanos)
    culpert__pbenc_int64(b, PROFILE_TIME_NANOS, p->time_nanos);
  if (p->duration_nanos)
    culpert__pbenc_int64(b, PROFILE_DURATION_NANOS, p->duration_nanos);
  encode_value_type(b, PROFILE_PERIOD_TYPE, strtab_intern(&c->strs, "space"),
                    strtab_intern(&c->strs, "bytes"));
  if (p->rate)
    culpert__pbenc_int64(b, PROFILE_PERIOD, p->rate > INT64_MAX ? INT64_MAX : (int64_t)p->rate);
  for (size_t i = 0; i < c->ncomments; i++)
    culpert__pbenc_int64(b, PROFILE_COMMENT, strtab_intern(&c->strs, c->comments[i]));
  culpert__pbenc_int64(b, PROFILE_DEFAULT_SAMPLE_TYPE, strtab_intern(&c->strs, "alloc_space"));
}

int culpert__writer_encode(const struct culpert__wprofile *p, unsigned char **out, size_t *len)
{
  struct ctx c;
  struct culpert__pbuf b;
  int rc = 0;

  memset(&c, 0, sizeof c);
  culpert__pbuf_init(&b);
  *out = NULL;
  *len = 0;
  if (!p || (p->nsamples && !p->samples) || (p->nspans && !p->spans) ||
      (p->ncomments && !p->comments)) {
    rc = -EINVAL;
    goto out;
  }
  c.p = p;
  rc = prepare_strings(&c);
  if (rc == 0)
    rc = assign_spans(&c);
  if (rc == 0)
    rc = collect_code(&c);
  if (rc)
    goto out;
  encode_profile(&c, &b);
  rc = b.err ? b.err : gzip(b.data, b.len, p, out, len);

out:
  culpert__pbuf_free(&b);
  free(c.comments);
  if (c.sample_locs)
    for (size_t i = 0; i < p->nsamples; i++)
      free(c.sample_locs[i]);
  free(c.sample_locs);
  free(c.sample_nlocs);
  free(c.sample_path);
  free(c.node_path);
  free(c.chain);
  free(c.paths);
  for (size_t i = 0; i < c.nlocs; i++)
    free(c.locs[i].lines);
  free(c.locs);
  free(c.funcs);
  free(c.maps);
  u64map_free(&c.path_index);
  u64map_free(&c.loc_index);
  u64map_free(&c.func_index);
  strtab_free(&c.strs);
  if (c.cache)
    culpert__symcache_end();
  culpert__symbolize_close(c.sym);
  return rc;
}
