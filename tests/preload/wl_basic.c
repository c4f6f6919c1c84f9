/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_basic: a program instrumented with the span API that is built without
 * -lculpert. Run plainly, the span calls do nothing; run under LD_PRELOAD
 * with CULPERT_SAMPLE_RATE=0, its profile holds exactly:
 *   handle_request/parse   100 objects, 100000 bytes; 40 / 40000 in use
 *   handle_request/resize  3 objects, 4300 bytes (malloc+2 reallocs); 1 / 4000
 *   aligned                9 objects, 13456 bytes, all in use
 *   moved                  2 objects, 8888 bytes (malloc, then a realloc
 *                          that moves the block); 1 / 8000
 *   realloc_failed         1 object, 600 bytes, in use (a realloc of it
 *                          that failed left it where it was)
 * and the comments culpert.span_overflow=6, culpert.span_underflow=1; in
 * use at the peak: the 100 parse blocks (100000 bytes) and whatever stdio
 * holds then.
 * It also checks errno preservation, alignment and zeroing itself, and
 * with "--snapshot PATH" writes a snapshot before exiting (and asks for
 * one to an empty path, which is refused with -EINVAL); with
 * "--chdir DIR" it changes directory before exiting; with "--stderr-to
 * FILE" it closes its stderr and writes a line to FILE, opened as fd 2,
 * before exiting (as a program that reuses the descriptor for its data);
 * with "--hang" it waits, after its work, until a signal kills it (as a
 * service stopped by SIGKILL), and with "--fork-hang" its fork child does
 * the same work and waits too (the parent waits for the child); with
 * "--handle-int" it waits too, but handles SIGINT itself as Python does
 * (a handler only where the action is the default: it prints what
 * sigaction and signal report for SIGINT and SIGTERM), printing "handled
 * SIGINT" when it comes and then, as Python does, ending itself by SIGINT
 * with the default action. "--resethand" waits too, with a SIGTERM
 * handler set with SA_RESETHAND, as node sets its own: the handler prints
 * "handled SIGTERM" and whether the action is the default again, then
 * raises the signal again, which (blocked while it runs) then ends the
 * program with the default action. "--overwrite-env" writes 'x' over every
 * environment string before exiting, as programs that set their process
 * title do. "--loader-busy" waits too, while a thread of
 * its own sits inside a dl_iterate_phdr callback, holding the dynamic
 * loader's lock (as a thread caught mid-dlopen would). "--abort" ends
 * with abort() after its work; "--exhaust" allocates 1 MiB blocks until
 * malloc fails (under an address-space limit), then abort()s.
 * "--failures": see after_failures.
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "culpert.h"

static void *kept[64];
static int nkept;
static int failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "wl_basic: check failed: %s\n", #cond);                                      \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

__attribute__((noinline)) static void *parse_alloc(size_t n)
{
  void *p = malloc(n);
  return p;
}

__attribute__((noinline)) static void *resize_alloc(void)
{
  char *p = malloc(100);
  memset(p, 'a', 100);
  p = realloc(p, 200);
  p = realloc(p, 4000);
  CHECK(p[99] == 'a');
  return p;
}

static void handle_request(void)
{
  CULPERT_SPAN("handle_request");
  void *p[100];
  culpert_span_enter("parse");
  for (int i = 0; i < 100; i++)
    p[i] = parse_alloc(1000);
  culpert_span_exit();
  for (int i = 0; i < 60; i++)
    free(p[i]);
  for (int i = 60; i < 100; i++)
    kept[nkept++ % 64] = p[i];
  culpert_span_enter("resize");
  kept[nkept++ % 64] = resize_alloc();
  culpert_span_exit();
}

__attribute__((noinline)) static void aligned(void)
{
  CULPERT_SPAN("aligned");
  void *p;
  for (int i = 0; i < 3; i++) {
    CHECK(posix_memalign(&p, 64, 512) == 0);
    CHECK(((uintptr_t)p & 63) == 0);
    kept[nkept++ % 64] = p;
  }
  p = aligned_alloc(256, 1024);
  CHECK(p != NULL && ((uintptr_t)p & 255) == 0);
  kept[nkept++ % 64] = p;
  p = memalign(128, 300);
  CHECK(p != NULL && ((uintptr_t)p & 127) == 0);
  kept[nkept++ % 64] = p;
  long page = sysconf(_SC_PAGESIZE);
  p = valloc(5000);
  CHECK(p != NULL && ((uintptr_t)p & (uintptr_t)(page - 1)) == 0);
  kept[nkept++ % 64] = p;
  p = pvalloc(100);
  CHECK(p != NULL && ((uintptr_t)p & (uintptr_t)(page - 1)) == 0);
  CHECK(malloc_usable_size(p) >= (size_t)page);
  kept[nkept++ % 64] = p;
  p = reallocarray(NULL, 10, 100);
  CHECK(p != NULL && malloc_usable_size(p) >= 1000);
  kept[nkept++ % 64] = p;
  unsigned char *z = calloc(10, 50);
  CHECK(z != NULL);
  for (int i = 0; z != NULL && i < 500; i++)
    CHECK(z[i] == 0);
  kept[nkept++ % 64] = z;
  /* overflow is refused, not wrapped */
  volatile size_t huge = SIZE_MAX / 2; /* hidden from the compiler's checks */
  errno = 0;
  CHECK(reallocarray(NULL, huge, 3) == NULL && errno == ENOMEM);
  CHECK(calloc(huge, 3) == NULL);
  errno = 0;
  CHECK(pvalloc(huge * 2 + 1) == NULL && errno == ENOMEM); /* SIZE_MAX: no page count holds it */
}

/* A realloc that has to move its block (another one sits right behind
 * it): the old block is no longer in use, the new one is. Then a realloc
 * that fails: its block stays where it was, in use. 888 bytes is a size
 * nothing else here allocates, so no later sample reuses the old block's
 * address before the exit profile. */
__attribute__((noinline)) static void realloc_moves(void)
{
  culpert_span_enter("moved");
  char *p = malloc(888);
  culpert_span_exit();
  kept[nkept++ % 64] = malloc(888); /* outside every span */
  CHECK(p != NULL);
  memset(p, 'm', 888);
  uintptr_t old = (uintptr_t)p;
  culpert_span_enter("moved");
  p = realloc(p, 8000);
  culpert_span_exit();
  CHECK(p != NULL && (uintptr_t)p != old && p[887] == 'm');
  kept[nkept++ % 64] = p;

  volatile size_t huge = (size_t)1 << 62;
  culpert_span_enter("realloc_failed");
  static char *volatile q;
  q = malloc(600);
  culpert_span_exit();
  CHECK(q != NULL && realloc(q, huge) == NULL);
  kept[nkept++ % 64] = q;
}

/* The allocation is the last thing its line does: the instruction after
 * the call (the epilogue) belongs to the closing brace's line, so a
 * profile that took the return address for the allocation's place would
 * name that line instead. */
__attribute__((noinline)) static void *leaf_line_alloc(void)
{
  return malloc(321); /* leaf_line_alloc's allocation */
}

/* 70 nested spans (6 beyond CULPERT_SPAN_MAX_DEPTH), all closed, then one
 * exit too many: the profile counts culpert.span_overflow=6 and
 * culpert.span_underflow=1, and the stack ends balanced. */
static void deep_spans(void)
{
  for (int i = 0; i < 70; i++)
    culpert_span_enter("deep");
  free(malloc(10));
  for (int i = 0; i < 70; i++)
    culpert_span_exit();
  culpert_span_exit();
}

static void errno_kept(void)
{
  for (int i = 0; i < 1000; i++) {
    errno = 4242;
    void *p = malloc((size_t)(i % 7) * 100 + 1);
    CHECK(errno == 4242);
    p = realloc(p, 3000);
    CHECK(errno == 4242);
    free(p);
    CHECK(errno == 4242);
  }
}

static volatile sig_atomic_t interrupted;

static void on_int(int sig)
{
  (void)sig;
  interrupted = 1;
}

static void on_term_once(int sig, siginfo_t *info, void *ctx)
{
  (void)info;
  (void)ctx;
  struct sigaction now;
  /* the kernel resets the handler alone, not the flags */
  int dfl = sigaction(SIGTERM, NULL, &now) == 0 && now.sa_handler == SIG_DFL;
  char line[64];
  int n = snprintf(line, sizeof line, "handled SIGTERM default=%d\n", dfl);
  (void)!write(STDOUT_FILENO, line, (size_t)n);
  raise(sig);
}

/* A dl_iterate_phdr callback that never returns: the loader's lock stays
 * held by this thread. */
static int hold_loader(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)info;
  (void)size;
  *(volatile int *)data = 1;
  for (;;)
    pause();
  return 0;
}

static void *loader_busy(void *data)
{
  dl_iterate_phdr(hold_loader, data);
  return NULL;
}

/* --failures: allocations of every kind that fail (sizes no allocator
 * grants, some above INT64_MAX), then 1000 blocks of 4 KiB in span
 * "after_failures": at CULPERT_SAMPLE_RATE=0 each of them is recorded, and
 * at any rate sampling goes on as before the failures. */
static void after_failures(void)
{
  volatile size_t huge = (size_t)1 << 62, above = SIZE_MAX - 4095, above64k = SIZE_MAX - 65535;
  /* volatile: a failed realloc leaves the block where it was, which the
   * compiler's use-after-realloc warning cannot know */
  static void *volatile keep;
  void *q = NULL;
  keep = malloc(100);
  CHECK(keep != NULL);
  for (int i = 0; i < 3; i++)
    CHECK(realloc(keep, huge) == NULL);
  for (int i = 0; i < 3; i++)
    CHECK(malloc(huge) == NULL);
  CHECK(malloc(above) == NULL);
  CHECK(calloc(1, above) == NULL);
  CHECK(realloc(keep, above) == NULL);
  CHECK(posix_memalign(&q, 64, huge) != 0);
  CHECK(aligned_alloc(64, huge) == NULL);
  CHECK(memalign(64, above) == NULL);
  /* last before the blocks: a realloc whose size, subtracted, would leave
   * 64 KiB on the count at rate 0 (16 of the blocks unrecorded) */
  CHECK(realloc(keep, above64k) == NULL);
  free(keep);
  static void *p[1000];
  culpert_span_enter("after_failures");
  for (int i = 0; i < 1000; i++)
    p[i] = malloc(4096);
  culpert_span_exit();
  for (int i = 0; i < 1000; i++)
    free(p[i]);
}

int main(int argc, char **argv)
{
  int hang = argc == 2 && strcmp(argv[1], "--hang") == 0;
  int loader = argc == 2 && strcmp(argv[1], "--loader-busy") == 0;
  hang |= loader;
  if (argc == 2 && strcmp(argv[1], "--handle-int") == 0) {
    struct sigaction old;
    CHECK(sigaction(SIGINT, NULL, &old) == 0);
    int dfl = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;
    printf("SIGINT default=%d\n", dfl);
    printf("SIGTERM default=%d\n", signal(SIGTERM, SIG_DFL) == SIG_DFL);
    if (dfl)
      CHECK(signal(SIGINT, on_int) == SIG_DFL);
    hang = 1;
  }
  if (argc == 2 && strcmp(argv[1], "--resethand") == 0) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_term_once;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGTERM, &sa, NULL) == 0);
    CHECK(sigaction(SIGTERM, NULL, &old) == 0);
    printf("SIGTERM resethand=%d\n",
           old.sa_sigaction == on_term_once && (old.sa_flags & SA_RESETHAND) != 0);
    hang = 1;
  }
  if (argc == 2 && strcmp(argv[1], "--fork-hang") == 0) {
    pid_t child = fork();
    CHECK(child >= 0);
    if (child > 0) {
      int status;
      CHECK(waitpid(child, &status, 0) == child);
      return failures != 0;
    }
    hang = 1;
  }
  handle_request();
  aligned();
  realloc_moves();
  culpert_span_enter("leaf_line");
  kept[nkept++ % 64] = leaf_line_alloc();
  culpert_span_exit();
  errno_kept();
  deep_spans();
  printf("active=%d\n", culpert_is_active());
  printf("span outside=%llu\n", (unsigned long long)culpert_span_current());
  if (argc == 3 && strcmp(argv[1], "--snapshot") == 0) {
    int rc = culpert_snapshot_write(argv[2]);
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc2 = culpert_snapshot(&buf, &len);
    printf("snapshot=%d buffer=%d gzip=%d empty=%d\n", rc, rc2,
           rc2 == 0 && len > 2 && buf[0] == 0x1f && buf[1] == 0x8b, culpert_snapshot_write(""));
    free(buf);
  }
  if (argc == 3 && strcmp(argv[1], "--chdir") == 0)
    CHECK(chdir(argv[2]) == 0);
  if (argc == 3 && strcmp(argv[1], "--stderr-to") == 0) {
    close(STDERR_FILENO);
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd == STDERR_FILENO);
    CHECK(write(fd, "program data\n", 13) == 13);
  }
  if (argc == 2 && strcmp(argv[1], "--overwrite-env") == 0) {
    extern char **environ;
    for (char **e = environ; *e != NULL; e++)
      memset(*e, 'x', strlen(*e));
  }
  if (loader) {
    /* After the work (culpert's unwinder takes the same lock on a cache
     * miss); signals go to the main thread, the busy one only holds it. */
    static volatile int holding;
    sigset_t all, old;
    pthread_t t;
    sigfillset(&all);
    CHECK(pthread_sigmask(SIG_BLOCK, &all, &old) == 0);
    CHECK(pthread_create(&t, NULL, loader_busy, (void *)&holding) == 0);
    CHECK(pthread_sigmask(SIG_SETMASK, &old, NULL) == 0);
    while (!holding)
      usleep(1000);
  }
  if (argc == 2 && strcmp(argv[1], "--failures") == 0)
    after_failures();
  printf("failures=%d\n", failures);
  if (argc == 2 && strcmp(argv[1], "--exhaust") == 0) {
    size_t blocks = 0;
    while (malloc(1u << 20) != NULL)
      blocks++;
    printf("exhausted after %zu MiB\n", blocks);
  }
  if (argc == 2 && (strcmp(argv[1], "--abort") == 0 || strcmp(argv[1], "--exhaust") == 0)) {
    fflush(stdout);
    abort();
  }
  if (hang) {
    fflush(stdout);
    while (!interrupted)
      pause();
    printf("handled SIGINT\n");
    fflush(stdout);
    CHECK(signal(SIGINT, SIG_DFL) == on_int);
    raise(SIGINT);
  }
  return failures != 0;
}
