/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_marks: what a program sees of sampled blocks when libculpert marks
 * them (CULPERT_MARKS=1 over glibc; src/malloc.c "Marked blocks").
 * Every check is made by the program itself and counted in "failures=N";
 * run it at CULPERT_SAMPLE_RATE=0 (every block sampled, so marked) and at
 * 1T (none). It prints "marked=1" when the 8 bytes below a fresh block
 * hold the mark's magic word, "marked=0" otherwise.
 *
 * Checked: contents survive realloc growing, shrinking and moving a
 * block, between marked and unmarked sizes; realloc(p, 0) and
 * realloc(NULL, n); every aligned allocation function at alignments up to
 * 64 KiB, and posix_memalign at 2 MiB; malloc_usable_size covers the
 * request and all of it can be written; and a block whose 8 bytes below
 * hold the magic by chance (the program writes it at the end of the block
 * before) is freed, reallocated and measured like any other.
 * "--not-glibc" skips the two checks of glibc's own behaviour (errno of a
 * refused realloc, memalign rounding an alignment that is not a power of
 * two). "--deepbind PLUGIN" instead frees blocks through a library loaded
 * with RTLD_DEEPBIND and prints "deepbind=ok": what marks cannot survive,
 * and why they are off by default.
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The magic word of src/malloc.c (MARK_MAGIC). */
#define MAGIC UINT64_C(0xFFFFFFFF9C75B1E4)

static int failures;
static int glibc = 1; /* 0 with --not-glibc: skip checks of glibc's own ways */

/* Called through a volatile pointer, so that the compiler neither warns
 * about using a block after a realloc that failed nor about reading the
 * bytes below a block. */
static void *(*volatile realloc_fn)(void *, size_t) = realloc;

static __attribute__((noinline)) uint64_t word_below(uintptr_t p)
{
  const volatile unsigned char *b = (const volatile unsigned char *)(p - 16);
  uint64_t w = 0;
  for (int i = 7; i >= 0; i--)
    w = (w << 8) | b[i];
  return w;
}

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "wl_marks: check failed, line %d: %s\n", __LINE__, #cond);                   \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static void fill(unsigned char *p, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)(seed + i * 7u);
}

static int filled(const unsigned char *p, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(seed + i * 7u))
      return 0;
  return 1;
}

/* The whole usable size of p can be written, and p freed afterwards. */
static void usable(void *p, size_t asked)
{
  size_t n = malloc_usable_size(p);
  CHECK(n >= asked);
  memset(p, 0xA5, n);
}

static void reallocs(void)
{
  static const size_t sizes[] = {10, 100, 5000, 40, 300000, 64, 1 << 20, 24, 0};
  unsigned char *p = malloc(20);
  size_t have = 20;
  CHECK(p != NULL);
  fill(p, have, 1);
  for (size_t i = 0; sizes[i] != 0; i++) {
    size_t n = sizes[i];
    unsigned char *q = realloc(p, n);
    CHECK(q != NULL);
    if (q == NULL)
      return;
    size_t kept = have < n ? have : n;
    CHECK(filled(q, kept, 1));
    fill(q, n, 1);
    usable(q, n);
    fill(q, n, 1);
    p = q;
    have = n;
  }
  errno = 0;
  CHECK(realloc(p, 0) == NULL); /* glibc frees the block */
  p = realloc(NULL, 3000);
  CHECK(p != NULL);
  usable(p, 3000);
  free(p);
  volatile size_t huge = SIZE_MAX - 8; /* refused, the block untouched */
  p = malloc(100);
  fill(p, 100, 3);
  errno = 0;
  CHECK(realloc_fn(p, huge) == NULL && (errno == ENOMEM || !glibc));
  CHECK(filled(p, 100, 3));
  free(p);
  errno = 0;
  CHECK(malloc(huge) == NULL && errno == ENOMEM);
}

static void aligned(void)
{
  for (size_t a = 8; a <= 65536; a *= 2) {
    void *p = NULL;
    CHECK(posix_memalign(&p, a, 100 + a) == 0);
    CHECK(((uintptr_t)p & (a - 1)) == 0);
    usable(p, 100 + a);
    unsigned char *q = realloc(p, 3 * a); /* alignment not kept, contents are */
    CHECK(q != NULL);
    if (q != NULL) {
      fill(q, 3 * a, 5);
      free(q);
    }
    p = aligned_alloc(a, 4 * a);
    CHECK(p != NULL && ((uintptr_t)p & (a - 1)) == 0);
    usable(p, 4 * a);
    free(p);
    p = memalign(a, 77);
    CHECK(p != NULL && ((uintptr_t)p & (a - 1)) == 0);
    usable(p, 77);
    free(p);
  }
  void *big = NULL; /* a huge page's alignment: 2 MiB below the pointer */
  CHECK(posix_memalign(&big, (size_t)2 << 20, 100) == 0);
  CHECK(((uintptr_t)big & (((size_t)2 << 20) - 1)) == 0);
  usable(big, 100);
  free(big);
  void *p = memalign(48, 100); /* glibc rounds the alignment up to 64 */
  if (glibc)
    CHECK(p != NULL && ((uintptr_t)p & 63) == 0);
  free(p);
  long page = sysconf(_SC_PAGESIZE);
  p = valloc(10);
  CHECK(p != NULL && ((uintptr_t)p & (uintptr_t)(page - 1)) == 0);
  usable(p, 10);
  free(p);
  p = pvalloc(1);
  CHECK(p != NULL && ((uintptr_t)p & (uintptr_t)(page - 1)) == 0);
  usable(p, (size_t)page);
  free(p);
  unsigned char *z = calloc(1000, 3);
  CHECK(z != NULL);
  for (size_t i = 0; z != NULL && i < 3000; i++)
    CHECK(z[i] == 0);
  free(z);
}

/* Two blocks in a row from a fresh size class; the magic written into the
 * last 8 bytes of the first lies just below the second when glibc put
 * them next to each other (it does for consecutive small blocks). */
static void lookalike(void)
{
  void *held[128];
  int nheld = 0, tried = 0;
  for (int i = 0; i < 64 && tried < 8; i++) {
    unsigned char *a = malloc(40), *b = malloc(40);
    CHECK(a != NULL && b != NULL);
    if (a == NULL || b == NULL)
      break;
    size_t ua = malloc_usable_size(a);
    if (a + ua != b - 8) {
      held[nheld++] = a; /* not adjacent (or marked): kept until the end, */
      held[nheld++] = b; /* so that the next two come from fresh memory */
      continue;
    }
    uint64_t magic = MAGIC;
    memcpy(a + ua - 8, &magic, sizeof magic);
    fill(b, 40, 9);
    CHECK(malloc_usable_size(b) >= 40);
    unsigned char *c = realloc(b, 56); /* still fits: may stay in place */
    CHECK(c != NULL && filled(c, 40, 9));
    free(c);
    free(a);
    tried++;
  }
  while (nheld > 0)
    free(held[--nheld]);
  printf("lookalikes=%d\n", tried);
}

/* --deepbind PLUGIN: blocks of every size, sampled or not, freed by a
 * library loaded with RTLD_DEEPBIND, whose free is glibc's own. */
static int deepbind(const char *plugin)
{
  void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  void (*plugin_free)(void *) = NULL;
  if (h != NULL) {
    void *sym = dlsym(h, "plugin_free");
    memcpy(&plugin_free, &sym, sizeof sym);
  }
  if (plugin_free == NULL) {
    fprintf(stderr, "wl_marks: %s\n", dlerror());
    return 1;
  }
  for (size_t i = 0; i < 2000; i++)
    plugin_free(malloc(16 + i * 37));
  puts("deepbind=ok");
  return 0;
}

int main(int argc, char **argv)
{
  if (argc > 2 && strcmp(argv[1], "--deepbind") == 0)
    return deepbind(argv[2]);
  glibc = !(argc > 1 && strcmp(argv[1], "--not-glibc") == 0);
  void *probe = malloc(32);
  printf("marked=%d\n", probe != NULL && word_below((uintptr_t)probe) == MAGIC);
  free(probe);
  reallocs();
  aligned();
  lookalike();
  printf("failures=%d\n", failures);
  return failures != 0;
}
