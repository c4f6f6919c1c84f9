/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * fuzz_merge: libFuzzer target for `culpert merge` (merge.c). Each input
 * is cut into two or three profiles (fuzz_split.h), written to memfds and
 * merged by culpert__merge_files, as the command does. A refusal must come
 * with a message. A merge that succeeds must give a profile the loader
 * accepts, holding every sample of the inputs with the totals they add up
 * to, and, when every input gives each span id one name and parent, so
 * must the merge (it renumbers span ids by path). A crash, leak, hang or
 * sanitizer report is a bug. Build and run: tests/README.md ("Fuzzing").
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_split.h"
#include "merge.h"
#include "profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct span_key {
  int64_t id, parent;
  const char *name;
};

static int span_key_cmp(const void *a, const void *b)
{
  const struct span_key *x = a, *y = b;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* Whether every span id of `p` comes with one name and one parent. */
static bool spans_consistent(const struct culpert__profile *p)
{
  struct span_key *k = malloc((p->nsamples ? p->nsamples : 1) * sizeof *k);
  size_t n = 0;
  bool ok = true;
  if (!k)
    abort();
  for (size_t i = 0; i < p->nsamples; i++)
    if (p->samples[i].span_name && p->samples[i].span_id != 0)
      k[n++] = (struct span_key){p->samples[i].span_id, p->samples[i].span_parent_id,
                                 p->samples[i].span_name};
  qsort(k, n, sizeof *k, span_key_cmp);
  for (size_t i = 1; i < n && ok; i++)
    ok = k[i].id != k[i - 1].id ||
         (k[i].parent == k[i - 1].parent && strcmp(k[i].name, k[i - 1].name) == 0);
  free(k);
  return ok;
}

/* *sum += v; false when either the total already was clamped or it overflows. */
static bool add_total(int64_t *sum, int64_t v)
{
  return v != INT64_MAX && v != INT64_MIN && !__builtin_add_overflow(*sum, v, sum);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct fuzz_part parts[FUZZ_PARTS_MAX];
  char paths[FUZZ_PARTS_MAX][32];
  const char *argv[FUZZ_PARTS_MAX];
  size_t n = fuzz_split(data, size, parts);
  if (n == 0)
    return 0;
  fuzz_files(parts, n, paths);
  for (size_t i = 0; i < n; i++)
    argv[i] = paths[i];

  struct culpert__merged m;
  char err[1024];
  if (culpert__merge_files(argv, n, &m, err, sizeof err) != 0) {
    if (err[0] == '\0' || m.gz)
      abort(); /* every refusal has a message and no output */
    return 0;
  }

  /* The inputs as the loader sees them: they loaded, or merge refused. */
  size_t nsamples = 0;
  int64_t bytes = 0, inuse = 0;
  bool exact = true, consistent = true;
  for (size_t i = 0; i < n; i++) {
    struct culpert__profile *p;
    if (culpert__profile_load_buffer(parts[i].data, parts[i].len, "part", &p, err, sizeof err)) {
      fprintf(stderr, "merge accepted part %zu, the loader refuses it: %s\n", i, err);
      abort();
    }
    nsamples += p->nsamples;
    exact = add_total(&bytes, p->total_bytes) && exact;
    exact = add_total(&inuse, p->total_inuse_bytes) && exact;
    consistent = consistent && spans_consistent(p);
    culpert__profile_free(p);
  }

  struct culpert__profile *out;
  if (culpert__profile_load_buffer(m.gz, m.gzlen, "merged", &out, err, sizeof err) != 0) {
    fprintf(stderr, "the merged profile does not load: %s\n", err);
    abort();
  }
  if (out->nsamples != nsamples) {
    fprintf(stderr, "merged %zu samples, the inputs hold %zu\n", out->nsamples, nsamples);
    abort();
  }
  if (exact && (out->total_bytes != bytes || out->total_inuse_bytes != inuse)) {
    fprintf(stderr, "merged totals %lld/%lld bytes, the inputs add up to %lld/%lld\n",
            (long long)out->total_bytes, (long long)out->total_inuse_bytes, (long long)bytes,
            (long long)inuse);
    abort();
  }
  if (consistent && !spans_consistent(out)) {
    fprintf(stderr, "the merge gives one span id two names or parents\n");
    abort();
  }
  culpert__profile_free(out);
  culpert__merged_free(&m);
  return 0;
}
