/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * profile.h: a profile loaded into memory, whoever produced it.
 *
 * One loader serves every subcommand. It accepts gzip or plain protobuf
 * pprof from culpert, the Rust culpert and Go (heap/allocs), validates every
 * index and length, caps the decompressed size, and hands the commands this
 * producer-neutral model. Values are picked by sample type name, never by
 * position (see profile-format.md, "Reading").
 */
#ifndef CULPERT_CLI_PROFILE_H
#define CULPERT_CLI_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest decompressed profile the loader accepts (documented in --help). */
#define CULPERT_PROFILE_MAX_BYTES (512u * 1024u * 1024u)

enum culpert__producer {
  CULPERT_PRODUCER_CULPERT, /* alloc_* / inuse_* / samples */
  CULPERT_PRODUCER_RUST,    /* allocations/count + space/bytes */
  CULPERT_PRODUCER_GO,      /* Go heap or allocs profile */
};

struct culpert__kv {
  char *key;
  char *value;
};

/* One frame of a stack, inline frames expanded (innermost first). */
struct culpert__frame {
  const char *function; /* demangled name; "0x<addr>" when unknown; never NULL */
  const char *file;     /* NULL when unknown */
  int64_t line;         /* 0 when unknown */
  uint64_t address;     /* the location's address */
  const char *mapping;  /* the mapping's file name, NULL when none */
};

struct culpert__sample {
  const uint32_t *frames; /* indices into profile->frames, leaf first */
  uint32_t nframes;       /* 0 also when the load options dropped the stack */
  const char *span_name;  /* NULL: outside every span ("(no span)") */
  int64_t span_id;        /* 0 when the sample has no span_id label */
  int64_t span_parent_id; /* 0 when absent (a root span) */
  int64_t bytes;          /* allocated bytes, unbiased estimate */
  int64_t objects;        /* allocated objects, 0 when the file has none */
  int64_t inuse_bytes;    /* 0 when the file has no in-use values */
  int64_t inuse_objects;
  int64_t samples; /* raw samples in this bucket, 0 when unknown */
};

/* One file of a merged profile: its samples end before samples[end]. */
struct culpert__part {
  int64_t rate;
  size_t end;
};

struct culpert__profile {
  char *path; /* as given to the loader */
  enum culpert__producer producer;
  int64_t rate; /* period in bytes; 0 = every allocation (merged: the first file's) */
  int64_t time_nanos;
  int64_t duration_nanos;
  bool has_objects, has_inuse, has_samples;

  struct culpert__sample *samples;
  size_t nsamples;
  struct culpert__frame *frames;
  size_t nframes;

  /* Comments of the form key=value, sorted by key. culpert's own keys
   * (culpert.version, culpert.rate, culpert.stack, ...) go to `props`;
   * everything else is user metadata. Comments without '=' are in
   * `notes`. */
  struct culpert__kv *props;
  size_t nprops;
  struct culpert__kv *metadata;
  size_t nmetadata;
  char **notes;
  size_t nnotes;

  /* Whole-profile totals over every sample: exact sums, clamped to the
   * int64 range. */
  int64_t total_bytes;
  int64_t total_objects;
  int64_t total_inuse_bytes;
  int64_t total_inuse_objects;
  int64_t total_samples;

  /* Set by culpert__profile_merge: how many files (0 for one loaded
   * file), and whether their rates differ. */
  size_t nparts;
  const char *const *part_paths;     /* the files' paths, nparts of them */
  const struct culpert__part *parts; /* their rates and samples, nparts of them */
  bool mixed_rates;

  void *arena_; /* owned storage; private to profile.c */
};

/* The rate sample i of p was taken at: p->rate, or in a merged profile
 * the rate of the file it came from. */
int64_t culpert__profile_sample_rate(const struct culpert__profile *p, size_t i);

/* The variance of an unbiased estimate of `bytes` made at `rate` (0: exact):
 * rate x bytes, the variance of a Poisson count of samples scaled by the
 * rate. Variances of independent estimates add. */
double culpert__estimate_var(int64_t rate, int64_t bytes);

/* Which samples keep their stacks (culpert__sample.frames). */
enum culpert__stacks {
  CULPERT_STACKS_ALL = 0, /* every sample */
  CULPERT_STACKS_NONE,    /* none: every sample has nframes 0 */
  CULPERT_STACKS_OF_SPAN, /* only samples whose span_name is `span` (NULL:
                           * samples outside every span); others have 0 */
};

/*
 * What a command reads from the model, so the loader can skip building the
 * rest; {0} (or a NULL pointer) loads everything. Validation does not
 * depend on it: a damaged profile one command rejects, every command
 * rejects with the same message, and only the stacks differ between the
 * models. (Only the memory budget sees the difference: a profile too large
 * to load with its stacks may load without them.)
 */
struct culpert__load_opts {
  enum culpert__stacks stacks;
  const char *span; /* with CULPERT_STACKS_OF_SPAN */
  /* Threads decoding the samples: 0 picks by profile size and CPUs; 1, 2,
   * 4 or 8 forces that many (others round down; files with inlined frames
   * always use one). Model and messages are the same for every count. */
  unsigned threads;
  /* The bytes given to a _buffer loader were inflated from a gzip file
   * (culpert__profile_read_plain): messages say "after gunzip", as for
   * the file itself. */
  bool inflated;
};

/*
 * culpert__profile_load: read and validate the profile at `path` ("-" is
 * stdin). On success returns 0 and *out; on failure returns a negative errno
 * and writes a message naming the file and the problem into err (for
 * "culpert: error: <err>"). `opts` may be NULL.
 */
int culpert__profile_load(const char *path, struct culpert__profile **out, char *err,
                          size_t errlen);
int culpert__profile_load_with(const char *path, const struct culpert__load_opts *opts,
                               struct culpert__profile **out, char *err, size_t errlen);

/* culpert__profile_load_buffer: the same from memory; `name` is used in
 * messages and as profile->path. */
int culpert__profile_load_buffer(const void *data, size_t len, const char *name,
                                 struct culpert__profile **out, char *err, size_t errlen);
int culpert__profile_load_buffer_with(const void *data, size_t len, const char *name,
                                      const struct culpert__load_opts *opts,
                                      struct culpert__profile **out, char *err, size_t errlen);

void culpert__profile_free(struct culpert__profile *p);

/*
 * culpert__profile_merge: one profile holding every sample of in[0..n-1],
 * which it takes over (they are freed with it, or at once on failure).
 * Frames are shared; span ids are renumbered so that spans of different
 * files never share one (the span tree still merges spans of the same name
 * under the same parent name, across files as within one). Totals add up,
 * since every file's values are unbiased estimates whatever its rate; a
 * value kind counts as present only when every file has it. `path` lists
 * the files, comma-separated; props, metadata and notes are empty.
 */
int culpert__profile_merge(struct culpert__profile **in, size_t n, struct culpert__profile **out,
                           char *err, size_t errlen);

/*
 * culpert__profile_load_all: load paths[0..n-1] (n >= 1) with `opts` and,
 * when there are several, merge them. A path that is a directory stands
 * for the profiles in it: its regular files but hidden ones and profiles
 * being written (NAME.tmp.PID), in name order; an empty one is an error.
 * A file reached by two names is loaded once, with a note on stderr.
 * `check`, when not NULL, sees each file as it is loaded; a non-zero
 * return (with its message in err) stops there. Returns 0 and *out, or a
 * negative errno with the message in err.
 */
typedef int (*culpert__profile_check_fn)(const struct culpert__profile *p, const void *arg,
                                         char *err, size_t errlen);
int culpert__profile_load_all(const char *const *paths, size_t n,
                              const struct culpert__load_opts *opts,
                              culpert__profile_check_fn check, const void *arg,
                              struct culpert__profile **out, char *err, size_t errlen);

/* The same list with each directory replaced by its profiles and each
 * file named once, as culpert__profile_load_all sees it: *out (n >= 1 strings) is freed with
 * culpert__profile_paths_free. Returns 0, or a negative errno with the
 * message in err. */
int culpert__profile_expand_paths(const char *const *paths, size_t n, char ***out, size_t *nout,
                                  char *err, size_t errlen);
void culpert__profile_paths_free(char **paths, size_t n);

/* The input among inputs[0..n-1] that is the directory the file `output`
 * would be written in (through a link, its target's), or NULL. A file
 * written there is one of that directory's profiles from then on: every
 * command given the directory would read it (a merge counting its inputs
 * twice, a flame graph refused as no profile). */
const char *culpert__profile_input_dir(const char *output, const char *const *inputs, size_t n);

/* Whether the existing regular file `file` is one of the profiles
 * paths[0..n-1] stand for (directories expanded, links followed): 1 with
 * the name that reaches it in which[0..len), else 0 (also when the paths
 * do not expand: loading them says why). For an output that must not
 * replace its own input. */
int culpert__profile_paths_name(const char *const *paths, size_t n, const char *file, char *which,
                                size_t len);

/*
 * culpert__profile_read_plain: the protobuf bytes of the file at `path`
 * ("-" is stdin), inflated when it is gzipped, under the same size caps
 * and with the same messages as the loader. Not validated: load the bytes
 * with culpert__profile_load_buffer_with for that, passing *inflated
 * (whether the file was gzipped) in the options. *out is malloc'd.
 */
int culpert__profile_read_plain(const char *path, unsigned char **out, size_t *outlen,
                                bool *inflated, char *err, size_t errlen);

/* Look up a culpert.* property ("culpert.stack"); NULL when absent. */
const char *culpert__profile_prop(const struct culpert__profile *p, const char *key);

/* Whether every file of p recorded every allocation (rate 0): its bytes
 * are then exact counts, not estimates. */
bool culpert__profile_exact(const struct culpert__profile *p);

/* The peak of libculpert's in-use estimate (culpert.peak_inuse_bytes): 1
 * with *bytes set, 0 when the profile does not say, -1 when the value is
 * not a byte count. */
int culpert__profile_peak_inuse(const struct culpert__profile *p, int64_t *bytes);

/* When the in-use values were taken, as the end of a sentence ("In-use
 * bytes were still allocated ..."): "when the profile was written", or, in
 * the file CULPERT_PEAK writes (culpert.inuse_at_peak), "at the in-use
 * peak, 2026-12-01 11:09:14 UTC" ("at each process's in-use peak" when
 * merged from several). Returns buf. */
enum { CULPERT_INUSE_WHEN_MAX = 64 };
const char *culpert__profile_inuse_when(const struct culpert__profile *p, char *buf);

#endif /* CULPERT_CLI_PROFILE_H */
