/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * bytesize.c: byte counts with K/M/G/T suffixes. Runs in the collector
 * (environment parsing) and in the CLI: no allocation, no locale.
 */
#include "bytesize.h"

#include <errno.h>
#include <stddef.h>

int culpert__bytesize_parse(const char *s, uint64_t *out)
{
  uint64_t v = 0;
  int overflow = 0;
  const char *c = s;
  if (s == NULL || *s < '0' || *s > '9')
    return -EINVAL;
  for (; *c >= '0' && *c <= '9'; c++) {
    uint64_t d = (uint64_t)(*c - '0');
    if (v > (UINT64_MAX - d) / 10)
      overflow = 1;
    else
      v = v * 10 + d;
  }
  unsigned shift = 0;
  switch (*c) {
  case 'k':
  case 'K':
    shift = 10;
    break;
  case 'm':
  case 'M':
    shift = 20;
    break;
  case 'g':
  case 'G':
    shift = 30;
    break;
  case 't':
  case 'T':
    shift = 40;
    break;
  default:
    break;
  }
  if (shift != 0) {
    c++;
    if (*c == 'i' || *c == 'I')
      c++;
  }
  if (*c == 'b' || *c == 'B')
    c++;
  if (*c != '\0')
    return -EINVAL;
  if (overflow || (shift != 0 && v > (UINT64_MAX >> shift)))
    return -ERANGE;
  *out = v << shift;
  return 0;
}
