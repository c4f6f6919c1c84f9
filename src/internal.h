/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * internal.h: what the collector's modules promise each other.
 *
 * Everything declared here runs inside someone else's malloc. Unless a
 * comment says otherwise a function here never calls malloc, never takes a
 * lock and never touches stdio. Functions marked "slow path" may take the
 * collector's locks and may only run with the thread's re-entry guard set
 * (struct culpert__thread.guard), so that any allocation they cause is
 * passed straight through.
 *
 * src/README.md explains the design; this header states the contracts.
 */
#ifndef CULPERT_INTERNAL_H
#define CULPERT_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "culpert.h"

#if defined(__GNUC__)
#define CULPERT__LIKELY(x)   __builtin_expect(!!(x), 1)
#define CULPERT__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CULPERT__NOINLINE    __attribute__((noinline))
#define CULPERT__TLS_MODEL   __attribute__((tls_model("initial-exec")))
#define CULPERT__EXPORT      __attribute__((visibility("default")))
#else
#define CULPERT__EXPORT
#define CULPERT__LIKELY(x)   (x)
#define CULPERT__UNLIKELY(x) (x)
#define CULPERT__NOINLINE
#define CULPERT__TLS_MODEL
#endif

/* ----------------------------------------------------------------- locks */

/*
 * The slow path's locks (record buckets, live table): a futex word,
 * 0 free, 1 held, 2 held with sleepers. Taking a free lock is one
 * compare-and-swap inline and releasing it one exchange, where a
 * pthread mutex costs two calls and its type checks; a waiter spins a
 * little, then sleeps (lock.c). Not recursive. Statically initialised to
 * zero; after fork() the child sets every lock back to zero.
 */
typedef struct {
  _Atomic uint32_t state;
} culpert__lock_t;

void culpert__lock_wait(culpert__lock_t *l);
void culpert__lock_wake(culpert__lock_t *l);

static inline void culpert__lock(culpert__lock_t *l)
{
  uint32_t c = 0;
  if (!atomic_compare_exchange_strong_explicit(&l->state, &c, 1, memory_order_acquire,
                                               memory_order_relaxed))
    culpert__lock_wait(l);
}

static inline void culpert__unlock(culpert__lock_t *l)
{
  if (atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2)
    culpert__lock_wake(l);
}

/* Take the lock only if it is free: never waits (signal handlers). */
static inline int culpert__trylock(culpert__lock_t *l)
{
  uint32_t c = 0;
  return atomic_compare_exchange_strong_explicit(&l->state, &c, 1, memory_order_acquire,
                                                 memory_order_relaxed);
}

static inline void culpert__lock_reinit(culpert__lock_t *l)
{
  atomic_store_explicit(&l->state, 0, memory_order_relaxed);
}

/* ---------------------------------------------------------------- config */

#define CULPERT__DEFAULT_RATE  524288u
#define CULPERT__DEFAULT_DEPTH 64u
#define CULPERT__MAX_DEPTH     256u
#define CULPERT__MAX_META      32u
#define CULPERT__PATH_MAX      4096u

enum culpert__stack_mode { CULPERT__STACK_LIBUNWIND = 0, CULPERT__STACK_FP = 1 };

/* The environment, parsed once at start-up into fixed storage. */
struct culpert__config {
  uint64_t rate;        /* CULPERT_SAMPLE_RATE, bytes; 0 = every allocation */
  uint64_t seed;        /* CULPERT_SEED */
  int has_seed;         /* CULPERT_SEED was given and valid */
  int stack_mode;       /* enum culpert__stack_mode (CULPERT_STACK) */
  int names_only;       /* CULPERT_SYMBOLS=names: symbol-table names, no DWARF */
  uint32_t stack_depth; /* CULPERT_STACK_DEPTH, 1..CULPERT__MAX_DEPTH */
  int quiet;            /* CULPERT_QUIET=1 */
  int no_children;      /* CULPERT_NO_CHILDREN=1 */
  const char *output;   /* CULPERT_OUTPUT template (in output_buf), NULL when unset */
  uint32_t interval;    /* CULPERT_INTERVAL, seconds; 0 = the exit profile only */
  int write_on_signal;  /* CULPERT_WRITE_ON_SIGNAL=1 */
  int peak;             /* CULPERT_PEAK=1: also write the in-use-at-peak profile */
  int snapshot_signal;  /* CULPERT_SNAPSHOT_SIGNAL: rewrite the exit profile on it; 0 = none */
  /* CULPERT_METADATA, validated, as "key=value" strings in meta_buf. */
  const char *meta[CULPERT__MAX_META];
  uint32_t nmeta;
  char meta_buf[2048];
  /* A copy: programs that set their process title (nginx, PostgreSQL)
   * write over the memory their environment strings were in. */
  char output_buf[CULPERT__PATH_MAX];
  /* CULPERT_RUN_ID, set by `culpert run` for the processes of one run: 1
   * to 32 of [0-9a-f], put in each file's gzip header (gzmark.h); empty
   * when unset or not that. */
  char run_id[33];
};

/* Look-up function for environment variables (getenv, or a table in tests). */
typedef const char *(*culpert__getenv_fn)(const char *name);

/*
 * culpert__config_load: fill `c` from the environment seen through `get`.
 * Bad values fall back to the default with one warning line written to
 * `warn_fd` (-1: no warnings). Never allocates.
 */
void culpert__config_load(struct culpert__config *c, culpert__getenv_fn get, int warn_fd);

/*
 * culpert__config_output_path: expand an output template into buf: "%p" is
 * the pid, "%e" the executable's basename, "%%" a percent sign; NULL means
 * the default "culpert.%e.%p.pb.gz". When `is_child` is set and the
 * template has no "%p", ".<pid>" is appended so that no two processes write
 * the same file. Returns 0, or -ENAMETOOLONG when buf is too small.
 */
int culpert__config_output_path(const char *tmpl, long pid, const char *exe, int is_child,
                                char *buf, size_t n);

/* The configuration in force in this process (set by culpert__init). */
extern struct culpert__config culpert__cfg;

/* ---------------------------------------------------------- thread state */

/* The call-frame walk's own small cache of rules (unwind.c), per thread:
 * 32 (address, rule word) pairs, direct mapped. A sample whose frames were
 * seen lately on this thread reads these eight lines instead of a line of
 * the shared rule table per frame, each a miss that waits for the one
 * before. */
#define CULPERT__UNWIND_MEMO_BITS 5u
struct culpert__unwind_memo {
  struct {
    uintptr_t addr;
    uint64_t word;
  } frame[1u << CULPERT__UNWIND_MEMO_BITS];
  uint64_t generation; /* the rule cache's generation these words belong to */
};

/*
 * Per-thread state: initial-exec TLS, fixed size, owns no heap memory.
 * `countdown` comes first: the allocation hot path is one subtract from it
 * and a branch. It starts at 0, so a thread's first allocation takes the
 * slow path, which sets the thread up. It is never below zero outside the
 * slow path: the hot path compares it with the size unsigned.
 */
struct culpert__thread {
  int64_t countdown;      /* bytes left before the next sample */
  uint32_t guard;         /* >0: inside culpert, pass every call through */
  uint32_t ready;         /* the PRNG stream is seeded */
  uint64_t rng;           /* this thread's PRNG state (splitmix64) */
  uintptr_t stack_lo;     /* readable bounds of the stack this thread ran */
  uintptr_t stack_hi;     /* on at its last walk (0, 0: none yet) */
  uint64_t span_seq_next; /* the next span sequence number of this thread's
                           * block; a multiple of the block size: none left */
  uint32_t span_depth;    /* spans open, including those beyond the stack */
  /* 1: fork_prepare took output.c's write lock, for this thread's fork */
  uint32_t fork_write;
  uint64_t spans[CULPERT_SPAN_MAX_DEPTH]; /* ids of the open spans */
  struct culpert__unwind_memo unwind;     /* the rules of the last walk */
};

extern __thread struct culpert__thread culpert__tls CULPERT__TLS_MODEL;

/* ------------------------------------------------------------- sampler */

/* Sampling state shared by all threads; written only at start-up and on stop. */
extern uint64_t culpert__rate;      /* mean interval in bytes, 0 = exact */
extern atomic_int culpert__running; /* 1 while sampling */

/*
 * culpert__sampler_setup: set the mean interval and the seed of every
 * thread's PRNG stream. Threads that already drew an interval keep it.
 */
void culpert__sampler_setup(uint64_t rate, uint64_t seed);

/*
 * culpert__sampler_thread_init: give the calling thread its own PRNG stream,
 * derived from the seed and the order in which threads first reached the
 * slow path (so CULPERT_SEED makes runs reproducible).
 */
void culpert__sampler_thread_init(struct culpert__thread *t);

/* culpert__sampler_stream: the PRNG state of the order-th thread (0 = the
 * first to reach the slow path) for a given seed: a pure function, so a
 * seed reproduces every thread's sampling sequence. */
uint64_t culpert__sampler_stream(uint64_t seed, uint64_t order);

/*
 * culpert__sampler_next: draw the next interval in bytes for thread `t`:
 * floor of an exponential variate of mean culpert__rate (0 when the rate is
 * 0). With a countdown of floor(E) an allocation of s bytes is sampled
 * exactly when floor(E) < s, i.e. with probability 1 - exp(-s/R).
 */
int64_t culpert__sampler_next(struct culpert__thread *t);

/*
 * culpert__sampler_weight: 1/p(s) with p(s) = 1 - exp(-s/R); 1 when R = 0.
 */
double culpert__sampler_weight(uint64_t size, uint64_t rate);

/*
 * culpert__sampler_stop: stop sampling for good (exit, or an internal
 * failure). Threads notice it on their next slow path and then pass every
 * call through. `why` non-NULL: say so once on stderr.
 */
void culpert__sampler_stop(const char *why);

/* culpert__sampler_failed: 1 when an internal failure stopped sampling. */
int culpert__sampler_failed(void);

/* ---------------------------------------------------------------- spans */

/* Span path table capacity; node indexes fit in CULPERT__SPAN_NODE_BITS. */
#define CULPERT__SPAN_NODE_BITS 16
#define CULPERT__SPAN_NODES     (1u << CULPERT__SPAN_NODE_BITS)
#define CULPERT__SPAN_NAME_MAX  255u

/* culpert__span_current_node: path node of the innermost recorded span on
 * this thread, 0 outside every span. */
uint32_t culpert__span_current_node(void);

/* culpert__span_node_of: path node encoded in a span id (0: none/unknown). */
uint32_t culpert__span_node_of(uint64_t id);

/*
 * culpert__span_lookup: the path node for `name` under `parent`, created on
 * first sight. Lock-free; never allocates. Returns 0 only when the table or
 * the name arena is full (the caller then attributes to the parent).
 */
uint32_t culpert__span_lookup(uint32_t parent, const char *name);

/* Read access for snapshots: node count (including unused slot 0), and the
 * name and parent of a node (name NULL for an empty slot). */
uint32_t culpert__span_capacity(void);
const char *culpert__span_name(uint32_t node, uint32_t *parent);

/* Counters written into the profile. */
uint64_t culpert__span_overflows(void);
uint64_t culpert__span_underflows(void);
uint64_t culpert__span_table_full(void);

/* culpert__span_reset_counters: the fork child starts its own counts. */
void culpert__span_reset_counters(void);

/* CULPERT__SET_FN: store the address dlsym returned in the function
 * pointer dst. ISO C has no cast between object and function pointers,
 * so the bits are copied (malloc.c and exec.c, the interposers). */
#define CULPERT__SET_FN(dst, ptr)                                                                  \
  do {                                                                                             \
    void *p_ = (ptr);                                                                              \
    memcpy(&(dst), &p_, sizeof p_);                                                                \
  } while (0)

/* ------------------------------------------------------------ livetable */

/*
 * The free() filter: one bit per 64-byte granule of a 1 GiB window of the
 * address space (2^24 bits: 2 MiB, read-mostly, its pages touched only
 * where samples fall), indexed by (p >> 6) mod 2^24. A bit is set while
 * some live sampled pointer falls on it, and for good over the bootstrap
 * arena. free() tests one bit. Two pointers share a bit only when they lie
 * in the same 64-byte granule or differ by a multiple of 1 GiB, so an
 * unsampled block is flagged only next to a sampled one or by aliasing.
 */
#define CULPERT__FILTER_BITS  24
#define CULPERT__FILTER_SHIFT 6
extern _Atomic uint32_t culpert__filter[(1u << CULPERT__FILTER_BITS) / 32u];

static inline uint32_t culpert__filter_slot(const void *p)
{
  return (uint32_t)((uintptr_t)p >> CULPERT__FILTER_SHIFT) & ((1u << CULPERT__FILTER_BITS) - 1u);
}

/*
 * The summary in front of the filter: one bit per 32 KiB region of the same
 * 1 GiB window (2^15 bits: 4 KiB, 64 cache lines that every free() touches,
 * so they stay in L1), set exactly while the region's 512 filter bits (one
 * line of the filter) are not all clear. free() reads the filter only when
 * the summary bit is set: a heap whose regions hold no sample never
 * reaches the filter.
 */
#define CULPERT__SUMMARY_BITS  15
#define CULPERT__SUMMARY_SHIFT 15
extern _Atomic uint32_t culpert__summary[(1u << CULPERT__SUMMARY_BITS) / 32u];

static inline uint32_t culpert__summary_slot(const void *p)
{
  return (uint32_t)((uintptr_t)p >> CULPERT__SUMMARY_SHIFT) & ((1u << CULPERT__SUMMARY_BITS) - 1u);
}

static inline int culpert__summary_test(const void *p)
{
  uint32_t s = culpert__summary_slot(p);
  return (atomic_load_explicit(&culpert__summary[s / 32u], memory_order_relaxed) >> (s % 32u)) & 1u;
}

/* culpert__filter_test: the summary bit, then the filter bit; may say yes
 * for pointers that merely share a slot with a sampled one, never no for a
 * live one. */
static inline int culpert__filter_test(const void *p)
{
  if (!culpert__summary_test(p))
    return 0;
  uint32_t s = culpert__filter_slot(p);
  return (atomic_load_explicit(&culpert__filter[s / 32u], memory_order_relaxed) >> (s % 32u)) & 1u;
}

/* culpert__filter_pin: flag every granule of [p, p + n) for good (the
 * bootstrap arena, so its blocks reach free()'s slow path). One range only,
 * pinned before any sample is taken; a later call replaces the range that
 * is kept from being cleared. */
void culpert__filter_pin(const void *p, size_t n);

/* A live sampled allocation. */
struct culpert__live {
  uint32_t bucket; /* index of its record bucket */
  uint64_t size;   /* bytes requested */
  double weight;   /* 1/p(size) when it was sampled */
};

/*
 * culpert__live_insert: remember sampled pointer p (slow path; takes the live
 * table's lock). Returns 0, or -ENOMEM when the table cannot grow (the
 * sample then counts as allocated but never as in use).
 */
int culpert__live_insert(const void *p, const struct culpert__live *v);

/* culpert__live_prefetch: start loading what culpert__live_insert(p) will
 * write (the table's header and p's filter line), so that the misses
 * overlap with the stack walk in between. */
void culpert__live_prefetch(const void *p);

/*
 * culpert__live_remove: forget p if it is a live sampled pointer. Returns 1
 * and fills *v when it was, 0 otherwise (slow path; takes the lock).
 */
int culpert__live_remove(const void *p, struct culpert__live *v);

/* culpert__live_add_inuse: add every live sampled pointer to the in-use
 * totals of its bucket in b[0..nb) (pointers of later buckets are left
 * out). Takes the table's lock. */
struct culpert__bucket;
void culpert__live_add_inuse(struct culpert__bucket *b, size_t nb);

/* culpert__live_keep_peak: from now on, keep the live samples of the
 * highest in-use estimate (CULPERT_PEAK). */
void culpert__live_keep_peak(void);

/* culpert__live_add_peak: add the samples that were live at the highest
 * in-use estimate to the in-use totals of their buckets in b[0..nb), as
 * culpert__live_add_inuse does for those live now. Returns when that peak
 * was reached (ns since the epoch; 0: no sample yet) and sets *lost to the
 * samples left out for want of memory, *peak to that peak's in-use estimate
 * (read with them). Samples of buckets at nb or above are left out (none
 * are, called under the record lock: see culpert__record_copy). Takes the
 * table's lock. */
int64_t culpert__live_add_peak(struct culpert__bucket *b, size_t nb, uint64_t *lost, double *peak);

/* culpert__live_peak_bytes: the highest in-use estimate (the live sampled
 * blocks' weighted bytes, what culpert__live_add_inuse sums) since
 * start-up, or since the fork in a child. Takes the table's lock. */
double culpert__live_peak_bytes(void);

/* culpert__live_count: number of live sampled pointers. */
size_t culpert__live_count(void);

/* culpert__live_reset: forget every pointer (fork child); lock not held. */
void culpert__live_reset(void);

/* Fork support: take / release the live table's lock (trylock: 1 when
 * taken, never waits). */
void culpert__live_lock(void);
int culpert__live_trylock(void);
void culpert__live_unlock(void);
void culpert__live_reinit_lock(void);

/* ---------------------------------------------------------------- stack */

/*
 * culpert__stack_init: choose how stacks are captured. For libunwind this
 * dlopens libunwind.so.8 RTLD_LOCAL (so it never interposes the host's
 * unwinder) and falls back to frame pointers when that fails. Also finds
 * culpert's own text so its frames can be skipped. Call once, before
 * sampling starts, outside any lock, with the guard set.
 */
void culpert__stack_init(int mode);

/* culpert__stack_mode_name: "libunwind" or "fp", what is in force. */
const char *culpert__stack_mode_name(void);

/* culpert__stack_libunwind_walks: how many stacks libunwind walked in
 * libunwind mode (those culpert's call-frame walk gave up on), the
 * profile's culpert.libunwind_stacks; reset in a fork child. */
uint64_t culpert__stack_libunwind_walks(void);
void culpert__stack_reset_counters(void);

/*
 * culpert__stack_capture: the calling thread's stack, leaf first, without
 * culpert's own frames: ips[0] is an address inside the call instruction
 * that reached the allocator, the rest are return addresses. `ips` must
 * have room for max + CULPERT__STACK_SLACK entries (culpert's frames are
 * captured first, then dropped). Returns the number of entries kept (at
 * most max). Never faults on a corrupt or missing frame-pointer chain.
 */
#define CULPERT__STACK_SLACK 16u
uint32_t culpert__stack_capture(uintptr_t *ips, uint32_t max);

/* culpert__stack_walk_fp: frame-pointer walk starting at frame `fp` within
 * [lo, hi); exposed for tests. Stops at the first frame pointer that is out
 * of bounds, misaligned or not strictly above the previous one. */
uint32_t culpert__stack_walk_fp(uintptr_t fp, uintptr_t lo, uintptr_t hi, uintptr_t *ips,
                                uint32_t max);

/* culpert__stack_mapping: the bounds [lo, hi) of the mapping that holds
 * addr, from /proc/self/maps read with open/read (no allocation). Returns
 * 0 when it cannot tell. */
int culpert__stack_mapping(uintptr_t addr, uintptr_t *lo, uintptr_t *hi);

/* Fork support: wait until no thread is inside libunwind or reading
 * call-frame rules, and keep it so. */
void culpert__stack_lock(void);
void culpert__stack_unlock(void);
void culpert__stack_reinit_lock(void);

/* ---------------------------------------------------------------- unwind */

/* Registers a call-frame walk starts from: the address it is at, the
 * stack pointer and rbp there. */
struct culpert__regs {
  uintptr_t ip, sp, bp;
};

#if defined(__x86_64__) && defined(__GNUC__)
/* Fill `regs` with the address of the next instruction and rsp and rbp
 * there, where the macro stands: a walk from them starts in the calling
 * function, whose rule is looked up at that exact address. */
#define CULPERT__READ_REGS(regs)                                                                   \
  __asm__ volatile("leaq 0(%%rip), %0\n\t"                                                         \
                   "movq %%rsp, %1\n\t"                                                            \
                   "movq %%rbp, %2"                                                                \
                   : "=r"((regs).ip), "=r"((regs).sp), "=r"((regs).bp))
#endif

/*
 * culpert__unwind_walk: the stack from `regs` by the DWARF call-frame
 * information, ips[0] = regs.ip, then return addresses, at most max.
 * Every stack read lies in [lo, hi). Returns the number of frames, or -1
 * when some frame needs what only libunwind does (an expression, a
 * signal frame, code without call-frame information, a stack outside
 * [lo, hi)): the caller then asks libunwind. Rules are cached process
 * wide and in `memo`, the calling thread's; no allocation, and a lock
 * only on a miss in both.
 */
int culpert__unwind_walk(struct culpert__regs regs, uintptr_t lo, uintptr_t hi, uintptr_t *ips,
                         uint32_t max, struct culpert__unwind_memo *memo);

/* culpert__unwind_available: 0 where the walk always returns -1 (not
 * x86-64, or a glibc without _dl_find_object). */
int culpert__unwind_available(void);

/* culpert__unwind_rule_word: the walk's rule word for addr, read from the
 * call-frame information whose .eh_frame_hdr is at eh_frame_hdr, reading
 * nothing outside [lo, hi); exposed for tests (0 where the walk is not
 * built). */
uint64_t culpert__unwind_rule_word(const void *eh_frame_hdr, const void *lo, const void *hi,
                                   uintptr_t addr);

/* culpert__unwind_flush: forget every cached rule. The walk does it
 * itself when it notices an object was unloaded; exposed for tests. */
void culpert__unwind_flush(void);

/* Fork support (called by culpert__stack_lock and friends): hold the
 * lock of the walk's misses. */
void culpert__unwind_lock(void);
void culpert__unwind_unlock(void);
void culpert__unwind_reinit_lock(void);

/* ---------------------------------------------------------------- record */

/* One aggregated bucket (a distinct stack and span node). */
struct culpert__bucket {
  uint64_t hash;
  uint32_t span;
  uint32_t depth;
  uint64_t ip_off; /* first of `depth` entries in the ip pool */
  double alloc_objects;
  double alloc_bytes;
  double inuse_objects; /* zero here; a snapshot sums the live table */
  double inuse_bytes;
  uint64_t samples;
};

/*
 * culpert__record_sample: add one sampled allocation of `size` bytes with
 * weight w to the bucket of (ips, span). Returns the bucket index, or -1
 * when the sample was dropped (table full, out of memory; counted).
 * Slow path; takes the record lock.
 */
int64_t culpert__record_sample(const uintptr_t *ips, uint32_t depth, uint32_t span, uint64_t size,
                               double w);

/*
 * culpert__record_copy: a consistent copy of every bucket for a snapshot,
 * in memory from the real malloc (guard set): *buckets and *ips, freed by
 * the caller with free(). Returns the number of buckets, nb, or -ENOMEM.
 * With `twice`, *buckets holds the copy twice, at 0 and at nb, so that two
 * profiles (the exit profile and CULPERT_PEAK's) have the same samples. When
 * `then` is not NULL it is called with the copy before the record lock is
 * let go (a sampling thread records first, then inserts into the live
 * table, and no sample is recorded meanwhile), so what it reads from the
 * live table belongs to buckets of the copy, never to a sample the copy
 * has not counted.
 */
long culpert__record_copy(struct culpert__bucket **buckets, uintptr_t **ips, size_t *nips,
                          int twice, void (*then)(void *arg, struct culpert__bucket *b, size_t nb),
                          void *arg);

uint64_t culpert__record_dropped(void);
/* culpert__record_any: whether any sample was recorded (1 also while
 * another thread is recording one). */
int culpert__record_any(void);
void culpert__record_count_dropped(void);

/* culpert__record_reset: forget everything (fork child); lock not held. */
void culpert__record_reset(void);
/* culpert__map_unfilled: a private anonymous mapping of `bytes`, its first
 * `guard` bytes inaccessible and the rest readable and writable, whose
 * pages are backed only as they are touched, even where the program asked
 * mlockall(MCL_FUTURE); NULL when it cannot be made (record.c). */
void *culpert__map_unfilled(size_t bytes, size_t guard);

void culpert__record_lock(void);
int culpert__record_trylock(void); /* 1 when taken; never waits */
void culpert__record_unlock(void);
void culpert__record_reinit_lock(void);

/* ---------------------------------------------------------------- output */

/*
 * culpert__init: parse the environment, set up stacks and output, register
 * the fork handlers and start sampling. Idempotent; called from the
 * constructor (and the first slow path if that comes earlier).
 */
void culpert__init(void);

/* culpert__initialized: culpert__init has completed. */
extern atomic_int culpert__ready;

/*
 * culpert__output_profile: encode a snapshot (guard must be set). Returns 0
 * with a malloc'd buffer in *out, or a negative errno. *nsamples gets the
 * number of raw samples it holds.
 */
int culpert__output_profile(unsigned char **out, size_t *len, uint64_t *nsamples);

/*
 * CULPERT_WRITE_ON_SIGNAL's handlers are hidden from the program:
 * culpert__signal_watched(sig) says whether sig is one culpert's handler
 * may stand in for (its default action), and culpert__signal_intercept is
 * sigaction() as the program should see it (the sigaction and signal
 * wrappers in malloc.c call it for those signals). Async-signal-safe,
 * like sigaction.
 */
struct sigaction;
int culpert__signal_watched(int sig);
/* In a process forked to write a profile: allocate from fresh mmap'd
 * memory, never from the next allocator (malloc.c; only in the library). */
void culpert__use_private_heap(void);
int culpert__signal_intercept(int sig, const struct sigaction *act, struct sigaction *old);

/* culpert__output_at_exit: stop sampling, then write the exit profile
 * (destructor of libculpert.so). Other threads keep pass-through service. */
void culpert__output_at_exit(void);

/* culpert__output_at_immediate_exit: the exit profile before _exit, _Exit
 * or quick_exit ends the process (their wrappers in malloc.c), written from a
 * forked copy as at an ending signal; nothing in a process culpert did not
 * see begin (a vfork child). Async-signal-safe in the way the signal-time
 * writer is. */
void culpert__output_at_immediate_exit(void);

/* culpert__output_before_exec / culpert__output_exec_failed: around an
 * exec (the exec wrappers in exec.c) of `file` (NULL: a descriptor's), the
 * profile of the image about to be replaced, when it recorded any sample,
 * written from a forked copy to <exit profile>.exec<N> (its exit profile's
 * own name under CULPERT_NO_CHILDREN=1, or when the new environment's
 * LD_PRELOAD leaves libculpert out: then the profile names `file` in its
 * comment culpert.exec_unprofiled, and a line on stderr says so); removed
 * again, and the write lock given back, when the exec fails. Nothing in a
 * process culpert did not see begin. */
struct culpert__exec_note {
  int locked;  /* holds the write lock */
  int written; /* 1: path was written; 2: and goes if the exec fails */
  char path[2 * CULPERT__PATH_MAX];
};
/* culpert__output_exec_writes: whether culpert__output_before_exec would
 * write the image's profile (this process, not a vfork child; sampling on;
 * not inside culpert). */
int culpert__output_exec_writes(void);
void culpert__output_before_exec(struct culpert__exec_note *note, const char *file,
                                 char *const envp[]);
void culpert__output_exec_failed(struct culpert__exec_note *note);
/* culpert__exec_resolve: find the next execve, execvpe, fexecve and
 * execveat (exec.c; from the constructor). */
void culpert__exec_resolve(void);

/* culpert__output_write_file: encode and write atomically (temp + rename),
 * then say so on stderr unless quiet. Guard must be set. */
int culpert__output_write_file(const char *path);

/* culpert__say: write one "culpert: ..." line to stderr (no stdio). */
void culpert__say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* culpert__say_raw: write `text` (a whole line, "culpert: " and "\n"
 * included) to stderr as culpert__say does, with no formatting and a few
 * words of stack: for the allocation slow path and signal handlers. */
void culpert__say_raw(const char *text);
/* culpert__say_fd: the same to `fd`; nothing when fd < 0. */
void culpert__say_fd(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* CULPERT_INTERNAL_H */
