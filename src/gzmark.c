/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * gzmark.c: the writer's mark and the run's id in a gzip header, made and
 * found (see gzmark.h). Shared by libculpert and the culpert command.
 */
#include "gzmark.h"

#include <string.h>

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
