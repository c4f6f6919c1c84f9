/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * livetable.c: which pointers are live sampled allocations.
 *
 * Two parts. The filter is a static 256 KiB bit map read by every free()
 * with one load and a bit test; a bit is set only while some live sampled
 * (or bootstrap arena) pointer falls on its 16-byte granule modulo 32 MiB,
 * so almost every free() of an unsampled block costs nothing more.
 * Per-slot counts, touched only on the slow path, say when a bit may be
 * cleared. Behind the filter, a
 * hash table (linear probing, mmap'd, doubled when half full) maps each live
 * sampled pointer to its record bucket, size and weight.
 *
 * Runs inside malloc: the table's memory comes from mmap, never from
 * malloc; the lock is taken only on the slow path.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

_Atomic uint32_t culpert__filter[(1u << CULPERT__FILTER_BITS) / 32u];
static _Atomic uint32_t filter_count[1u << CULPERT__FILTER_BITS];

struct entry {
  uintptr_t ptr; /* 0 = empty */
  uint32_t bucket;
  uint32_t unused;
  uint64_t size;
  double weight;
};

#define INITIAL_CAPACITY 4096u

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *table;
static size_t capacity; /* power of two, 0 before the first insert */
static size_t used;

void culpert__filter_add(const void *p)
{
  uint32_t s = culpert__filter_slot(p);
  atomic_fetch_add(&filter_count[s], 1);
  atomic_fetch_or(&culpert__filter[s / 32u], 1u << (s % 32u));
}

/* Remove one count from p's slot, clearing its bit at zero. A concurrent
 * culpert__filter_add (bootstrap arena, no lock) may race with the clear:
 * re-checking the count afterwards puts the bit back for it. Bits of other
 * slots in the same word are untouched (atomic and/or). */
static void filter_del(const void *p)
{
  uint32_t s = culpert__filter_slot(p);
  if (atomic_load(&filter_count[s]) == 0)
    return;
  if (atomic_fetch_sub(&filter_count[s], 1) != 1)
    return;
  atomic_fetch_and(&culpert__filter[s / 32u], ~(1u << (s % 32u)));
  if (atomic_load(&filter_count[s]) != 0)
    atomic_fetch_or(&culpert__filter[s / 32u], 1u << (s % 32u));
}

static size_t home(uintptr_t p, size_t cap)
{
  return (size_t)((p * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (cap - 1);
}

static struct entry *find(uintptr_t p)
{
  if (capacity == 0)
    return NULL;
  for (size_t i = home(p, capacity);; i = (i + 1) & (capacity - 1)) {
    if (table[i].ptr == p)
      return &table[i];
    if (table[i].ptr == 0)
      return NULL;
  }
}

static int grow(void)
{
  size_t ncap = capacity ? capacity * 2 : INITIAL_CAPACITY;
  struct entry *nt =
      mmap(NULL, ncap * sizeof *nt, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (nt == MAP_FAILED)
    return -ENOMEM;
  for (size_t i = 0; i < capacity; i++) {
    if (table[i].ptr == 0)
      continue;
    size_t j = home(table[i].ptr, ncap);
    while (nt[j].ptr != 0)
      j = (j + 1) & (ncap - 1);
    nt[j] = table[i];
  }
  if (table != NULL)
    munmap(table, capacity * sizeof *table);
  table = nt;
  capacity = ncap;
  return 0;
}

int culpert__live_insert(const void *p, const struct culpert__live *v)
{
  int rc = 0;
  uintptr_t key = (uintptr_t)p;
  pthread_mutex_lock(&lock);
  struct entry *e = find(key);
  if (e == NULL) {
    if ((used + 1) * 2 > capacity && (rc = grow()) != 0)
      goto out;
    size_t i = home(key, capacity);
    while (table[i].ptr != 0)
      i = (i + 1) & (capacity - 1);
    e = &table[i];
    e->ptr = key;
    used++;
    culpert__filter_add(p);
  }
  e->bucket = v->bucket;
  e->size = v->size;
  e->weight = v->weight;
out:
  pthread_mutex_unlock(&lock);
  return rc;
}

int culpert__live_remove(const void *p, struct culpert__live *v)
{
  int found = 0;
  pthread_mutex_lock(&lock);
  struct entry *e = find((uintptr_t)p);
  if (e == NULL)
    goto out;
  v->bucket = e->bucket;
  v->size = e->size;
  v->weight = e->weight;
  found = 1;
  /* Backward-shift deletion keeps every probe chain unbroken. */
  size_t i = (size_t)(e - table);
  for (size_t j = (i + 1) & (capacity - 1); table[j].ptr != 0; j = (j + 1) & (capacity - 1)) {
    size_t h = home(table[j].ptr, capacity);
    /* Move j into the hole at i when its home is not in (i, j]. */
    if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
      table[i] = table[j];
      i = j;
    }
  }
  table[i].ptr = 0;
  used--;
  filter_del(p);
out:
  pthread_mutex_unlock(&lock);
  return found;
}

size_t culpert__live_count(void)
{
  pthread_mutex_lock(&lock);
  size_t n = used;
  pthread_mutex_unlock(&lock);
  return n;
}

void culpert__live_reset(void)
{
  for (size_t i = 0; i < capacity; i++) {
    if (table[i].ptr != 0) {
      filter_del((const void *)table[i].ptr);
      table[i].ptr = 0;
    }
  }
  used = 0;
}

void culpert__live_lock(void)
{
  pthread_mutex_lock(&lock);
}

void culpert__live_unlock(void)
{
  pthread_mutex_unlock(&lock);
}

void culpert__live_reinit_lock(void)
{
  pthread_mutex_init(&lock, NULL);
}
