/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * symcache.c: the writer's answers about code addresses, kept from one
 * profile to the next (symcache.h says when they are used).
 *
 * One open-addressing table keyed by run-time address, doubled when half
 * full, and one set of strings so that a file or function name shared by
 * many addresses is kept once. Everything is best effort: when memory runs
 * out an answer is simply not kept.
 */
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "symcache.h"
#include "loader.h"
#include "symbolize.h"

#define SYMCACHE_MAX_ENTRIES (1u << 20)

struct entry {
  uint64_t addr; /* 0: an empty slot */
  unsigned has_symbol : 1;
  unsigned has_pos : 1;
  int symbol_rc;
  struct culpert__symbol symbol;
  struct culpert__srcpos pos; /* pos.inl malloc'd, strings interned */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *slots;
static size_t cap, used;
static char **strs; /* interned strings, open addressing */
static size_t str_cap, str_used;
static unsigned long long loads[2]; /* dlpi_adds and dlpi_subs at the last use */
static uint64_t hits;

static uint64_t addr_hash(uint64_t a)
{
  return (a * UINT64_C(0x9E3779B97F4A7C15)) >> 17;
}

static uint64_t str_hash(const char *s)
{
  uint64_t h = UINT64_C(0xCBF29CE484222325);
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001B3);
  return h;
}

static void clear(void)
{
  for (size_t i = 0; i < cap; i++)
    free((void *)slots[i].pos.inl);
  for (size_t i = 0; i < str_cap; i++)
    free(strs[i]);
  free(slots);
  free(strs);
  slots = NULL;
  strs = NULL;
  cap = used = str_cap = str_used = 0;
}

/* The kept copy of s (NULL for NULL); *ok = 0 when memory ran out. */
static const char *intern(const char *s, int *ok)
{
  if (s == NULL)
    return NULL;
  if (2 * (str_used + 1) > str_cap) {
    size_t ncap = str_cap ? 2 * str_cap : 1024;
    char **n = calloc(ncap, sizeof *n);
    if (n == NULL) {
      *ok = 0;
      return NULL;
    }
    for (size_t i = 0; i < str_cap; i++) {
      if (strs[i] == NULL)
        continue;
      size_t j = str_hash(strs[i]) & (ncap - 1);
      while (n[j] != NULL)
        j = (j + 1) & (ncap - 1);
      n[j] = strs[i];
    }
    free(strs);
    strs = n;
    str_cap = ncap;
  }
  size_t j = str_hash(s) & (str_cap - 1);
  for (; strs[j] != NULL; j = (j + 1) & (str_cap - 1))
    if (strcmp(strs[j], s) == 0)
      return strs[j];
  strs[j] = strdup(s);
  if (strs[j] == NULL) {
    *ok = 0;
    return NULL;
  }
  str_used++;
  return strs[j];
}

/* The entry of addr, or NULL. */
static struct entry *find(uint64_t addr)
{
  if (cap == 0 || addr == 0)
    return NULL;
  for (size_t j = addr_hash(addr) & (cap - 1); slots[j].addr != 0; j = (j + 1) & (cap - 1))
    if (slots[j].addr == addr)
      return &slots[j];
  return NULL;
}

/* The entry of addr, made when missing; NULL when full or out of memory. */
static struct entry *find_or_add(uint64_t addr)
{
  struct entry *e = find(addr);
  if (e != NULL || addr == 0 || used >= SYMCACHE_MAX_ENTRIES)
    return e;
  if (2 * (used + 1) > cap) {
    size_t ncap = cap ? 2 * cap : 1024;
    struct entry *n = calloc(ncap, sizeof *n);
    if (n == NULL)
      return NULL;
    for (size_t i = 0; i < cap; i++) {
      if (slots[i].addr == 0)
        continue;
      size_t j = addr_hash(slots[i].addr) & (ncap - 1);
      while (n[j].addr != 0)
        j = (j + 1) & (ncap - 1);
      n[j] = slots[i];
    }
    free(slots);
    slots = n;
    cap = ncap;
  }
  size_t j = addr_hash(addr) & (cap - 1);
  while (slots[j].addr != 0)
    j = (j + 1) & (cap - 1);
  slots[j].addr = addr;
  used++;
  return &slots[j];
}

static int load_counts(struct dl_phdr_info *info, size_t size, void *data)
{
  unsigned long long *v = data;
  (void)size;
  v[0] = info->dlpi_adds;
  v[1] = info->dlpi_subs;
  return 1;
}

int culpert__symcache_begin(void)
{
  /* Without the loader's lock there is no telling whether something was
   * loaded or unloaded since the answers were kept. */
  if (!culpert__loader_usable() || pthread_mutex_trylock(&lock) != 0)
    return 0;
  unsigned long long now[2] = {0, 0};
  dl_iterate_phdr(load_counts, now);
  if (now[0] != loads[0] || now[1] != loads[1])
    clear(); /* something was loaded or unloaded: addresses may mean other code */
  loads[0] = now[0];
  loads[1] = now[1];
  return 1;
}

void culpert__symcache_end(void)
{
  pthread_mutex_unlock(&lock);
}

int culpert__symcache_symbol(uint64_t addr, struct culpert__symbol *out, int *rc)
{
  struct entry *e = find(addr);
  if (e == NULL || !e->has_symbol)
    return 0;
  *out = e->symbol;
  *rc = e->symbol_rc;
  hits++;
  return 1;
}

void culpert__symcache_put_symbol(uint64_t addr, const struct culpert__symbol *sym, int rc)
{
  int ok = 1;
  const char *name = intern(sym->name, &ok);
  struct entry *e = ok ? find_or_add(addr) : NULL;
  if (e == NULL)
    return;
  e->symbol = (struct culpert__symbol){name, sym->start};
  e->symbol_rc = rc;
  e->has_symbol = 1;
}

int culpert__symcache_srcpos(uint64_t addr, struct culpert__srcpos *out)
{
  struct entry *e = find(addr);
  if (e == NULL || !e->has_pos)
    return 0;
  *out = e->pos;
  hits++;
  return 1;
}

void culpert__symcache_put_srcpos(uint64_t addr, const struct culpert__srcpos *pos)
{
  int ok = 1;
  struct culpert__srcpos copy = *pos;
  struct culpert__inline *inl = NULL;
  copy.file = intern(pos->file, &ok);
  if (pos->ninl > 0) {
    inl = calloc(pos->ninl, sizeof *inl);
    ok &= inl != NULL;
    for (uint32_t k = 0; ok && k < pos->ninl; k++) {
      inl[k].name = intern(pos->inl[k].name, &ok);
      inl[k].mangled = pos->inl[k].mangled;
      inl[k].call_file = intern(pos->inl[k].call_file, &ok);
      inl[k].call_line = pos->inl[k].call_line;
    }
  }
  copy.inl = inl;
  struct entry *e = ok ? find_or_add(addr) : NULL;
  if (e == NULL || e->has_pos) {
    free(inl);
    return;
  }
  e->pos = copy;
  e->has_pos = 1;
}

uint64_t culpert__symcache_hits(void)
{
  return hits;
}
