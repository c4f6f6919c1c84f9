/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * livetable.c: which pointers are live sampled allocations.
 *
 * Two parts. In front, two static bit maps over the same 1 GiB window of
 * the address space: a 4 KiB summary with a bit per 32 KiB region, read by
 * every free(), and a 2 MiB filter with a bit per 64-byte granule, read
 * only when the summary bit is set. A region's 512 filter bits are one
 * 64-byte line of the filter, and its summary bit is set exactly while
 * that line is not all zero. A filter bit is set while some live sampled
 * pointer falls on its granule (or for good, over the bootstrap arena), so
 * almost every free() of an unsampled block costs nothing more.
 *
 * Behind them, one hash table (linear probing, mmap'd, doubled when half
 * full, under one lock) maps each live sampled pointer to its record
 * bucket, size and weight. The lock serialises every write to the filter
 * lines; pointers that share a granule bit share a home slot, so the probe
 * run from that home says whether the bit is still needed. A sampled
 * allocation and its free touch the table's header line (the lock, the
 * in-use sum and its peak), one entry and one filter line, and take the
 * lock once each: no other shared state.
 *
 * Why one table and one lock rather than shards: the header line, touched
 * by every sampled allocation and free, then stays in cache, and the
 * entries of a few hundred live samples sit in a few KiB. With 64 shards
 * (a lock and a table each) a sample and its free cost about 330 TSC
 * ticks more in the bench's mixed workload (cost counters: insert 244 and
 * remove 371 ticks against 127 and 168); at 4 KiB with two threads, where
 * the one lock is contended, CPU time moved by less than the noise. The
 * record lock is global anyway, so every sample already serialises
 * there.
 *
 * Runs inside malloc: the table's memory comes from mmap, never from
 * malloc; the lock is taken only on the slow path.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "internal.h"

_Atomic uint32_t culpert__filter[(1u << CULPERT__FILTER_BITS) / 32u];
_Atomic uint32_t culpert__summary[(1u << CULPERT__SUMMARY_BITS) / 32u];

_Static_assert(CULPERT__FILTER_SHIFT + CULPERT__FILTER_BITS ==
                   CULPERT__SUMMARY_SHIFT + CULPERT__SUMMARY_BITS,
               "the filter and the summary cover the same window");
/* Filter words per region: one 64-byte line. */
#define LINE_WORDS (1u << (CULPERT__SUMMARY_SHIFT - CULPERT__FILTER_SHIFT - 5u))
_Static_assert(LINE_WORDS * sizeof(uint32_t) == 64, "a region's filter bits fill one line");

struct entry {
  uintptr_t ptr; /* 0 = empty */
  uint32_t bucket;
  uint32_t epoch; /* at_peak.epoch when inserted (CULPERT_PEAK) */
  uint64_t size;
  double weight;
};

#define INITIAL_CAPACITY 256u

/* The lock and everything a sampled allocation or free reads besides the
 * entries and the bit maps, in one line. */
struct table {
  culpert__lock_t lock;
  /* The bootstrap arena's granules, flagged for good: [pin_first,
   * +pin_count) modulo the window (set once, before any sample). */
  _Atomic uint32_t pin_first, pin_count;
  struct entry *slots;
  size_t capacity; /* power of two, 0 before the first insert */
  size_t used;
  /* The live samples' weighted bytes (the in-use estimate), and its
   * highest value since start-up (or since the fork). */
  double inuse_bytes, peak_bytes;
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct table) == 64, "the table's header is one line");

static struct table live; /* lock free, no slots */

/*
 * CULPERT_PEAK: the live samples as they were when the in-use estimate was
 * at its highest, kept exactly and in constant time per operation. Each
 * new highest value starts a new epoch; an entry records the epoch it was
 * inserted in. So the samples live at the peak are the entries of an
 * earlier epoch still in the table, and those removed since: a removal of
 * an earlier epoch's entry appends it to `gone`, which a new peak empties.
 * `gone` never holds more than the entries live at the peak.
 */
struct held {
  uint32_t bucket;
  uint64_t size;
  double weight;
};

static struct {
  int on;
  uint32_t epoch;
  struct held *gone; /* mmap'd, cap entries */
  size_t n, cap;
  uint64_t lost; /* removals `gone` could not grow for */
  int64_t nanos; /* when the peak was reached (CLOCK_REALTIME), 0: never */
} at_peak;

static uint64_t mix(uint64_t v)
{
  return v * UINT64_C(0x9E3779B97F4A7C15);
}

/* The home slot of every pointer on granule bit g. */
static size_t home(uint32_t g, size_t cap)
{
  return (size_t)(mix(g) >> 17) & (cap - 1);
}

static uint32_t word_of(uint32_t bit)
{
  return bit / 32u;
}

static uint32_t mask_of(uint32_t bit)
{
  return 1u << (bit % 32u);
}

/* The region (summary bit) of granule bit g. */
static uint32_t region_of(uint32_t g)
{
  return g >> (CULPERT__SUMMARY_SHIFT - CULPERT__FILTER_SHIFT);
}

/* Set summary bit r unless it is set already: the word every free() reads
 * is written only when a region changes state. */
static void summary_set(uint32_t r)
{
  if (!(atomic_load_explicit(&culpert__summary[word_of(r)], memory_order_relaxed) & mask_of(r)))
    atomic_fetch_or(&culpert__summary[word_of(r)], mask_of(r));
}

/* Set filter bit g (the lock held: no other writer of its line). */
static void filter_set(uint32_t g)
{
  _Atomic uint32_t *w = &culpert__filter[word_of(g)];
  uint32_t v = atomic_load_explicit(w, memory_order_relaxed);
  if (!(v & mask_of(g)))
    atomic_store_explicit(w, v | mask_of(g), memory_order_release);
  summary_set(region_of(g));
}

static int pinned(uint32_t g)
{
  uint32_t off = (g - atomic_load_explicit(&live.pin_first, memory_order_relaxed)) &
                 ((1u << CULPERT__FILTER_BITS) - 1u);
  return off < atomic_load_explicit(&live.pin_count, memory_order_relaxed);
}

/* Clear filter bit g, and its region's summary bit when that leaves the
 * region's line empty (the lock held). */
static void filter_clear(uint32_t g)
{
  if (pinned(g))
    return;
  _Atomic uint32_t *w = &culpert__filter[word_of(g)];
  uint32_t left = atomic_load_explicit(w, memory_order_relaxed) & ~mask_of(g);
  atomic_store_explicit(w, left, memory_order_relaxed);
  if (left != 0)
    return; /* the line is not empty: no need to look at the rest */
  uint32_t r = region_of(g);
  const _Atomic uint32_t *line = &culpert__filter[r * LINE_WORDS];
  for (uint32_t i = 0; i < LINE_WORDS; i++)
    left |= atomic_load_explicit(&line[i], memory_order_relaxed);
  if (left == 0)
    atomic_fetch_and(&culpert__summary[word_of(r)], ~mask_of(r));
}

void culpert__filter_pin(const void *p, size_t n)
{
  if (n == 0)
    return;
  uint32_t first = culpert__filter_slot(p);
  uint64_t count = (((uintptr_t)p + n - 1) >> CULPERT__FILTER_SHIFT) -
                   ((uintptr_t)p >> CULPERT__FILTER_SHIFT) + 1u;
  if (count > (1u << CULPERT__FILTER_BITS))
    count = 1u << CULPERT__FILTER_BITS;
  atomic_store(&live.pin_first, first);
  atomic_store(&live.pin_count, (uint32_t)count);
  for (uint64_t i = 0; i < count; i++) {
    uint32_t g = (first + (uint32_t)i) & ((1u << CULPERT__FILTER_BITS) - 1u);
    atomic_fetch_or(&culpert__filter[word_of(g)], mask_of(g));
    summary_set(region_of(g));
  }
}

static struct entry *find(uintptr_t p)
{
  if (live.capacity == 0)
    return NULL;
  size_t mask = live.capacity - 1;
  for (size_t i = home(culpert__filter_slot((void *)p), live.capacity);; i = (i + 1) & mask) {
    if (live.slots[i].ptr == p)
      return &live.slots[i];
    if (live.slots[i].ptr == 0)
      return NULL;
  }
}

/* Whether a live pointer other than the ones removed falls on granule bit
 * g: every such pointer sits in the probe run that starts at g's home. */
static int granule_in_use(uint32_t g)
{
  size_t mask = live.capacity - 1;
  for (size_t i = home(g, live.capacity); live.slots[i].ptr != 0; i = (i + 1) & mask) {
    if (culpert__filter_slot((void *)live.slots[i].ptr) == g)
      return 1;
  }
  return 0;
}

static int grow(void)
{
  size_t ncap = live.capacity ? live.capacity * 2 : INITIAL_CAPACITY;
  struct entry *nt =
      mmap(NULL, ncap * sizeof *nt, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (nt == MAP_FAILED)
    return -ENOMEM;
  for (size_t i = 0; i < live.capacity; i++) {
    if (live.slots[i].ptr == 0)
      continue;
    size_t j = home(culpert__filter_slot((void *)live.slots[i].ptr), ncap);
    while (nt[j].ptr != 0)
      j = (j + 1) & (ncap - 1);
    nt[j] = live.slots[i];
  }
  if (live.slots != NULL)
    munmap(live.slots, live.capacity * sizeof *live.slots);
  live.slots = nt;
  live.capacity = ncap;
  return 0;
}

/* A new highest in-use estimate (lock held): what is live now is the
 * peak. */
static void peak_reached(void)
{
  at_peak.epoch++;
  at_peak.n = 0;
  at_peak.lost = 0;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  at_peak.nanos = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Entry e leaves the table (lock held): if it was live at the peak, the
 * peak keeps it in `gone`. */
static void peak_forget(const struct entry *e)
{
  if (!at_peak.on || e->epoch == at_peak.epoch)
    return;
  if (at_peak.n == at_peak.cap) {
    size_t ncap = at_peak.cap ? at_peak.cap * 2 : 256;
    struct held *nv =
        mmap(NULL, ncap * sizeof *nv, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (nv == MAP_FAILED) {
      at_peak.lost++;
      return;
    }
    if (at_peak.gone != NULL) {
      memcpy(nv, at_peak.gone, at_peak.n * sizeof *nv);
      munmap(at_peak.gone, at_peak.cap * sizeof *at_peak.gone);
    }
    at_peak.gone = nv;
    at_peak.cap = ncap;
  }
  at_peak.gone[at_peak.n++] =
      (struct held){.bucket = e->bucket, .size = e->size, .weight = e->weight};
}

void culpert__live_prefetch(const void *p)
{
  __builtin_prefetch(&live, 1);
  __builtin_prefetch(&culpert__filter[word_of(culpert__filter_slot(p))], 1);
}

int culpert__live_insert(const void *p, const struct culpert__live *v)
{
  int rc = 0;
  uintptr_t key = (uintptr_t)p;
  culpert__lock(&live.lock);
  struct entry *e = find(key);
  if (e == NULL) {
    if ((live.used + 1) * 2 > live.capacity && (rc = grow()) != 0)
      goto out;
    uint32_t g = culpert__filter_slot(p);
    size_t i = home(g, live.capacity);
    while (live.slots[i].ptr != 0)
      i = (i + 1) & (live.capacity - 1);
    e = &live.slots[i];
    e->ptr = key;
    live.used++;
    filter_set(g);
  } else {
    live.inuse_bytes -= e->weight * (double)e->size; /* freed where culpert did not see it */
    peak_forget(e);
  }
  e->bucket = v->bucket;
  e->epoch = at_peak.epoch;
  e->size = v->size;
  e->weight = v->weight;
  live.inuse_bytes += v->weight * (double)v->size;
  if (live.inuse_bytes > live.peak_bytes) {
    live.peak_bytes = live.inuse_bytes;
    if (at_peak.on)
      peak_reached();
  }
out:
  culpert__unlock(&live.lock);
  return rc;
}

/* Take entry e out of the table (lock held): backward-shift deletion keeps
 * every probe run unbroken, then the granule bit goes if no other live
 * pointer needs it. */
static void delete_entry(struct entry *e)
{
  struct entry *t = live.slots;
  size_t mask = live.capacity - 1;
  size_t i = (size_t)(e - t);
  uint32_t g = culpert__filter_slot((void *)e->ptr);
  for (size_t j = (i + 1) & mask; t[j].ptr != 0; j = (j + 1) & mask) {
    size_t h = home(culpert__filter_slot((void *)t[j].ptr), live.capacity);
    /* Move j into the hole at i when its home is not in (i, j]. */
    if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
      t[i] = t[j];
      i = j;
    }
  }
  t[i].ptr = 0;
  live.used--;
  if (!granule_in_use(g))
    filter_clear(g);
}

int culpert__live_remove(const void *p, struct culpert__live *v)
{
  int found = 0;
  culpert__lock(&live.lock);
  struct entry *e = find((uintptr_t)p);
  if (e == NULL)
    goto out;
  v->bucket = e->bucket;
  v->size = e->size;
  v->weight = e->weight;
  live.inuse_bytes -= e->weight * (double)e->size;
  found = 1;
  peak_forget(e);
  delete_entry(e);
out:
  culpert__unlock(&live.lock);
  return found;
}

void culpert__live_add_inuse(struct culpert__bucket *b, size_t nb)
{
  culpert__lock(&live.lock);
  for (size_t i = 0; i < live.capacity; i++) {
    const struct entry *e = &live.slots[i];
    if (e->ptr == 0 || e->bucket >= nb)
      continue;
    b[e->bucket].inuse_objects += e->weight;
    b[e->bucket].inuse_bytes += e->weight * (double)e->size;
  }
  culpert__unlock(&live.lock);
}

void culpert__live_keep_peak(void)
{
  culpert__lock(&live.lock);
  at_peak.on = 1;
  culpert__unlock(&live.lock);
}

int64_t culpert__live_add_peak(struct culpert__bucket *b, size_t nb, uint64_t *lost, double *peak)
{
  culpert__lock(&live.lock);
  for (size_t i = 0; i < live.capacity; i++) {
    const struct entry *e = &live.slots[i];
    if (e->ptr == 0 || e->epoch == at_peak.epoch || e->bucket >= nb)
      continue;
    b[e->bucket].inuse_objects += e->weight;
    b[e->bucket].inuse_bytes += e->weight * (double)e->size;
  }
  for (size_t i = 0; i < at_peak.n; i++) {
    const struct held *h = &at_peak.gone[i];
    if (h->bucket >= nb)
      continue;
    b[h->bucket].inuse_objects += h->weight;
    b[h->bucket].inuse_bytes += h->weight * (double)h->size;
  }
  int64_t nanos = at_peak.nanos;
  *lost = at_peak.lost;
  *peak = live.peak_bytes;
  culpert__unlock(&live.lock);
  return nanos;
}

double culpert__live_peak_bytes(void)
{
  culpert__lock(&live.lock);
  double peak = live.peak_bytes;
  culpert__unlock(&live.lock);
  return peak;
}

size_t culpert__live_count(void)
{
  culpert__lock(&live.lock);
  size_t n = live.used;
  culpert__unlock(&live.lock);
  return n;
}

void culpert__live_reset(void)
{
  for (size_t i = 0; i < live.capacity; i++) {
    uintptr_t p = live.slots[i].ptr;
    live.slots[i].ptr = 0;
    if (p != 0)
      filter_clear(culpert__filter_slot((void *)p));
  }
  live.used = 0;
  live.inuse_bytes = live.peak_bytes = 0;
  at_peak.epoch++;
  at_peak.n = 0;
  at_peak.lost = 0;
  at_peak.nanos = 0;
}

/* Fork and snapshots. */
void culpert__live_lock(void)
{
  culpert__lock(&live.lock);
}

int culpert__live_trylock(void)
{
  return culpert__trylock(&live.lock);
}

void culpert__live_unlock(void)
{
  culpert__unlock(&live.lock);
}

void culpert__live_reinit_lock(void)
{
  culpert__lock_reinit(&live.lock);
}
