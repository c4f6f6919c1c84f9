/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_bytesize.c: the byte-count syntax that CULPERT_SAMPLE_RATE, culpert
 * run --rate and culpert diff's byte thresholds all accept.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bytesize.h"

static void test_bytesize_parse(void **state)
{
  (void)state;
  static const struct {
    const char *in;
    int ok; /* 1, or the error expected */
    uint64_t want;
  } cases[] = {
      {"0", 1, 0},
      {"1", 1, 1},
      {"524288", 1, 524288},
      {"4K", 1, 4096},
      {"4k", 1, 4096},
      {"4KB", 1, 4096},
      {"4KiB", 1, 4096},
      {"512KiB", 1, 524288},
      {"1M", 1, 1048576},
      {"1MB", 1, 1048576},
      {"1MiB", 1, 1048576},
      {"1m", 1, 1048576},
      {"8mib", 1, 8388608},
      {"2g", 1, 2147483648u},
      {"2kb", 1, 2048},
      {"2G", 1, 2147483648u},
      {"100B", 1, 100},
      {"", 0, 0},
      {"K", 0, 0},
      {"-1", 0, 0},
      {"1.5M", 0, 0},
      {"4 K", 0, 0},
      {"4X", 0, 0},
      {"4KX", 0, 0},
      {"4Ki", 1, 4096},
      {"99999999999999999999", -ERANGE, 0},
      {"99999999999T", -ERANGE, 0},
      {"0x10", 0, 0},
      {"1T", 1, 1099511627776u},
      {"3t", 1, 3298534883328u},
      {"16777215T", 1, 18446742974197923840u},
      {"16777216T", -ERANGE, 0},
      {"4iB", 0, 0},
      {"4KBB", 0, 0},
      {"18446744073709551615", 1, UINT64_MAX},
      {"18446744073709551616", -ERANGE, 0},
      {"99999999999999999999X", 0, 0}, /* malformed before too large */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t v = 12345;
    int rc = culpert__bytesize_parse(cases[i].in, &v);
    if (cases[i].ok == 1) {
      assert_int_equal(rc, 0);
      assert_int_equal(v, cases[i].want);
    } else {
      assert_int_equal(rc, cases[i].ok != 0 ? cases[i].ok : -EINVAL);
      assert_int_equal(v, 12345); /* untouched */
    }
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bytesize_parse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
