/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * gzmark.c: the writer's mark in a gzip header, made and found (see
 * gzmark.h). Shared by libculpert and the culpert command.
 */
#include "gzmark.h"

#include <string.h>

size_t culpert__gzmark_extra(unsigned char *out, const char *mark, size_t len)
{
  out[0] = 'C';
  out[1] = 'u';
  out[2] = (unsigned char)(len & 0xff);
  out[3] = (unsigned char)(len >> 8);
  memcpy(out + 4, mark, len);
  return 4 + len;
}

int culpert__gzmark_has(const unsigned char *h, size_t got, const char *mark, size_t len,
                        int prefix)
{
  /* 1f 8b, method, flags (4: an extra field), mtime, xfl, os, then the
   * extra field's length and its subfields (id, length, data) */
  if (got < 12 || h[0] != 0x1f || h[1] != 0x8b || (h[3] & 4) == 0)
    return 0;
  size_t end = 12 + (h[10] | (size_t)h[11] << 8);
  if (end > got)
    end = got;
  for (size_t at = 12; at + 4 <= end;) {
    size_t sub = h[at + 2] | (size_t)h[at + 3] << 8;
    if (h[at] == 'C' && h[at + 1] == 'u' && (prefix ? sub >= len : sub == len) &&
        at + 4 + len <= end && memcmp(h + at + 4, mark, len) == 0)
      return 1;
    at += 4 + sub;
  }
  return 0;
}
