/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * pbenc.c: protobuf wire-format encoding into a growable byte buffer.
 *
 * Used by the profile writer only (never inside malloc). Every allocation is
 * checked; the first failure is remembered in the buffer and turns every
 * later call into a no-op.
 */
#include "pbenc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

void culpert__pbuf_init(struct culpert__pbuf *b)
{
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  b->err = 0;
}

void culpert__pbuf_free(struct culpert__pbuf *b)
{
  free(b->data);
  culpert__pbuf_init(b);
}

/* Makes room for `extra` more bytes; doubles so appends are amortized O(1). */
static int reserve(struct culpert__pbuf *b, size_t extra)
{
  if (b->err)
    return b->err;
  if (extra <= b->cap - b->len)
    return 0;
  if (extra > SIZE_MAX / 2 - b->len) {
    b->err = -ENOMEM;
    return b->err;
  }
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->len < extra)
    cap *= 2;
  unsigned char *p = realloc(b->data, cap);
  if (!p) {
    b->err = -ENOMEM;
    return b->err;
  }
  b->data = p;
  b->cap = cap;
  return 0;
}

/* Encodes v into out (at least 10 bytes); returns the number of bytes. */
static size_t varint_bytes(unsigned char *out, uint64_t v)
{
  size_t n = 0;
  while (v >= 0x80) {
    out[n++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  out[n++] = (unsigned char)v;
  return n;
}

int culpert__pbenc_varint(struct culpert__pbuf *b, uint64_t v)
{
  if (reserve(b, 10))
    return b->err;
  b->len += varint_bytes(b->data + b->len, v);
  return 0;
}

static int tag(struct culpert__pbuf *b, uint32_t field, unsigned wire)
{
  return culpert__pbenc_varint(b, ((uint64_t)field << 3) | wire);
}

int culpert__pbenc_uint64(struct culpert__pbuf *b, uint32_t field, uint64_t v)
{
  tag(b, field, WIRE_VARINT);
  return culpert__pbenc_varint(b, v);
}

int culpert__pbenc_int64(struct culpert__pbuf *b, uint32_t field, int64_t v)
{
  return culpert__pbenc_uint64(b, field, (uint64_t)v);
}

int culpert__pbenc_bool(struct culpert__pbuf *b, uint32_t field, int v)
{
  return culpert__pbenc_uint64(b, field, v ? 1 : 0);
}

int culpert__pbenc_bytes(struct culpert__pbuf *b, uint32_t field, const void *p, size_t n)
{
  tag(b, field, WIRE_LEN);
  culpert__pbenc_varint(b, n);
  if (reserve(b, n))
    return b->err;
  if (n)
    memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

int culpert__pbenc_string(struct culpert__pbuf *b, uint32_t field, const char *s)
{
  return culpert__pbenc_bytes(b, field, s, strlen(s));
}

int culpert__pbenc_packed_uint64(struct culpert__pbuf *b, uint32_t field, const uint64_t *v,
                                 size_t n)
{
  if (n == 0)
    return b->err;
  size_t mark = culpert__pbenc_begin(b, field);
  for (size_t i = 0; i < n; i++)
    culpert__pbenc_varint(b, v[i]);
  return culpert__pbenc_end(b, mark);
}

int culpert__pbenc_packed_int64(struct culpert__pbuf *b, uint32_t field, const int64_t *v, size_t n)
{
  if (n == 0)
    return b->err;
  size_t mark = culpert__pbenc_begin(b, field);
  for (size_t i = 0; i < n; i++)
    culpert__pbenc_varint(b, (uint64_t)v[i]);
  return culpert__pbenc_end(b, mark);
}

size_t culpert__pbenc_begin(struct culpert__pbuf *b, uint32_t field)
{
  tag(b, field, WIRE_LEN);
  return b->len;
}

/* The body was written right after the tag; shift it to make room for its
 * length. The memmove costs one copy per nesting level, which is cheap for
 * the small messages of a profile (samples, locations, functions). */
int culpert__pbenc_end(struct culpert__pbuf *b, size_t mark)
{
  if (b->err)
    return b->err;
  if (mark > b->len) {
    b->err = -EINVAL;
    return b->err;
  }
  unsigned char lenbuf[10];
  size_t body = b->len - mark;
  size_t n = varint_bytes(lenbuf, body);
  if (reserve(b, n))
    return b->err;
  memmove(b->data + mark + n, b->data + mark, body);
  memcpy(b->data + mark, lenbuf, n);
  b->len += n;
  return 0;
}
