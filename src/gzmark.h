/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * gzmark.h: what libculpert puts in the gzip header of every profile it
 * writes, to be read back from the first bytes of the file, nothing
 * decompressed: the writer's mark ("pid=P start=T pidns=I boot=B",
 * output.c), by which a process tells its own files from another's, and
 * the id of the `culpert run` it belongs to, if any, by which the run
 * tells its processes' files from those of other runs in a directory
 * everyone shares. They are subfields "Cu" and "Cr" of the header's extra
 * field (RFC 1952, 2.3.1.1), which readers of gzip skip. Also the rest
 * of what the two must agree on: how the mark is spelled and where a
 * process falls back to when its directory refuses its file. No
 * allocation; the only I/O is culpert__gzmark_fallback_dir's stat.
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

/* The start of a process in clock ticks since boot, from a line of its
 * /proc/PID/stat (field 22, counted after the command name's last ")"),
 * into *start: 0, or -1 when the line has no such field. */
int culpert__gzmark_start(const char *stat_line, unsigned long long *start);

/* The mark into out (n bytes): "pid=P start=T pidns=I boot=B", or with
 * boot NULL "pid=P start=T pidns=I ", the part of another process's mark
 * that `culpert run` can know, which every such mark starts with. Returns
 * what snprintf returns. */
int culpert__gzmark_format(char *out, size_t n, long pid, unsigned long long start,
                           unsigned long long pidns, const char *boot);

/* The fallback directory into out (n bytes): `tmpdir` ($TMPDIR) when an
 * absolute path to a directory, else /tmp, without trailing slashes. */
void culpert__gzmark_fallback_dir(const char *tmpdir, char *out, size_t n);

#endif /* CULPERT_GZMARK_H */
