/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * writer.h: turns what the collector recorded into a gzipped pprof profile.
 *
 * The collector hands the writer a plain, already-aggregated snapshot
 * (struct culpert__wprofile); the writer owns everything about the file
 * format: span path ids and synthetic ancestor samples, mappings with build
 * ids, symbolization and demangling, the string table, comments and gzip.
 *
 * Runs outside malloc's hot path (at exit or on a snapshot call), on a thread
 * whose allocations the collector passes straight through, so it may use
 * malloc. It must never crash on odd input: code unloaded with dlclose,
 * unreadable ELF files, addresses in no mapping.
 */
#ifndef CULPERT_WRITER_H
#define CULPERT_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "gzmark.h"

/* One span path node. Index 0 of the array is unused (0 means "no span"). */
struct culpert__wspan {
  const char *name; /* NUL-terminated, never NULL */
  uint32_t parent;  /* index of the parent node, 0 for a root span */
};

/* One aggregated bucket: a distinct (stack, span) pair. */
struct culpert__wsample {
  const uintptr_t *ips; /* leaf first; return addresses except ips[0] */
  uint32_t depth;       /* number of entries in ips (may be 0) */
  uint32_t span;        /* index into spans, 0 = outside every span */
  double alloc_objects; /* weighted estimates, see profile-format.md */
  double alloc_bytes;
  double inuse_objects;
  double inuse_bytes;
  uint64_t samples; /* raw number of samples */
};

struct culpert__wprofile {
  const struct culpert__wsample *samples;
  size_t nsamples;
  const struct culpert__wspan *spans; /* spans[0] unused */
  size_t nspans;                      /* including the unused slot 0 */
  uint64_t rate;                      /* mean sampling interval in bytes, 0 = exact */
  int64_t time_nanos;                 /* wall clock when the snapshot was taken */
  int64_t duration_nanos;             /* how long the profile covers */
  /* Extra comments as "key=value" strings in any order (culpert.version,
   * culpert.rate, culpert.stack, culpert.dropped_samples, culpert.pid,
   * culpert.exe, culpert.span_overflow, user metadata, ...). The writer
   * sorts them by key. */
  const char *const *comments;
  size_t ncomments;
  /* CULPERT__WRITER_* flags; 0 (the default) symbolizes fully. */
  unsigned flags;
  /* The writer's mark for the gzip header (gzmark.h), or NULL: at most
   * CULPERT__GZMARK_MAX bytes. The collector marks each file with the
   * process that wrote it (output.c), and with the id of the `culpert run`
   * it belongs to (run_len 0: none; at most CULPERT__GZMARK_RUN_MAX). */
  const char *mark;
  size_t mark_len;
  const char *run;
  size_t run_len;
};

/* Function names only: no DWARF file names, line numbers or inlined frames
 * (reading DWARF is most of the writer's time on big binaries). */
#define CULPERT__WRITER_NAMES_ONLY 1u

/*
 * culpert__writer_encode: encode `p` as a gzipped pprof Profile. On success
 * returns 0 and sets *out to a malloc'd buffer of *len bytes. On failure
 * returns a negative errno; *out is NULL.
 */
int culpert__writer_encode(const struct culpert__wprofile *p, unsigned char **out, size_t *len);

#endif /* CULPERT_WRITER_H */
