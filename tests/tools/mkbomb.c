/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * mkbomb: write a valid gzip file that inflates to GIB gibibytes of zeros,
 * for the loader's decompression cap test. It never holds more than one
 * MiB of the inflated data: one MiB of zeros is deflated once, ending in a
 * full flush (byte-aligned, history reset), so the same compressed block can
 * be repeated; the CRC comes from crc32_combine.
 *
 *   mkbomb OUT.gz GIB
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define CHUNK (1u << 20)

static int fail(const char *what)
{
  fprintf(stderr, "mkbomb: %s\n", what);
  return 2;
}

/* Deflate `len` bytes of `in` (raw deflate) with `flush`; append to out. */
static size_t deflate_step(z_stream *zs, const unsigned char *in, size_t len, int flush,
                           unsigned char *out, size_t cap)
{
  zs->next_in = (Bytef *)(uintptr_t)in;
  zs->avail_in = (uInt)len;
  zs->next_out = out;
  zs->avail_out = (uInt)cap;
  deflate(zs, flush);
  return cap - zs->avail_out;
}

int main(int argc, char **argv)
{
  if (argc != 3)
    return fail("usage: mkbomb OUT.gz GIB");
  unsigned long gib = strtoul(argv[2], NULL, 10);
  unsigned long chunks = gib * 1024;
  unsigned char *zeros = calloc(CHUNK, 1);
  unsigned char *a = malloc(CHUNK), *b = malloc(CHUNK), tail[64];
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (!zeros || !a || !b || chunks == 0)
    return fail("bad size or out of memory");
  if (deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY) != Z_OK)
    return fail("deflateInit2");
  size_t na = deflate_step(&zs, zeros, CHUNK, Z_FULL_FLUSH, a, CHUNK);
  size_t nb = deflate_step(&zs, zeros, CHUNK, Z_FULL_FLUSH, b, CHUNK);
  size_t nt = deflate_step(&zs, zeros, 0, Z_FINISH, tail, sizeof tail);
  deflateEnd(&zs);
  if (na != nb || memcmp(a, b, na) != 0)
    return fail("full-flush blocks differ; cannot repeat them");

  uLong crc1 = crc32(0L, zeros, CHUNK), crc = crc1;
  for (unsigned long i = 1; i < chunks; i++)
    crc = crc32_combine(crc, crc1, CHUNK);
  unsigned long long total = (unsigned long long)chunks * CHUNK;

  FILE *f = fopen(argv[1], "wb");
  if (!f)
    return fail("cannot open output");
  static const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 3};
  fwrite(header, 1, sizeof header, f);
  for (unsigned long i = 0; i < chunks; i++)
    fwrite(a, 1, na, f);
  fwrite(tail, 1, nt, f);
  unsigned char trailer[8];
  for (int i = 0; i < 4; i++) {
    trailer[i] = (unsigned char)(crc >> (8 * i));
    trailer[4 + i] = (unsigned char)(total >> (8 * i));
  }
  fwrite(trailer, 1, sizeof trailer, f);
  if (fclose(f) != 0)
    return fail("cannot write output");
  free(zeros);
  free(a);
  free(b);
  return 0;
}
