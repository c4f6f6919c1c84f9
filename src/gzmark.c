/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * gzmark.c: the writer's mark and the run's id in a gzip header, made and
 * found, and the rest libculpert and the culpert command must agree on
 * about a profile's file (see gzmark.h). Shared by both.
 */
#include "gzmark.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One subfield: its two-byte id, its length (little-endian), its data. */
static size_t subfield(unsigned char *out, const char *id, const char *data, size_t len)
{
  out[0] = (unsigned char)id[0];
  out[1] = (unsigned char)id[1];
  out[2] = (unsigned char)(len & 0xff);
  out[3] = (unsigned char)(len >> 8);
  memcpy(out + 4, data, len);
  return 4 + len;
}

size_t culpert__gzmark_extra(unsigned char *out, const char *mark, size_t len, const char *run,
                             size_t run_len)
{
  size_t at = subfield(out, "Cu", mark, len);
  if (run_len > 0)
    at += subfield(out + at, "Cr", run, run_len);
  return at;
}

const unsigned char *culpert__gzmark_find(const unsigned char *h, size_t got, const char *id,
                                          size_t *len)
{
  /* 1f 8b, method, flags (4: an extra field), mtime, xfl, os, then the
   * extra field's length and its subfields */
  if (got < 12 || h[0] != 0x1f || h[1] != 0x8b || (h[3] & 4) == 0)
    return NULL;
  size_t end = 12 + (h[10] | (size_t)h[11] << 8);
  if (end > got)
    end = got;
  for (size_t at = 12; at + 4 <= end;) {
    size_t sub = h[at + 2] | (size_t)h[at + 3] << 8;
    if (at + 4 + sub > end)
      return NULL;
    if (h[at] == (unsigned char)id[0] && h[at + 1] == (unsigned char)id[1]) {
      *len = sub;
      return h + at + 4;
    }
    at += 4 + sub;
  }
  return NULL;
}

int culpert__gzmark_start(const char *stat_line, unsigned long long *start)
{
  const char *f = strrchr(stat_line, ')');
  for (int field = 2; f != NULL && field < 22; field++)
    f = strchr(f + 1, ' ');
  if (f == NULL)
    return -1;
  *start = strtoull(f + 1, NULL, 10);
  return 0;
}

int culpert__gzmark_format(char *out, size_t n, long pid, unsigned long long start,
                           unsigned long long pidns, const char *boot)
{
  return boot != NULL
             ? snprintf(out, n, "pid=%ld start=%llu pidns=%llu boot=%s", pid, start, pidns, boot)
             : snprintf(out, n, "pid=%ld start=%llu pidns=%llu ", pid, start, pidns);
}

void culpert__gzmark_fallback_dir(const char *tmpdir, char *out, size_t n)
{
  struct stat st;
  if (tmpdir == NULL || tmpdir[0] != '/' || strlen(tmpdir) >= n || stat(tmpdir, &st) != 0 ||
      !S_ISDIR(st.st_mode))
    tmpdir = "/tmp";
  snprintf(out, n, "%s", tmpdir);
  for (size_t len = strlen(out); len > 1 && out[len - 1] == '/'; len--)
    out[len - 1] = '\0';
}
