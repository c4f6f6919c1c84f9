/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * gzmark.h: what libculpert puts in the gzip header of every profile it
 * writes, to be read back from the first bytes of the file, nothing
 * decompressed: the writer's mark ("pid=P start=T pidns=I boot=B",
 * output.c), by which a process tells its own files from another's, and
 * the id of the `culpert run` it belongs to, if any, by which the run
 * tells its processes' files from those of other runs in a directory
 * everyone shares. They are subfields "Cu" and "Cr" of the header's extra
 * field (RFC 1952, 2.3.1.1), which readers of gzip skip. Plain byte
 * handling: no allocation, no I/O.
 */
#ifndef CULPERT_GZMARK_H
#define CULPERT_GZMARK_H

#include <stddef.h>

/* The longest mark and run id, the room the extra field needs, and how
 * many bytes from a file's start hold the header up to its end. */
#define CULPERT__GZMARK_MAX     200
#define CULPERT__GZMARK_RUN_MAX 32
#define CULPERT__GZMARK_EXTRA   (4 + CULPERT__GZMARK_MAX + 4 + CULPERT__GZMARK_RUN_MAX)
#define CULPERT__GZMARK_HEAD    (12 + CULPERT__GZMARK_EXTRA)

/* The extra field for `mark` (len bytes, at most CULPERT__GZMARK_MAX) and
 * the run id `run` (run_len bytes, at most CULPERT__GZMARK_RUN_MAX; none
 * when 0) into out (CULPERT__GZMARK_EXTRA bytes): returns its length. */
size_t culpert__gzmark_extra(unsigned char *out, const char *mark, size_t len, const char *run,
                             size_t run_len);

/* The data of subfield `id` ("Cu": the mark, "Cr": the run id) in the
 * extra field of the gzip header h, the first `got` bytes of a file, and
 * its length in *len; NULL when h has none (or is no gzip header). */
const unsigned char *culpert__gzmark_find(const unsigned char *h, size_t got, const char *id,
                                          size_t *len);

#endif /* CULPERT_GZMARK_H */
