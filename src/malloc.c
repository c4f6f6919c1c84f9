/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * malloc.c: the interposer. The only file that defines malloc, free,
 * calloc, realloc, reallocarray, posix_memalign, aligned_alloc, memalign,
 * valloc, pvalloc and malloc_usable_size.
 *
 * Each wrapper calls the next allocator in line (glibc, or jemalloc or
 * tcmalloc loaded after libculpert) and does one cheap check; only when the
 * check fires does it call an out-of-line slow path. The real functions are
 * resolved once with dlsym(RTLD_NEXT) on the first allocation or in the
 * constructor, whichever comes first; allocations made while resolving
 * (dlsym allocates) come from a small static arena whose pointers are never
 * handed to the real allocator. free() never resolves anything.
 *
 * Must never crash or change the host's behaviour: errno is preserved, and
 * after an internal failure every call passes straight through.
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "symbolize.h"

/* ---------------------------------------------------------------- the real allocator */

struct real_fns {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*memalign)(size_t, size_t);
  size_t (*malloc_usable_size)(void *);
};

static void *boot_malloc(size_t n);
static void boot_free(void *p);
static void *boot_calloc(size_t m, size_t n);
static void *boot_realloc(void *p, size_t n);
static int boot_posix_memalign(void **out, size_t align, size_t n);
static void *boot_aligned_alloc(size_t align, size_t n);
static void *boot_memalign(size_t align, size_t n);
static size_t boot_malloc_usable_size(void *p);

/* Until resolution these point at the bootstrap versions; afterwards at the
 * next allocator. Written once, before resolve_state becomes DONE. */
static struct real_fns real = {
    boot_malloc,         boot_free,          boot_calloc,   boot_realloc,
    boot_posix_memalign, boot_aligned_alloc, boot_memalign, boot_malloc_usable_size,
};

enum { RESOLVE_NONE, RESOLVE_BUSY, RESOLVE_DONE };
static atomic_int resolve_state;
static __thread int resolving CULPERT__TLS_MODEL;

/* ---------------------------------------------------------------- bootstrap arena */

/* Allocations made before the real allocator is known. Never freed, never
 * reused; the whole arena is flagged in the free() filter so that free(),
 * realloc() and malloc_usable_size() recognise its blocks on their slow
 * path. */
#define ARENA_SIZE   (256u * 1024u)
#define ARENA_HEADER 16u
static _Alignas(4096) unsigned char arena[ARENA_SIZE];
static atomic_size_t arena_used;
static atomic_int arena_pinned;

static int in_arena(const void *p)
{
  return (const unsigned char *)p >= arena && (const unsigned char *)p < arena + ARENA_SIZE;
}

static void *arena_alloc(size_t n, size_t align)
{
  if (align < ARENA_HEADER)
    align = ARENA_HEADER;
  if (n > ARENA_SIZE || align > 4096 || (align & (align - 1)) != 0)
    return NULL;
  size_t need = n + align + ARENA_HEADER;
  /* The whole arena is flagged in the filter before its first block goes
   * out: resolution, its only user, ends before any sample is taken. */
  if (!atomic_exchange(&arena_pinned, 1))
    culpert__filter_pin(arena, ARENA_SIZE);
  size_t at = atomic_fetch_add(&arena_used, need);
  if (at + need > ARENA_SIZE)
    return NULL;
  uintptr_t p = ((uintptr_t)arena + at + ARENA_HEADER + align - 1) & ~(uintptr_t)(align - 1);
  memcpy((void *)(p - sizeof(size_t)), &n, sizeof n);
  return (void *)p;
}

static size_t arena_size(const void *p)
{
  size_t n;
  memcpy(&n, (const unsigned char *)p - sizeof n, sizeof n);
  return n;
}

/* ---------------------------------------------------------------- resolution */

static void *(*libc_memalign)(size_t, size_t);

static int posix_memalign_via_libc(void **out, size_t align, size_t n)
{
  void *p = libc_memalign(align, n);
  if (p == NULL)
    return ENOMEM;
  *out = p;
  return 0;
}

static void *fn_addr(void *(*fn)(size_t))
{
  void *p;
  memcpy(&p, &fn, sizeof p);
  return p;
}

/* The start of the loaded object that holds addr, NULL when none does.
 * _dl_find_object first: dladdr also looks for the nearest symbol, a
 * search of the object's whole symbol table (about 50 µs for libc's,
 * three times at every start); but _dl_find_object knows nothing yet when
 * the first allocation comes from libc's own early start-up. */
static void *object_of(void *addr)
{
  struct dl_find_object o;
  Dl_info info;
  if (_dl_find_object(addr, &o) == 0)
    return o.dlfo_map_start;
  return dladdr(addr, &info) != 0 ? info.dli_fbase : NULL;
}

/* dlsym(RTLD_NEXT, name) when it lies in the object that starts at base. */
static void *next_in(const char *name, void *base)
{
  void *fn = dlsym(RTLD_NEXT, name);
  return fn != NULL && object_of(fn) == base ? fn : NULL;
}

/* Find the next allocator. Runs once; allocations it causes on this thread
 * come from the arena. memalign and aligned_alloc are used only when they
 * belong to the same object as malloc (jemalloc lacks some of them, and
 * glibc's would then allocate from the wrong heap); otherwise they are
 * built on posix_memalign. */
static void do_resolve(void)
{
  struct real_fns r;
  void *base;
  memset(&r, 0, sizeof r);
  CULPERT__SET_FN(r.malloc, dlsym(RTLD_NEXT, "malloc"));
  CULPERT__SET_FN(r.free, dlsym(RTLD_NEXT, "free"));
  CULPERT__SET_FN(r.calloc, dlsym(RTLD_NEXT, "calloc"));
  CULPERT__SET_FN(r.realloc, dlsym(RTLD_NEXT, "realloc"));
  CULPERT__SET_FN(r.posix_memalign, dlsym(RTLD_NEXT, "posix_memalign"));
  if (r.malloc == NULL || r.free == NULL || r.calloc == NULL || r.realloc == NULL ||
      r.posix_memalign == NULL) {
    /* No next object (static oddities): glibc's own entry points. */
    CULPERT__SET_FN(r.malloc, dlsym(RTLD_DEFAULT, "__libc_malloc"));
    CULPERT__SET_FN(r.free, dlsym(RTLD_DEFAULT, "__libc_free"));
    CULPERT__SET_FN(r.calloc, dlsym(RTLD_DEFAULT, "__libc_calloc"));
    CULPERT__SET_FN(r.realloc, dlsym(RTLD_DEFAULT, "__libc_realloc"));
    CULPERT__SET_FN(libc_memalign, dlsym(RTLD_DEFAULT, "__libc_memalign"));
    r.posix_memalign = libc_memalign != NULL ? posix_memalign_via_libc : NULL;
  }
  if (r.malloc != NULL && (base = object_of(fn_addr(r.malloc))) != NULL) {
    CULPERT__SET_FN(r.aligned_alloc, next_in("aligned_alloc", base));
    CULPERT__SET_FN(r.memalign, next_in("memalign", base));
    CULPERT__SET_FN(r.malloc_usable_size, dlsym(RTLD_NEXT, "malloc_usable_size"));
  }
  if (r.malloc == NULL || r.free == NULL || r.calloc == NULL || r.realloc == NULL) {
    /* Keep the arena: allocations fail once it is full. */
    culpert__say("cannot find the next malloc (dlsym RTLD_NEXT failed)");
    return;
  }
  real = r;
}

/* 1 when the real functions are known (possibly after waiting for another
 * thread to find them); 0 when this thread is resolving and must use the
 * arena. */
static int resolve(void)
{
  if (atomic_load_explicit(&resolve_state, memory_order_acquire) == RESOLVE_DONE)
    return 1;
  if (resolving)
    return 0;
  int expect = RESOLVE_NONE;
  if (atomic_compare_exchange_strong(&resolve_state, &expect, RESOLVE_BUSY)) {
    int saved = errno;
    resolving = 1;
    do_resolve();
    resolving = 0;
    atomic_store_explicit(&resolve_state, RESOLVE_DONE, memory_order_release);
    errno = saved;
    return 1;
  }
  while (atomic_load_explicit(&resolve_state, memory_order_acquire) != RESOLVE_DONE)
    sched_yield();
  return 1;
}

static int resolved_real(void)
{
  return resolve() && real.malloc != boot_malloc;
}

static void *boot_malloc(size_t n)
{
  return resolved_real() ? real.malloc(n) : arena_alloc(n, 16);
}

static void boot_free(void *p)
{
  /* Never resolves: a block not from the arena cannot exist before the
   * real allocator is known, and arena blocks are never released. */
  if (p != NULL && !in_arena(p) && real.free != boot_free)
    real.free(p);
}

static void *boot_calloc(size_t m, size_t n)
{
  if (resolved_real())
    return real.calloc(m, n);
  if (n != 0 && m > SIZE_MAX / n)
    return NULL;
  return arena_alloc(m * n, 16); /* static memory, never reused: already zero */
}

static void *boot_realloc(void *p, size_t n)
{
  if (resolved_real())
    return real.realloc(p, n);
  if (p != NULL && !in_arena(p))
    return NULL; /* cannot happen: nothing else exists yet */
  void *q = arena_alloc(n, 16);
  if (q != NULL && p != NULL)
    memcpy(q, p, arena_size(p) < n ? arena_size(p) : n);
  return q;
}

static int boot_posix_memalign(void **out, size_t align, size_t n)
{
  if (resolved_real() && real.posix_memalign != boot_posix_memalign && real.posix_memalign != NULL)
    return real.posix_memalign(out, align, n);
  void *p = arena_alloc(n, align);
  if (p == NULL)
    return ENOMEM;
  *out = p;
  return 0;
}

static void *boot_aligned_alloc(size_t align, size_t n)
{
  void *p = NULL;
  return boot_posix_memalign(&p, align, n) == 0 ? p : NULL;
}

static void *boot_memalign(size_t align, size_t n)
{
  return boot_aligned_alloc(align, n);
}

static size_t boot_malloc_usable_size(void *p)
{
  (void)p;
  return 0;
}

/* ---------------------------------------------------------------- writer child's heap */

/*
 * The process CULPERT_WRITE_ON_SIGNAL's handler forks to write the profile
 * (output.c) is a copy of the program at an arbitrary instant: the next
 * allocator's locks may be held there by threads that no longer exist.
 * Its allocations come from fresh mmap'd chunks instead, and its frees
 * are ignored: it lives for one profile. A block from before the fork is
 * sized for realloc by the next allocator's malloc_usable_size, which
 * takes no lock.
 */
#define PRIVATE_CHUNK  ((size_t)64 << 20)
#define PRIVATE_CHUNKS 64
static struct {
  unsigned char *lo, *hi;
} priv_chunk[PRIVATE_CHUNKS];
static int priv_nchunks;
static unsigned char *priv_at, *priv_end;
static size_t (*prev_usable_size)(void *);

static int priv_owns(const void *p)
{
  for (int i = 0; i < priv_nchunks; i++)
    if ((const unsigned char *)p >= priv_chunk[i].lo && (const unsigned char *)p < priv_chunk[i].hi)
      return 1;
  return 0;
}

static void *priv_alloc(size_t n, size_t align)
{
  if (align < 16)
    align = 16;
  if (n > PRIVATE_CHUNK * 16 || align > 4096 || (align & (align - 1)) != 0)
    return NULL;
  uintptr_t p = ((uintptr_t)priv_at + 16 + align - 1) & ~(uintptr_t)(align - 1);
  if (priv_at == NULL || p + n > (uintptr_t)priv_end) {
    size_t len =
        n + align + 16 > PRIVATE_CHUNK ? (n + align + 16 + 4095) & ~(size_t)4095 : PRIVATE_CHUNK;
    if (priv_nchunks == PRIVATE_CHUNKS)
      return NULL;
    void *m =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
      return NULL;
    priv_at = m;
    priv_end = priv_at + len;
    priv_chunk[priv_nchunks].lo = priv_at;
    priv_chunk[priv_nchunks++].hi = priv_end;
    p = ((uintptr_t)priv_at + 16 + align - 1) & ~(uintptr_t)(align - 1);
  }
  memcpy((void *)(p - sizeof(size_t)), &n, sizeof n);
  priv_at = (unsigned char *)(p + n);
  return (void *)p;
}

static size_t priv_usable_size(void *p)
{
  size_t n = 0;
  if (p == NULL)
    return 0;
  if (priv_owns(p) || in_arena(p))
    memcpy(&n, (const unsigned char *)p - sizeof n, sizeof n);
  else if (prev_usable_size != NULL)
    n = prev_usable_size(p);
  return n;
}

static void *priv_malloc(size_t n)
{
  return priv_alloc(n, 16);
}

static void priv_free(void *p)
{
  (void)p;
}

static void *priv_calloc(size_t m, size_t n)
{
  if (n != 0 && m > SIZE_MAX / n)
    return NULL;
  return priv_alloc(m * n, 16); /* fresh mmap'd memory, never reused: zero */
}

static void *priv_realloc(void *p, size_t n)
{
  void *q = priv_alloc(n, 16);
  size_t old = priv_usable_size(p);
  if (q != NULL && p != NULL)
    memcpy(q, p, old < n ? old : n);
  return q;
}

static int priv_posix_memalign(void **out, size_t align, size_t n)
{
  void *p = priv_alloc(n, align);
  if (p == NULL)
    return ENOMEM;
  *out = p;
  return 0;
}

static void *priv_memalign(size_t align, size_t n)
{
  return priv_alloc(n, align);
}

void culpert__use_private_heap(void)
{
  prev_usable_size =
      real.malloc_usable_size == boot_malloc_usable_size ? NULL : real.malloc_usable_size;
  struct real_fns r = {priv_malloc,         priv_free,     priv_calloc,   priv_realloc,
                       priv_posix_memalign, priv_memalign, priv_memalign, priv_usable_size};
  real = r;
}

/* ---------------------------------------------------------------- slow paths */

#define STOPPED_COUNTDOWN (INT64_C(1) << 62)

/*
 * Cycle counters on the sampled path, compiled in only by a measurement
 * build (cmake -DCULPERT_COST_COUNTERS=ON, x86-64): the time stamp counter
 * read between the steps of each sample and around each sampled free,
 * summed over the process and printed at exit, so the cost of a sample
 * can be split by step inside a real workload, where its code and data
 * are cold (bench/README.md reads them). Otherwise the macros vanish.
 */
#ifdef CULPERT_COST_COUNTERS
enum { COST_DRAW, COST_STACK, COST_WEIGHT, COST_RECORD, COST_INSERT, COST_REMOVE, COST_PARTS };
static atomic_uint_fast64_t cost_cycles[COST_PARTS], cost_samples, cost_removed;
#define COST_NOW(v) uint64_t v = __builtin_ia32_rdtsc()
#define COST_ADD(part, a, b)                                                                       \
  atomic_fetch_add_explicit(&cost_cycles[part], (b) - (a), memory_order_relaxed)
#define COST_COUNT(counter) atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed)

/* The mean ticks of step `part` over n events. */
static unsigned long long cost_mean(int part, uint64_t n)
{
  return n != 0 ? (unsigned long long)(atomic_load(&cost_cycles[part]) / n) : 0;
}

static void cost_report(void)
{
  uint64_t n = atomic_load(&cost_samples), r = atomic_load(&cost_removed);
  culpert__say("cost counters: %llu samples, TSC ticks each: draw %llu, stack %llu, weight %llu, "
               "record %llu, live insert %llu; %llu sampled frees, %llu ticks each",
               (unsigned long long)n, cost_mean(COST_DRAW, n), cost_mean(COST_STACK, n),
               cost_mean(COST_WEIGHT, n), cost_mean(COST_RECORD, n), cost_mean(COST_INSERT, n),
               (unsigned long long)r, cost_mean(COST_REMOVE, r));
}
#else
#define COST_NOW(v)          __attribute__((unused)) uint64_t v = 0
#define COST_ADD(part, a, b) ((void)0)
#define COST_COUNT(counter)  ((void)0)
#endif

/*
 * record: capture, weigh and record the sample at p (n bytes), its stack
 * into ips, which has room for culpert__cfg.stack_depth +
 * CULPERT__STACK_SLACK entries. Inlined into the two functions below,
 * which differ only in how big that array is: the default depth's takes a
 * fifth of the stack the deepest takes (about 600 bytes against 2 KiB), so
 * a sample near the end of a small thread stack does not run off it.
 */
static inline __attribute__((always_inline)) void record(void *p, size_t n, uintptr_t *ips)
{
  COST_NOW(c1);
  uint32_t depth = culpert__stack_capture(ips, culpert__cfg.stack_depth);
  COST_NOW(c2);
  double w = culpert__sampler_weight(n, culpert__rate);
  COST_NOW(c3);
  int64_t b = culpert__record_sample(ips, depth, culpert__span_current_node(), n, w);
  COST_NOW(c4);
  if (b >= 0) {
    struct culpert__live v = {(uint32_t)b, n, w};
    if (culpert__live_insert(p, &v) != 0)
      culpert__record_count_dropped(); /* allocated, never counted in use */
  }
  COST_NOW(c5);
  COST_ADD(COST_STACK, c1, c2);
  COST_ADD(COST_WEIGHT, c2, c3);
  COST_ADD(COST_RECORD, c3, c4);
  COST_ADD(COST_INSERT, c4, c5);
  COST_COUNT(cost_samples);
}

static CULPERT__NOINLINE void record_default_depth(void *p, size_t n)
{
  uintptr_t ips[CULPERT__DEFAULT_DEPTH + CULPERT__STACK_SLACK];
  record(p, n, ips);
}

static CULPERT__NOINLINE void record_any_depth(void *p, size_t n)
{
  uintptr_t ips[CULPERT__MAX_DEPTH + CULPERT__STACK_SLACK];
  record(p, n, ips);
}

/*
 * sample_check: called after an allocation of n bytes at p once the
 * thread's countdown (already reduced by n) reached zero or below. Decides
 * whether the allocation is sampled and records it. Keeps errno. A
 * function of its own, called after the real allocation returned, with the
 * stack array in a function further down: inlined into each *_slow
 * function, that array sat on the stack during the real call too, so a
 * thread's first allocation, which always comes here, needed over 2 KiB
 * more stack than without culpert (a thread with a 16 KiB stack and 8 KiB
 * of it in use crashed in glibc's arena set-up, found by a soak test).
 */
static CULPERT__NOINLINE void sample_check(void *p, size_t n)
{
  struct culpert__thread *t = &culpert__tls;
  if (p == NULL || t->guard != 0) {
    /* Nothing to record: a failed allocation allocated nothing, and
     * culpert's own allocations (a snapshot's, say) are not the program's.
     * A sample point that fell inside these n bytes is dropped and the
     * next one drawn afresh; the distance to it is memoryless, so the
     * program's own allocations are still sampled with p(s). Left pending,
     * the point sampled the program's next allocation whatever its size,
     * at the weight of p(s): after 200 snapshots, 179 of 200 16-byte
     * blocks were sampled and counted as 94 MB. The count before the
     * wrapper's subtract is >= 0, so the point fell inside iff it was < n
     * (the subtract may have wrapped: three failed reallocs of 2^62
     * bytes once ran the count past INT64_MIN). */
    uint64_t before = (uint64_t)t->countdown + n;
    if (before < n)
      t->countdown = t->ready ? culpert__sampler_next(t) : 0;
    return;
  }
  int saved = errno;
  t->guard++;
  if (!atomic_load_explicit(&culpert__ready, memory_order_acquire)) {
    t->countdown = 0; /* before the constructor: look again next time */
    goto out;
  }
  if (!atomic_load_explicit(&culpert__running, memory_order_relaxed)) {
    t->countdown = STOPPED_COUNTDOWN; /* pass-through from now on */
    goto out;
  }
  if (!t->ready) {
    /* This thread's first interval: the allocation that brought it here is
     * judged against a fresh draw like any other. */
    culpert__sampler_thread_init(t);
    t->countdown = culpert__sampler_next(t) - (int64_t)n;
  }
  if (t->countdown > 0 || (t->countdown == 0 && culpert__rate != 0))
    goto out; /* the next sample point lies beyond this allocation */
  COST_NOW(c0);
  t->countdown = culpert__sampler_next(t);
  culpert__live_prefetch(p);
  COST_NOW(c1);
  COST_ADD(COST_DRAW, c0, c1);
  if (culpert__cfg.stack_depth <= CULPERT__DEFAULT_DEPTH)
    record_default_depth(p, n);
  else
    record_any_depth(p, n);
out:
  t->guard--;
  errno = saved;
}

/* forget: p is about to be released; if it is a live sampled block, take it
 * out of the live table (and so out of the in-use totals). Returns 1 for a
 * bootstrap arena block (which must never reach the real allocator). With
 * the guard already set (culpert freeing its own unsampled memory, or a
 * signal handler that interrupted the slow path) the live table is left
 * alone: its lock may be held by this very thread. */
static CULPERT__NOINLINE int forget(void *p)
{
  if (in_arena(p))
    return 1;
  struct culpert__thread *t = &culpert__tls;
  if (t->guard != 0)
    return 0;
  struct culpert__live v;
  int saved = errno;
  t->guard++;
  COST_NOW(c0);
  if (culpert__live_remove(p, &v)) {
    COST_NOW(c1);
    COST_ADD(COST_REMOVE, c0, c1);
    COST_COUNT(cost_removed);
  }
  t->guard--;
  errno = saved;
  return 0;
}

static CULPERT__NOINLINE void *malloc_slow(size_t n)
{
  void *p = real.malloc(n);
  sample_check(p, n);
  return p;
}

static CULPERT__NOINLINE void free_slow(void *p)
{
  if (!forget(p))
    real.free(p);
}

static CULPERT__NOINLINE void *calloc_slow(size_t m, size_t n)
{
  void *p = real.calloc(m, n);
  sample_check(p, m * n);
  return p;
}

/* realloc of a block that may be sampled or from the arena, or whose new
 * size ran the countdown out. A sampled block is forgotten before the real
 * realloc (after it, another thread could get the same address) and put
 * back if the realloc fails. */
static CULPERT__NOINLINE void *realloc_slow(void *p, size_t n)
{
  struct culpert__live v;
  int had = 0;
  if (p != NULL && culpert__filter_test(p) && (in_arena(p) || culpert__tls.guard == 0)) {
    if (in_arena(p)) {
      size_t old = arena_size(p);
      /* undo the wrapper's subtract (wrapping as it did): malloc below
       * counts these bytes */
      culpert__tls.countdown = (int64_t)((uint64_t)culpert__tls.countdown + n);
      if (n == 0)
        return NULL;
      void *q = malloc(n);
      if (q != NULL)
        memcpy(q, p, old < n ? old : n);
      return q;
    }
    int saved = errno;
    culpert__tls.guard++;
    had = culpert__live_remove(p, &v);
    culpert__tls.guard--;
    errno = saved;
  }
  void *q = real.realloc(p, n);
  if (had) {
    int saved = errno;
    culpert__tls.guard++;
    /* A failed realloc leaves p untouched and still live; if it cannot
     * go back into the table (only when mmap fails), it is counted as
     * dropped, as sample_check counts a sample it cannot insert. */
    if (q == NULL && n != 0 && culpert__live_insert(p, &v) != 0)
      culpert__record_count_dropped();
    culpert__tls.guard--;
    errno = saved;
  }
  if (q == NULL || culpert__tls.countdown <= 0)
    sample_check(q, n); /* a failure too: see sample_check */
  return q;
}

static CULPERT__NOINLINE int memalign_slow(void **out, size_t align, size_t n)
{
  int rc = real.posix_memalign != NULL ? real.posix_memalign(out, align, n) : ENOMEM;
  sample_check(rc == 0 ? *out : NULL, n);
  return rc;
}

/* ---------------------------------------------------------------- the wrappers */

/*
 * Cost budget of the unsampled path: allocation = one TLS subtract and a
 * branch, then a tail call to the real function (4 instructions for
 * malloc); free = the summary slot from the pointer (a shift and a
 * mask), a `bt` of that bit in the read-mostly 4 KiB summary, a branch,
 * then a tail call (6 instructions, an `asm goto` on x86-64 like malloc's
 * check; 5 more, the same on the filter, in regions that hold a sample).
 * No locks, no shared writes. Everything else is out of line.
 */
_Static_assert(offsetof(struct culpert__thread, countdown) == 0, "countdown leads culpert__tls");

static inline __attribute__((always_inline)) int countdown_expired(size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
  /* The same subtract and branch in three instructions: the flags of the
   * in-place subtract say whether the old count was <= n, unsigned, which
   * is what "expired" means. Unsigned because the count is never below
   * zero outside the slow path (sample_check sees to it), and so that a
   * size above INT64_MAX, which no allocator grants, expires the count
   * instead of adding 2^64 - n to it (a signed test did: rate 0 then
   * missed the next 4096 bytes after a failed malloc(SIZE_MAX - 4095)). */
  __asm__ goto("movq culpert__tls@gottpoff(%%rip), %%rax\n\t"
               "subq %0, %%fs:(%%rax)\n\t"
               "jbe %l[expired]"
               :
               : "r"(n)
               : "rax", "cc", "memory"
               : expired);
  return 0;
expired:
  return 1;
#else
  uint64_t old = (uint64_t)culpert__tls.countdown;
  culpert__tls.countdown = (int64_t)(old - n);
  return CULPERT__UNLIKELY(old <= n);
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Jump to LABEL when bit (p >> SHIFT) mod 2^BITS of the bit map MAP is
 * set: that slot is the bit offset of a `bt` on the map itself, which
 * addresses the bit string from its first byte (bit s is bit s mod 32 of
 * word s / 32, as in C). A `bt` on memory with a register bit number is
 * microcoded; a load and a `bt` in a register instead (3 instructions
 * more) made no difference to CPU time in the bench (small 1 20000000 at
 * 1T, 41 interleaved rounds: +8.3% and +7.7% against no preload). */
#define BIT_SET_GOTO(p, map, shift, bits, label)                                                   \
  __asm__ goto("movq %0, %%rax\n\t"                                                                \
               "shrq %[sh], %%rax\n\t"                                                             \
               "andl %[mask], %%eax\n\t"                                                           \
               "btl %%eax, " #map "(%%rip)\n\t"                                                    \
               "jc %l[" #label "]"                                                                 \
               :                                                                                   \
               : "r"(p), [sh] "i"(shift), [mask] "i"((1u << (bits)) - 1u)                          \
               : "rax", "cc", "memory"                                                             \
               : label)
#endif

static inline __attribute__((always_inline)) int filter_hit(const void *p)
{
#if defined(__x86_64__) && defined(__GNUC__)
  /* culpert__filter_test in asm: the summary bit, then, only when it is
   * set, the filter bit. */
  BIT_SET_GOTO(p, culpert__summary, CULPERT__SUMMARY_SHIFT, CULPERT__SUMMARY_BITS, maybe);
  return 0;
maybe:
  BIT_SET_GOTO(p, culpert__filter, CULPERT__FILTER_SHIFT, CULPERT__FILTER_BITS, hit);
  return 0;
hit:
  return 1;
#else
  return CULPERT__UNLIKELY(culpert__filter_test(p));
#endif
}

/* malloc starts a page of its own, free and the others follow it: where
 * the wrappers sit in a page, and so in the branch predictor's tables, no
 * longer moves when code or PLT entries are added before them. Seven new
 * PLT entries once moved them by 0x70 bytes, and the bench's small
 * workload (malloc+free pairs) then ran 45% slower on its AMD EPYC whenever
 * sampling was on: the same instructions ran, and at 1T, where the
 * slow-path branch is never taken, nothing changed, so a collision in the
 * predictor, it seems. */
CULPERT__EXPORT __attribute__((aligned(4096))) void *malloc(size_t n)
{
  if (countdown_expired(n))
    return malloc_slow(n);
  return real.malloc(n);
}

CULPERT__EXPORT void free(void *p)
{
  if (filter_hit(p)) {
    free_slow(p);
    return;
  }
  real.free(p);
}

CULPERT__EXPORT void *calloc(size_t m, size_t n)
{
  size_t total;
  if (__builtin_mul_overflow(m, n, &total))
    return real.calloc(m, n); /* fails with ENOMEM */
  if (countdown_expired(total))
    return calloc_slow(m, n);
  return real.calloc(m, n);
}

CULPERT__EXPORT void *realloc(void *p, size_t n)
{
  int expired = countdown_expired(n);
  if (CULPERT__UNLIKELY(expired | culpert__filter_test(p)))
    return realloc_slow(p, n);
  return real.realloc(p, n);
}

CULPERT__EXPORT void *reallocarray(void *p, size_t m, size_t n)
{
  size_t total;
  if (__builtin_mul_overflow(m, n, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, total);
}

CULPERT__EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
  if (align < sizeof(void *) || (align & (align - 1)) != 0)
    return EINVAL;
  if (countdown_expired(n) ||
      CULPERT__UNLIKELY(real.posix_memalign == boot_posix_memalign || real.posix_memalign == NULL))
    return memalign_slow(out, align, n);
  return real.posix_memalign(out, align, n);
}

/* aligned_alloc and memalign use the next allocator's own function when it
 * has one; otherwise posix_memalign, which accepts any power of two. */
static void *aligned_common(size_t align, size_t n, void *(*fn)(size_t, size_t))
{
  void *p = NULL;
  if (fn != NULL && fn != boot_aligned_alloc && fn != boot_memalign) {
    if (countdown_expired(n)) {
      p = fn(align, n);
      sample_check(p, n);
      return p;
    }
    return fn(align, n);
  }
  if (align < sizeof(void *))
    align = sizeof(void *);
  if ((align & (align - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  int rc = posix_memalign(&p, align, n);
  if (rc != 0) {
    errno = rc;
    return NULL;
  }
  return p;
}

CULPERT__EXPORT void *aligned_alloc(size_t align, size_t n)
{
  if (real.aligned_alloc == boot_aligned_alloc)
    return resolve(), aligned_common(align, n, NULL);
  return aligned_common(align, n, real.aligned_alloc);
}

CULPERT__EXPORT void *memalign(size_t align, size_t n)
{
  if (real.memalign == boot_memalign)
    return resolve(), aligned_common(align, n, NULL);
  return aligned_common(align, n, real.memalign);
}

CULPERT__EXPORT void *valloc(size_t n)
{
  return aligned_common((size_t)sysconf(_SC_PAGESIZE), n, NULL);
}

CULPERT__EXPORT void *pvalloc(size_t n)
{
  /* 0 stays 0, as in glibc: a page-aligned block of the smallest size */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t rounded = (n + page - 1) & ~(page - 1);
  if (rounded < n) {
    errno = ENOMEM;
    return NULL;
  }
  return aligned_common(page, rounded, NULL);
}

CULPERT__EXPORT size_t malloc_usable_size(void *p)
{
  if (p == NULL)
    return 0;
  if (CULPERT__UNLIKELY(culpert__filter_test(p)) && in_arena(p))
    return arena_size(p);
  if (real.malloc_usable_size == NULL || real.malloc_usable_size == boot_malloc_usable_size)
    return 0;
  return real.malloc_usable_size(p);
}

/* ---------------------------------------------------------------- signals */

/*
 * sigaction and signal, so that CULPERT_WRITE_ON_SIGNAL's handlers stay out
 * of the program's sight (output.c): where culpert's handler stands in for
 * the default action, the program reads the default action and may set
 * its own handler, which replaces culpert's; setting the default action
 * puts culpert's back. Every other call goes straight to the next
 * definition (libc's). sigset, sysv_signal and bsd_signal are not
 * wrapped: a program using them sees culpert's handler as it is.
 */
static int (*next_sigaction)(int, const struct sigaction *, struct sigaction *);
static sighandler_t (*next_signal)(int, sighandler_t);

CULPERT__EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
  if (CULPERT__UNLIKELY(culpert__signal_watched(sig)))
    return culpert__signal_intercept(sig, act, old);
  if (next_sigaction == NULL)
    return culpert__signal_intercept(sig, act, old); /* before start-up: glibc's */
  return next_sigaction(sig, act, old);
}

CULPERT__EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
  if (CULPERT__LIKELY(!culpert__signal_watched(sig)) && next_signal != NULL)
    return next_signal(sig, handler);
  /* What glibc's signal does: the handler, with the signal blocked while
   * it runs and interrupted calls restarted. */
  struct sigaction act, old;
  if (handler == SIG_ERR || sig <= 0 || sig >= NSIG) {
    errno = EINVAL;
    return SIG_ERR;
  }
  memset(&act, 0, sizeof act);
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  sigaddset(&act.sa_mask, sig);
  act.sa_flags = SA_RESTART;
  return culpert__signal_intercept(sig, &act, &old) == 0 ? old.sa_handler : SIG_ERR;
}

/* ---------------------------------------------------------------- dlclose */

/*
 * dlclose: an object unloaded before the profile is written would leave
 * its samples' frames unnamed, so the symbolizer notes it first and keeps
 * the note if it is really gone (symbolize.h). Not a hot path.
 */
static int (*next_dlclose)(void *);

CULPERT__EXPORT int dlclose(void *handle)
{
  int (*next)(void *) = next_dlclose;
  if (next == NULL) /* before start-up */
    CULPERT__SET_FN(next, dlsym(RTLD_NEXT, "dlclose"));
  if (next == NULL) {
    errno = ENOSYS;
    return -1;
  }
  culpert__tls.guard++; /* culpert's own allocations are not the program's */
  struct culpert__unload_note *note = culpert__symbolize_unload_begin(handle);
  culpert__tls.guard--;
  int rc = next(handle);
  int saved = errno;
  culpert__tls.guard++;
  culpert__symbolize_unload_end(note);
  culpert__tls.guard--;
  errno = saved;
  return rc;
}

/* ---------------------------------------------------------------- _exit */

/*
 * _exit, _Exit and quick_exit skip the exit handlers, and with them
 * culpert's destructor: the profile is written here first (output.c), then
 * the next definition (libc's) ends the process. glibc's own calls
 * (posix_spawn's child, daemon) do not come through here.
 */
static void (*next_exit)(int);

static _Noreturn void immediate_exit(int status)
{
  culpert__output_at_immediate_exit();
  if (next_exit != NULL)
    next_exit(status);
  for (;;)
    syscall(SYS_exit_group, status);
}

CULPERT__EXPORT void _exit(int status)
{
  immediate_exit(status);
}

CULPERT__EXPORT void _Exit(int status)
{
  immediate_exit(status);
}

/* quick_exit runs the at_quick_exit handlers, then glibc's own _exit,
 * which does not come through the wrapper above. The constructor
 * registered the first of those handlers, so it runs last: the profile
 * then sees what the program's handlers freed. Only when that
 * registration failed is the profile written here, before them. */
static void (*next_quick_exit)(int);
static int quick_exit_handler;

static void at_quick_exit_handler(void)
{
  culpert__output_at_immediate_exit();
}

CULPERT__EXPORT void quick_exit(int status)
{
  if (!quick_exit_handler)
    culpert__output_at_immediate_exit();
  if (next_quick_exit != NULL)
    next_quick_exit(status);
  immediate_exit(status);
}

/* ---------------------------------------------------------------- start and exit */

/*
 * The exit profile is written by a handler exit() runs after every ELF
 * destructor (the program's libraries', C++ static objects', culpert's
 * own): the constructor registers it with no DSO handle, before glibc's
 * start-up code registers the dynamic loader's finalizer (which runs the
 * destructors), and exit() runs its handlers last registered first. So
 * what a library frees in its destructor is no longer counted in use.
 * (With a DSO handle, libculpert's own destructor would run it, in the
 * middle of the others. libculpert is linked -z nodelete, so the handler
 * stays mapped.) Only when that registration failed does the destructor
 * write the profile.
 */
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso_handle);
static int exit_handler;

static void at_exit_handler(void *arg)
{
  (void)arg;
  culpert__output_at_exit();
}

__attribute__((constructor)) static void culpert_start(void)
{
  resolve();
  CULPERT__SET_FN(next_sigaction, dlsym(RTLD_NEXT, "sigaction"));
  CULPERT__SET_FN(next_signal, dlsym(RTLD_NEXT, "signal"));
  CULPERT__SET_FN(next_exit, dlsym(RTLD_NEXT, "_exit"));
  CULPERT__SET_FN(next_quick_exit, dlsym(RTLD_NEXT, "quick_exit"));
  CULPERT__SET_FN(next_dlclose, dlsym(RTLD_NEXT, "dlclose"));
  culpert__exec_resolve();
  culpert__tls.guard++;
  culpert__init();
  exit_handler = __cxa_atexit(at_exit_handler, NULL, NULL) == 0;
  quick_exit_handler = at_quick_exit(at_quick_exit_handler) == 0;
  culpert__tls.guard--;
}

__attribute__((destructor)) static void culpert_finish(void)
{
#ifdef CULPERT_COST_COUNTERS
  cost_report();
#endif
  if (!exit_handler)
    culpert__output_at_exit();
}
