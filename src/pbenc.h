/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * pbenc.h: a minimal protobuf wire-format encoder into a growable buffer.
 *
 * Just what a pprof Profile needs: varints (int64 is written as its two's
 * complement, as protobuf does for non-zigzag types), length-delimited
 * strings and submessages, and packed repeated varints. Errors are sticky:
 * after the first failed allocation every call is a no-op returning -ENOMEM,
 * so a caller may encode a whole message and check once at the end.
 * Never used on malloc's hot path.
 */
#ifndef CULPERT_PBENC_H
#define CULPERT_PBENC_H

#include <stddef.h>
#include <stdint.h>

struct culpert__pbuf {
  unsigned char *data; /* malloc'd, NULL until the first byte */
  size_t len;
  size_t cap;
  int err; /* 0 or the first negative errno */
};

/* An empty buffer; needs no cleanup until something was written. */
void culpert__pbuf_init(struct culpert__pbuf *b);
/* Frees the bytes and returns the buffer to the empty state. */
void culpert__pbuf_free(struct culpert__pbuf *b);

/* A bare varint (no tag). Returns 0 or b->err. */
int culpert__pbenc_varint(struct culpert__pbuf *b, uint64_t v);
/* field `field`, wire type varint; written even when v is 0. */
int culpert__pbenc_uint64(struct culpert__pbuf *b, uint32_t field, uint64_t v);
int culpert__pbenc_int64(struct culpert__pbuf *b, uint32_t field, int64_t v);
int culpert__pbenc_bool(struct culpert__pbuf *b, uint32_t field, int v);
/* field `field`, wire type length-delimited: `n` raw bytes. */
int culpert__pbenc_bytes(struct culpert__pbuf *b, uint32_t field, const void *p, size_t n);
/* Same for a NUL-terminated string. */
int culpert__pbenc_string(struct culpert__pbuf *b, uint32_t field, const char *s);
/* Packed repeated varints; nothing is written when n is 0. */
int culpert__pbenc_packed_uint64(struct culpert__pbuf *b, uint32_t field, const uint64_t *v,
                                 size_t n);
int culpert__pbenc_packed_int64(struct culpert__pbuf *b, uint32_t field, const int64_t *v,
                                size_t n);

/*
 * A length-delimited submessage: culpert__pbenc_begin() writes the tag and
 * returns a mark; encode the submessage's fields; culpert__pbenc_end(mark)
 * inserts the length in front of them. Begin/end pairs nest.
 */
size_t culpert__pbenc_begin(struct culpert__pbuf *b, uint32_t field);
int culpert__pbenc_end(struct culpert__pbuf *b, size_t mark);

#endif /* CULPERT_PBENC_H */
