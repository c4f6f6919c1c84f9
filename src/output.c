/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * output.c: start-up, fork handling and profiles: at exit, on
 * culpert_snapshot_write() and culpert_snapshot().
 *
 * Everything here runs with the calling thread's guard set, so the writer's
 * allocations pass straight through and are never sampled. Files are
 * written under a temporary name and renamed, so no reader ever sees a
 * partial profile. Never crashes the host: a failure to write is reported
 * on stderr and the program carries on.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "demangle.h"
#include "gzmark.h"
#include "internal.h"
#include "loader.h"
#include "symbolize.h"
#include "writer.h"

/* The writer lands separately: until it is linked in, profiles fail with
 * -ENOSYS instead of the library failing to load. */
#pragma weak culpert__writer_encode

atomic_int culpert__ready;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
/* Serialises writing profile files: the exit profile, CULPERT_INTERVAL's
 * and culpert_snapshot_write's, so that two never share a temporary file
 * and an older profile never replaces a newer one. culpert_snapshot holds
 * it too, though it writes no file: whoever encodes a profile walks the
 * loader's lists, and fork_prepare takes this lock so that no fork
 * happens in the middle of that. */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
/* How long a write in progress is waited for, at most. */
#define WRITER_SECONDS 60
/* The thread holding write_lock (0: none), so that fork_prepare never
 * waits for a lock its own thread holds. */
static atomic_int write_owner;
/* The holder's cancellation state before it took write_lock. A write calls
 * open, write and close, cancellation points: a program thread cancelled
 * inside culpert_snapshot_write would leave the lock held, and the exit
 * profile, every later snapshot and every fork would wait for it forever.
 * The holder cannot be cancelled until it lets go. */
static int write_cancel_state;

static void write_lock_held(void)
{
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &write_cancel_state);
  atomic_store(&write_owner, (int)gettid());
}

static void write_lock_take(void)
{
  pthread_mutex_lock(&write_lock);
  write_lock_held();
}

/* write_lock, waiting for a write in progress WRITER_SECONDS at most: 1
 * if taken. */
static int write_lock_wait(void)
{
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += WRITER_SECONDS;
  if (pthread_mutex_timedlock(&write_lock, &until) != 0)
    return 0;
  write_lock_held();
  return 1;
}

static void write_lock_release(void)
{
  int state = write_cancel_state;
  atomic_store(&write_owner, 0);
  pthread_mutex_unlock(&write_lock);
  pthread_setcancelstate(state, NULL);
}

/* The temporary file of the write in progress (write_lock held), so that
 * an ending signal, which ends the program before that write can finish,
 * removes it rather than leaving PATH.tmp.PID behind. */
static char partial[2 * CULPERT__PATH_MAX + 64];
static atomic_int partial_set;
/* The signals CULPERT_WRITE_ON_SIGNAL catches (below). */
static const int ending_signals[] = {SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGABRT};
#define N_ENDING ((int)(sizeof ending_signals / sizeof ending_signals[0]))
static long pid;
/* Not the first process of the run: a fork child, or a program started
 * below the one that first loaded culpert (CULPERT_ROOT_PID). Its file
 * name carries its pid, and it writes no profile while it has sampled
 * nothing (nothing_to_write). */
static int is_child;
static int64_t start_nanos;
static char exe_name[256];
/* The program an exec is about to run without libculpert, as the exec
 * named it, for the comment culpert.exec_unprofiled of the profile the
 * image writes before it; "" otherwise. */
static char exec_unprofiled[CULPERT__PATH_MAX];
/* The working directory at start-up: a relative CULPERT_OUTPUT is anchored
 * there, so a program that changes directory (daemons chdir to /) still
 * writes where it was started. */
static char start_dir[CULPERT__PATH_MAX];
/* Where the process's profiles go once the directory of its name refused
 * one (use_fallback, see fall_back): $TMPDIR as it was at start-up when
 * an absolute path to a directory, else /tmp. */
static char fallback_dir[CULPERT__PATH_MAX];
static int use_fallback;
/* The name a process below the first one writes under, once chosen
 * (own_name; a fork child chooses again). */
static char own_path[2 * CULPERT__PATH_MAX];
/* This process's mark (find_owner_mark), put in the gzip header of each
 * file it writes: taken at start-up and by a fork child, since the copies
 * that write for it at a signal or at _exit are processes of their own.
 * Empty when /proc cannot tell. */
static char owner_mark[CULPERT__GZMARK_MAX];
static size_t owner_mark_len;

/* The file on stderr when culpert started: messages go there only while
 * fd 2 is still that file. A program that closed its stderr may have
 * reopened fd 2 as one of its own files (a log, a database), and a line
 * from culpert in it would change the program's output. */
static struct {
  int known;
  dev_t dev;
  ino_t ino;
} start_stderr;

static void note_stderr(void)
{
  struct stat st;
  start_stderr.known = fstat(STDERR_FILENO, &st) == 0;
  start_stderr.dev = start_stderr.known ? st.st_dev : 0;
  start_stderr.ino = start_stderr.known ? st.st_ino : 0;
}

static int stderr_unchanged(void)
{
  struct stat st;
  return start_stderr.known && fstat(STDERR_FILENO, &st) == 0 && st.st_dev == start_stderr.dev &&
         st.st_ino == start_stderr.ino;
}

/*
 * Writing a profile takes tens of KiB of stack (path buffers, the
 * encoder's, the symbolizer's and zlib's frames): more than a thread
 * started with a small stack has left (16 or 32 KiB, as some programs give
 * their workers; `ulimit -s 32` gives the main thread that little), which
 * then crashed with SIGSEGV where it called exit() or _exit(), took an
 * ending signal or exec'd. The writer runs on a stack of culpert's own
 * instead, mapped for the write with a guard page below it and unmapped
 * after (only the pages it touches are ever backed). Where none can be
 * mapped it runs where it is. Async-signal-safe as used here (getcontext,
 * makecontext and swapcontext only save and load registers and the signal
 * mask).
 */
#define WRITER_STACK       (1024 * 1024)
#define WRITER_STACK_GUARD (64 * 1024)

struct own_stack {
  void (*fn)(void *);
  void *arg;
  ucontext_t back;
};

static void own_stack_entry(unsigned hi, unsigned lo)
{
  struct own_stack *s = (struct own_stack *)(((uintptr_t)hi << 32) | (uintptr_t)lo);
  s->fn(s->arg);
}

static void on_own_stack(void (*fn)(void *), void *arg)
{
  size_t size = WRITER_STACK + WRITER_STACK_GUARD;
  /* Not filled at once under mlockall(MCL_FUTURE); the guard below. */
  unsigned char *mem = culpert__map_unfilled(size, WRITER_STACK_GUARD);
  if (mem == NULL) {
    fn(arg);
    return;
  }
  struct own_stack s = {fn, arg, {0}};
  ucontext_t ctx;
  int switched = 0;
  if (getcontext(&ctx) == 0) {
    ctx.uc_stack.ss_sp = mem + WRITER_STACK_GUARD;
    ctx.uc_stack.ss_size = WRITER_STACK;
    ctx.uc_link = &s.back;
    uintptr_t p = (uintptr_t)&s;
    makecontext(&ctx, (void (*)(void))own_stack_entry, 2, (unsigned)(p >> 32), (unsigned)p);
    switched = swapcontext(&s.back, &ctx) == 0;
  }
  if (!switched)
    fn(arg);
  munmap(mem, size);
}

/* write(2) of culpert's own line that never raises SIGPIPE: where fd 2 is
 * a pipe whose reader has gone (`prog 2>&1 | head -1`), the line is lost,
 * not the process, which would otherwise end by SIGPIPE (status 141)
 * instead of its own status. SIGPIPE is blocked on this thread around the
 * write, and the one the write raised, if any, taken back; one the
 * program had pending already stays. Async-signal-safe; keeps errno. */
static void write_line(int fd, const char *text, size_t len)
{
  int saved = errno;
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  int blocked = pthread_sigmask(SIG_BLOCK, &pipe_only, &old) == 0;
  int was_pending = !blocked || (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE));
  ssize_t w = write(fd, text, len);
  if (w < 0 && errno == EPIPE && !was_pending) {
    struct timespec none = {0, 0};
    while (sigtimedwait(&pipe_only, NULL, &none) < 0 && errno == EINTR) {
    }
  }
  if (blocked)
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = saved;
}

static void say_v(int fd, const char *fmt, va_list ap)
{
  if (fd == STDERR_FILENO && !stderr_unchanged())
    return;
  char line[2 * CULPERT__PATH_MAX + 256];
  int n = snprintf(line, sizeof line, "culpert: ");
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  if (m < 0)
    return;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof line - 2)
    len = sizeof line - 2;
  line[len++] = '\n';
  write_line(fd, line, len);
}

void culpert__say(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  say_v(STDERR_FILENO, fmt, ap);
  va_end(ap);
}

void culpert__say_fd(int fd, const char *fmt, ...)
{
  va_list ap;
  if (fd < 0)
    return;
  va_start(ap, fmt);
  say_v(fd, fmt, ap);
  va_end(ap);
}

static int64_t now_nanos(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The variable `name` of the environment the process started with, read
 * from environ itself rather than through getenv: a program may define
 * getenv and setenv of its own, and bash's stop reading environ once its
 * setenv has been called (by mark_root below) before its main has imported
 * the environment, which left every CULPERT_* variable unread when bash was
 * the first process. */
static const char *env_get(const char *name)
{
  size_t n = strlen(name);
  for (char **e = environ; e != NULL && *e != NULL; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
      return *e + n + 1;
  return NULL;
}

static void find_exe_name(void)
{
  char path[CULPERT__PATH_MAX];
  const char *base = program_invocation_short_name;
  if (culpert__main_exe_path(path, sizeof path) == 0) {
    const char *slash = strrchr(path, '/');
    base = slash ? slash + 1 : path;
    /* Started through a link to this very file (a program of many names:
     * redis-server is a link to redis-check-rdb, sh may be busybox): the
     * name it was started by, as ps shows it. A script's name leads to
     * another file, and keeps its interpreter's; so do /proc/self/exe and
     * /dev/fd/N (a program that execs itself again, fexecve), links of
     * the kernel's whose names say nothing. */
    const char *fn = (const char *)getauxval(AT_EXECFN);
    struct stat started, file;
    if (getauxval(AT_BASE) != 0 && fn != NULL && strncmp(fn, "/proc/", 6) != 0 &&
        strncmp(fn, "/dev/fd/", 8) != 0 && stat(fn, &started) == 0 && stat(path, &file) == 0 &&
        started.st_dev == file.st_dev && started.st_ino == file.st_ino) {
      slash = strrchr(fn, '/');
      if (slash == NULL || slash[1] != '\0')
        base = slash ? slash + 1 : fn;
    }
  }
  if (base == NULL || *base == '\0')
    base = "unknown";
  size_t len = strlen(base);
  if (len >= sizeof exe_name)
    len = sizeof exe_name - 1; /* cut, like a comm name */
  memcpy(exe_name, base, len);
  exe_name[len] = '\0';
}

/* ---------------------------------------------------------------- fork */

/* The thread forking a writer (0: none) and, once forked, the writer. An
 * ending signal may come while _exit's copy writes (Python's process pool
 * sends SIGTERM to workers that are ending with _exit): the second caller
 * waits for the first copy instead of forking another. */
static atomic_int writer_tid;
static atomic_int writer_pid;
static atomic_int immediate_exit_entered; /* _exit's write has begun */

static void interval_start(void);
static void find_owner_mark(void);
static void find_fallback_dir(void);
static int may_fall_back(const char *path, int rc);
static int template_has_pid(const char *tmpl);
static int exit_path(char *path, size_t n);
static void catch_ending_signals(void);
static void catch_snapshot_signal(void);
/* CULPERT_WRITE_ON_SIGNAL (below): the first signal caught (0 = none) and
 * when, in monotonic seconds (0 = not yet). */
static atomic_int caught;
static _Atomic int64_t caught_at;

/* glibc's registration behind pthread_atfork, which passes the caller's
 * __dso_handle. */
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                             void *dso_handle);

static int loader_drained(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)info;
  (void)size;
  (void)data;
  return 1;
}

/* Fork with other threads inside culpert: hold both locks across fork()
 * so the child never inherits one held by a thread that no longer exists.
 * Whether fork_prepare took write_lock is the forking thread's own
 * (culpert__tls.fork_write): threads fork at once, and one shared flag,
 * cleared by a second fork_prepare while the first fork held the lock,
 * left it held for good (every later fork waited WRITER_SECONDS for it,
 * and no profile was written again). */
static void fork_prepare(void)
{
  culpert__tls.guard++;
  /* No profile is being written across the fork either: the writer walks
   * the loader's lists (dl_iterate_phdr) under the loader's lock, which a
   * child would inherit held and wait for at its first sample. Taken
   * first, as a writer takes it before the tables' locks; never when this
   * very thread holds it (a handler forking in the middle of a write). */
  culpert__tls.fork_write = 0;
  if (atomic_load(&write_owner) != (int)gettid())
    culpert__tls.fork_write = (uint32_t)write_lock_wait();
  /* Then wait for the loader's write lock to be free, as late as can be:
   * glibc does not reset it in a child, so a child forked while another
   * thread iterated the loader's list or was adding or removing an object
   * would wait for it for good at its first unwind-cache miss or when it
   * writes its profile, neither of which the program itself would do.
   * dl_iterate_phdr takes that lock; returning from the first object lets
   * it go. Not after the tables' locks: a callback running meanwhile may
   * allocate, be sampled and need them. */
  dl_iterate_phdr(loader_drained, NULL);
  culpert__stack_lock();
  culpert__record_lock();
  culpert__live_lock();
}

static void fork_parent(void)
{
  culpert__live_unlock();
  culpert__record_unlock();
  culpert__stack_unlock();
  if (culpert__tls.fork_write)
    write_lock_release();
  culpert__tls.fork_write = 0;
  culpert__tls.guard--;
}

/* In a child of fork: culpert's locks, free again. fork_prepare held
 * them; in the copy CULPERT_WRITE_ON_SIGNAL forks (_Fork, no handlers),
 * they may be held by threads that do not exist there. */
static void reinit_locks(void)
{
  pthread_mutex_init(&write_lock, NULL);
  atomic_store(&write_owner, 0);
  atomic_store(&partial_set, 0);
  culpert__live_reinit_lock();
  culpert__record_reinit_lock();
  culpert__stack_reinit_lock();
}

/* The child's profile covers only the child: it starts with no samples and
 * no live blocks (blocks inherited from the parent are freed as unsampled
 * ones), keeps the span path table so its open spans stay valid, and writes
 * its own file. */
static void fork_child(void)
{
  /* Held by a thread that is gone, or by this one under its old id:
   * held for good (loader.h). */
  if (culpert__loader_lock_held())
    culpert__loader_set_usable(0);
  reinit_locks();
  own_path[0] = '\0'; /* another pid, another name */
  use_fallback = 0;   /* and its own credentials */
  find_owner_mark();
  culpert__tls.fork_write = 0;
  culpert__live_reset();
  culpert__record_reset();
  culpert__span_reset_counters();
  culpert__stack_reset_counters();
  pid = (long)getpid();
  is_child = 1;
  start_nanos = now_nanos();
  atomic_store(&caught, 0);
  atomic_store(&caught_at, 0);
  atomic_store(&writer_tid, 0);
  atomic_store(&writer_pid, 0);
  atomic_store(&immediate_exit_entered, 0);
  interval_start();
  culpert__tls.guard--;
}

/* ---------------------------------------------------------------- start-up */

/* Set `name` (or with value NULL, unset it) in the C library's
 * environment, never through a setenv the program defines: bash's, called
 * before its main, makes the table its getenv answers from from then on,
 * empty but for `name`, so every constructor until main (another preloaded
 * library's, reading its settings) found no environment, and main then
 * undid what was set. The C library's change environ, and main is handed
 * environ as it is then: bash's main fills its table from it, and passes
 * it on to its commands. */
static void libc_setenv(const char *name, const char *value)
{
  void *sym = dlsym(RTLD_NEXT, value != NULL ? "setenv" : "unsetenv");
  if (value != NULL) {
    int (*set)(const char *, const char *, int) = setenv;
    if (sym != NULL)
      memcpy(&set, &sym, sizeof set); /* ISO C has no object-to-function cast */
    set(name, value, 1);
  } else {
    int (*unset)(const char *) = unsetenv;
    if (sym != NULL)
      memcpy(&unset, &sym, sizeof unset);
    unset(name);
  }
}

/* The first process that loads culpert marks the environment with its
 * pid; a process that finds another pid there was started below it. With
 * CULPERT_OUTPUT inherited, such a process must not overwrite the first
 * one's file: when the template has no %p it appends ".<pid>"
 * (culpert__config_output_path). */
static void mark_root(void)
{
  const char *root = env_get("CULPERT_ROOT_PID");
  char num[32];
  snprintf(num, sizeof num, "%ld", pid);
  /* Empty counts as unset; anything but digits was not written by culpert
   * (it would make this process a child, writing FILE.<pid>, or nothing
   * when it samples nothing). */
  int pid_like = root != NULL && root[0] != '\0' && strlen(root) < 20 &&
                 strspn(root, "0123456789") == strlen(root);
  if (root != NULL && root[0] != '\0' && !pid_like)
    culpert__say_fd(STDERR_FILENO, "CULPERT_ROOT_PID=%s is not a process id; ignoring it", root);
  if (!pid_like)
    libc_setenv("CULPERT_ROOT_PID", num);
  else if (strcmp(root, num) != 0)
    is_child = 1;
}

/* Whether the LD_PRELOAD entry entry[0..n) is libculpert: its file name
 * starts with "libculpert". (Entries are separated by spaces or colons.) */
static int preload_entry_ours(const char *entry, size_t n)
{
  const char *slash = entry;
  for (size_t i = 0; i < n; i++)
    if (entry[i] == '/')
      slash = entry + i + 1;
  return (size_t)(entry + n - slash) >= 10 && strncmp(slash, "libculpert", 10) == 0;
}

/* Whether the LD_PRELOAD value `pre` (NULL: unset) loads libculpert. */
static int preload_has_us(const char *pre)
{
  for (; pre != NULL && *pre != '\0'; pre++) {
    size_t n = strcspn(pre, " :");
    if (n > 0 && preload_entry_ours(pre, n))
      return 1;
    pre += n;
    if (*pre == '\0')
      break;
  }
  return 0;
}

/* libculpert came through LD_PRELOAD (not linked into the program), seen
 * at start-up before CULPERT_NO_CHILDREN takes it out. */
static int preloaded;

/* CULPERT_NO_CHILDREN=1: take libculpert out of LD_PRELOAD so that programs
 * this one execs run without it (through the C library, as libc_setenv
 * says why). */
static void drop_from_preload(void)
{
  const char *pre = env_get("LD_PRELOAD");
  char out[CULPERT__PATH_MAX];
  size_t at = 0;
  if (pre == NULL)
    return;
  while (*pre != '\0') {
    size_t n = strcspn(pre, " :");
    if (n > 0 && !preload_entry_ours(pre, n)) {
      if (at + n + 2 > sizeof out)
        return; /* too long to rewrite safely: leave it alone */
      if (at > 0)
        out[at++] = ' ';
      memcpy(out + at, pre, n);
      at += n;
    }
    pre += n;
    if (*pre != '\0')
      pre++;
  }
  out[at] = '\0';
  libc_setenv("LD_PRELOAD", at == 0 ? NULL : out);
}

void culpert__init(void)
{
  pthread_mutex_lock(&init_lock);
  if (atomic_load(&culpert__ready))
    goto out;
  note_stderr();
  pid = (long)getpid();
  mark_root();
  /* A bad setting is reported by the first process alone: those started
   * below it read the same environment, and a shell script repeated the
   * line for every command it ran. */
  culpert__config_load(&culpert__cfg, env_get, is_child ? -1 : STDERR_FILENO);
  uint64_t seed = culpert__cfg.seed;
  if (!culpert__cfg.has_seed) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ ((uint64_t)getpid() << 16) ^
           (uint64_t)(uintptr_t)&ts;
  }
  culpert__sampler_setup(culpert__cfg.rate, seed);
  start_nanos = now_nanos();
  find_owner_mark();
  find_exe_name();
  if (getcwd(start_dir, sizeof start_dir) == NULL)
    start_dir[0] = '\0';
  find_fallback_dir();
  preloaded = preload_has_us(env_get("LD_PRELOAD"));
  if (culpert__cfg.no_children)
    drop_from_preload();
  culpert__stack_init(culpert__cfg.stack_mode);
  culpert__demangle_prepare(); /* the writer of a forked copy cannot dlsym */
  culpert__loader_find_lock();
  /* With no DSO handle, as the C library's own registrations are:
   * pthread_atfork registers under libculpert's, and exit() drops those
   * handlers when it runs libculpert's destructor, before the exit
   * profile is written. A fork on another thread meanwhile left the child
   * with write_lock (and the tables' locks) as the writer held them and
   * with the parent's pid and tables: culpert_snapshot_write there waited
   * forever. libculpert is linked -z nodelete, so they stay mapped. */
  if (__register_atfork(fork_prepare, fork_parent, fork_child, NULL) != 0) {
    culpert__sampler_stop("pthread_atfork failed");
    goto out;
  }
  if (culpert__cfg.peak)
    culpert__live_keep_peak();
  atomic_store(&culpert__running, 1);
  atomic_store(&culpert__ready, 1);
  interval_start();
  catch_snapshot_signal();
  catch_ending_signals();
out:
  pthread_mutex_unlock(&init_lock);
}

/* ---------------------------------------------------------------- profiles */

/* Only the path nodes that samples use, and their ancestors, renumbered
 * densely from 1, parents before children. map is indexed by node and
 * starts zeroed. While a chain of new nodes is numbered, each of them holds
 * CHAIN_LINK | the node below it, so the chain is walked down again from
 * its top without a bound on its depth (thread-pool hand-offs with
 * culpert_span_enter_child_of nest as deep as the table holds). */
#define CHAIN_LINK 0x80000000u
_Static_assert(CULPERT__SPAN_NODES <= CHAIN_LINK, "node indexes leave CHAIN_LINK free");

static size_t collect_spans(struct culpert__wsample *s, size_t ns, uint32_t *map,
                            struct culpert__wspan *out)
{
  size_t n = 1;
  out[0].name = "";
  out[0].parent = 0;
  for (size_t i = 0; i < ns; i++) {
    uint32_t top = 0, parent = 0;
    for (uint32_t node = s[i].span; node != 0 && map[node] == 0; node = parent) {
      if (culpert__span_name(node, &parent) == NULL)
        break;
      map[node] = CHAIN_LINK | top;
      top = node;
    }
    for (uint32_t node = top; node != 0;) {
      uint32_t below = map[node] & ~CHAIN_LINK;
      out[n].name = culpert__span_name(node, &parent);
      out[n].parent = parent != 0 && map[parent] < CHAIN_LINK ? map[parent] : 0;
      map[node] = (uint32_t)n++;
      node = below;
    }
    s[i].span = s[i].span != 0 ? map[s[i].span] : 0;
  }
  return n;
}

/* The node -> output index map of collect_spans: one slot per possible
 * node, zeroed. An anonymous mapping rather than calloc: the kernel zeroes
 * only the pages the sampled nodes touch, while calloc clears all 256 KiB
 * whenever the heap serves it (glibc does once the program has freed
 * blocks that big), which made it one of the exit's biggest costs. */
static uint32_t *span_map_new(void)
{
  void *m = mmap(NULL, CULPERT__SPAN_NODES * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return m == MAP_FAILED ? NULL : m;
}

static void span_map_free(uint32_t *map)
{
  if (map != NULL)
    munmap(map, CULPERT__SPAN_NODES * sizeof(uint32_t));
}

/* A copy of the records with their in-use values, taken under the record
 * lock: the in-use values of the samples live now in b[0..nb) and, with
 * `peak`, a second copy at b[nb..2nb) with those live at the in-use peak
 * (CULPERT_PEAK) instead, so that the exit profile and the peak profile
 * written beside it have the same samples. */
struct records {
  struct culpert__bucket *b;
  uintptr_t *ips;
  size_t nips;
  long nb;
  int peak;
  int64_t peak_nanos;
  uint64_t peak_lost;
  double peak_bytes;
};

static void add_inuse(void *arg, struct culpert__bucket *b, size_t nb)
{
  struct records *r = arg;
  culpert__live_add_inuse(b, nb);
  if (r->peak)
    r->peak_nanos = culpert__live_add_peak(b + nb, nb, &r->peak_lost, &r->peak_bytes);
}

static int records_take(struct records *r, int peak)
{
  *r = (struct records){.peak = peak};
  r->nb = culpert__record_copy(&r->b, &r->ips, &r->nips, peak, add_inuse, r);
  return r->nb < 0 ? (int)r->nb : 0;
}

static void records_free(struct records *r)
{
  free(r->ips);
  free(r->b);
}

/* The in-use bytes of nb buckets as a profile shows them: each stack's
 * estimate rounded, as the writer rounds it. */
static double rounded_inuse(const struct culpert__bucket *b, long nb)
{
  double sum = 0;
  for (long i = 0; i < nb; i++)
    sum += b[i].inuse_bytes > 0 ? round(b[i].inuse_bytes) : 0;
  return sum;
}

/* The profile as culpert__output_profile describes it, from the records
 * `r`; with at_peak (r taken with the peak), the in-use values are those
 * of the samples live at the in-use peak instead of those live now, and a
 * comment says when the peak was reached. */
static int encode_profile(const struct records *r, unsigned char **out, size_t *len,
                          uint64_t *nsamples, int at_peak)
{
  const struct culpert__bucket *b = r->b + (at_peak ? r->nb : 0);
  long nb = r->nb;
  struct culpert__wsample *ws = NULL;
  struct culpert__wspan *spans = NULL;
  uint32_t *map = NULL;
  int rc;
  enum { NCOMMENT = 15 };
  char cbuf[NCOMMENT][320]; /* room for culpert.exe= and a 255-byte name */
  const char *comments[NCOMMENT + CULPERT__MAX_META];
  size_t nc = 0;

  *out = NULL;
  *len = 0;
  *nsamples = 0;
  if (culpert__writer_encode == NULL)
    return -ENOSYS;
  ws = calloc((size_t)nb + 1, sizeof *ws);
  /* collect_spans writes every entry of `spans` it counts: no zeroing. */
  spans = malloc(CULPERT__SPAN_NODES * sizeof *spans);
  map = span_map_new();
  if (ws == NULL || spans == NULL || map == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  for (long i = 0; i < nb; i++) {
    ws[i].ips = r->ips + b[i].ip_off;
    ws[i].depth = b[i].depth;
    ws[i].span = b[i].span;
    ws[i].alloc_objects = b[i].alloc_objects;
    ws[i].alloc_bytes = b[i].alloc_bytes;
    ws[i].inuse_objects = b[i].inuse_objects;
    ws[i].inuse_bytes = b[i].inuse_bytes;
    ws[i].samples = b[i].samples;
    *nsamples += b[i].samples;
  }
  size_t nspans = collect_spans(ws, (size_t)nb, map, spans);

  snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.version=%s", CULPERT_VERSION_STRING);
  snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.rate=%llu", (unsigned long long)culpert__rate);
  snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.stack=%s", culpert__stack_mode_name());
  if (strcmp(culpert__stack_mode_name(), "libunwind") == 0)
    snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.libunwind_stacks=%llu",
             (unsigned long long)culpert__stack_libunwind_walks());
  snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.dropped_samples=%llu",
           (unsigned long long)culpert__record_dropped());
  /* Never below the in-use total this profile shows (rounded per stack).
   * With the peak's copy, the peak is that copy's total rounded the same
   * way, so that the peak file's in-use total is its comment: the running
   * sum the table keeps is not rounded per stack, and at a sampling rate
   * other than 0 it came out a byte or so above what the file showed. */
  double inuse = rounded_inuse(b, nb);
  double peak = !r->peak            ? culpert__live_peak_bytes()
                : r->peak_lost == 0 ? rounded_inuse(r->b + nb, nb)
                                    : r->peak_bytes;
  snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.peak_inuse_bytes=%.0f",
           peak > inuse ? peak : inuse);
  if (at_peak)
    snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.inuse_at_peak=%lld", (long long)r->peak_nanos);
  if (at_peak && r->peak_lost != 0)
    snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.inuse_at_peak_lost=%llu",
             (unsigned long long)r->peak_lost);
  snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.pid=%ld", pid != 0 ? pid : (long)getpid());
  snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.exe=%s", exe_name);
  snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.span_overflow=%llu",
           (unsigned long long)culpert__span_overflows());
  snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.span_underflow=%llu",
           (unsigned long long)culpert__span_underflows());
  snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.span_table_full=%llu",
           (unsigned long long)culpert__span_table_full());
  if (exec_unprofiled[0] != '\0')
    snprintf(cbuf[nc++], sizeof cbuf[0], "culpert.exec_unprofiled=%.290s", exec_unprofiled);
  size_t ncomments = 0;
  for (size_t i = 0; i < nc; i++)
    comments[ncomments++] = cbuf[i];
  for (uint32_t i = 0; i < culpert__cfg.nmeta; i++)
    comments[ncomments++] = culpert__cfg.meta[i];

  int64_t now = now_nanos();
  struct culpert__wprofile p = {
      .samples = ws,
      .nsamples = (size_t)nb,
      .spans = spans,
      .nspans = nspans,
      .rate = culpert__rate,
      .time_nanos = now,
      .duration_nanos = start_nanos != 0 && now > start_nanos ? now - start_nanos : 0,
      .comments = comments,
      .ncomments = ncomments,
      .flags = culpert__cfg.names_only ? CULPERT__WRITER_NAMES_ONLY : 0u,
      .mark = owner_mark_len != 0 ? owner_mark : NULL,
      .mark_len = owner_mark_len,
      .run = culpert__cfg.run_id,
      .run_len = strlen(culpert__cfg.run_id),
  };
  rc = culpert__writer_encode(&p, out, len);
out:
  span_map_free(map);
  free(spans);
  free(ws);
  return rc;
}

int culpert__output_profile(unsigned char **out, size_t *len, uint64_t *nsamples)
{
  struct records r;
  *out = NULL;
  *len = 0;
  *nsamples = 0;
  int rc = records_take(&r, 0);
  if (rc == 0)
    rc = encode_profile(&r, out, len, nsamples, 0);
  records_free(&r);
  return rc;
}

/* A process below the first one that has sampled nothing writes no
 * profile of its own (not at exit, nor on a rewrite): a shell script's
 * subshells and short commands would otherwise leave dozens of empty
 * files. The first process always writes: its file is the one asked for.
 * An explicit culpert_snapshot_write() writes regardless. */
static int nothing_to_write(void)
{
  return is_child && !culpert__record_any() && culpert__record_dropped() == 0;
}

/* Under a file size limit (RLIMIT_FSIZE, `ulimit -f`) a write past it
 * raises SIGXFSZ, whose default action ends the process: a profile too
 * large for the limit must fail (EFBIG, said on stderr) and leave the
 * program running. The signal stays blocked while writing; one the write
 * raised (it was not pending before) is taken back before unblocking. */
static int write_all(int fd, const unsigned char *buf, size_t len)
{
  sigset_t xfsz, old, pending;
  sigemptyset(&xfsz);
  sigaddset(&xfsz, SIGXFSZ);
  pthread_sigmask(SIG_BLOCK, &xfsz, &old);
  int was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
  int rc = 0;
  while (len > 0 && rc == 0) {
    ssize_t w = write(fd, buf, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      rc = w < 0 ? -errno : -EIO;
    } else {
      buf += w;
      len -= (size_t)w;
    }
  }
  if (rc == -EFBIG && !was_pending) {
    struct timespec now = {0, 0};
    sigtimedwait(&xfsz, NULL, &now);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

/* ------------------------------------------------------ whose a file is */

/* Read a small file (under /proc) into buf, NUL-terminated: its length, or
 * -1. */
static ssize_t read_small(const char *path, char *buf, size_t n)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t len = read(fd, buf, n - 1);
  close(fd);
  if (len < 0)
    return -1;
  buf[len] = '\0';
  return len;
}

/*
 * The mark that tells this process's files from any other's: its pid, its
 * start in clock ticks since boot (/proc/self/stat), its pid namespace and
 * the id of the boot. An exec keeps all four, so every image of the
 * process has the same mark; no other process has it while this one runs,
 * in another pid namespace (a container, whose pids start at 1 again) or
 * on another machine sharing the file system, and a later one with the
 * same pid started later. Written into the gzip header (writer.h), where
 * own_name reads it back without decompressing anything.
 */
static void find_owner_mark(void)
{
  char stat_line[1024], boot[64];
  owner_mark_len = 0;
  unsigned long long start;
  if (read_small("/proc/self/stat", stat_line, sizeof stat_line) <= 0 ||
      culpert__gzmark_start(stat_line, &start) != 0)
    return;
  struct stat ns;
  if (stat("/proc/self/ns/pid", &ns) != 0)
    ns.st_ino = 0;
  if (read_small("/proc/sys/kernel/random/boot_id", boot, sizeof boot) < 0)
    boot[0] = '\0';
  boot[strcspn(boot, "\n")] = '\0';
  int w = culpert__gzmark_format(owner_mark, sizeof owner_mark, (long)getpid(), start,
                                 (unsigned long long)ns.st_ino, boot);
  if (w > 0 && (size_t)w < sizeof owner_mark)
    owner_mark_len = (size_t)w;
}

enum whose { NOBODYS, OWN, ANOTHERS, NOT_REGULAR };

/* Whose the file at `path` is: nobody's (there is none), this process's
 * own (its gzip header carries owner_mark), another's (any other regular
 * file), or not a regular file (written through, see in_place). */
static enum whose file_owner(const char *path)
{
  struct stat st;
  if (lstat(path, &st) != 0)
    return NOBODYS; /* or unreachable: the write will say why */
  if (!S_ISREG(st.st_mode))
    return NOT_REGULAR;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return errno == ENOENT ? NOBODYS : ANOTHERS;
  unsigned char h[CULPERT__GZMARK_HEAD];
  ssize_t got = read(fd, h, sizeof h);
  close(fd);
  size_t len = 0;
  const unsigned char *mark = got > 0 ? culpert__gzmark_find(h, (size_t)got, "Cu", &len) : NULL;
  return mark != NULL && len == owner_mark_len && memcmp(mark, owner_mark, len) == 0 ? OWN
                                                                                     : ANOTHERS;
}

/* How write_file puts a profile at its name (flags): over whatever is
 * there, or, at a name of the process's own (OWN_NAME, see own_name),
 * never over another's file; with FALL_BACK, the caller writes elsewhere
 * when the directory refuses the file (may_fall_back), and write_file does
 * not say it failed. With SHARED_DIR (the fallback directory, which every
 * user may write), nothing but a regular file is the process's own: a
 * symbolic link or a FIFO there is another's, never written through. */
enum { REPLACE = 0, OWN_NAME = 1, FALL_BACK = 2, SHARED_DIR = 4 };

/* Put the written temporary file `tmp` at `path`. At an own name, a hard
 * link puts it there only if the name is free, so that of two processes
 * that chose it at once one wins and the other gets -EEXIST (and chooses
 * again); its own file it replaces. Where the file system has no hard
 * links, it looks first. */
static int place_file(const char *tmp, const char *path, unsigned place)
{
  for (int tries = 0; (place & OWN_NAME) != 0 && owner_mark_len != 0 && tries < 100; tries++) {
    if (link(tmp, path) == 0) {
      unlink(tmp);
      return 0;
    }
    int linked = errno;
    enum whose w = file_owner(path);
    if (w == ANOTHERS || (w == NOT_REGULAR && (place & SHARED_DIR) != 0))
      return -EEXIST;
    if (linked != EEXIST || w != NOBODYS)
      break; /* no hard links here, or a file of this process's own: replace it */
    /* gone again: try again */
  }
  return rename(tmp, path) == 0 ? 0 : -errno;
}

/* What write_file says on stderr when it succeeds: nothing, the usual
 * line, or the line with CULPERT_INTERVAL's note. */
enum say_ok { OK_SILENT, OK_SAY, OK_SAY_PERIODIC };
enum which { PROFILE, PEAK_PROFILE };

/* 1 when the profile must be written into the file at `path` rather
 * than renamed over it: a symbolic link (the link stays; /dev/stdout
 * leads through /proc to whatever descriptor 1 is, a terminal, a pipe or
 * the file a shell redirected it to), a device (/dev/null) or a FIFO. A
 * rename would put a regular file where the link or the device node was.
 * A regular file, or a new one, is replaced by a rename, so that no reader
 * ever sees it half written. */
static int in_place(const char *path)
{
  struct stat st;
  return lstat(path, &st) == 0 && !S_ISREG(st.st_mode);
}

/* Write the encoded profile straight into the file at `path` (see
 * in_place). A FIFO without a reader fails at once (ENXIO) instead of
 * holding the process at exit. */
static int write_in_place(const char *path, const unsigned char *buf, size_t len)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0)
    return -errno;
  int flags = fcntl(fd, F_GETFL);
  int rc = flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? -errno : 0;
  if (rc == 0)
    rc = write_all(fd, buf, len);
  if (close(fd) != 0 && rc == 0)
    rc = -errno;
  return rc;
}

/* Encode the profile from the records `r` and put it at `path` through a
 * temporary file and a rename (or in place, see in_place); a failure is
 * reported when say_failure is set. The caller holds write_lock. */
static int write_file(const char *path, unsigned place, const struct records *r, enum which which,
                      enum say_ok say_ok, int say_failure)
{
  unsigned char *buf = NULL;
  size_t len = 0;
  uint64_t nsamples = 0;
  char tmp[2 * CULPERT__PATH_MAX + 64];
  int fd = -1;
  const char *what = which == PEAK_PROFILE ? "in-use-at-peak profile" : "profile";
  int rc = encode_profile(r, &buf, &len, &nsamples, which == PEAK_PROFILE);
  if (rc != 0)
    goto out;
  if ((place & SHARED_DIR) == 0 && in_place(path)) {
    rc = write_in_place(path, buf, len);
    goto out;
  }
  /* A temporary name of this write's alone: a process of the same pid in
   * another pid namespace, or a copy killed half way, may have one too. */
  for (unsigned k = 1; fd < 0; k++) {
    int w = k == 1 ? snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid())
                   : snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), k);
    if (w < 0 || (size_t)w >= sizeof tmp) {
      rc = -ENAMETOOLONG;
      goto out;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && (errno != EEXIST || k == 1000)) {
      rc = -errno;
      goto out;
    }
  }
  memcpy(partial, tmp, strlen(tmp) + 1);
  atomic_store(&partial_set, 1);
  /* Readable by its owner whatever the umask (0777, say): a process reads
   * its own files' marks back (file_owner), and took a new name at every
   * rewrite when it could not. */
  struct stat st;
  if (fstat(fd, &st) == 0 && (st.st_mode & S_IRUSR) == 0)
    fchmod(fd, (st.st_mode & 07777) | S_IRUSR);
  rc = write_all(fd, buf, len);
  if (close(fd) != 0 && rc == 0)
    rc = -errno;
  fd = -1;
  if (rc == 0)
    rc = place_file(tmp, path, place);
  if (rc != 0)
    unlink(tmp);
  atomic_store(&partial_set, 0);
out:
  if (rc == 0 && !culpert__cfg.quiet && say_ok == OK_SAY)
    culpert__say("wrote %s to %s (%llu sample%s)", what, path, (unsigned long long)nsamples,
                 nsamples == 1 ? "" : "s");
  else if (rc == 0 && !culpert__cfg.quiet && say_ok == OK_SAY_PERIODIC)
    culpert__say("wrote %s to %s (%llu sample%s); rewriting it every %u s", what, path,
                 (unsigned long long)nsamples, nsamples == 1 ? "" : "s",
                 (unsigned)culpert__cfg.interval);
  else if (rc != 0 && say_failure && !(rc == -EEXIST && (place & OWN_NAME) != 0) &&
           !((place & FALL_BACK) != 0 && may_fall_back(path, rc)))
    culpert__say("cannot write %s %s: %s", what, path, strerror(-rc));
  free(buf);
  return rc;
}

/* CULPERT_PEAK's file beside the profile at `path`: "NAME.pb.gz" gives
 * "NAME.peak.pb.gz", any other name gets ".peak.pb.gz" added. `out` (n
 * bytes) may be `path`. */
static int peak_path(const char *path, char *out, size_t n)
{
  static const char ext[] = ".pb.gz";
  size_t len = strlen(path), stem = len;
  if (len > sizeof ext - 1 && strcmp(path + len - (sizeof ext - 1), ext) == 0)
    stem = len - (sizeof ext - 1);
  if (stem + sizeof ".peak.pb.gz" > n)
    return -ENAMETOOLONG;
  memmove(out, path, stem); /* out may be path itself */
  memcpy(out + stem, ".peak.pb.gz", sizeof ".peak.pb.gz");
  return 0;
}

/* The profile at `path` and, with peak_too, the in-use-at-peak profile
 * beside it, both from one copy of the records. The caller holds
 * write_lock. Returns what writing the profile returned. */
static int write_files(const char *path, unsigned place, int peak_too, enum say_ok say_ok,
                       int say_failure)
{
  char peak[2 * CULPERT__PATH_MAX + 16];
  int with_peak = 0;
  if (peak_too && (place & SHARED_DIR) == 0 && in_place(path)) {
    if (say_failure)
      culpert__say("CULPERT_PEAK: %s is not a regular file; no in-use-at-peak profile written",
                   path);
  } else if (peak_too && peak_path(path, peak, sizeof peak) != 0) {
    if (say_failure)
      culpert__say("CULPERT_PEAK: the name beside %s is too long; no in-use-at-peak profile "
                   "written",
                   path);
  } else {
    with_peak = peak_too;
  }
  struct records r;
  int rc = records_take(&r, with_peak);
  if (rc != 0) {
    if (say_failure)
      culpert__say("cannot write profile %s: %s", path, strerror(-rc));
    return rc;
  }
  rc = write_file(path, place, &r, PROFILE, say_ok, say_failure);
  /* The peak's name follows the profile's: not when that was another's */
  if (with_peak && rc != -EEXIST)
    write_file(peak, place & (FALL_BACK | SHARED_DIR), &r, PEAK_PROFILE,
               say_ok == OK_SAY_PERIODIC ? OK_SAY : say_ok, say_failure);
  records_free(&r);
  return rc;
}

/* Whether the exit profile's name is the process's own (own_name). */
static int own_named(void)
{
  return owner_mark_len != 0 && (is_child || template_has_pid(culpert__cfg.output) || use_fallback);
}

/* fallback_dir: $TMPDIR when an absolute path to a directory, else /tmp. */
static void find_fallback_dir(void)
{
  culpert__gzmark_fallback_dir(env_get("TMPDIR"), fallback_dir, sizeof fallback_dir);
}

/* `path` (n bytes of room) moved into the fallback directory. */
static int in_fallback_dir(char *path, size_t n)
{
  const char *slash = strrchr(path, '/');
  const char *base = slash != NULL ? slash + 1 : path;
  size_t dlen = strlen(fallback_dir), blen = strlen(base);
  if (dlen + 1 + blen >= n)
    return -ENAMETOOLONG;
  memmove(path + dlen + 1, base, blen + 1);
  memcpy(path, fallback_dir, dlen);
  path[dlen] = '/';
  return 0;
}

/* Whether a write to `path` that failed with rc may go to the fallback
 * directory instead: the directory refused it (its permissions, say, to a
 * service that dropped its privileges after it started, or a read-only
 * file system), and it is not the fallback directory already. */
static int may_fall_back(const char *path, int rc)
{
  if ((rc != -EACCES && rc != -EPERM && rc != -EROFS) || use_fallback)
    return 0;
  const char *slash = strrchr(path, '/');
  size_t dlen = slash != NULL ? (size_t)(slash - path) : 0;
  return !(dlen == strlen(fallback_dir) && memcmp(path, fallback_dir, dlen) == 0);
}

/* From now on this process writes its profiles into the fallback
 * directory, under names of its own; said once. */
static void fall_back(const char *path, int rc)
{
  use_fallback = 1;
  own_path[0] = '\0';
  culpert__say("cannot write profile %s: %s; this process's profiles go to %s instead", path,
               strerror(-rc), fallback_dir);
}

/* The exit profile's file (at exit, on a rewrite, before an exec) and,
 * with CULPERT_PEAK, the in-use-at-peak profile beside it. When another
 * process takes its own name meanwhile (place_file), or its directory
 * refuses the file (may_fall_back), with `choose` it writes under the
 * next name exit_path gives, which replaces `path` (n bytes); without, it
 * returns the error, for the caller to choose. */
static int write_exit_files(char *path, size_t n, int choose, enum say_ok say_ok, int say_failure)
{
  int rc = 0;
  for (int tries = 0; tries < 100; tries++) {
    unsigned place =
        (own_named() ? OWN_NAME : REPLACE) | FALL_BACK | (use_fallback ? SHARED_DIR : 0);
    rc = write_files(path, place, culpert__cfg.peak, say_ok, say_failure);
    int taken = rc == -EEXIST && (place & OWN_NAME) != 0, refused = may_fall_back(path, rc);
    if ((!taken && !refused) || !choose)
      return rc;
    if (refused)
      fall_back(path, rc);
    else
      own_path[0] = '\0';
    int named = exit_path(path, n);
    if (named != 0) {
      rc = named;
      break;
    }
  }
  if (say_failure)
    culpert__say("cannot write profile %s: %s", path,
                 rc == -EEXIST ? "every name tried is another process's" : strerror(-rc));
  return rc;
}

/* Set by culpert__output_at_exit, under write_lock, once the exit profile
 * is written (or found needless): the process ends at any moment, and
 * would cut off half way a write that began after it, leaving its
 * temporary file behind. */
static atomic_int exit_done;

struct snapshot_file {
  const char *path;
  int rc;
};

static void snapshot_file(void *arg)
{
  struct snapshot_file *f = arg;
  f->rc = write_files(f->path, REPLACE, 0, OK_SAY, 1);
}

int culpert__output_write_file(const char *path)
{
  write_lock_take();
  struct snapshot_file f = {path, -EAGAIN};
  if (!atomic_load(&exit_done))
    on_own_stack(snapshot_file, &f);
  write_lock_release();
  return f.rc;
}

/* Whether CULPERT_OUTPUT's template (NULL: the default) has a %p. */
static int template_has_pid(const char *tmpl)
{
  if (tmpl == NULL)
    return 1;
  for (const char *c = tmpl; c[0] != '\0'; c++)
    if (c[0] == '%' && (c[1] == 'p' || c[1] == '%')) {
      if (c[1] == 'p')
        return 1;
      c++;
    }
  return 0;
}

/* A process below the first one, or the first one when its name holds
 * its pid (%p), writes only over files of its own: pids are reused, and
 * processes in other pid namespaces (containers) or on other machines
 * sharing the directory have the same ones. A regular file at the name
 * without this process's mark (find_owner_mark) is another's, and this
 * one takes "<path>.2" (or .3, ...) instead. Its own file, from an
 * earlier write or from an image before an exec, it writes over, and
 * anything but a regular file (a FIFO, a device) it writes through, as
 * ever, except in the fallback directory, where anyone may have put a
 * symbolic link or a FIFO (SHARED_DIR). place_file keeps the choice good
 * against another process making the same one at the same moment. */
static int own_name(char *path, size_t n)
{
  if (own_path[0] != '\0') {
    if (strlen(own_path) >= n)
      return -ENAMETOOLONG;
    strcpy(path, own_path);
    return 0;
  }
  if (owner_mark_len == 0)
    return 0; /* no telling whose a file is: write over it, as before */
  size_t len = strlen(path);
  for (unsigned k = 1; k < 1000; k++) {
    if (k > 1) {
      int w = snprintf(path + len, n - len, ".%u", k);
      if (w < 0 || (size_t)w >= n - len)
        return -ENAMETOOLONG;
    }
    enum whose w = file_owner(path);
    if (w == NOBODYS || w == OWN || (w == NOT_REGULAR && !use_fallback)) {
      if (strlen(path) < sizeof own_path)
        strcpy(own_path, path);
      return 0;
    }
  }
  path[len] = '\0';
  return 0; /* a thousand others: write over the first, as before */
}

/* The exit profile's path: CULPERT_OUTPUT expanded, relative names
 * anchored at the start-up directory. A child writes beside its parent's
 * file, unless that is a character device (CULPERT_OUTPUT=/dev/null):
 * devices are written through, never replaced, so it writes there too
 * instead of leaving /dev/null.PID files in /dev. */
static int exit_path(char *path, size_t n)
{
  size_t at = 0;
  const char *tmpl = culpert__cfg.output;
  if ((tmpl == NULL || tmpl[0] != '/') && start_dir[0] != '\0') {
    at = strlen(start_dir);
    if (at + 1 >= n)
      return -ENAMETOOLONG;
    memcpy(path, start_dir, at);
    path[at++] = '/';
  }
  struct stat st;
  int rc = culpert__config_output_path(tmpl, pid, exe_name, 0, path + at, n - at);
  if (rc != 0 || (stat(path, &st) == 0 && S_ISCHR(st.st_mode)))
    return rc;
  if (is_child)
    rc = culpert__config_output_path(tmpl, pid, exe_name, 1, path + at, n - at);
  if (rc == 0 && use_fallback)
    rc = in_fallback_dir(path, n);
  /* A name with the pid in it is this process's alone, unless an earlier
   * process had the pid; one without is the user's to reuse, but not in
   * the fallback directory, which everyone shares. */
  if (rc == 0 && (is_child || template_has_pid(tmpl) || use_fallback))
    rc = own_name(path, n);
  return rc;
}

static void output_at_exit(void *unused)
{
  (void)unused;
  char path[2 * CULPERT__PATH_MAX];
  struct culpert__thread *t = &culpert__tls;
  t->guard++;
  int saved = errno;
  /* An ending signal must not end the program half way through: on this
   * thread it waits (blocked) until the file is written, on another its
   * handler waits for write_lock. */
  sigset_t ending, old;
  sigemptyset(&ending);
  for (int i = 0; i < N_ENDING; i++)
    sigaddset(&ending, ending_signals[i]);
  pthread_sigmask(SIG_BLOCK, &ending, &old);
  /* After a write in progress; none begins after (exit_done). Sampling
   * stops only once the lock is held: an ending signal's handler or an
   * _exit that holds it has a forked copy write the exit profile, which
   * needs sampling on, then ends the process itself. */
  write_lock_take();
  /* Stop: every thread still running gets pass-through service while the
   * profile is written. */
  if (!atomic_exchange(&culpert__running, 0)) {
    /* already written (a second destructor run) */
  } else if (nothing_to_write()) {
    /* no file */
  } else if (exit_path(path, sizeof path) != 0) {
    culpert__say("CULPERT_OUTPUT expands to a path longer than %u bytes; no profile written",
                 CULPERT__PATH_MAX);
  } else {
    write_exit_files(path, sizeof path, 1, OK_SAY, 1);
  }
  atomic_store(&exit_done, 1);
  write_lock_release();
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = saved;
  t->guard--;
}

void culpert__output_at_exit(void)
{
  if (!atomic_load(&culpert__ready) || culpert__sampler_failed())
    return;
  on_own_stack(output_at_exit, NULL);
}

/* ------------------------------------------ interval and snapshot signal */

/*
 * CULPERT_INTERVAL and CULPERT_SNAPSHOT_SIGNAL: a thread of culpert's own
 * rewrites the exit profile's file every so many seconds, and each time the
 * snapshot signal comes, for programs that never exit normally (a service
 * stopped with SIGKILL) or that must be looked at while they run: the file
 * then holds what the last rewrite saw. The signal's handler only posts
 * `wake` (async-signal-safe); signals that come together make one rewrite.
 * Started at start-up and again in each fork child (which writes its own
 * file); an exec'd program starts its own. All signals stay blocked in the
 * thread, so none of the program's handlers ever runs there, and its
 * allocations (the writer's) are never sampled. Rewrites stop when the
 * exit profile is being written.
 */
static sem_t wake;

static void on_snapshot_signal(int sig)
{
  int saved = errno;
  (void)sig;
  sem_post(&wake);
  errno = saved;
}

/* Wait for the next rewrite: 1 when the signal asked for it, 0 when the
 * interval is up (then `next` moves on). */
static int wait_for_rewrite(struct timespec *next)
{
  for (;;) {
    int rc =
        culpert__cfg.interval != 0 ? sem_clockwait(&wake, CLOCK_MONOTONIC, next) : sem_wait(&wake);
    if (rc == 0) {
      while (sem_trywait(&wake) == 0)
        ;
      return 1;
    }
    if (errno == ETIMEDOUT) {
      next->tv_sec += culpert__cfg.interval;
      return 0;
    }
  }
}

static void *rewrite_thread(void *arg)
{
  (void)arg;
  char path[2 * CULPERT__PATH_MAX];
  culpert__tls.guard++;
  if (exit_path(path, sizeof path) != 0)
    return NULL; /* the exit profile will say why */
  /* The interval's rewrites are said once: the first success, and the
   * first failure after a success (or at the start). Each rewrite the
   * signal asks for is said. */
  int announced = 0, last_ok = 1;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  next.tv_sec += culpert__cfg.interval;
  for (;;) {
    int asked = wait_for_rewrite(&next);
    write_lock_take();
    int stop = !atomic_load(&culpert__running); /* the exit profile is written or on its way */
    int skip = !stop && nothing_to_write();
    int rc = stop || skip ? 0
             : asked      ? write_exit_files(path, sizeof path, 1, OK_SAY, 1)
                          : write_exit_files(path, sizeof path, 1,
                                        announced ? OK_SILENT : OK_SAY_PERIODIC, last_ok);
    write_lock_release();
    if (stop)
      return NULL;
    if (!asked && !skip) {
      announced |= rc == 0;
      last_ok = rc == 0;
    }
  }
}

static void interval_start(void)
{
  if (culpert__cfg.interval == 0 && culpert__cfg.snapshot_signal == 0)
    return;
  sem_init(&wake, 0, 0); /* also in a fork child: whatever state it had */
  pthread_t th;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  /* Stack enough for a write, whatever the default (`ulimit -s`). */
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc == 0) {
    pthread_attr_setstacksize(&attr, WRITER_STACK);
    rc = pthread_create(&th, &attr, rewrite_thread, NULL);
    pthread_attr_destroy(&attr);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    culpert__say("cannot start the thread of CULPERT_INTERVAL and CULPERT_SNAPSHOT_SIGNAL: %s; "
                 "the profile is written at exit only",
                 strerror(rc));
    return;
  }
  pthread_setname_np(th, "culpert");
  pthread_detach(th);
}

/* ---------------------------------------------------------- ending signals */

/*
 * CULPERT_WRITE_ON_SIGNAL: SIGHUP, SIGINT, SIGTERM, SIGQUIT and SIGABRT,
 * where they would end the program (their action is the default at
 * start-up), are caught: the stops a user or a supervisor asks for, and
 * abort(), where a C++ program ends on an uncaught std::bad_alloc or glibc
 * on a corrupt heap (the copy needs neither the program's heap nor its
 * allocator's locks). Not the signals of a fault (SIGSEGV, SIGBUS): a
 * program that corrupts memory may have corrupted culpert's too. The
 * handler forks (_Fork: async-signal-safe, no atfork handlers): the child,
 * a single-threaded copy of the program at that instant, writes the exit
 * profile with its own locks reset and a private heap (malloc.c), then
 * exits; the handler waits for it, at most WRITER_SECONDS, then restores
 * the default action and raises the signal, which ends the program as it
 * would have when the handler returns. The interrupted thread never gets
 * back to the program's code; its other threads run on meanwhile.
 *
 * The program must not see culpert's handler: runtimes that set up their
 * own only where the action is the default (Python's KeyboardInterrupt)
 * would leave theirs out. So bit i of `hidden` says culpert's handler
 * stands in for ending_signals[i]'s default action, and the sigaction and
 * signal wrappers (malloc.c) then answer with `seen[i]`, the default action
 * as the program last set or found it. A handler of the program's own
 * replaces culpert's; when the program sets the default action again,
 * culpert's handler stands in for it again. culpert's own calls go to
 * glibc's __sigaction, past the wrappers.
 *
 * A handler set with SA_RESETHAND (node's for SIGINT and SIGTERM) goes back
 * to the default action in the kernel as the signal arrives, past the
 * wrappers, and the signal it raises again then ended the program with no
 * profile. So bit i of `oneshot` says on_oneshot_signal stands in for such
 * a handler, `theirs[i]`: it does what the kernel would (culpert's handler
 * then stands in for the default action), then calls the program's.
 */
#pragma weak culpert__use_private_heap
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
extern pid_t _Fork(void);
#pragma weak _Fork

static atomic_uint hidden, oneshot;
static struct sigaction seen[N_ENDING], theirs[N_ENDING];

static int ending_index(int sig)
{
  for (int i = 0; i < N_ENDING; i++)
    if (ending_signals[i] == sig)
      return i;
  return -1;
}

static void on_ending_signal(int sig);
static atomic_int watching; /* CULPERT_WRITE_ON_SIGNAL is in force */

int culpert__signal_watched(int sig)
{
  return atomic_load_explicit(&watching, memory_order_relaxed) && ending_index(sig) >= 0;
}

/* Whether an action is the default one. */
static int is_default(const struct sigaction *act)
{
  return !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL;
}

/* CULPERT_SNAPSHOT_SIGNAL: culpert's handler, where the signal's action is
 * the default at start-up (a signal the program inherited ignored stays
 * ignored). Set once: a fork child keeps it, an exec'd program sets its
 * own. A handler the program sets later replaces it. */
static void catch_snapshot_signal(void)
{
  int sig = culpert__cfg.snapshot_signal;
  struct sigaction old, sa;
  if (sig == 0)
    return;
  if (__sigaction(sig, NULL, &old) != 0 || !is_default(&old)) {
    culpert__say("CULPERT_SNAPSHOT_SIGNAL: signal %d is already ignored or handled; no snapshots "
                 "on it",
                 sig);
    return;
  }
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_snapshot_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  __sigaction(sig, &sa, NULL);
}

/* Install culpert's handler in place of the default action of signal
 * ending_signals[i], which the program sees as `dfl`. */
static int stand_in_for_default(int i, const struct sigaction *dfl, struct sigaction *old)
{
  struct sigaction mine;
  memset(&mine, 0, sizeof mine);
  mine.sa_handler = on_ending_signal;
  sigfillset(&mine.sa_mask);
  seen[i] = *dfl;
  if (__sigaction(ending_signals[i], &mine, old) != 0)
    return -1;
  atomic_fetch_and(&oneshot, ~(1u << i));
  atomic_fetch_or(&hidden, 1u << i);
  return 0;
}

/* The program's SA_RESETHAND handler of `sig`, run as the kernel would:
 * the default action first (culpert's stand-in for it), then the handler,
 * under the mask the program gave (installed with it). */
static void on_oneshot_signal(int sig, siginfo_t *info, void *ctx)
{
  int i = ending_index(sig), saved = errno;
  /* The kernel resets the handler alone; sigaction reports its flags. */
  struct sigaction prog = theirs[i], dfl = theirs[i];
  dfl.sa_handler = SIG_DFL;
  stand_in_for_default(i, &dfl, NULL);
  errno = saved;
  if (prog.sa_flags & SA_SIGINFO)
    prog.sa_sigaction(sig, info, ctx);
  else
    prog.sa_handler(sig);
}

/* Install on_oneshot_signal in place of the program's SA_RESETHAND
 * handler `act` of signal ending_signals[i], with its mask and flags. */
static int stand_in_for_oneshot(int i, const struct sigaction *act)
{
  struct sigaction mine = *act;
  mine.sa_flags = (act->sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
  mine.sa_sigaction = on_oneshot_signal;
  theirs[i] = *act;
  if (__sigaction(ending_signals[i], &mine, NULL) != 0)
    return -1;
  atomic_fetch_and(&hidden, ~(1u << i));
  atomic_fetch_or(&oneshot, 1u << i);
  return 0;
}

int culpert__signal_intercept(int sig, const struct sigaction *act, struct sigaction *old)
{
  int i = ending_index(sig);
  if (i < 0 || !atomic_load(&watching))
    return __sigaction(sig, act, old);
  unsigned bit = 1u << i, had = atomic_load(&hidden) & bit;
  /* What the program sees now: the default action culpert's handler
   * stands in for, its own SA_RESETHAND handler, or the kernel's. */
  struct sigaction before;
  if (had)
    before = seen[i];
  else if (atomic_load(&oneshot) & bit)
    before = theirs[i];
  else if (__sigaction(sig, NULL, &before) != 0)
    return -1;
  int rc = 0;
  if (act == NULL) {
    /* a query */
  } else if (is_default(act) && had) {
    seen[i] = *act; /* the default again: culpert's handler stays */
  } else if (is_default(act)) {
    /* The program goes back to the default action (Python does before it
     * ends itself by SIGINT): culpert's handler stands in for it again. */
    rc = stand_in_for_default(i, act, NULL);
  } else if ((act->sa_flags & SA_RESETHAND) &&
             ((act->sa_flags & SA_SIGINFO) || act->sa_handler != SIG_IGN)) {
    rc = stand_in_for_oneshot(i, act);
  } else {
    /* A handler of the program's own, or SIG_IGN: culpert steps aside. */
    unsigned one = atomic_load(&oneshot) & bit;
    atomic_fetch_and(&hidden, ~bit);
    atomic_fetch_and(&oneshot, ~bit);
    rc = __sigaction(sig, act, NULL);
    if (rc != 0) {
      atomic_fetch_or(&hidden, had);
      atomic_fetch_or(&oneshot, one);
    }
  }
  if (rc == 0 && old != NULL)
    *old = before;
  return rc;
}

/* Seconds on CLOCK_MONOTONIC (async-signal-safe). */
static int64_t monotonic_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec;
}

/* Write `text` to stderr with write(2) alone (async-signal-safe, and
 * a few words of stack: say_v's line buffer takes 8 KiB). */
void culpert__say_raw(const char *text)
{
  if (!stderr_unchanged())
    return;
  write_line(STDERR_FILENO, text, strlen(text));
}

/* In the forked child: write the profile to `path` (NULL: the exit
 * profile's), then _exit. */
/* writer_child's exit status when another process took the name given,
 * and when its directory refused the file (may_fall_back). */
#define WRITER_NAME_TAKEN  2
#define WRITER_DIR_REFUSED 3

static void writer_child(const char *path)
{
  char exit_name[2 * CULPERT__PATH_MAX];
  culpert__tls.guard++; /* nothing here is sampled or leaves the live table */
  atomic_store(&culpert__running, 0);
  culpert__use_private_heap();
  reinit_locks();
  /* A program that ran out of address space under a soft limit (an
   * uncaught std::bad_alloc, then abort()) leaves the copy none to write
   * with: it may go up to the hard limit. */
  struct rlimit lim;
  if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_AS, &lim);
  }
  /* The loader's locks may be held by a thread that is gone: find the
   * objects without them (symbolize.h). */
  culpert__loader_set_usable(0);
  /* The exit profile's name it may choose again; a name given (before an
   * exec) the process chooses, as it may remove that file again. */
  int rc = path == NULL                      ? exit_path(exit_name, sizeof exit_name)
           : strlen(path) < sizeof exit_name ? 0
                                             : -ENAMETOOLONG;
  if (rc == 0 && path != NULL)
    strcpy(exit_name, path);
  if (rc == 0)
    rc = write_exit_files(exit_name, sizeof exit_name, path == NULL, OK_SAY, 1);
  _exit(rc == 0                        ? 0
        : rc == -EEXIST                ? WRITER_NAME_TAKEN
        : may_fall_back(exit_name, rc) ? WRITER_DIR_REFUSED
                                       : 1);
}

static void writer_child_entry(void *path)
{
  writer_child(path);
}

/* Wait, 100 ms at most, until no other thread is inside an update of the
 * record or live tables, and hold both across the fork, so that the copy
 * sees them whole. Not when this thread was itself interrupted inside
 * culpert (its guard is set): it cannot finish that update. Trylocks and
 * short sleeps only: a signal handler must not block on a lock. Returns 1
 * when both are held (in fork_prepare's order). */
static int hold_tables(void)
{
  if (culpert__tls.guard != 0)
    return 0;
  for (int i = 0; i < 1000; i++) {
    if (culpert__record_trylock()) {
      if (culpert__live_trylock())
        return 1;
      culpert__record_unlock();
    }
    struct timespec tick = {0, 100 * 1000};
    nanosleep(&tick, NULL);
  }
  return 0;
}

/* Wait for the forked writer `child` to end, WRITER_SECONDS at most; 0
 * once it has written the profile, which is the exit profile when `final`
 * is set. */
static int wait_for_writer(pid_t child, int final)
{
  int status = 0;
  pid_t got;
  int64_t deadline = monotonic_seconds() + WRITER_SECONDS;
  while ((got = waitpid(child, &status, WNOHANG)) == 0 && monotonic_seconds() < deadline) {
    struct timespec tick = {0, 5 * 1000 * 1000};
    nanosleep(&tick, NULL);
  }
  if (got == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    culpert__say_raw("culpert: writing the profile took too long; stopped\n");
    return -1;
  }
  if (got < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (got > 0 && !WIFEXITED(status))
      culpert__say_raw("culpert: the process writing the profile failed; none written\n");
    int code = got > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return code == WRITER_NAME_TAKEN ? -EEXIST : code == WRITER_DIR_REFUSED ? -EACCES : -1;
  }
  /* The exit profile is written: the one at exit must not replace it. */
  if (final)
    atomic_store(&culpert__running, 0);
  return 0;
}

/* Write the profile from a forked copy of the process, to `path` (NULL:
 * the exit profile, after which sampling stops); 0 once it is written. */
static int write_from_child(const char *path)
{
  if (_Fork == NULL || culpert__use_private_heap == NULL || !atomic_load(&culpert__ready) ||
      culpert__sampler_failed() || !atomic_load(&culpert__running))
    return -1;
  if (path == NULL && nothing_to_write())
    return 0; /* the exit profile, of which there is none */
  int me = (int)gettid(), other = 0;
  if (!atomic_compare_exchange_strong(&writer_tid, &other, me)) {
    if (other == me) { /* this thread was interrupted while its copy writes */
      pid_t child = (pid_t)atomic_load(&writer_pid);
      return child > 0 ? wait_for_writer(child, path == NULL) : -1;
    }
    int64_t deadline = monotonic_seconds() + WRITER_SECONDS + 1;
    while (atomic_load(&writer_tid) != 0 && monotonic_seconds() < deadline) {
      struct timespec tick = {0, 5 * 1000 * 1000};
      nanosleep(&tick, NULL);
    }
    /* Its copy wrote the exit profile, or nothing: never `path`. */
    return path == NULL && !atomic_load(&culpert__running) ? 0 : -1;
  }
  int held = hold_tables();
  pid_t child = _Fork();
  if (child == 0)
    on_own_stack(writer_child_entry, (void *)path); /* resets the locks; never returns */
  if (held) {
    culpert__live_unlock();
    culpert__record_unlock();
  }
  int rc = -1;
  if (child < 0) {
    culpert__say_raw("culpert: cannot fork to write the profile; none written\n");
  } else {
    atomic_store(&writer_pid, (int)child);
    rc = wait_for_writer(child, path == NULL);
    atomic_store(&writer_pid, 0);
  }
  atomic_store(&writer_tid, 0);
  return rc;
}

static void on_ending_signal(int sig)
{
  int saved = errno;
  int none = 0;
  int64_t now = monotonic_seconds();
  int first = atomic_compare_exchange_strong(&caught, &none, sig);
  if (!first && (atomic_load(&caught_at) == 0 || now - atomic_load(&caught_at) < 2)) {
    /* The same signal sent twice at once (to the process and to its
     * group) counts once: the first is being handled on another thread. */
    errno = saved;
    return;
  }
  if (first)
    atomic_store(&caught_at, now);
  /* No other write may be in progress when the signal ends the program:
   * one on another thread is waited for (its file is then whole; the exit
   * profile's too, whose thread blocks these signals), and the lock is
   * kept, so that none begins after. The program's own exit, which takes
   * it, then cannot write a profile of its own and end the program while
   * the copy below writes, leaving the copy to replace that file after the
   * process is gone. A thread interrupted inside culpert may hold a table
   * that the write it would wait for needs: it has its copy write first. A
   * write that this thread interrupted cannot finish, and its file goes. */
  int inside = culpert__tls.guard != 0;
  if (first && inside)
    write_from_child(NULL);
  if (atomic_load(&write_owner) != (int)gettid()) {
    (void)write_lock_wait();
  }
  if (first && !inside)
    write_from_child(NULL);
  if (atomic_load(&partial_set))
    unlink(partial);
  /* The default action: the signal is blocked while this handler runs, so
   * it ends the program as the handler returns. */
  int i = ending_index(sig);
  if (i >= 0)
    atomic_fetch_and(&hidden, ~(1u << i));
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  __sigaction(sig, &dfl, NULL);
  raise(sig);
  errno = saved;
}

static void catch_ending_signals(void)
{
  if (!culpert__cfg.write_on_signal)
    return;
  if (_Fork == NULL || culpert__use_private_heap == NULL) {
    culpert__say("CULPERT_WRITE_ON_SIGNAL needs glibc 2.34 or later and the preloaded library; "
                 "ignored");
    return;
  }
  atomic_store(&watching, 1);
  for (int i = 0; i < N_ENDING; i++) {
    struct sigaction old, sa;
    if (__sigaction(ending_signals[i], NULL, &old) != 0 || !is_default(&old))
      continue; /* ignored or handled by the program: none of culpert's business */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_ending_signal;
    sigfillset(&sa.sa_mask);
    seen[i] = old;
    if (__sigaction(ending_signals[i], &sa, NULL) == 0)
      atomic_fetch_or(&hidden, 1u << i);
  }
}

/* ------------------------------------------------- _exit, _Exit, quick_exit */

/*
 * _exit, _Exit and quick_exit end the process without its exit handlers,
 * so their wrappers (malloc.c) have the exit profile written first. The
 * first two are async-signal-safe and called from signal handlers, and any
 * of them may come while other threads are inside an update, so the
 * profile comes from a forked copy, as at an ending signal. Not in a process whose start culpert
 * did not see: a vfork child shares its parent's memory, and a clone made without fork's handlers
 * has no state of its own; both pass straight through. A write in progress on another thread (the
 * exit profile, CULPERT_INTERVAL's, a snapshot) is waited for, WRITER_SECONDS at most, so that it
 * is not cut off, and write_lock then stays held, so no other write can rename its file over this
 * one.
 */
void culpert__output_at_immediate_exit(void)
{
  if (!atomic_load(&culpert__ready) || (long)getpid() != pid)
    return;
  /* A second call (an at_quick_exit handler calling _exit, another thread
   * ending at once): the first one wrote the profile or has a copy writing
   * it, which finishes even if this process ends first. */
  if (atomic_exchange(&immediate_exit_entered, 1))
    return;
  if (culpert__tls.guard == 0) { /* else this thread may hold write_lock itself */
    (void)write_lock_wait();
  }
  write_from_child(NULL); /* nothing when the exit profile is written already */
}

/* ---------------------------------------------------------------- exec */

/*
 * An exec replaces the program's image, whose exit handlers then never
 * run. The exec wrappers (exec.c) have its profile written first, when
 * it recorded any sample and the exec looks likely to succeed (the program
 * file is there and may be run), from a forked copy as for _exit: exec is
 * async-signal-safe and the usual call after fork. The exec'd program is
 * profiled too and has the same pid, so the same file name: the image
 * before the exec takes <name>.exec<N>, N the first number not yet taken,
 * and the last image keeps <name>. Under CULPERT_NO_CHILDREN=1 nothing
 * writes after the exec, so the image writes <name> itself. Not in a
 * process whose start culpert did not see (a vfork child), nor on a thread
 * interrupted inside culpert.
 *
 * write_lock is taken first, so no rewrite of CULPERT_INTERVAL or the
 * snapshot signal is cut off half-way by the exec, and kept until the exec
 * has failed. If it fails (it can, in ways no check beforehand sees), the
 * .exec file goes again: the program carries on, and its exit profile
 * will hold everything.
 */
/* The name of the profile written before an exec: the exit profile's
 * with .exec<N>, N the first number not taken yet. */
static int exec_path(char *path, size_t n)
{
  int rc = exit_path(path, n);
  if (rc != 0)
    return rc;
  size_t len = strlen(path);
  for (unsigned k = 1; k < 10000; k++) {
    int w = snprintf(path + len, n - len, ".exec%u", k);
    if (w < 0 || (size_t)w >= n - len)
      return -ENAMETOOLONG;
    if (access(path, F_OK) != 0 && errno == ENOENT)
      return 0;
  }
  return -EEXIST;
}

/* Whether the environment `envp` of an exec still preloads libculpert:
 * if not, nothing in the new image writes the exit profile's name. */
static int env_preloads_us(char *const envp[])
{
  for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
    if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0)
      return preload_has_us(envp[i] + 11);
  return 0;
}

int culpert__output_exec_writes(void)
{
  return atomic_load(&culpert__ready) && !culpert__sampler_failed() &&
         atomic_load(&culpert__running) && (long)getpid() == pid && culpert__tls.guard == 0;
}

void culpert__output_before_exec(struct culpert__exec_note *note, const char *file,
                                 char *const envp[])
{
  note->locked = note->written = 0;
  if (!culpert__output_exec_writes())
    return;
  int saved = errno;
  culpert__tls.guard++;
  note->locked = write_lock_wait();
  /* The image writes `<name>` itself when the new one will not load
   * libculpert: CULPERT_NO_CHILDREN, or an environment without it (execle
   * with an environment of the program's own). */
  int unprofiled = !culpert__cfg.no_children && preloaded && !env_preloads_us(envp);
  int own_name = culpert__cfg.no_children || unprofiled;
  if (unprofiled)
    snprintf(exec_unprofiled, sizeof exec_unprofiled, "%s",
             file != NULL ? file : "(a program run from a descriptor)");
  /* Under its own name the first process writes even when it sampled
   * nothing, as it would at exit; an .exec<N> of nothing is left out, since
   * the next image writes the name. */
  if (own_name ? !nothing_to_write() : culpert__record_any()) {
    /* Chosen here, as this file may have to go again: when another
     * process takes the name meanwhile (place_file), the next one; when
     * the directory refuses it, one in the fallback directory. */
    int rc = -EEXIST;
    for (int tries = 0; tries < 100 && (rc == -EEXIST || rc == -EACCES); tries++) {
      if (rc == -EACCES && !may_fall_back(note->path, rc))
        break;
      if (rc == -EACCES)
        fall_back(note->path, rc);
      else if (own_name && tries > 0)
        own_path[0] = '\0';
      rc = own_name ? exit_path(note->path, sizeof note->path)
                    : exec_path(note->path, sizeof note->path);
      if (rc == 0)
        rc = write_from_child(note->path);
    }
    if (rc == 0)
      note->written = own_name ? 1 : 2;
    if (rc == 0 && unprofiled && !culpert__cfg.quiet)
      culpert__say("%s runs without libculpert (the LD_PRELOAD of its environment leaves it "
                   "out): it is not profiled",
                   exec_unprofiled);
  }
  culpert__tls.guard--;
  errno = saved;
}

void culpert__output_exec_failed(struct culpert__exec_note *note)
{
  int saved = errno;
  exec_unprofiled[0] = '\0'; /* the image goes on */
  if (note->written == 2 && unlink(note->path) == 0 && !culpert__cfg.quiet)
    culpert__say("the exec failed (%s): removed %s again; the program goes on, and its exit "
                 "profile will hold those samples",
                 strerror(saved), note->path);
  /* and the in-use-at-peak profile written beside it (write_files), its
   * name made in note->path itself: no room for another on the stack of
   * a small thread */
  if (note->written == 2 && culpert__cfg.peak &&
      peak_path(note->path, note->path, sizeof note->path) == 0)
    unlink(note->path);
  if (note->locked)
    write_lock_release();
  note->locked = note->written = 0;
  errno = saved;
}

/* ---------------------------------------------------------------- public API */

struct snapshot_buffer {
  unsigned char **out;
  size_t *len;
  uint64_t *nsamples;
  int rc;
};

static void snapshot_buffer(void *arg)
{
  struct snapshot_buffer *b = arg;
  b->rc = culpert__output_profile(b->out, b->len, b->nsamples);
}

CULPERT__EXPORT int culpert_snapshot_write(const char *path)
{
  if (path == NULL || *path == '\0')
    return -EINVAL;
  if (!atomic_load(&culpert__ready) || culpert__sampler_failed())
    return -EAGAIN;
  int saved = errno;
  culpert__tls.guard++;
  int rc = culpert__output_write_file(path);
  culpert__tls.guard--;
  errno = saved;
  return rc;
}

CULPERT__EXPORT int culpert_snapshot(unsigned char **out, size_t *len)
{
  uint64_t nsamples;
  if (out == NULL || len == NULL)
    return -EINVAL;
  *out = NULL;
  *len = 0;
  if (!atomic_load(&culpert__ready) || culpert__sampler_failed())
    return -EAGAIN;
  int saved = errno;
  culpert__tls.guard++;
  write_lock_take(); /* see write_lock: no fork while it encodes */
  struct snapshot_buffer b = {out, len, &nsamples, -EAGAIN};
  on_own_stack(snapshot_buffer, &b);
  int rc = b.rc;
  write_lock_release();
  culpert__tls.guard--;
  errno = saved;
  return rc;
}

CULPERT__EXPORT int culpert_is_active(void)
{
  return atomic_load(&culpert__ready) && atomic_load(&culpert__running);
}
