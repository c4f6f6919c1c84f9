/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * format.c: number formatting and display-width-aware padding for the CLI's
 * text and markdown views.
 */
#include "format.h"

#include <inttypes.h>
#include <string.h>

const char *culpert__fmt_bytes(char buf[CULPERT_FMT_MAX], int64_t bytes)
{
  static const struct {
    double scale;
    const char *unit;
  } units[] = {
      {1099511627776.0, "TB"},
      {1073741824.0, "GB"},
      {1048576.0, "MB"},
      {1024.0, "KB"},
  };
  const char *sign = bytes < 0 ? "-" : "";
  /* Magnitude as unsigned so INT64_MIN does not overflow. */
  uint64_t mag = bytes < 0 ? (uint64_t)0 - (uint64_t)bytes : (uint64_t)bytes;

  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if ((double)mag >= units[i].scale) {
      snprintf(buf, CULPERT_FMT_MAX, "%s%.2f %s", sign, (double)mag / units[i].scale,
               units[i].unit);
      return buf;
    }
  }
  snprintf(buf, CULPERT_FMT_MAX, "%s%" PRIu64 " B", sign, mag);
  return buf;
}

const char *culpert__fmt_delta(char buf[CULPERT_FMT_MAX], int64_t delta)
{
  char mag[CULPERT_FMT_MAX];
  uint64_t m = delta < 0 ? (uint64_t)0 - (uint64_t)delta : (uint64_t)delta;
  /* Format the magnitude, then prefix the sign ("+0 B" for zero). */
  culpert__fmt_bytes(mag, m > INT64_MAX ? INT64_MAX : (int64_t)m);
  snprintf(buf, CULPERT_FMT_MAX, "%c%.40s", delta < 0 ? '-' : '+', mag);
  return buf;
}

const char *culpert__fmt_rate(char buf[CULPERT_FMT_MAX], int64_t rate)
{
  char b[CULPERT_FMT_MAX];
  if (rate <= 0) {
    snprintf(buf, CULPERT_FMT_MAX, "every allocation");
    return buf;
  }
  snprintf(buf, CULPERT_FMT_MAX, "%.40s/alloc", culpert__fmt_bytes(b, rate));
  return buf;
}

const char *culpert__fmt_merged_rate(char buf[CULPERT_FMT_RATES_MAX], int64_t rate, size_t nfiles,
                                     bool mixed)
{
  char r[CULPERT_FMT_MAX];
  culpert__fmt_rate(r, rate);
  if (nfiles < 2)
    snprintf(buf, CULPERT_FMT_RATES_MAX, "%s", r);
  else
    snprintf(buf, CULPERT_FMT_RATES_MAX, "%s, %zu profiles merged", mixed ? "differs" : r, nfiles);
  return buf;
}

/* One character at s for display: its length and code point, or for a
 * byte that is not UTF-8, 1 and U+FFFD (one column). */
static size_t utf8_next(const unsigned char *s, uint32_t *cp)
{
  size_t n = culpert__utf8_char(s, cp);
  if (n == 0) {
    *cp = 0xFFFD;
    n = 1;
  }
  return n;
}

static int codepoint_width(uint32_t c)
{
  /* Combining marks take no column. */
  if ((c >= 0x0300 && c <= 0x036F) || (c >= 0x1AB0 && c <= 0x1AFF) ||
      (c >= 0x1DC0 && c <= 0x1DFF) || (c >= 0x20D0 && c <= 0x20FF) ||
      (c >= 0xFE20 && c <= 0xFE2F) || c == 0x200B || c == 0x200D)
    return 0;
  /* East Asian wide and fullwidth ranges, and emoji. */
  if ((c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0x303E) ||
      (c >= 0x3041 && c <= 0x33FF) || (c >= 0x3400 && c <= 0x4DBF) ||
      (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xA000 && c <= 0xA4CF) ||
      (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
      (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
      (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
      (c >= 0x1F900 && c <= 0x1F9FF) || (c >= 0x20000 && c <= 0x3FFFD))
    return 2;
  return 1;
}

size_t culpert__display_width(const char *s)
{
  const unsigned char *p = (const unsigned char *)s;
  size_t w = 0;
  while (*p) {
    uint32_t cp;
    p += utf8_next(p, &cp);
    w += (size_t)codepoint_width(cp);
  }
  return w;
}

char *culpert__truncate(const char *s, size_t max_cols, char *out, size_t outlen)
{
  static const char ellipsis[] = "\xE2\x80\xA6"; /* U+2026, one column */
  if (outlen == 0)
    return out;
  if (culpert__display_width(s) <= max_cols && strlen(s) < outlen) {
    memcpy(out, s, strlen(s) + 1);
    return out;
  }
  /* Keep whole characters while they and the ellipsis fit. */
  const unsigned char *p = (const unsigned char *)s;
  size_t cols = 0, used = 0;
  while (*p) {
    uint32_t cp;
    size_t n = utf8_next(p, &cp);
    size_t w = (size_t)codepoint_width(cp);
    if (cols + w + 1 > max_cols || used + n + sizeof ellipsis > outlen)
      break;
    memcpy(out + used, p, n);
    used += n;
    cols += w;
    p += n;
  }
  if (max_cols >= 1 && used + sizeof ellipsis <= outlen) {
    memcpy(out + used, ellipsis, sizeof ellipsis);
  } else {
    out[used] = '\0';
  }
  return out;
}

void culpert__put_padded(FILE *f, const char *s, size_t width, int right)
{
  size_t w = culpert__display_width(s);
  size_t pad = w < width ? width - w : 0;
  if (right)
    fprintf(f, "%*s", (int)pad, "");
  fputs(s, f);
  if (!right)
    fprintf(f, "%*s", (int)pad, "");
}

size_t culpert__utf8_char(const unsigned char *s, uint32_t *cp)
{
  size_t n;
  uint32_t c;
  if (s[0] < 0x80) {
    *cp = s[0];
    return 1;
  }
  if (s[0] >= 0xC2 && s[0] <= 0xDF) {
    n = 2;
    c = s[0] & 0x1Fu;
  } else if ((s[0] & 0xF0) == 0xE0) {
    n = 3;
    c = s[0] & 0x0Fu;
  } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
    n = 4;
    c = s[0] & 0x07u;
  } else {
    return 0;
  }
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    c = (c << 6) | (s[i] & 0x3Fu);
  }
  if ((n == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) ||
      (n == 4 && (c < 0x10000 || c > 0x10FFFF)))
    return 0;
  *cp = c;
  return n;
}

/* Whether a character n bytes long (0: a byte that is not UTF-8) with code
 * point cp could drive a terminal: C0 and C1 controls, DEL, stray bytes. */
static bool unprintable(size_t n, uint32_t cp)
{
  return n == 0 || cp < 0x20 || (cp >= 0x7F && cp <= 0x9F);
}

char *culpert__printable(char *s)
{
  const unsigned char *r = (const unsigned char *)s;
  char *w = s;
  while (*r) {
    uint32_t cp = 0;
    size_t n = culpert__utf8_char(r, &cp);
    if (unprintable(n, cp)) {
      *w++ = '?';
      r += n ? n : 1;
    } else {
      memmove(w, r, n);
      w += n;
      r += n;
    }
  }
  *w = '\0';
  return s;
}

void culpert__put_printable(FILE *f, const char *s)
{
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    uint32_t cp = 0;
    size_t n = culpert__utf8_char(p, &cp);
    if (unprintable(n, cp))
      fputc('?', f);
    else
      fwrite(p, 1, n, f);
    p += n ? n : 1;
  }
}

void culpert__put_json_string(FILE *f, const char *s)
{
  const unsigned char *p = (const unsigned char *)s;
  fputc('"', f);
  while (*p) {
    if (*p == '"' || *p == '\\') {
      fputc('\\', f);
      fputc(*p++, f);
    } else if (*p < 0x20) {
      switch (*p) {
      case '\n':
        fputs("\\n", f);
        break;
      case '\t':
        fputs("\\t", f);
        break;
      case '\r':
        fputs("\\r", f);
        break;
      default:
        fprintf(f, "\\u%04x", *p);
        break;
      }
      p++;
    } else {
      uint32_t cp = 0;
      size_t n = culpert__utf8_char(p, &cp);
      if (n == 0) {
        fputs("\\ufffd", f);
        p++;
      } else if (cp >= 0x7F && cp <= 0x9F) {
        fprintf(f, "\\u%04" PRIx32, cp);
        p += n;
      } else {
        fwrite(p, 1, n, f);
        p += n;
      }
    }
  }
  fputc('"', f);
}
