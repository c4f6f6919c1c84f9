/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * gzmark.h: the mark libculpert puts in the gzip header of every profile
 * it writes, naming the process that wrote it ("pid=P start=T pidns=I
 * boot=B", output.c), so that a process can tell its own files from
 * another's and `culpert run` can find its program's, by reading the
 * first bytes of a file, nothing decompressed. The mark is subfield "Cu"
 * of the header's extra field (RFC 1952, 2.3.1.1); readers of gzip skip
 * it. Plain byte handling: no allocation, no I/O.
 */
#ifndef CULPERT_GZMARK_H
#define CULPERT_GZMARK_H

#include <stddef.h>

/* The longest mark, and how many bytes from a file's start hold the
 * header up to the end of any mark. */
#define CULPERT__GZMARK_MAX  200
#define CULPERT__GZMARK_HEAD (12 + 4 + CULPERT__GZMARK_MAX)

/* The extra field for `mark` (len <= CULPERT__GZMARK_MAX bytes) into out,
 * which has room for 4 + len: returns its length. */
size_t culpert__gzmark_extra(unsigned char *out, const char *mark, size_t len);

/* Whether the first `got` bytes of a file, h, are a gzip header whose
 * extra field has a mark equal to `mark` (len bytes), or, with prefix,
 * one that starts with it. */
int culpert__gzmark_has(const unsigned char *h, size_t got, const char *mark, size_t len,
                        int prefix);

#endif /* CULPERT_GZMARK_H */
