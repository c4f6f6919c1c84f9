/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * record.c: aggregated samples. One bucket per distinct (stack, span path
 * node), holding weighted estimates of allocated objects and bytes plus the
 * raw sample count. What is still in use is not kept here: a snapshot sums
 * the live table (livetable.c), so freeing a sampled block never takes
 * this lock.
 *
 * Slow path only: one lock guards the buckets, their open-addressing index
 * and the pool of stack addresses. Memory is reserved once with mmap
 * (MAP_NORESERVE, touched as it fills), never taken from malloc; when it
 * runs out, samples are dropped and counted. The whole reservation is 146
 * MiB of address space; under an address-space limit (RLIMIT_AS, `ulimit
 * -v`) a half, a quarter, ... down to a 64th is taken instead: the largest
 * within an eighth of the limit (the writer needs room too: libc's debug
 * information alone inflates to 6 MiB), or smaller where the mapping is
 * refused. Before, every sample of such a program was dropped, silently:
 * its profiles held none.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "internal.h"

#define MAX_BUCKETS (1u << 18)
#define INDEX_SIZE  (MAX_BUCKETS * 2u)
#define IP_POOL     (1u << 24)

/* The capacities reserved: MAX_BUCKETS, INDEX_SIZE and IP_POOL, or as
 * many fewer as an address-space limit let in (ensure_tables). */
static uint32_t max_buckets, index_size;
static uint64_t ip_pool_size;

static culpert__lock_t lock;
static struct culpert__bucket *buckets;
static uint32_t *index_; /* bucket number + 1, 0 = empty */
static uintptr_t *ip_pool;
static uint32_t nbuckets;
static uint64_t nips;
static int map_failed;
static atomic_uint_fast64_t dropped;

/* Address space only, whatever the program asked with
 * mlockall(MCL_FUTURE): a mapping made readable and writable at once would
 * then be locked and filled at once, all 146 MiB of the tables resident (a
 * program's VmLck went from 8 MB to 164 MB). Mapped inaccessible (nothing
 * to fill), unlocked, then opened: its pages come as they are touched. */
void *culpert__map_unfilled(size_t bytes, size_t guard)
{
  unsigned char *p =
      mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  munlock(p, bytes);
  if (mprotect(p + guard, bytes - guard, PROT_READ | PROT_WRITE) != 0) {
    munmap(p, bytes);
    return NULL;
  }
  return p;
}

static void *reserve(size_t bytes)
{
  return culpert__map_unfilled(bytes, 0);
}

/* Reserve the tables on first use (lock held): whole, or a half, a
 * quarter, ... a 64th of them (above). */
static int ensure_tables(void)
{
  if (buckets != NULL)
    return 0;
  if (map_failed)
    return -ENOMEM;
  unsigned first = 0;
  struct rlimit lim;
  uint64_t whole = (uint64_t)MAX_BUCKETS * sizeof *buckets + (uint64_t)INDEX_SIZE * sizeof *index_ +
                   (uint64_t)IP_POOL * sizeof *ip_pool;
  if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    while (first < 6 && (whole >> first) > lim.rlim_cur / 8)
      first++;
  for (unsigned shift = first; shift <= 6; shift++) {
    uint32_t nb = MAX_BUCKETS >> shift, ni = INDEX_SIZE >> shift;
    uint64_t np = (uint64_t)IP_POOL >> shift;
    struct culpert__bucket *b = reserve(nb * sizeof *b);
    uint32_t *x = reserve(ni * sizeof *x);
    uintptr_t *ip = reserve(np * sizeof *ip);
    if (b != NULL && x != NULL && ip != NULL) {
      buckets = b;
      index_ = x;
      ip_pool = ip;
      max_buckets = nb;
      index_size = ni;
      ip_pool_size = np;
      return 0;
    }
    if (b != NULL)
      munmap(b, nb * sizeof *b);
    if (x != NULL)
      munmap(x, ni * sizeof *x);
    if (ip != NULL)
      munmap(ip, np * sizeof *ip);
  }
  map_failed = 1;
  culpert__say_raw("culpert: cannot reserve memory for the sampled stacks (an address-space "
                   "limit, ulimit -v?); samples are dropped\n");
  return -ENOMEM;
}

static uint64_t stack_hash(const uintptr_t *ips, uint32_t depth, uint32_t span)
{
  uint64_t h = UINT64_C(0xCBF29CE484222325) ^ span ^ ((uint64_t)depth << 32);
  for (uint32_t i = 0; i < depth; i++) {
    h ^= ips[i];
    h *= UINT64_C(0x100000001B3);
    h ^= h >> 29;
  }
  return h;
}

int64_t culpert__record_sample(const uintptr_t *ips, uint32_t depth, uint32_t span, uint64_t size,
                               double w)
{
  int64_t found = -1;
  uint64_t h = stack_hash(ips, depth, span);
  culpert__lock(&lock);
  if (ensure_tables() != 0)
    goto out;
  uint32_t i = (uint32_t)(h & (index_size - 1));
  for (;; i = (i + 1) & (index_size - 1)) {
    uint32_t b = index_[i];
    if (b == 0)
      break;
    struct culpert__bucket *k = &buckets[b - 1];
    if (k->hash == h && k->span == span && k->depth == depth &&
        memcmp(&ip_pool[k->ip_off], ips, depth * sizeof *ips) == 0) {
      found = b - 1;
      break;
    }
  }
  if (found < 0) {
    if (nbuckets >= max_buckets || nips + depth > ip_pool_size)
      goto out;
    struct culpert__bucket *k = &buckets[nbuckets];
    memset(k, 0, sizeof *k);
    k->hash = h;
    k->span = span;
    k->depth = depth;
    k->ip_off = nips;
    memcpy(&ip_pool[nips], ips, depth * sizeof *ips);
    nips += depth;
    found = nbuckets++;
    index_[i] = (uint32_t)found + 1;
  }
  struct culpert__bucket *k = &buckets[found];
  k->alloc_objects += w;
  k->alloc_bytes += w * (double)size;
  k->samples++;
out:
  culpert__unlock(&lock);
  if (found < 0)
    culpert__record_count_dropped();
  return found;
}

long culpert__record_copy(struct culpert__bucket **out, uintptr_t **ips, size_t *nips_out,
                          int twice, void (*then)(void *arg, struct culpert__bucket *b, size_t nb),
                          void *arg)
{
  size_t copies = twice ? 2 : 1;
  long rc = -EAGAIN;
  *out = NULL;
  *ips = NULL;
  *nips_out = 0;
  /* Buckets and addresses only ever grow, so buffers sized from a first
   * look plus some slack usually fit; otherwise retry with the new sizes.
   * No allocation or free happens under the lock. */
  size_t want_b = 0, want_i = 0;
  for (int attempt = 0; attempt < 8; attempt++) {
    *out = malloc((want_b + 1) * copies * sizeof **out);
    *ips = malloc((want_i + 1) * sizeof **ips);
    if (*out == NULL || *ips == NULL) {
      rc = -ENOMEM;
      goto out;
    }
    culpert__lock(&lock);
    if (nbuckets <= want_b && nips <= want_i) {
      if (nbuckets > 0) {
        for (size_t c = 0; c < copies; c++)
          memcpy(*out + c * nbuckets, buckets, nbuckets * sizeof **out);
        memcpy(*ips, ip_pool, (size_t)nips * sizeof **ips);
      }
      *nips_out = (size_t)nips;
      rc = (long)nbuckets;
      if (then != NULL)
        then(arg, *out, nbuckets);
      culpert__unlock(&lock);
      return rc;
    }
    want_b = nbuckets + nbuckets / 8 + 64;
    want_i = (size_t)nips + (size_t)nips / 8 + 1024;
    culpert__unlock(&lock);
    free(*out);
    free(*ips);
  }
  *out = NULL;
  *ips = NULL;
  rc = -EAGAIN;
out:
  free(*out);
  free(*ips);
  *out = NULL;
  *ips = NULL;
  return rc;
}

uint64_t culpert__record_dropped(void)
{
  return atomic_load(&dropped);
}

int culpert__record_any(void)
{
  if (!culpert__record_trylock())
    return 1; /* a sample is being recorded */
  int any = nbuckets != 0;
  culpert__record_unlock();
  return any;
}

void culpert__record_count_dropped(void)
{
  atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
}

void culpert__record_reset(void)
{
  if (buckets != NULL) {
    memset(index_, 0, index_size * sizeof *index_);
    /* Give the touched pages back; the mapping stays reserved. */
    madvise(buckets, max_buckets * sizeof *buckets, MADV_DONTNEED);
    madvise(ip_pool, ip_pool_size * sizeof *ip_pool, MADV_DONTNEED);
  }
  nbuckets = 0;
  nips = 0;
  atomic_store(&dropped, 0);
}

void culpert__record_lock(void)
{
  culpert__lock(&lock);
}

int culpert__record_trylock(void)
{
  return culpert__trylock(&lock);
}

void culpert__record_unlock(void)
{
  culpert__unlock(&lock);
}

void culpert__record_reinit_lock(void)
{
  culpert__lock_reinit(&lock);
}
