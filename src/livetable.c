/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * livetable.c: which pointers are live sampled allocations.
 *
 * Two parts. In front, two static bit maps: a 4 KiB summary with a bit
 * per 32 KiB region (modulo 1 GiB), read by every free(), and a 256 KiB
 * filter with a bit per 64-byte granule (modulo 128 MiB), read only when
 * the summary bit is set. A bit is set only while some live sampled (or
 * bootstrap arena) pointer falls on it, so almost every free() of an
 * unsampled block costs nothing more. Counts per region and per granule,
 * touched only on the slow path, say when a bit may be cleared. Behind
 * them, a hash table (linear probing, mmap'd, doubled when half full,
 * split into 64 locked shards) maps each live sampled pointer to its
 * record bucket, size and weight.
 *
 * Runs inside malloc: the table's memory comes from mmap, never from
 * malloc; a shard's lock is taken only on the slow path.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

_Atomic uint32_t culpert__filter[(1u << CULPERT__FILTER_BITS) / 32u];
/* How many live pointers fall on each slot. A count that reaches
 * COUNT_STUCK stays there and its bit stays set for good: that costs
 * false positives on one slot, never a miss, and lets a byte do (2 MiB,
 * touched a page at a time, instead of 8 MiB of 32-bit counts). */
#define COUNT_STUCK 255u
static _Atomic uint8_t filter_count[1u << CULPERT__FILTER_BITS];

struct entry {
  uintptr_t ptr; /* 0 = empty */
  uint32_t bucket;
  uint32_t unused;
  uint64_t size;
  double weight;
};

/*
 * The table is split into shards by pointer hash, each with its own lock,
 * so threads sampling at high rates rarely meet on the same lock or the
 * same cache lines (one shard per 64-byte line).
 */
#define SHARD_BITS       6u
#define SHARDS           (1u << SHARD_BITS)
#define INITIAL_CAPACITY 256u

struct shard {
  pthread_mutex_t lock;
  struct entry *table;
  size_t capacity; /* power of two, 0 before the first insert */
  size_t used;
} __attribute__((aligned(64)));

#define SHARD_INIT                                                                                 \
  {                                                                                                \
    .lock = PTHREAD_MUTEX_INITIALIZER                                                              \
  }
#define SHARD_INIT8                                                                                \
  SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT, SHARD_INIT
_Static_assert(SHARDS == 64, "one initializer per shard");
static struct shard shards[SHARDS] = {SHARD_INIT8, SHARD_INIT8, SHARD_INIT8, SHARD_INIT8,
                                      SHARD_INIT8, SHARD_INIT8, SHARD_INIT8, SHARD_INIT8};

static uint64_t mix(uintptr_t p)
{
  return (uint64_t)p * UINT64_C(0x9E3779B97F4A7C15);
}

static struct shard *shard_of(uintptr_t p)
{
  return &shards[mix(p) >> (64u - SHARD_BITS)];
}

_Atomic uint32_t culpert__summary[(1u << CULPERT__SUMMARY_BITS) / 32u];
static _Atomic uint32_t summary_count[1u << CULPERT__SUMMARY_BITS];

/* Set bit s of MAP (a word array) after counting one more user of it.
 * Already set, the word is left alone, so the cache line that every free()
 * reads is not taken away from the other cores. */
static void bit_set(_Atomic uint32_t *map, uint32_t s)
{
  if (!(atomic_load(&map[s / 32u]) & (1u << (s % 32u))))
    atomic_fetch_or(&map[s / 32u], 1u << (s % 32u));
}

/* Clear bit s of MAP, whose count has dropped to zero. A concurrent add
 * (another shard, or the bootstrap arena without any lock) may race with
 * the clear: the caller re-checks the count afterwards and puts the bit
 * back for it. Bits of other slots in the same word are untouched (atomic
 * and/or). */
static void bit_clear(_Atomic uint32_t *map, uint32_t s)
{
  atomic_fetch_and(&map[s / 32u], ~(1u << (s % 32u)));
}

void culpert__filter_add(const void *p)
{
  uint32_t s = culpert__filter_slot(p), r = culpert__summary_slot(p);
  uint8_t c = atomic_load(&filter_count[s]);
  while (c != COUNT_STUCK && !atomic_compare_exchange_weak(&filter_count[s], &c, (uint8_t)(c + 1)))
    ;
  bit_set(culpert__filter, s);
  atomic_fetch_add(&summary_count[r], 1);
  bit_set(culpert__summary, r);
}

/* Remove one count from p's filter slot and summary region, clearing each
 * bit when its count reaches zero. A slot whose count is stuck keeps its
 * region's count too, so the summary never hides a set filter bit. */
static void filter_del(const void *p)
{
  uint32_t s = culpert__filter_slot(p), r = culpert__summary_slot(p);
  uint8_t c = atomic_load(&filter_count[s]);
  do {
    if (c == 0 || c == COUNT_STUCK)
      return;
  } while (!atomic_compare_exchange_weak(&filter_count[s], &c, (uint8_t)(c - 1)));
  if (c == 1) {
    bit_clear(culpert__filter, s);
    if (atomic_load(&filter_count[s]) != 0)
      bit_set(culpert__filter, s);
  }
  if (atomic_fetch_sub(&summary_count[r], 1) == 1) {
    bit_clear(culpert__summary, r);
    if (atomic_load(&summary_count[r]) != 0)
      bit_set(culpert__summary, r);
  }
}

static size_t home(uintptr_t p, size_t cap)
{
  return (size_t)(mix(p) >> 17) & (cap - 1);
}

static struct entry *find(const struct shard *sh, uintptr_t p)
{
  if (sh->capacity == 0)
    return NULL;
  for (size_t i = home(p, sh->capacity);; i = (i + 1) & (sh->capacity - 1)) {
    if (sh->table[i].ptr == p)
      return &sh->table[i];
    if (sh->table[i].ptr == 0)
      return NULL;
  }
}

static int grow(struct shard *sh)
{
  size_t ncap = sh->capacity ? sh->capacity * 2 : INITIAL_CAPACITY;
  struct entry *nt =
      mmap(NULL, ncap * sizeof *nt, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (nt == MAP_FAILED)
    return -ENOMEM;
  for (size_t i = 0; i < sh->capacity; i++) {
    if (sh->table[i].ptr == 0)
      continue;
    size_t j = home(sh->table[i].ptr, ncap);
    while (nt[j].ptr != 0)
      j = (j + 1) & (ncap - 1);
    nt[j] = sh->table[i];
  }
  if (sh->table != NULL)
    munmap(sh->table, sh->capacity * sizeof *sh->table);
  sh->table = nt;
  sh->capacity = ncap;
  return 0;
}

int culpert__live_insert(const void *p, const struct culpert__live *v)
{
  int rc = 0;
  uintptr_t key = (uintptr_t)p;
  struct shard *sh = shard_of(key);
  pthread_mutex_lock(&sh->lock);
  struct entry *e = find(sh, key);
  if (e == NULL) {
    if ((sh->used + 1) * 2 > sh->capacity && (rc = grow(sh)) != 0)
      goto out;
    size_t i = home(key, sh->capacity);
    while (sh->table[i].ptr != 0)
      i = (i + 1) & (sh->capacity - 1);
    e = &sh->table[i];
    e->ptr = key;
    sh->used++;
    culpert__filter_add(p);
  }
  e->bucket = v->bucket;
  e->size = v->size;
  e->weight = v->weight;
out:
  pthread_mutex_unlock(&sh->lock);
  return rc;
}

int culpert__live_remove(const void *p, struct culpert__live *v)
{
  int found = 0;
  struct shard *sh = shard_of((uintptr_t)p);
  pthread_mutex_lock(&sh->lock);
  struct entry *e = find(sh, (uintptr_t)p);
  if (e == NULL)
    goto out;
  v->bucket = e->bucket;
  v->size = e->size;
  v->weight = e->weight;
  found = 1;
  /* Backward-shift deletion keeps every probe chain unbroken. */
  struct entry *t = sh->table;
  size_t mask = sh->capacity - 1;
  size_t i = (size_t)(e - t);
  for (size_t j = (i + 1) & mask; t[j].ptr != 0; j = (j + 1) & mask) {
    size_t h = home(t[j].ptr, sh->capacity);
    /* Move j into the hole at i when its home is not in (i, j]. */
    if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
      t[i] = t[j];
      i = j;
    }
  }
  t[i].ptr = 0;
  sh->used--;
  filter_del(p);
out:
  pthread_mutex_unlock(&sh->lock);
  return found;
}

size_t culpert__live_count(void)
{
  size_t n = 0;
  for (unsigned k = 0; k < SHARDS; k++) {
    pthread_mutex_lock(&shards[k].lock);
    n += shards[k].used;
    pthread_mutex_unlock(&shards[k].lock);
  }
  return n;
}

void culpert__live_reset(void)
{
  for (unsigned k = 0; k < SHARDS; k++) {
    struct shard *sh = &shards[k];
    for (size_t i = 0; i < sh->capacity; i++) {
      if (sh->table[i].ptr != 0) {
        filter_del((const void *)sh->table[i].ptr);
        sh->table[i].ptr = 0;
      }
    }
    sh->used = 0;
  }
}

/* Every shard, always in the same order (fork and snapshots). */
void culpert__live_lock(void)
{
  for (unsigned k = 0; k < SHARDS; k++)
    pthread_mutex_lock(&shards[k].lock);
}

void culpert__live_unlock(void)
{
  for (unsigned k = SHARDS; k-- > 0;)
    pthread_mutex_unlock(&shards[k].lock);
}

void culpert__live_reinit_lock(void)
{
  for (unsigned k = 0; k < SHARDS; k++)
    pthread_mutex_init(&shards[k].lock, NULL);
}
