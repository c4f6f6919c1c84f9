/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * writer_figures.c: prints what culpert__writer_encode costs on a synthetic
 * snapshot of realistic shape (not a test; nothing is asserted).
 *
 *   writer_figures [buckets] [depth] [distinct addresses]
 *
 * Stacks are drawn from real code addresses of this process (the executable,
 * libc, libz, ...), so symbolization reads real symbol tables and DWARF.
 * Prints the CPU time (not wall time: the machine may be shared) of two
 * full encodes (each reads and parses the files again: the writer keeps no
 * cache) and of one with names only (no DWARF), the profile size, bytes
 * per bucket, and the ratio of the two modes.
 */
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "writer.h"

struct range {
  uint64_t start, end;
};

struct ranges {
  struct range r[256];
  size_t n;
};

static int collect(struct dl_phdr_info *info, size_t size, void *data)
{
  struct ranges *rs = data;
  (void)size;
  for (int i = 0; i < info->dlpi_phnum && rs->n < 256; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
      rs->r[rs->n++] = (struct range){info->dlpi_addr + ph->p_vaddr,
                                      info->dlpi_addr + ph->p_vaddr + ph->p_memsz};
  }
  return 0;
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rnd(uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

int main(int argc, char **argv)
{
  size_t nb = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
  size_t depth = argc > 2 ? strtoul(argv[2], NULL, 10) : 24;
  size_t naddr = argc > 3 ? strtoul(argv[3], NULL, 10) : 3000;
  struct ranges rs = {0};
  uint64_t seed = 0x9e3779b97f4a7c15ULL;
  dl_iterate_phdr(collect, &rs);
  if (rs.n == 0 || nb == 0 || naddr == 0)
    return 1;

  uintptr_t *pool = malloc(naddr * sizeof *pool);
  uintptr_t *ips = malloc(nb * depth * sizeof *ips);
  struct culpert__wsample *ws = calloc(nb, sizeof *ws);
  enum { NSPANS = 200 };
  struct culpert__wspan spans[NSPANS];
  static const char *const names[] = {"handle_request", "parse",      "db_query",  "render",
                                      "auth",           "cache_fill", "serialize", "compress"};
  if (!pool || !ips || !ws)
    return 1;
  for (size_t i = 0; i < naddr; i++) {
    const struct range *r = &rs.r[rnd(&seed) % rs.n];
    pool[i] = r->start + rnd(&seed) % (r->end - r->start);
  }
  spans[0] = (struct culpert__wspan){"", 0};
  for (uint32_t i = 1; i < NSPANS; i++)
    spans[i] =
        (struct culpert__wspan){names[rnd(&seed) % 8], (uint32_t)(i > 8 ? rnd(&seed) % i : 0)};
  for (size_t b = 0; b < nb; b++) {
    for (size_t d = 0; d < depth; d++)
      ips[b * depth + d] = pool[rnd(&seed) % naddr] + 1;
    double objs = (double)(rnd(&seed) % 1000) + 0.5;
    ws[b] = (struct culpert__wsample){ips + b * depth,
                                      (uint32_t)depth,
                                      (uint32_t)(rnd(&seed) % NSPANS),
                                      objs,
                                      objs * 64,
                                      objs / 2,
                                      objs * 32,
                                      rnd(&seed) % 50 + 1};
  }
  const char *comments[] = {"culpert.version=0.1.0", "culpert.rate=524288"};
  struct culpert__wprofile p = {.samples = ws,
                                .nsamples = nb,
                                .spans = spans,
                                .nspans = NSPANS,
                                .rate = 524288,
                                .time_nanos = 1,
                                .duration_nanos = 1,
                                .comments = comments,
                                .ncomments = 2};

  /* Full symbolization twice (the writer keeps nothing between calls, so
   * both pay for reading the files), then names only, side by side. */
  static const struct {
    const char *what;
    unsigned flags;
  } runs[] = {{"full", 0}, {"full again", 0}, {"names only", CULPERT__WRITER_NAMES_ONLY}};
  double ms[3];
  for (int run = 0; run < 3; run++) {
    unsigned char *out;
    size_t len;
    p.flags = runs[run].flags;
    double t0 = now();
    int rc = culpert__writer_encode(&p, &out, &len);
    double t1 = now();
    if (rc) {
      fprintf(stderr, "writer_figures: encode failed: %d\n", rc);
      return 1;
    }
    ms[run] = (t1 - t0) * 1e3;
    printf("%-10s: %zu buckets x depth %zu, %zu distinct addresses: %.1f ms CPU, "
           "%zu bytes gzipped (%.1f bytes/bucket)\n",
           runs[run].what, nb, depth, naddr, ms[run], len, (double)len / (double)nb);
    free(out);
  }
  printf("full / names only: %.1fx\n", ms[1] / ms[2]);
  free(pool);
  free(ips);
  free(ws);
  return 0;
}
