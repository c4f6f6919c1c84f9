/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * format.h: the number formats and column layout every text and markdown
 * view shares (cli.md, "Number formats").
 */
#ifndef CULPERT_CLI_FORMAT_H
#define CULPERT_CLI_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Room for any formatted number, sign and unit included. */
#define CULPERT_FMT_MAX 48

/* 1572864 -> "1.50 MB", 1023 -> "1023 B", 0 -> "0 B" (base 1024). A
 * negative value is formatted as its magnitude with a leading '-'. */
const char *culpert__fmt_bytes(char buf[CULPERT_FMT_MAX], int64_t bytes);

/* Always signed: "+256.00 KB", "-1.00 MB", "+0 B". */
const char *culpert__fmt_delta(char buf[CULPERT_FMT_MAX], int64_t delta);

/* The sample rate: "64.00 KB/alloc"; 0 -> "every allocation". */
const char *culpert__fmt_rate(char buf[CULPERT_FMT_MAX], int64_t rate);

/* The rate of a profile that may be several merged: as culpert__fmt_rate
 * for one file; "64.00 KB/alloc, 3 profiles merged" for several, and
 * "differs, 3 profiles merged" when their rates differ. */
#define CULPERT_FMT_RATES_MAX (CULPERT_FMT_MAX + 48)
const char *culpert__fmt_merged_rate(char buf[CULPERT_FMT_RATES_MAX], int64_t rate, size_t nfiles,
                                     bool mixed);

/* Columns a UTF-8 string takes on a terminal: one per code point, two for
 * East Asian wide and fullwidth characters, none for combining marks.
 * Invalid bytes count one column each. */
size_t culpert__display_width(const char *s);

/* Copy `s` into out (outlen bytes), cut to at most `max_cols` display
 * columns at a character boundary, ending with "…" when cut. Returns out. */
char *culpert__truncate(const char *s, size_t max_cols, char *out, size_t outlen);

/* Length (1-4) of the valid UTF-8 character at s, its code point in *cp;
 * 0 when the bytes there are not valid UTF-8 (overlong forms, surrogates
 * and code points past U+10FFFF included). */
size_t culpert__utf8_char(const unsigned char *s, uint32_t *cp);

/* Names and values come from files: before they reach a terminal, each C0
 * or C1 control character, DEL, and each byte that is not UTF-8 becomes
 * one '?', which takes the column culpert__display_width gave it.
 * culpert__printable does so in place and returns s. */
char *culpert__printable(char *s);
void culpert__put_printable(FILE *f, const char *s);

/* `s` as a JSON string: quotes, backslashes and control characters (C1
 * and DEL too) escaped, each invalid UTF-8 byte written as U+FFFD, so the
 * document stays valid. */
void culpert__put_json_string(FILE *f, const char *s);

/* Write `s` padded with spaces to `width` display columns, on the left
 * (right-aligned) when `right` is non-zero. Longer strings are not cut. */
void culpert__put_padded(FILE *f, const char *s, size_t width, int right);

#endif /* CULPERT_CLI_FORMAT_H */
