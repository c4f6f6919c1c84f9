/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * fuzz_split.h: how fuzz_merge and fuzz_flamegraph cut one fuzz input into
 * several profiles, and the memfds that stand for them as files.
 *
 * Layout: one byte whose low bit picks two profiles (0) or three (1), then
 * for every profile but the last a 4-byte little-endian length and that
 * many bytes (cut short at the end of the input), then the last profile:
 * the rest. fuzz_pack writes seeds in this layout from profile files.
 */
#ifndef CULPERT_FUZZ_SPLIT_H
#define CULPERT_FUZZ_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_PARTS_MAX 3

struct fuzz_part {
  const uint8_t *data;
  size_t len;
};

/* Cut data[0..size-1] into parts; returns how many (0: input too short). */
static inline size_t fuzz_split(const uint8_t *data, size_t size,
                                struct fuzz_part parts[FUZZ_PARTS_MAX])
{
  if (size < 1)
    return 0;
  size_t n = (data[0] & 1) ? 3 : 2, at = 1;
  for (size_t i = 0; i + 1 < n; i++) {
    uint32_t len = 0;
    for (size_t k = 0; k < 4; k++)
      len |= (uint32_t)(at + k < size ? data[at + k] : 0) << (8 * k);
    at = at + 4 < size ? at + 4 : size;
    parts[i].data = data + at;
    parts[i].len = len < size - at ? len : size - at;
    at += parts[i].len;
  }
  parts[n - 1].data = data + at;
  parts[n - 1].len = size - at;
  return n;
}

/* Part i's bytes as a file: a memfd rewritten for each input, named by
 * paths[i] ("/proc/self/fd/N"). Aborts when the memfd cannot be made. */
static inline void fuzz_files(const struct fuzz_part *parts, size_t n,
                              char paths[FUZZ_PARTS_MAX][32])
{
  static int fds[FUZZ_PARTS_MAX] = {-1, -1, -1};
  for (size_t i = 0; i < n; i++) {
    if (fds[i] < 0 && (fds[i] = memfd_create("profile", 0)) < 0)
      abort();
    if (ftruncate(fds[i], 0) != 0 ||
        (parts[i].len && pwrite(fds[i], parts[i].data, parts[i].len, 0) != (ssize_t)parts[i].len))
      abort();
    snprintf(paths[i], sizeof paths[i], "/proc/self/fd/%d", fds[i]);
  }
}

/* The input's profiles as files: fuzz_split, then fuzz_files. Returns how
 * many (0: input too short, no file). */
static inline size_t fuzz_inputs(const uint8_t *data, size_t size, char paths[FUZZ_PARTS_MAX][32])
{
  struct fuzz_part parts[FUZZ_PARTS_MAX];
  size_t n = fuzz_split(data, size, parts);
  if (n > 0)
    fuzz_files(parts, n, paths);
  return n;
}

/* Standard output to /dev/null from the first input on: the commands'
 * output is not what is checked. */
static inline void fuzz_quiet_stdout(void)
{
  static bool quiet;
  if (!quiet && !freopen("/dev/null", "w", stdout))
    abort();
  quiet = true;
}

#endif /* CULPERT_FUZZ_SPLIT_H */
