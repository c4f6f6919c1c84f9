/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_pbenc.c: the wire encoder, checked against an independent decoder
 * (protobuf-c, generated from proto/profile.proto) and against the bytes
 * the protobuf encoding rules give.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pbenc.h"
#include "profile.pb-c.h"

static void test_pbenc_varint_bytes(void **state)
{
  (void)state;
  static const struct {
    uint64_t v;
    unsigned char bytes[10];
    size_t n;
  } cases[] = {
      {0, {0x00}, 1},
      {1, {0x01}, 1},
      {127, {0x7f}, 1},
      {128, {0x80, 0x01}, 2},
      {300, {0xac, 0x02}, 2},
      {16384, {0x80, 0x80, 0x01}, 3},
      {UINT64_MAX, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct culpert__pbuf b;
    culpert__pbuf_init(&b);
    assert_int_equal(culpert__pbenc_varint(&b, cases[i].v), 0);
    assert_int_equal(b.len, cases[i].n);
    assert_memory_equal(b.data, cases[i].bytes, cases[i].n);
    culpert__pbuf_free(&b);
  }
}

/* -1 as int64 is ten bytes on the wire (two's complement, no zigzag). */
static void test_pbenc_negative_int64(void **state)
{
  (void)state;
  struct culpert__pbuf b;
  culpert__pbuf_init(&b);
  culpert__pbenc_int64(&b, 9, -1); /* Profile.time_nanos */
  assert_int_equal(b.len, 11);
  assert_int_equal(b.data[0], 9 << 3);
  Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, b.len, b.data);
  assert_non_null(p);
  assert_int_equal(p->time_nanos, -1);
  perftools__profiles__profile__free_unpacked(p, NULL);
  culpert__pbuf_free(&b);
}

/* A Profile with nested messages, long strings (multi-byte lengths), a
 * submessage over 16 KiB (three-byte length) and packed repeated fields,
 * decoded by protobuf-c. */
static void test_pbenc_profile_round_trip(void **state)
{
  (void)state;
  struct culpert__pbuf b;
  culpert__pbuf_init(&b);

  char *longstr = malloc(20000);
  assert_non_null(longstr);
  for (size_t i = 0; i < 19999; i++)
    longstr[i] = (char)('a' + i % 26);
  longstr[19999] = '\0';

  uint64_t locs[1000];
  int64_t vals[5] = {0, 1, -1, INT64_MAX, INT64_MIN};
  for (size_t i = 0; i < 1000; i++)
    locs[i] = (uint64_t)i * 977 + 1;

  /* sample_type { type: 1 unit: 2 } */
  size_t m = culpert__pbenc_begin(&b, 1);
  culpert__pbenc_int64(&b, 1, 1);
  culpert__pbenc_int64(&b, 2, 2);
  culpert__pbenc_end(&b, m);

  /* sample { location_id: locs, value: vals, label { key: 3 num: -7 } } */
  m = culpert__pbenc_begin(&b, 2);
  culpert__pbenc_packed_uint64(&b, 1, locs, 1000);
  culpert__pbenc_packed_int64(&b, 2, vals, 5);
  size_t l = culpert__pbenc_begin(&b, 3);
  culpert__pbenc_int64(&b, 1, 3);
  culpert__pbenc_int64(&b, 3, -7);
  culpert__pbenc_end(&b, l);
  culpert__pbenc_end(&b, m);

  /* an empty sample: zero-length submessage, nothing packed */
  m = culpert__pbenc_begin(&b, 2);
  culpert__pbenc_packed_uint64(&b, 1, NULL, 0);
  culpert__pbenc_end(&b, m);

  /* mapping { id: 1 memory_start: 2^64-1 has_functions: true } */
  m = culpert__pbenc_begin(&b, 3);
  culpert__pbenc_uint64(&b, 1, 1);
  culpert__pbenc_uint64(&b, 2, UINT64_MAX);
  culpert__pbenc_bool(&b, 7, 1);
  culpert__pbenc_end(&b, m);

  culpert__pbenc_string(&b, 6, "");
  culpert__pbenc_string(&b, 6, "alloc_space");
  culpert__pbenc_string(&b, 6, longstr);
  culpert__pbenc_bytes(&b, 6, "ab\0cd", 2);
  culpert__pbenc_int64(&b, 12, 524288);
  assert_int_equal(b.err, 0);

  Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, b.len, b.data);
  assert_non_null(p);
  assert_int_equal(p->n_sample_type, 1);
  assert_int_equal(p->sample_type[0]->type, 1);
  assert_int_equal(p->sample_type[0]->unit, 2);
  assert_int_equal(p->n_sample, 2);
  assert_int_equal(p->sample[0]->n_location_id, 1000);
  for (size_t i = 0; i < 1000; i++)
    assert_int_equal(p->sample[0]->location_id[i], locs[i]);
  assert_int_equal(p->sample[0]->n_value, 5);
  for (size_t i = 0; i < 5; i++)
    assert_int_equal(p->sample[0]->value[i], vals[i]);
  assert_int_equal(p->sample[0]->n_label, 1);
  assert_int_equal(p->sample[0]->label[0]->key, 3);
  assert_int_equal(p->sample[0]->label[0]->num, -7);
  assert_int_equal(p->sample[1]->n_location_id, 0);
  assert_int_equal(p->n_mapping, 1);
  assert_int_equal(p->mapping[0]->memory_start, UINT64_MAX);
  assert_true(p->mapping[0]->has_functions);
  assert_int_equal(p->n_string_table, 4);
  assert_string_equal(p->string_table[0], "");
  assert_string_equal(p->string_table[1], "alloc_space");
  assert_string_equal(p->string_table[2], longstr);
  assert_string_equal(p->string_table[3], "ab");
  assert_int_equal(p->period, 524288);
  perftools__profiles__profile__free_unpacked(p, NULL);
  culpert__pbuf_free(&b);
  free(longstr);
}

/* Nested submessages whose lengths need more bytes than their first guess:
 * each level's length prefix grows as the inner ones are inserted. */
static void test_pbenc_nested_lengths(void **state)
{
  (void)state;
  struct culpert__pbuf b;
  culpert__pbuf_init(&b);
  size_t loc = culpert__pbenc_begin(&b, 4); /* location */
  culpert__pbenc_uint64(&b, 1, 7);
  for (int i = 0; i < 40; i++) {
    size_t line = culpert__pbenc_begin(&b, 4); /* line */
    culpert__pbenc_uint64(&b, 1, (uint64_t)i + 1);
    culpert__pbenc_int64(&b, 2, 100000 + i);
    culpert__pbenc_end(&b, line);
  }
  culpert__pbenc_end(&b, loc);
  assert_int_equal(b.err, 0);
  Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, b.len, b.data);
  assert_non_null(p);
  assert_int_equal(p->n_location, 1);
  assert_int_equal(p->location[0]->id, 7);
  assert_int_equal(p->location[0]->n_line, 40);
  assert_int_equal(p->location[0]->line[39]->function_id, 40);
  assert_int_equal(p->location[0]->line[39]->line, 100039);
  perftools__profiles__profile__free_unpacked(p, NULL);
  culpert__pbuf_free(&b);
}

/* Errors are sticky: after one, every call is a no-op returning it. */
static void test_pbenc_sticky_error(void **state)
{
  (void)state;
  struct culpert__pbuf b;
  culpert__pbuf_init(&b);
  culpert__pbenc_uint64(&b, 1, 1);
  size_t len = b.len;
  assert_int_equal(culpert__pbenc_end(&b, len + 100), -EINVAL);
  assert_int_equal(culpert__pbenc_uint64(&b, 1, 2), -EINVAL);
  assert_int_equal(culpert__pbenc_string(&b, 6, "x"), -EINVAL);
  assert_int_equal(b.len, len);
  culpert__pbuf_free(&b);
  assert_null(b.data);
  assert_int_equal(b.err, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pbenc_varint_bytes),       cmocka_unit_test(test_pbenc_negative_int64),
      cmocka_unit_test(test_pbenc_profile_round_trip), cmocka_unit_test(test_pbenc_nested_lengths),
      cmocka_unit_test(test_pbenc_sticky_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
