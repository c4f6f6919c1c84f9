/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * stack.c: capture the allocating thread's stack.
 *
 * Two ways: libunwind (default), loaded with dlopen RTLD_LOCAL so that its
 * exported _Unwind_* and backtrace symbols never interpose the host's C++
 * exception handling or glibc's backtrace(); or frame pointers
 * (CULPERT_STACK=fp), bounds-checked against the thread's stack so that a
 * corrupt or missing chain ends the walk instead of faulting.
 *
 * Runs on the slow path with the guard set: libunwind may allocate, and
 * those allocations pass through.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "internal.h"
#include "loader.h"

typedef int (*getcontext_fn)(unw_context_t *);
typedef int (*init_local_fn)(unw_cursor_t *, unw_context_t *);
typedef int (*step_fn)(unw_cursor_t *);
typedef int (*get_reg_fn)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
typedef int (*backtrace_fn)(void **, int);

static int mode = CULPERT__STACK_FP;
static int use_cfi; /* in libunwind mode, try culpert__unwind_walk first */
/* Stacks libunwind walked (in libunwind mode): all of them without the
 * call-frame walk, else the ones it gave up on. */
static atomic_uint_fast64_t libunwind_walks;

/* Leading frames of culpert (and libunwind) a libunwind capture makes room
 * for; at most CULPERT__STACK_SLACK. */
#define UNWIND_SLACK 8u
_Static_assert(UNWIND_SLACK <= CULPERT__STACK_SLACK, "ips has room for the slack");

/* Held (shared) while a thread is inside libunwind, and exclusively across
 * fork(): libunwind has internal locks, and a child must not inherit one
 * held by a thread that does not exist there. */
static pthread_rwlock_t capture_lock = PTHREAD_RWLOCK_INITIALIZER;
static getcontext_fn u_getcontext;
static init_local_fn u_init_local;
static step_fn u_step;
static get_reg_fn u_get_reg;
static backtrace_fn u_backtrace;

/* Text ranges whose frames are never recorded: culpert's and libunwind's. */
struct range {
  uintptr_t lo, hi;
};
static struct range skip[2];

struct find_text {
  uintptr_t addr;
  struct range *out;
};

static int find_text_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  struct find_text *f = data;
  int mine = 0;
  (void)size;
  for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    mine = ph->p_type == PT_LOAD && f->addr >= lo && f->addr - lo < ph->p_memsz;
  }
  if (!mine)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    uintptr_t hi = lo + ph->p_memsz;
    if (f->out->lo == 0 || lo < f->out->lo)
      f->out->lo = lo;
    if (hi > f->out->hi)
      f->out->hi = hi;
  }
  return 1;
}

/* The executable text of the loaded object with a segment holding `addr`.
 * Found from the program headers alone: dladdr() would also search the
 * object's symbols for the nearest one, which costs more than everything
 * else stack_init does. */
static void text_range(const void *addr, struct range *out)
{
  struct find_text f = {(uintptr_t)addr, out};
  dl_iterate_phdr(find_text_cb, &f);
}

void culpert__stack_init(int want)
{
  void (*self)(int) = culpert__stack_init;
  void *addr;
  memcpy(&addr, &self, sizeof addr); /* ISO C has no function-to-object cast */
  text_range(addr, &skip[0]);
  mode = CULPERT__STACK_FP;
  use_cfi = 0;
  if (want != CULPERT__STACK_LIBUNWIND)
    return;
  void *h = dlopen("libunwind.so.8", RTLD_LOCAL | RTLD_NOW);
  if (h == NULL)
    return;
  /* POSIX's way to turn dlsym's result into a function pointer. */
  *(void **)&u_getcontext = dlsym(h, "_Ux86_64_getcontext");
  *(void **)&u_init_local = dlsym(h, "_ULx86_64_init_local");
  *(void **)&u_step = dlsym(h, "_ULx86_64_step");
  void *step_addr = dlsym(h, "_ULx86_64_step");
  *(void **)&u_get_reg = dlsym(h, "_ULx86_64_get_reg");
  *(void **)&u_backtrace = dlsym(h, "unw_backtrace");
  if (u_getcontext == NULL || u_init_local == NULL || u_step == NULL || u_get_reg == NULL)
    return; /* keep the handle: unloading while symbols may be cached is not worth it */
  text_range(step_addr, &skip[1]);
  use_cfi = culpert__unwind_available();
  mode = CULPERT__STACK_LIBUNWIND;
}

uint64_t culpert__stack_libunwind_walks(void)
{
  return atomic_load_explicit(&libunwind_walks, memory_order_relaxed);
}

void culpert__stack_reset_counters(void)
{
  atomic_store(&libunwind_walks, 0);
}

const char *culpert__stack_mode_name(void)
{
  return mode == CULPERT__STACK_LIBUNWIND ? "libunwind" : "fp";
}

static int skipped(uintptr_t ip)
{
  for (int i = 0; i < 2; i++)
    if (ip >= skip[i].lo && ip < skip[i].hi)
      return 1;
  return 0;
}

uint32_t culpert__stack_walk_fp(uintptr_t fp, uintptr_t lo, uintptr_t hi, uintptr_t *ips,
                                uint32_t max)
{
  /* A frame is [saved fp, return address]: both words must be on the
   * stack, so fp lies in [lo, hi - 16]. One unsigned compare checks both
   * ends (below lo, fp - lo wraps around to a huge value). */
  const uintptr_t frame_size = 2 * sizeof(uintptr_t);
  if (hi < lo || hi - lo < frame_size)
    return 0;
  uintptr_t room = hi - lo - frame_size;
  uint32_t n = 0;
  while (n < max && fp - lo <= room && (fp & (sizeof(uintptr_t) - 1)) == 0) {
    const uintptr_t *frame = (const uintptr_t *)fp;
    uintptr_t ret = frame[1];
    uintptr_t next = frame[0];
    if (ret == 0)
      break;
    ips[n++] = ret;
    if (next <= fp)
      break;
    fp = next;
  }
  return n;
}

/* The mapping that holds addr, from /proc/self/maps. Through raw system
 * calls: glibc's open and read are cancellation points, and this runs
 * inside malloc, where a deferred cancellation must never act (it did,
 * for threads sampled on a stack of their own making). */
int culpert__stack_mapping(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  /* Each line starts "start-end ": parse those two hex numbers and skip
   * the rest, a character at a time, across reads of any size. */
  char buf[1024]; /* small: this may run near the end of a small stack */
  uintptr_t v[2] = {0, 0};
  int field = 0; /* 0: start, 1: end, 2: rest of the line */
  int found = 0;
  ssize_t got;
  while (!found && (got = syscall(SYS_read, fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < got && !found; i++) {
      char c = buf[i];
      if (c == '\n') {
        field = 0;
        v[0] = v[1] = 0;
      } else if (field < 2) {
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d >= 0) {
          v[field] = v[field] << 4 | (uintptr_t)d;
        } else if (++field == 2 && addr >= v[0] && addr < v[1]) {
          *lo = v[0];
          *hi = v[1];
          found = 1;
        }
      }
    }
  }
  syscall(SYS_close, fd);
  return found;
}

/* The page size the bounds are rounded to (x86-64's base page). */
#define PAGE ((uintptr_t)4096u)

/* The initial stack pointer of the main thread (exported by ld.so): its
 * stack's frames all lie below it. */
extern void *__libc_stack_end;

/* 1 if every page of [lo, hi) can be read: one byte of each, read from
 * this process with process_vm_readv, which fails instead of faulting. */
static int readable(uintptr_t lo, uintptr_t hi)
{
  enum { CHUNK = 16 }; /* 512 bytes of stack: this may run near the end of a small one */
  struct iovec local[CHUNK], remote[CHUNK];
  char sink[CHUNK];
  pid_t self = getpid();
  for (uintptr_t at = lo & ~(PAGE - 1); at < hi;) {
    int n = 0;
    for (; n < CHUNK && at < hi; n++, at += PAGE) {
      local[n] = (struct iovec){&sink[n], 1};
      remote[n] = (struct iovec){(void *)at, 1};
    }
    if (process_vm_readv(self, local, (unsigned long)n, remote, (unsigned long)n, 0) != n)
      return 0;
  }
  return 1;
}

/* Beyond this much stack in use (1024 system calls to check), the bounds
 * come from /proc instead. */
#define MAX_STACK_IN_USE ((uintptr_t)64 << 20)

/*
 * The bounds of the stack the thread runs on now, for the walks, kept
 * until the stack pointer leaves them. The top: glibc puts a thread's
 * descriptor (pthread_self()) just above its stack, and the main
 * thread's frames lie below __libc_stack_end; the bottom: the page of the
 * stack pointer (nothing below it is read). The range is checked readable
 * once, with process_vm_readv (one system call for up to 16 pages; when
 * the stack grows, only the new pages). On a fiber or signal stack below
 * the thread's own, that range would cross the stack's guard page (or
 * the gap the kernel keeps below the main stack) and the check fails;
 * above it, the top lies below the stack pointer. (Only a thread created
 * with a guard size of 0, whose fiber stack lies below its own with
 * nothing but readable mappings between, would pass over several
 * mappings.) Then the bounds are
 * those of the mapping that holds the stack pointer, from
 * /proc/self/maps (read with raw system calls: this runs inside malloc). Not
 * pthread_getattr_np: it holds the thread's lock while it allocates, so a
 * sample taken inside a program's own call of it would wait for itself.
 * Returns 0 when neither can tell (no walk this time).
 */
static int stack_bounds(struct culpert__thread *t, uintptr_t sp)
{
  if (sp - t->stack_lo < t->stack_hi - t->stack_lo)
    return 1;
  uintptr_t top = gettid() == getpid() ? ((uintptr_t)__libc_stack_end | (PAGE - 1)) + 1u
                                       : (uintptr_t)pthread_self();
  uintptr_t lo = sp & ~(PAGE - 1);
  if (top > sp && top - sp <= MAX_STACK_IN_USE) {
    /* Grown below pages already checked: check only the new ones. */
    uintptr_t checked = t->stack_hi == top && lo < t->stack_lo ? t->stack_lo : top;
    if (readable(lo, checked)) {
      t->stack_lo = lo;
      t->stack_hi = top;
      return 1;
    }
  }
  if (culpert__stack_mapping(sp, &t->stack_lo, &t->stack_hi))
    return 1;
  t->stack_lo = t->stack_hi = 0;
  return 0;
}

static uint32_t capture_fp(uintptr_t *raw, uint32_t max)
{
  struct culpert__thread *t = &culpert__tls;
  uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
  if (!stack_bounds(t, fp))
    return 0;
  return culpert__stack_walk_fp(fp, t->stack_lo, t->stack_hi, raw, max);
}

/* Stepping a libunwind cursor: only when unw_backtrace is missing. Out of
 * line, so that its context and cursor (over a kilobyte) never make the
 * fast path's frame, which libunwind steps through on every sample. */
static CULPERT__NOINLINE uint32_t capture_unwind_steps(uintptr_t *raw, uint32_t max)
{
  unw_context_t ctx;
  unw_cursor_t cur;
  uint32_t n = 0;
  if (u_getcontext(&ctx) != 0 || u_init_local(&cur, &ctx) != 0)
    return 0;
  while (n < max && u_step(&cur) > 0) {
    unw_word_t ip;
    if (u_get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0)
      break;
    raw[n++] = (uintptr_t)ip;
  }
  return n;
}

/* culpert's own call-frame walk (unwind.c), started from the registers of
 * culpert__stack_capture, into which it is inlined. -1: libunwind must do
 * it (see unwind.c for when). */
static inline __attribute__((always_inline)) int capture_cfi(uintptr_t *raw, uint32_t max)
{
#if defined(__x86_64__) && defined(__GNUC__)
  struct culpert__thread *t = &culpert__tls;
  struct culpert__regs regs;
  CULPERT__READ_REGS(regs);
  if (!stack_bounds(t, regs.sp))
    return -1;
  return culpert__unwind_walk(regs, t->stack_lo, t->stack_hi, raw, max, &t->unwind);
#else
  (void)raw, (void)max;
  return -1;
#endif
}

/* libunwind, inlined into culpert__stack_capture so that it adds no
 * frame of its own: libunwind caches frame descriptions per thread. */
static inline __attribute__((always_inline)) uint32_t capture_unwind(uintptr_t *raw, uint32_t max)
{
  if (u_backtrace == NULL)
    return capture_unwind_steps(raw, max);
  int n = u_backtrace((void **)raw, (int)max);
  return n > 0 ? (uint32_t)n : 0;
}

CULPERT__NOINLINE uint32_t culpert__stack_capture(uintptr_t *ips, uint32_t max)
{
  /* Capture culpert's own frames too (at most CULPERT__STACK_SLACK of
   * them), then drop them: ips has room for max + CULPERT__STACK_SLACK. */
  uint32_t want = max + CULPERT__STACK_SLACK;
  uint32_t n;
  if (mode == CULPERT__STACK_LIBUNWIND) {
    /* libunwind pays for every frame it steps through, so on a deep stack
     * it is asked for no more than it needs: culpert's frames at the leaf
     * are unw_backtrace's own, culpert__stack_capture and a *_slow
     * function, sample_check and record_*_depth, five; UNWIND_SLACK
     * leaves room for more than twice that. */
    want = max + UNWIND_SLACK;
    int got = use_cfi ? capture_cfi(ips, want) : -1;
    if (got >= 0) {
      n = (uint32_t)got;
    } else if (!culpert__loader_usable()) {
      /* libunwind finds frame descriptions with dl_iterate_phdr, which
       * would wait for good (loader.h): frame pointers, as far as they go */
      n = capture_fp(ips, want);
    } else {
      /* libunwind may make system calls of its own: none of them may
       * act on a deferred cancellation inside malloc */
      int cancel;
      atomic_fetch_add_explicit(&libunwind_walks, 1, memory_order_relaxed);
      pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
      pthread_rwlock_rdlock(&capture_lock);
      n = capture_unwind(ips, want);
      pthread_rwlock_unlock(&capture_lock);
      pthread_setcancelstate(cancel, NULL);
    }
  } else {
    n = capture_fp(ips, want);
  }
  uint32_t first = 0;
  while (first < n && skipped(ips[first]))
    first++;
  n -= first;
  if (n > max)
    n = max;
  memmove(ips, ips + first, n * sizeof *ips);
  /* The leaf: point inside the call instruction rather than after it. */
  if (n > 0)
    ips[0] -= 1;
  return n;
}

void culpert__stack_lock(void)
{
  pthread_rwlock_wrlock(&capture_lock);
  culpert__unwind_lock();
}

void culpert__stack_unlock(void)
{
  culpert__unwind_unlock();
  pthread_rwlock_unlock(&capture_lock);
}

void culpert__stack_reinit_lock(void)
{
  culpert__unwind_reinit_lock();
  pthread_rwlock_init(&capture_lock, NULL);
}
