/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * bytesize.h: the one parser of byte counts ("4K", "512KiB", "1MB"), shared
 * by libculpert (CULPERT_SAMPLE_RATE) and the CLI (run --rate, diff's byte
 * thresholds), so every place accepts exactly the same spellings.
 */
#ifndef CULPERT_BYTESIZE_H
#define CULPERT_BYTESIZE_H

#include <stdint.h>

/*
 * culpert__bytesize_parse: decimal digits, then optionally K, M, G or T
 * (either case, powers of 1024) followed by an optional "i", then an
 * optional "B" ("4096", "4K", "4k", "4KB", "4KiB", "512KiB", "1M", "100B").
 * No sign, no spaces, no fractions, no hex. Returns 0 and sets *out,
 * -EINVAL on malformed input, or -ERANGE on a well-formed count of 2^64
 * bytes or more (leaving *out alone either way). Pure: no allocation,
 * safe inside malloc.
 */
int culpert__bytesize_parse(const char *s, uint64_t *out);

#endif /* CULPERT_BYTESIZE_H */
