/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * merge.h: several profiles written into one pprof file, for `culpert
 * merge` and for `culpert upload` of a directory (cli/README.md, "merge").
 *
 * Unlike the loader's in-memory merge, this one writes a file, so it keeps
 * everything pprof holds: mappings with their build ids, locations with
 * their inline frames, functions, every label and the comments. Span ids
 * are renumbered so the file still has one id per span path.
 */
#ifndef CULPERT_CLI_MERGE_H
#define CULPERT_CLI_MERGE_H

#include <stddef.h>

struct culpert__merged {
  unsigned char *gz; /* the merged profile, gzipped; malloc'd */
  size_t gzlen;
  size_t nfiles; /* profiles merged (directories expanded) */
};

/*
 * culpert__merge_files: read paths[0..n-1] (n >= 1; a directory stands for
 * the profiles in it, "-" for stdin), validate each as every command does,
 * and merge them. The files must hold the same sample types at the same
 * sample rate. Returns 0 and *out, or a negative errno with a message
 * naming the file and the problem in err; nothing is written anywhere.
 */
int culpert__merge_files(const char *const *paths, size_t n, struct culpert__merged *out, char *err,
                         size_t errlen);

void culpert__merged_free(struct culpert__merged *m);

#endif /* CULPERT_CLI_MERGE_H */
