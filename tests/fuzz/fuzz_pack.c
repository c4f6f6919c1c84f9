/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * fuzz_pack: writes a seed for fuzz_merge and fuzz_flamegraph from two or
 * three profile files, in the layout fuzz_split.h reads:
 *   fuzz_pack OUT FILE1 FILE2 [FILE3]
 * A plain program, built without the fuzzer (target fuzz_seeds runs it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned char *slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  unsigned char *buf = NULL;
  size_t cap = 0, n = 0;
  if (!f)
    return NULL;
  for (;;) {
    if (n == cap) {
      unsigned char *nb = realloc(buf, cap ? 2 * cap : 65536);
      if (!nb)
        break;
      buf = nb;
      cap = cap ? 2 * cap : 65536;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f) || !feof(f))
        break;
      fclose(f);
      *len = n;
      return buf;
    }
  }
  fclose(f);
  free(buf);
  return NULL;
}

int main(int argc, char **argv)
{
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: fuzz_pack OUT FILE1 FILE2 [FILE3]\n");
    return 2;
  }
  FILE *out = fopen(argv[1], "wb");
  if (!out) {
    perror(argv[1]);
    return 2;
  }
  int nparts = argc - 2, rc = 0;
  fputc(nparts == 3 ? 1 : 0, out);
  for (int i = 0; i < nparts && rc == 0; i++) {
    size_t len;
    unsigned char *buf = slurp(argv[2 + i], &len);
    if (!buf || len > UINT32_MAX) {
      fprintf(stderr, "fuzz_pack: cannot read %s\n", argv[2 + i]);
      rc = 2;
    } else {
      if (i + 1 < nparts)
        for (int k = 0; k < 4; k++)
          fputc((int)((len >> (8 * k)) & 0xff), out);
      fwrite(buf, 1, len, out);
    }
    free(buf);
  }
  if (fclose(out) != 0 && rc == 0) {
    perror(argv[1]);
    rc = 2;
  }
  return rc;
}
