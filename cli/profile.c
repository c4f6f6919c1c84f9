/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * profile.c: the one profile loader every subcommand uses.
 *
 * Reads a file (or stdin), inflates gzip incrementally up to
 * CULPERT_PROFILE_MAX_BYTES, decodes the protobuf with the protobuf-c code
 * generated from proto/profile.proto, validates every index and length, and
 * builds the producer-neutral model of profile.h.
 *
 * It must never crash, hang or allocate without bound on hostile input:
 * protobuf-c decodes into a budgeted arena (memory proportional to the
 * input), the model lives in a second budgeted arena, and every integer taken
 * from the file is checked before it is used as an index or a size.
 *
 * Where the time goes on a big profile (bench/load/README.md): inflating,
 * then decoding a million Sample messages. The samples are split between
 * up to MAX_WORKERS threads; the model and the first error reported never
 * depend on how many (see "the samples" below). A command says what it
 * reads (struct culpert__load_opts) and stacks nobody reads are checked but
 * not stored. Decoded input is given back to the system as the model grows.
 */
#include "profile.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <libdeflate.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "profile.pb-c.h"

/* Memory budget for decoding (and, separately, for the model): 64 MiB plus
 * 48 bytes per decompressed input byte, never more than 2 GiB. protobuf-c's
 * structures take at most ~40 bytes per encoded byte (an empty Sample is 2
 * bytes on the wire and an 80-byte struct); real profiles take 5-10, so they
 * fit easily, while a crafted file cannot make the loader allocate more than
 * a fixed multiple of its size or past the absolute cap. */
#define DECODE_BYTES_PER_INPUT_BYTE 48u
#define DECODE_BASE_BYTES           ((size_t)64 << 20)
#define CULPERT_DECODE_MAX_BYTES    ((size_t)2 << 30)

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Function pb_function;
typedef Perftools__Profiles__Mapping pb_mapping;

/* ---- arena: bump allocation with a budget ---------------------------- */

struct chunk {
  struct chunk *next;
  size_t size, used;
  _Alignas(16) unsigned char data[];
};

struct arena {
  struct chunk *head;
  size_t total;     /* bytes handed out plus chunk overhead */
  size_t budget;    /* 0 = unlimited */
  bool over_budget; /* an allocation failed because of the budget */
  /* A merged profile's model arena owns the profiles it was made from
   * (their frames and strings are shared); malloc'd, freed with it. */
  struct culpert__profile **parts;
  size_t nparts;
};

/* `n` bytes aligned to `align` (a power of two, at most 16). */
static void *arena_alloc_aligned(struct arena *a, size_t n, size_t align)
{
  struct chunk *c = a->head;
  size_t at = c ? (c->used + align - 1) & ~(align - 1) : 0;
  if (!c || at > c->size || c->size - at < n) {
    size_t size = (size_t)1 << 20;
    if (c && c->size < ((size_t)64 << 20))
      size = c->size * 2;
    if (size < n)
      size = n;
    if (a->budget && (a->total > a->budget || size > a->budget - a->total)) {
      /* Try a chunk just large enough before giving up. */
      size = n;
      if (a->total > a->budget || size > a->budget - a->total) {
        a->over_budget = true;
        return NULL;
      }
    }
    c = malloc(sizeof *c + size);
    if (!c)
      return NULL;
    c->size = size;
    c->used = 0;
    c->next = a->head;
    a->head = c;
    a->total += size;
    at = 0;
  }
  void *p = c->data + at;
  c->used = at + n;
  return p;
}

static void *arena_alloc(struct arena *a, size_t n)
{
  n = (n + 15u) & ~(size_t)15u;
  if (n == 0)
    n = 16;
  return arena_alloc_aligned(a, n, 16);
}

static void arena_free(struct arena *a)
{
  struct chunk *c = a->head;
  while (c) {
    struct chunk *next = c->next;
    free(c);
    c = next;
  }
  a->head = NULL;
  a->total = 0;
}

static void *arena_calloc(struct arena *a, size_t n, size_t size)
{
  if (size && n > SIZE_MAX / size)
    return NULL;
  void *p = arena_alloc(a, n * size);
  if (p)
    memset(p, 0, n * size);
  return p;
}

static char *arena_strdup(struct arena *a, const char *s)
{
  size_t n = strlen(s) + 1;
  char *p = arena_alloc(a, n);
  if (p)
    memcpy(p, s, n);
  return p;
}

/* protobuf-c's allocator: several calls per Sample, so the common case
 * (room in the current chunk) is inline. The arenas it allocates from hold
 * only multiples of 16 bytes, so c->used stays aligned. */
static void *pb_alloc(void *data, size_t size)
{
  struct arena *a = data;
  struct chunk *c = a->head;
  size_t n = (size + 15u) & ~(size_t)15u;
  if (c && n && n >= size && c->size - c->used >= n) {
    void *p = c->data + c->used;
    c->used += n;
    return p;
  }
  return arena_alloc(a, size);
}

static void pb_free(void *data, void *ptr)
{
  /* The arena is released as a whole. */
  (void)data;
  (void)ptr;
}

/* ---- errors ------------------------------------------------------------ */

static int fail(char *err, size_t errlen, const char *name, int rc, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Write "<name>: <message>" into err and return rc. */
static int fail(char *err, size_t errlen, const char *name, int rc, const char *fmt, ...)
{
  if (err && errlen) {
    int n = snprintf(err, errlen, "%s: ", name);
    if (n >= 0 && (size_t)n < errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return rc;
}

/* ---- reading and inflating ---------------------------------------------- */

static unsigned online_cpus(void);

/* Pages of a buffer to map ahead of the thread that fills it. */
struct prefault {
  unsigned char *buf;
  size_t len;
};

#define PREFAULT_MIN_BYTES ((size_t)16 << 20)

static void *prefault_run(void *arg)
{
  const struct prefault *pf = arg;
  long page = sysconf(_SC_PAGESIZE);
  if (page > 0 && !(page & (page - 1))) {
    uintptr_t mask = (uintptr_t)page - 1;
    uintptr_t lo = ((uintptr_t)pf->buf + mask) & ~mask, hi = ((uintptr_t)pf->buf + pf->len) & ~mask;
    if (hi > lo)
      madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE); /* advice: failure is harmless */
  }
  return NULL;
}

/* Map buf[0, len) from another thread while the caller fills it, so its
 * page faults are not on the filling thread's path; *started says whether a
 * thread was started (then join it with prefault_join()). */
static void prefault_start(struct prefault *pf, pthread_t *thread, bool *started)
{
  *started = pf->len >= PREFAULT_MIN_BYTES && online_cpus() > 1 &&
             pthread_create(thread, NULL, prefault_run, pf) == 0;
}

static void prefault_join(const pthread_t *thread, bool started)
{
  if (started)
    pthread_join(*thread, NULL);
}

/* Read all of `f` into a malloc'd buffer, refusing more than `cap` bytes. A
 * regular file is read into a buffer of its size (plus one byte to see the
 * end) in one go; anything else, or a file that grows, grows the buffer. */
static int read_all(FILE *f, size_t cap, unsigned char **out, size_t *outlen)
{
  size_t size = 0, alloc = 1 << 16;
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
      (uint64_t)st.st_size < cap)
    alloc = (size_t)st.st_size + 1;
  unsigned char *buf = malloc(alloc);
  int rc = 0;
  if (!buf)
    return -ENOMEM;
  struct prefault pf = {buf, alloc};
  pthread_t helper;
  bool helping;
  prefault_start(&pf, &helper, &helping);
  for (;;) {
    if (size == alloc) {
      prefault_join(&helper, helping); /* buf moves */
      helping = false;
      if (alloc > cap) {
        rc = -EFBIG;
        goto out;
      }
      size_t next = alloc * 2;
      if (next > cap + 1)
        next = cap + 1;
      unsigned char *nb = realloc(buf, next);
      if (!nb) {
        rc = -ENOMEM;
        goto out;
      }
      buf = nb;
      alloc = next;
    }
    errno = 0;
    size_t n = fread(buf + size, 1, alloc - size, f);
    size += n;
    if (n == 0) {
      if (ferror(f))
        rc = errno ? -errno : -EIO; /* e.g. EISDIR for a directory */
      break;
    }
  }
  if (rc == 0 && size > cap)
    rc = -EFBIG;
out:
  prefault_join(&helper, helping);
  if (rc) {
    free(buf);
    return rc;
  }
  *out = buf;
  *outlen = size;
  return 0;
}

static bool is_gzip(const unsigned char *data, size_t len)
{
  return len >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

/*
 * The fast path for the common file, one gzip member and nothing after it:
 * libdeflate inflates the whole member in one call (about a third less CPU
 * than zlib's inflate) into a buffer of exactly the size the gzip trailer
 * announces (ISIZE). ISIZE is only a hint: a size of 0 or above `cap` is not
 * tried, and libdeflate never writes past the buffer and checks the CRC and
 * ISIZE itself. Returns 1 with *out and *outlen on success, 0 when the caller
 * must take the zlib path (several members, trailing bytes, a wrong ISIZE,
 * corrupt or truncated data: zlib then names the problem), or -ENOMEM.
 */
static int gunzip_whole(const unsigned char *in, size_t inlen, size_t cap, unsigned char **out,
                        size_t *outlen)
{
  struct libdeflate_decompressor *d = NULL;
  unsigned char *buf = NULL;
  size_t used_in = 0, used_out = 0;
  int rc = 0;

  if (inlen < 18) /* 10-byte header, empty deflate block, 8-byte trailer */
    return 0;
  const unsigned char *t = in + inlen - 4;
  size_t isize = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
  if (isize == 0 || isize > cap)
    return 0;
  if (!(buf = malloc(isize)) || !(d = libdeflate_alloc_decompressor())) {
    rc = -ENOMEM;
    goto out;
  }
  /* A big output buffer is mapped by another thread while this one
   * inflates, so the page faults are not on the inflating thread's path;
   * at most 16 bytes per input byte, as ISIZE may lie. */
  struct prefault pf = {buf, isize / 16 > inlen ? inlen * 16 : isize};
  pthread_t helper;
  bool helping;
  prefault_start(&pf, &helper, &helping);
  enum libdeflate_result r =
      libdeflate_gzip_decompress_ex(d, in, inlen, buf, isize, &used_in, &used_out);
  prefault_join(&helper, helping);
  if (r == LIBDEFLATE_SUCCESS && used_in == inlen && used_out == isize) {
    *out = buf;
    *outlen = used_out;
    buf = NULL;
    rc = 1;
  }
out:
  libdeflate_free_decompressor(d);
  free(buf);
  return rc;
}

/*
 * Inflate gzip data (one or more members) into a malloc'd buffer, growing it
 * step by step and stopping as soon as the output would pass `cap`: a gzip
 * bomb costs at most `cap` bytes of memory and the time to inflate them.
 */
static int gunzip(const unsigned char *in, size_t inlen, size_t cap, const char *name,
                  unsigned char **out, size_t *outlen, char *err, size_t errlen)
{
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  unsigned char *buf = NULL;
  size_t alloc = 0, used = 0;
  int rc = 0;

  rc = gunzip_whole(in, inlen, cap, out, outlen);
  if (rc < 0)
    return fail(err, errlen, name, rc, "out of memory inflating the profile");
  if (rc == 1)
    return 0;
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    return fail(err, errlen, name, -ENOMEM, "cannot initialise zlib");
  const unsigned char *next = in;
  size_t left = inlen;
  for (;;) {
    if (used == alloc) {
      if (alloc > cap) {
        rc = fail(err, errlen, name, -EFBIG,
                  "decompressed profile exceeds %zu MiB, the most culpert reads; "
                  "refusing it as a possible gzip bomb",
                  cap >> 20);
        goto out;
      }
      size_t grow = alloc ? alloc * 2 : (inlen < (cap / 4) ? inlen * 4 + 4096 : cap);
      if (grow > cap + 1)
        grow = cap + 1;
      unsigned char *nb = realloc(buf, grow);
      if (!nb) {
        rc = fail(err, errlen, name, -ENOMEM, "out of memory inflating the profile");
        goto out;
      }
      buf = nb;
      alloc = grow;
    }
    /* zlib counts in uInt; feed it at most 1 GiB at a time. */
    size_t in_step = left < (1u << 30) ? left : (1u << 30);
    size_t out_step = alloc - used < (1u << 30) ? alloc - used : (1u << 30);
    zs.next_in = (Bytef *)(uintptr_t)next;
    zs.avail_in = (uInt)in_step;
    zs.next_out = buf + used;
    zs.avail_out = (uInt)out_step;
    int z = inflate(&zs, Z_NO_FLUSH);
    size_t consumed = in_step - zs.avail_in;
    next += consumed;
    left -= consumed;
    used += out_step - zs.avail_out;
    if (z == Z_STREAM_END) {
      /* Another gzip member may follow (concatenated files); anything
       * else after the end is refused, as Go's reader refuses it (gzip
       * itself warns): a file with bytes appended is not the one written. */
      if (is_gzip(next, left)) {
        if (inflateReset(&zs) != Z_OK) {
          rc = fail(err, errlen, name, -EINVAL, "corrupt gzip data");
          goto out;
        }
        continue;
      }
      if (left > 0) {
        rc = fail(err, errlen, name, -EINVAL, "%zu byte%s after the end of the gzip data", left,
                  left == 1 ? "" : "s");
        goto out;
      }
      break;
    }
    if (z == Z_OK)
      continue;
    if (z == Z_BUF_ERROR && left == 0 && zs.avail_out > 0) {
      rc = fail(err, errlen, name, -EINVAL, "truncated gzip data (unexpected end of file)");
      goto out;
    }
    if (z == Z_BUF_ERROR)
      continue; /* output full: grow and go on */
    if (z == Z_MEM_ERROR) {
      rc = fail(err, errlen, name, -ENOMEM, "out of memory inflating the profile");
      goto out;
    }
    rc = fail(err, errlen, name, -EINVAL, "corrupt gzip data (%s)",
              zs.msg ? zs.msg : "inflate failed");
    goto out;
  }
  if (used > cap) {
    rc = fail(err, errlen, name, -EFBIG,
              "decompressed profile exceeds %zu MiB (CULPERT_PROFILE_MAX_BYTES); "
              "refusing it as a possible gzip bomb",
              cap >> 20);
    goto out;
  }
out:
  inflateEnd(&zs);
  if (rc) {
    free(buf);
    return rc;
  }
  *out = buf;
  *outlen = used;
  return 0;
}

/* ---- id maps ------------------------------------------------------------ */

/* Map from a non-zero uint64 id to an index: open addressing, or, when the
 * ids are exactly 1..n in file order (what culpert and Go write), the id
 * itself. */
struct idmap {
  uint64_t *keys; /* 0 = empty slot */
  uint32_t *vals;
  size_t mask;
  size_t dense; /* non-zero: ids are 1..dense, index = id - 1 */
};

static uint64_t mix64(uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

static int idmap_init(struct idmap *m, struct arena *a, size_t n)
{
  size_t cap = 16;
  m->dense = 0;
  while (cap < n * 2)
    cap *= 2;
  m->keys = arena_calloc(a, cap, sizeof *m->keys);
  m->vals = arena_alloc(a, cap * sizeof *m->vals);
  m->mask = cap - 1;
  return m->keys && m->vals ? 0 : -ENOMEM;
}

/* Insert id -> val; returns false if the id is already present. */
static bool idmap_put(struct idmap *m, uint64_t id, uint32_t val)
{
  size_t i = (size_t)mix64(id) & m->mask;
  while (m->keys[i]) {
    if (m->keys[i] == id)
      return false;
    i = (i + 1) & m->mask;
  }
  m->keys[i] = id;
  m->vals[i] = val;
  return true;
}

static bool idmap_get(const struct idmap *m, uint64_t id, uint32_t *val)
{
  if (m->dense) {
    if (id == 0 || id > m->dense)
      return false;
    *val = (uint32_t)(id - 1);
    return true;
  }
  if (id == 0)
    return false;
  size_t i = (size_t)mix64(id) & m->mask;
  while (m->keys[i]) {
    if (m->keys[i] == id) {
      *val = m->vals[i];
      return true;
    }
    i = (i + 1) & m->mask;
  }
  return false;
}

/* ---- the top-level wire walk -------------------------------------------- */

/*
 * The Profile message is walked here, field by field, and each sub-message
 * is decoded on its own by protobuf-c: mappings, locations, functions and
 * value types into the budgeted decode arena (the header walk), samples one
 * at a time into a scratch arena reset between samples (a second walk, by
 * the workers). Memory stays proportional to the largest single message
 * instead of the whole file, and the string table is copied straight into
 * the model.
 */
enum {
  F_SAMPLE_TYPE = 1,
  F_SAMPLE = 2,
  F_MAPPING = 3,
  F_LOCATION = 4,
  F_FUNCTION = 5,
  F_STRING = 6,
  F_DROP_FRAMES = 7,
  F_KEEP_FRAMES = 8,
  F_TIME = 9,
  F_DURATION = 10,
  F_PERIOD_TYPE = 11,
  F_PERIOD = 12,
  F_COMMENT = 13,
  F_DEFAULT_TYPE = 14,
  F_DOC_URL = 15,
};

struct field {
  uint64_t num;
  unsigned wt;         /* wire type */
  uint64_t v;          /* varint value (wt 0) */
  const uint8_t *data; /* payload (wt 2; empty for the others) */
  size_t len;
};

static bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
  if (*p != end && !(**p & 0x80)) { /* one byte: tags, most lengths */
    *v = *(*p)++;
    return true;
  }
  uint64_t r = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*p == end)
      return false;
    uint8_t byte = *(*p)++;
    r |= (uint64_t)(byte & 0x7f) << shift;
    if (!(byte & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false; /* more than 10 bytes */
}

/* Read one field at *p. Returns 1, 0 at the end, -1 on malformed data. */
static int next_field(const uint8_t **p, const uint8_t *end, struct field *f)
{
  uint64_t tag;
  if (*p == end)
    return 0;
  if (!get_varint(p, end, &tag) || (tag >> 3) == 0)
    return -1;
  f->num = tag >> 3;
  f->wt = (unsigned)(tag & 7);
  f->data = *p; /* no payload but for wire type 2 */
  f->len = 0;
  switch (f->wt) {
  case 0:
    return get_varint(p, end, &f->v) ? 1 : -1;
  case 1:
    if (end - *p < 8)
      return -1;
    *p += 8;
    return 1;
  case 5:
    if (end - *p < 4)
      return -1;
    *p += 4;
    return 1;
  case 2:
    if (!get_varint(p, end, &f->v) || f->v > (uint64_t)(end - *p))
      return -1;
    f->data = *p;
    f->len = (size_t)f->v;
    *p += f->len;
    return 1;
  default:
    return -1; /* groups and reserved wire types: not pprof */
  }
}

/* The wire type a known Profile field must have (-1: any, unknown field). */
static int field_wire_type(uint64_t num)
{
  switch (num) {
  case F_SAMPLE_TYPE:
  case F_SAMPLE:
  case F_MAPPING:
  case F_LOCATION:
  case F_FUNCTION:
  case F_STRING:
  case F_PERIOD_TYPE:
    return 2;
  case F_DROP_FRAMES:
  case F_KEEP_FRAMES:
  case F_TIME:
  case F_DURATION:
  case F_PERIOD:
  case F_DEFAULT_TYPE:
  case F_DOC_URL:
    return 0;
  case F_COMMENT:
    return -2; /* varint, or packed varints */
  default:
    return -1;
  }
}

/* ---- building the model ------------------------------------------------- */

#define MAX_WORKERS            8 /* sample decoding threads at most; a power of two */
#define MIN_SAMPLES_PER_WORKER 16384
#define SAMPLE_MARK_STRIDE     64 /* samples between two possible worker starts */

struct builder {
  pb_profile *pb; /* everything but samples and strings, decoded */
  struct culpert__profile *p;
  struct arena *a;        /* the model */
  struct arena *pb_arena; /* decoded sub-messages */
  const uint8_t *buf;     /* the decompressed Profile */
  size_t buflen;
  size_t nsamples; /* Sample fields in buf */
  bool gzipped;
  bool release_input; /* buf is the loader's own: decoded samples may go */
  const char *name;
  char *err;
  size_t errlen;
  char **strings; /* the string table, copied into the model arena */
  size_t nstrings;
  int64_t k_span_name, k_span_id, k_span_parent; /* their string indices, -1 if absent */
  bool one_frame_per_location; /* no inlined frames: frame index = location index */
  /* Where the top-level field of sample k * SAMPLE_MARK_STRIDE starts,
   * from the header walk: where workers may start. */
  const uint8_t **marks;
  size_t nmarks;
};

static int decode_failed(struct builder *b, const char *where)
{
  return fail(b->err, b->errlen, b->name, -EINVAL,
              "not a pprof profile (protobuf decoding failed%s%s)", where,
              b->gzipped ? " after gunzip" : "");
}

/* Resolve string index `idx` into *s, or fail naming `what`. */
static int str_at(struct builder *b, int64_t idx, const char **s, const char *what)
{
  *s = NULL;
  if (idx < 0 || (uint64_t)idx >= b->nstrings) {
    fail(b->err, b->errlen, b->name, -EINVAL,
         "%s refers to string %" PRId64 ", but the string table has %zu entries", what, idx,
         b->nstrings);
    return -EINVAL; /* stated here too: the compiler then sees *s is set when 0 is */
  }
  *s = b->strings[idx];
  return 0;
}

static int nomem(struct builder *b, const struct arena *a)
{
  if (a->over_budget)
    return fail(b->err, b->errlen, b->name, -EFBIG,
                "profile is too large to load (needs more than %zu MiB of memory)",
                a->budget >> 20);
  return fail(b->err, b->errlen, b->name, -ENOMEM, "out of memory loading the profile");
}

/* Decode one sub-message with protobuf-c into `a`; NULL on failure. */
static void *unpack(const ProtobufCMessageDescriptor *d, struct arena *a, const struct field *f)
{
  ProtobufCAllocator alloc = {pb_alloc, pb_free, a};
  return protobuf_c_message_unpack(d, &alloc, f->len, f->data);
}

/* `arr` (n of *cap elements used) with room for one more: itself, or a
 * copy twice the size in `a` (the old one stays there: at most as much
 * again); NULL when out of memory. */
static void *room(struct arena *a, void *arr, size_t n, size_t *cap, size_t elem)
{
  if (arr && n < *cap)
    return arr;
  size_t ncap = *cap ? *cap * 2 : 16;
  if (ncap > SIZE_MAX / elem)
    return NULL;
  void *na = arena_alloc(a, ncap * elem);
  if (!na)
    return NULL;
  if (n)
    memcpy(na, arr, n * elem);
  *cap = ncap;
  return na;
}

/* Array capacities during the header walk. */
struct header_caps {
  size_t sample_type, mapping, location, function, comment, string, marks;
};

/* One top-level field other than a Sample into b->pb or the strings. */
static int header_field(struct builder *b, struct header_caps *cap, const struct field *f)
{
  pb_profile *pb = b->pb;
  struct arena *pa = b->pb_arena;
  switch (f->num) {
  case F_SAMPLE_TYPE:
  case F_PERIOD_TYPE: {
    Perftools__Profiles__ValueType *vt =
        unpack(&perftools__profiles__value_type__descriptor, pa, f);
    if (!vt)
      return pa->over_budget ? nomem(b, pa) : decode_failed(b, " in a value type");
    if (f->num == F_PERIOD_TYPE) {
      pb->period_type = vt; /* the last one wins */
      break;
    }
    void *na =
        room(pa, pb->sample_type, pb->n_sample_type, &cap->sample_type, sizeof *pb->sample_type);
    if (!na)
      return nomem(b, pa);
    pb->sample_type = na;
    pb->sample_type[pb->n_sample_type++] = vt;
    break;
  }
  case F_MAPPING: {
    pb_mapping *m = unpack(&perftools__profiles__mapping__descriptor, pa, f);
    if (!m)
      return pa->over_budget ? nomem(b, pa) : decode_failed(b, " in a mapping");
    void *na = room(pa, pb->mapping, pb->n_mapping, &cap->mapping, sizeof *pb->mapping);
    if (!na)
      return nomem(b, pa);
    pb->mapping = na;
    pb->mapping[pb->n_mapping++] = m;
    break;
  }
  case F_LOCATION: {
    pb_location *l = unpack(&perftools__profiles__location__descriptor, pa, f);
    if (!l)
      return pa->over_budget ? nomem(b, pa) : decode_failed(b, " in a location");
    void *na = room(pa, pb->location, pb->n_location, &cap->location, sizeof *pb->location);
    if (!na)
      return nomem(b, pa);
    pb->location = na;
    pb->location[pb->n_location++] = l;
    break;
  }
  case F_FUNCTION: {
    pb_function *fn = unpack(&perftools__profiles__function__descriptor, pa, f);
    if (!fn)
      return pa->over_budget ? nomem(b, pa) : decode_failed(b, " in a function");
    void *na = room(pa, pb->function, pb->n_function, &cap->function, sizeof *pb->function);
    if (!na)
      return nomem(b, pa);
    pb->function = na;
    pb->function[pb->n_function++] = fn;
    break;
  }
  case F_STRING: {
    /* C strings: an embedded NUL ends the string, as with protobuf-c. */
    char *s = arena_alloc(b->a, f->len + 1);
    void *na = s ? room(b->a, b->strings, b->nstrings, &cap->string, sizeof *b->strings) : NULL;
    if (!na)
      return nomem(b, b->a);
    b->strings = na;
    memcpy(s, f->data, f->len);
    s[f->len] = '\0';
    b->strings[b->nstrings++] = s;
    break;
  }
  case F_COMMENT: {
    const uint8_t *q = f->data, *qend = f->data + f->len;
    uint64_t v = f->v;
    /* One varint, or packed varints (checked by the caller). */
    while (f->wt == 0 || (q < qend && get_varint(&q, qend, &v))) {
      void *na = room(pa, pb->comment, pb->n_comment, &cap->comment, sizeof *pb->comment);
      if (!na)
        return nomem(b, pa);
      pb->comment = na;
      pb->comment[pb->n_comment++] = (int64_t)v;
      if (f->wt == 0)
        break;
    }
    break;
  }
  case F_DROP_FRAMES:
    pb->drop_frames = (int64_t)f->v;
    break;
  case F_KEEP_FRAMES:
    pb->keep_frames = (int64_t)f->v;
    break;
  case F_TIME:
    pb->time_nanos = (int64_t)f->v;
    break;
  case F_DURATION:
    pb->duration_nanos = (int64_t)f->v;
    break;
  case F_PERIOD:
    pb->period = (int64_t)f->v;
    break;
  case F_DEFAULT_TYPE:
    pb->default_sample_type = (int64_t)f->v;
    break;
  case F_DOC_URL:
    pb->doc_url = (int64_t)f->v;
    break;
  default:
    break;
  }
  return 0;
}

/*
 * The header walk, the one pass over the whole Profile before the samples:
 * checks the wire structure of every top-level field, decodes everything
 * but the samples into b->pb, copies the strings, counts the samples and
 * marks where workers may start. A malformed wire structure anywhere is
 * reported before any error inside a field, so the first error of a field
 * is kept until the walk ends.
 */
static int decode_header(struct builder *b)
{
  struct header_caps cap = {0};
  pb_profile *pb = arena_calloc(b->pb_arena, 1, sizeof *pb);
  if (!pb)
    return nomem(b, b->pb_arena);
  perftools__profiles__profile__init(pb);
  b->pb = pb;

  const uint8_t *p = b->buf, *end = b->buf + b->buflen, *at = p;
  struct field f;
  size_t nsamples = 0;
  int r, pending = 0;
  for (; (r = next_field(&p, end, &f)) == 1; at = p) {
    int want = field_wire_type(f.num);
    if (want >= 0 && (unsigned)want != f.wt) {
      r = -1;
      break;
    }
    if (f.num == F_SAMPLE) { /* decoded later */
      if (nsamples++ % SAMPLE_MARK_STRIDE == 0 && !pending) {
        void *na = room(b->pb_arena, b->marks, b->nmarks, &cap.marks, sizeof *b->marks);
        if (!na) {
          pending = nomem(b, b->pb_arena);
        } else {
          b->marks = na;
          b->marks[b->nmarks++] = at;
        }
      }
      continue;
    }
    if (f.num == F_COMMENT) {
      if (f.wt != 0 && f.wt != 2) {
        r = -1;
        break;
      }
      const uint8_t *q = f.data, *qend = f.data + f.len;
      uint64_t v;
      while (f.wt == 2 && q < qend)
        if (!get_varint(&q, qend, &v)) {
          r = -1;
          goto walked;
        }
    }
    if (!pending)
      pending = header_field(b, &cap, &f);
  }
walked:
  if (r != 0)
    return decode_failed(b, "");
  if (pending)
    return pending;
  /* Every array exists, even when empty. */
  if ((!pb->sample_type &&
       !(pb->sample_type = room(b->pb_arena, NULL, 0, &cap.sample_type, sizeof(void *)))) ||
      (!pb->mapping && !(pb->mapping = room(b->pb_arena, NULL, 0, &cap.mapping, sizeof(void *)))) ||
      (!pb->location &&
       !(pb->location = room(b->pb_arena, NULL, 0, &cap.location, sizeof(void *)))) ||
      (!pb->function &&
       !(pb->function = room(b->pb_arena, NULL, 0, &cap.function, sizeof(void *)))) ||
      (!pb->comment && !(pb->comment = room(b->pb_arena, NULL, 0, &cap.comment, sizeof(int64_t)))))
    return nomem(b, b->pb_arena);
  if (!b->strings && !(b->strings = room(b->a, NULL, 0, &cap.string, sizeof(char *))))
    return nomem(b, b->a);
  b->nsamples = nsamples;
  return 0;
}

static int check_strings(struct builder *b)
{
  if (b->nstrings == 0)
    return fail(b->err, b->errlen, b->name, -EINVAL,
                "string table is empty (string_table[0] must be \"\")");
  if (b->strings[0][0] != '\0')
    return fail(b->err, b->errlen, b->name, -EINVAL, "string_table[0] must be the empty string");
  b->k_span_name = b->k_span_id = b->k_span_parent = -1;
  for (size_t i = b->nstrings; i-- > 1;) {
    if (strcmp(b->strings[i], "span_name") == 0)
      b->k_span_name = (int64_t)i;
    else if (strcmp(b->strings[i], "span_id") == 0)
      b->k_span_id = (int64_t)i;
    else if (strcmp(b->strings[i], "span_parent_id") == 0)
      b->k_span_parent = (int64_t)i;
  }
  return 0;
}

/* Indices into Sample.value of each quantity, -1 when the file lacks it. */
struct value_index {
  long bytes, objects, inuse_bytes, inuse_objects, samples;
};

static int pick_values(struct builder *b, struct value_index *vi)
{
  const pb_profile *pb = b->pb;
  long alloc_space = -1, space = -1, alloc_objects = -1, inuse_space = -1, inuse_objects = -1,
       samples = -1, allocations = -1;
  char found[256] = "";
  size_t flen = 0;
  int rc;

  for (size_t i = 0; i < pb->n_sample_type; i++) {
    const Perftools__Profiles__ValueType *vt = pb->sample_type[i];
    const char *type, *unit;
    if ((rc = str_at(b, vt->type, &type, "a sample type")) ||
        (rc = str_at(b, vt->unit, &unit, "a sample type unit")))
      return rc;
    if (flen < sizeof found - 1) {
      int n = snprintf(found + flen, sizeof found - flen, "%s%s/%s", flen ? ", " : "", type, unit);
      if (n > 0)
        flen = flen + (size_t)n < sizeof found ? flen + (size_t)n : sizeof found - 1;
    }
    long *slot = NULL;
    if (strcmp(type, "alloc_space") == 0)
      slot = &alloc_space;
    else if (strcmp(type, "space") == 0)
      slot = &space;
    else if (strcmp(type, "alloc_objects") == 0)
      slot = &alloc_objects;
    else if (strcmp(type, "inuse_space") == 0)
      slot = &inuse_space;
    else if (strcmp(type, "inuse_objects") == 0)
      slot = &inuse_objects;
    else if (strcmp(type, "samples") == 0)
      slot = &samples;
    else if (strcmp(type, "allocations") == 0)
      slot = &allocations;
    if (slot && *slot < 0)
      *slot = (long)i;
  }
  if (pb->n_sample_type == 0)
    return fail(b->err, b->errlen, b->name, -EINVAL,
                "not a heap profile: it declares no sample types");
  vi->bytes = alloc_space >= 0 ? alloc_space : space;
  if (vi->bytes < 0)
    return fail(b->err, b->errlen, b->name, -EINVAL,
                "not a heap allocation profile: no alloc_space or space sample type "
                "(it has %s)",
                found);
  vi->objects = alloc_objects;
  vi->inuse_bytes = inuse_space;
  vi->inuse_objects = inuse_objects;
  vi->samples = samples >= 0 ? samples : allocations;

  if (alloc_space >= 0 && samples >= 0)
    b->p->producer = CULPERT_PRODUCER_CULPERT;
  else if (alloc_space >= 0)
    b->p->producer = CULPERT_PRODUCER_GO;
  else
    b->p->producer = CULPERT_PRODUCER_RUST;
  b->p->has_objects = vi->objects >= 0;
  b->p->has_inuse = vi->inuse_bytes >= 0;
  b->p->has_samples = vi->samples >= 0;
  return 0;
}

/* Check the profile-level string indices nobody else looks at. */
static int check_header(struct builder *b)
{
  const pb_profile *pb = b->pb;
  const char *s;
  int rc;
  if ((rc = str_at(b, pb->drop_frames, &s, "drop_frames")) ||
      (rc = str_at(b, pb->keep_frames, &s, "keep_frames")) ||
      (rc = str_at(b, pb->default_sample_type, &s, "default_sample_type")) ||
      (rc = str_at(b, pb->doc_url, &s, "doc_url")))
    return rc;
  if (pb->period_type && ((rc = str_at(b, pb->period_type->type, &s, "period_type")) ||
                          (rc = str_at(b, pb->period_type->unit, &s, "period_type unit"))))
    return rc;
  if (pb->period < 0)
    return fail(b->err, b->errlen, b->name, -EINVAL,
                "period %" PRId64 " is negative, not a sample rate", (int64_t)pb->period);
  b->p->rate = pb->period;
  b->p->time_nanos = pb->time_nanos;
  b->p->duration_nanos = pb->duration_nanos;
  return 0;
}

static int kv_cmp(const void *x, const void *y)
{
  const struct culpert__kv *a = x, *b = y;
  int c = strcmp(a->key, b->key);
  if (c)
    return c;
  /* Same key twice: keep file order (the value pointers are in file order
   * within the model arena). */
  return a->value < b->value ? -1 : a->value > b->value;
}

static int load_comments(struct builder *b)
{
  const pb_profile *pb = b->pb;
  struct culpert__profile *p = b->p;
  size_t n = pb->n_comment;
  int rc;
  p->props = arena_calloc(b->a, n ? n : 1, sizeof *p->props);
  p->metadata = arena_calloc(b->a, n ? n : 1, sizeof *p->metadata);
  p->notes = arena_calloc(b->a, n ? n : 1, sizeof *p->notes);
  if (!p->props || !p->metadata || !p->notes)
    return nomem(b, b->a);
  for (size_t i = 0; i < n; i++) {
    const char *c;
    if ((rc = str_at(b, pb->comment[i], &c, "a comment")))
      return rc;
    const char *eq = strchr(c, '=');
    if (!eq || eq == c) {
      if (!(p->notes[p->nnotes++] = arena_strdup(b->a, c)))
        return nomem(b, b->a);
      continue;
    }
    size_t klen = (size_t)(eq - c);
    char *kv = arena_alloc(b->a, strlen(c) + 1);
    if (!kv)
      return nomem(b, b->a);
    memcpy(kv, c, strlen(c) + 1);
    kv[klen] = '\0';
    struct culpert__kv item = {kv, kv + klen + 1};
    if (strncmp(kv, "culpert.", 8) == 0)
      p->props[p->nprops++] = item;
    else
      p->metadata[p->nmetadata++] = item;
  }
  qsort(p->props, p->nprops, sizeof *p->props, kv_cmp);
  qsort(p->metadata, p->nmetadata, sizeof *p->metadata, kv_cmp);
  return 0;
}

/*
 * Frames: each Location expands to one frame per Line (innermost first), or
 * one address-only frame when it has no lines. loc_first/loc_count give each
 * location's range in p->frames.
 */
static int load_locations(struct builder *b, struct idmap *locs, uint32_t **loc_first_out,
                          uint32_t **loc_count_out)
{
  const pb_profile *pb = b->pb;
  struct culpert__profile *p = b->p;
  struct idmap funcs, maps;
  int rc;

  if (pb->n_location > UINT32_MAX / 2 || pb->n_function > UINT32_MAX / 2 ||
      pb->n_mapping > UINT32_MAX / 2)
    return fail(b->err, b->errlen, b->name, -EFBIG, "too many locations, functions or mappings");
  if (idmap_init(&funcs, b->a, pb->n_function) || idmap_init(&maps, b->a, pb->n_mapping) ||
      idmap_init(locs, b->a, pb->n_location))
    return nomem(b, b->a);
  bool dense_locs = true;
  for (size_t i = 0; i < pb->n_location && dense_locs; i++)
    dense_locs = pb->location[i]->id == i + 1;

  const char **map_names = arena_calloc(b->a, pb->n_mapping + 1, sizeof *map_names);
  if (!map_names)
    return nomem(b, b->a);
  for (size_t i = 0; i < pb->n_mapping; i++) {
    const pb_mapping *m = pb->mapping[i];
    const char *s;
    if (m->id == 0)
      return fail(b->err, b->errlen, b->name, -EINVAL, "mapping %zu has id 0", i + 1);
    if (!idmap_put(&maps, m->id, (uint32_t)i))
      return fail(b->err, b->errlen, b->name, -EINVAL, "mapping id %" PRIu64 " is not unique",
                  m->id);
    if ((rc = str_at(b, m->filename, &s, "a mapping's filename")) ||
        (rc = str_at(b, m->build_id, &map_names[i], "a mapping's build_id")))
      return rc;
    map_names[i] = s[0] ? s : NULL;
  }

  const char **fn_names = arena_calloc(b->a, pb->n_function + 1, sizeof *fn_names);
  const char **fn_files = arena_calloc(b->a, pb->n_function + 1, sizeof *fn_files);
  if (!fn_names || !fn_files)
    return nomem(b, b->a);
  for (size_t i = 0; i < pb->n_function; i++) {
    const pb_function *f = pb->function[i];
    const char *name, *sys, *file;
    if (f->id == 0)
      return fail(b->err, b->errlen, b->name, -EINVAL, "function %zu has id 0", i + 1);
    if (!idmap_put(&funcs, f->id, (uint32_t)i))
      return fail(b->err, b->errlen, b->name, -EINVAL, "function id %" PRIu64 " is not unique",
                  f->id);
    if ((rc = str_at(b, f->name, &name, "a function's name")) ||
        (rc = str_at(b, f->system_name, &sys, "a function's system_name")) ||
        (rc = str_at(b, f->filename, &file, "a function's filename")))
      return rc;
    fn_names[i] = name[0] ? name : sys[0] ? sys : NULL;
    fn_files[i] = file[0] ? file : NULL;
  }

  /* Count frames first so they go into one array. */
  size_t nframes = 0;
  for (size_t i = 0; i < pb->n_location; i++) {
    size_t nl = pb->location[i]->n_line;
    nframes += nl ? nl : 1;
    if (nframes > UINT32_MAX / 2)
      return fail(b->err, b->errlen, b->name, -EFBIG, "too many frames");
  }
  uint32_t *loc_first = arena_alloc(b->a, (pb->n_location + 1) * sizeof *loc_first);
  uint32_t *loc_count = arena_alloc(b->a, (pb->n_location + 1) * sizeof *loc_count);
  p->frames = arena_calloc(b->a, nframes ? nframes : 1, sizeof *p->frames);
  if (!loc_first || !loc_count || !p->frames)
    return nomem(b, b->a);

  size_t fi = 0;
  for (size_t i = 0; i < pb->n_location; i++) {
    const pb_location *l = pb->location[i];
    uint32_t idx;
    if (l->id == 0)
      return fail(b->err, b->errlen, b->name, -EINVAL, "location %zu has id 0", i + 1);
    if (!dense_locs && !idmap_put(locs, l->id, (uint32_t)i))
      return fail(b->err, b->errlen, b->name, -EINVAL, "location id %" PRIu64 " is not unique",
                  l->id);
    const char *mapping = NULL;
    if (l->mapping_id) {
      if (!idmap_get(&maps, l->mapping_id, &idx))
        return fail(b->err, b->errlen, b->name, -EINVAL,
                    "location id %" PRIu64 " refers to mapping id %" PRIu64
                    ", which does not exist",
                    l->id, l->mapping_id);
      mapping = map_names[idx];
    }
    loc_first[i] = (uint32_t)fi;
    char *hex = NULL; /* "0x<addr>", made at most once per location */
    size_t nl = l->n_line ? l->n_line : 1;
    for (size_t j = 0; j < nl; j++) {
      struct culpert__frame *fr = &p->frames[fi++];
      const char *fname = NULL;
      fr->address = l->address;
      fr->mapping = mapping;
      if (l->n_line) {
        const Perftools__Profiles__Line *ln = l->line[j];
        if (ln->function_id) {
          if (!idmap_get(&funcs, ln->function_id, &idx))
            return fail(b->err, b->errlen, b->name, -EINVAL,
                        "location id %" PRIu64 " refers to function id %" PRIu64
                        ", which does not exist",
                        l->id, ln->function_id);
          fname = fn_names[idx];
          fr->file = fn_files[idx];
        }
        fr->line = ln->line < 0 ? 0 : ln->line;
      }
      if (!fname) {
        if (!hex) {
          char tmp[32];
          snprintf(tmp, sizeof tmp, "0x%" PRIx64, l->address);
          if (!(hex = arena_strdup(b->a, tmp)))
            return nomem(b, b->a);
        }
        fname = hex;
      }
      fr->function = fname;
    }
    loc_count[i] = (uint32_t)nl;
  }
  if (dense_locs)
    locs->dense = pb->n_location;
  b->one_frame_per_location = fi == pb->n_location;
  p->nframes = fi;
  *loc_first_out = loc_first;
  *loc_count_out = loc_count;
  return 0;
}

static int64_t value_at(const pb_sample *s, long idx)
{
  return idx >= 0 ? s->value[idx] : 0;
}

/*
 * Labels, decoded once per distinct encoding. Samples are decoded with a
 * copy of the generated Sample descriptor in which the label field is
 * `bytes` (the wire format of an embedded message), so protobuf-c hands back
 * each label's encoded bytes; each distinct encoding is then decoded by
 * protobuf-c with the generated Label descriptor and validated once, and
 * every later label with the same bytes reuses the result. A profile has a
 * few labels per span, so 1M samples decode a few hundred labels instead of
 * 3M. The table grows with the distinct labels the file holds (at most one
 * per label, each kept in the budgeted decode arena).
 */
enum label_kind { LABEL_OTHER, LABEL_SPAN_NAME, LABEL_SPAN_ID, LABEL_SPAN_PARENT };

struct label_slot {
  const uint8_t *bytes; /* NULL: empty slot */
  size_t len;
  uint64_t hash;
  const Perftools__Profiles__Label *label;
  const char *str;      /* the label's string value, validated */
  enum label_kind kind; /* from its key, worked out once */
};

/* What a label's key string index names. Indices first; strcmp only for
 * duplicate key strings. */
static enum label_kind label_kind(const struct builder *b, int64_t k)
{
  const char *key = b->strings[k];
  if (k == b->k_span_name ||
      (k != b->k_span_id && k != b->k_span_parent && strcmp(key, "span_name") == 0))
    return LABEL_SPAN_NAME;
  if (k == b->k_span_id || (k != b->k_span_parent && strcmp(key, "span_id") == 0))
    return LABEL_SPAN_ID;
  if (k == b->k_span_parent || strcmp(key, "span_parent_id") == 0)
    return LABEL_SPAN_PARENT;
  return LABEL_OTHER;
}

struct labels {
  struct label_slot *slots;
  size_t mask, used;
  ProtobufCMessageDescriptor sample;   /* Sample with `bytes` labels */
  ProtobufCFieldDescriptor fields[16]; /* its fields */
};

static void labels_free(struct labels *t)
{
  free(t->slots);
}

/* Make t->sample; -1 if the generated descriptor is not the expected one. */
static int labels_init(struct labels *t)
{
  const ProtobufCMessageDescriptor *d = &perftools__profiles__sample__descriptor;
  bool found = false;
  if (d->n_fields > sizeof t->fields / sizeof t->fields[0])
    return -1;
  t->sample = *d;
  memcpy(t->fields, d->fields, d->n_fields * sizeof *d->fields);
  for (unsigned i = 0; i < d->n_fields; i++) {
    ProtobufCFieldDescriptor *f = &t->fields[i];
    if (f->id == 3 && f->label == PROTOBUF_C_LABEL_REPEATED && f->type == PROTOBUF_C_TYPE_MESSAGE &&
        f->descriptor == &perftools__profiles__label__descriptor &&
        f->offset == offsetof(pb_sample, label)) {
      f->type = PROTOBUF_C_TYPE_BYTES;
      f->descriptor = NULL;
      found = true;
    }
  }
  t->sample.fields = t->fields;
  /* Without an init function protobuf-c initialises the message from the
   * descriptor it is given, so the decoded Sample names this copy. Were it
   * to name the generated descriptor, protobuf-c's cleanup after a failed
   * decode would take the label bytes for Label messages. */
  t->sample.message_init = NULL;
  return found ? 0 : -1;
}

/* Labels are a few bytes: hash them a word at a time. */
static uint64_t bytes_hash(const uint8_t *p, size_t n)
{
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h = mix64(h ^ w);
  }
  if (n) {
    /* 1..7 bytes: two overlapping loads instead of a byte loop. */
    uint32_t x = 0, y = 0;
    if (n >= 4) {
      memcpy(&x, p, 4);
      memcpy(&y, p + n - 4, 4);
    } else {
      x = (uint32_t)p[0] | (uint32_t)p[n / 2] << 8 | (uint32_t)p[n - 1] << 16;
    }
    h = mix64(h ^ x ^ (uint64_t)y << 32 ^ (uint64_t)n << 59);
  }
  return h;
}

static int labels_grow(struct labels *t)
{
  size_t cap = t->slots ? (t->mask + 1) * 2 : 256;
  struct label_slot *slots = calloc(cap, sizeof *slots);
  if (!slots)
    return -ENOMEM;
  for (size_t i = 0; t->slots && i <= t->mask; i++) {
    if (!t->slots[i].bytes)
      continue;
    size_t j = (size_t)t->slots[i].hash & (cap - 1);
    while (slots[j].bytes)
      j = (j + 1) & (cap - 1);
    slots[j] = t->slots[i];
  }
  free(t->slots);
  t->slots = slots;
  t->mask = cap - 1;
  return 0;
}

/* The decoded, validated label encoded as `bd`, from the table or decoded
 * now. Returns 0 and *out, or an error already written. */
static int label_get(struct builder *b, struct labels *t, const ProtobufCBinaryData *bd,
                     const struct label_slot **out)
{
  if ((!t->slots || t->used + 1 > (t->mask + 1) / 2) && labels_grow(t))
    return nomem(b, b->pb_arena);
  uint64_t h = bytes_hash(bd->data, bd->len);
  size_t i = (size_t)h & t->mask;
  for (; t->slots[i].bytes; i = (i + 1) & t->mask) {
    const struct label_slot *s = &t->slots[i];
    if (s->hash == h && s->len == bd->len &&
        (bd->len == 0 || memcmp(s->bytes, bd->data, bd->len) == 0)) {
      *out = s;
      return 0;
    }
  }
  struct field f = {.data = bd->data, .len = bd->len};
  const Perftools__Profiles__Label *l =
      unpack(&perftools__profiles__label__descriptor, b->pb_arena, &f);
  if (!l)
    return b->pb_arena->over_budget ? nomem(b, b->pb_arena) : decode_failed(b, " in a sample");
  const char *key, *str, *unit;
  int rc;
  if ((rc = str_at(b, l->key, &key, "a sample label key")) ||
      (rc = str_at(b, l->str, &str, "a sample label value")) ||
      (rc = str_at(b, l->num_unit, &unit, "a sample label unit")))
    return rc;
  uint8_t *copy = arena_alloc(b->pb_arena, bd->len);
  if (!copy)
    return nomem(b, b->pb_arena);
  if (bd->len)
    memcpy(copy, bd->data, bd->len);
  t->slots[i] = (struct label_slot){copy, bd->len, h, l, str, label_kind(b, l->key)};
  t->used++;
  *out = &t->slots[i];
  return 0;
}

/* ---- the samples: one or more workers ----------------------------------- */

/*
 * The Sample records are decoded by up to MAX_WORKERS workers, each taking
 * a contiguous run of them (boundaries found by the header walk) with its
 * own scratch arena, label table and frames arena; the calling thread is
 * worker 0. Workers share only what is read-only by then (strings,
 * locations, the model's sample array, each writing its own slots), so the
 * model does not depend on how many there are. Nor do errors: each worker
 * stops at the first error in its run and the error of the first failing
 * worker in file order is reported, which is the first error in the file.
 * Memory a worker allocates is bounded by construction (below) and charged
 * against the budgets when all have finished, in the same order whatever
 * the split. Inlined frames can expand a few bytes into many frames, so
 * such files are decoded by one worker allocating straight from the
 * budgeted model arena, as before.
 */
/* A 128-bit sum of int64 values: totals are exact sums, clamped once at
 * the end, so they do not depend on the order of the additions. */
struct wide {
  uint64_t lo;
  int64_t hi;
};

static void wide_add(struct wide *w, int64_t v)
{
  uint64_t lo = w->lo + (uint64_t)v;
  w->hi += (v < 0 ? -1 : 0) + (lo < w->lo);
  w->lo = lo;
}

static void wide_merge(struct wide *w, const struct wide *x)
{
  uint64_t lo = w->lo + x->lo;
  w->hi += x->hi + (lo < w->lo);
  w->lo = lo;
}

static int64_t wide_clamp(const struct wide *w)
{
  if ((w->hi == 0 && w->lo <= (uint64_t)INT64_MAX) || (w->hi == -1 && w->lo > (uint64_t)INT64_MAX))
    return (int64_t)w->lo;
  return w->hi < 0 ? INT64_MIN : INT64_MAX;
}

enum { T_BYTES, T_OBJECTS, T_INUSE_BYTES, T_INUSE_OBJECTS, T_SAMPLES, NTOTALS };

/* What every worker reads; nothing here changes while they run. */
struct sample_plan {
  const struct value_index *vi;
  const struct idmap *locs;
  const uint32_t *loc_first, *loc_count;
  enum culpert__stacks stacks;
  const char *span; /* CULPERT_STACKS_OF_SPAN */
};

struct worker {
  struct builder b; /* the loader's, with this worker's error buffer and arenas */
  const struct sample_plan *plan;
  const uint8_t *begin, *end; /* top-level fields it walks */
  size_t first, limit;        /* its samples: first .. limit-1 */
  size_t done;
  /* Frames of its samples. Without inlined frames a sample has at most one
   * frame per location id, and an id takes at least a byte on the wire, so
   * this holds at most 4 bytes per input byte (checked after the join). */
  struct arena frames;
  /* Its distinct labels, decoded (at most one per label on the wire). */
  struct arena labels;
  struct wide totals[NTOTALS];
  int rc;
  unsigned index;
  /* Lowest index of a failed worker (the count when none): a worker after
   * it stops, as its own result can no longer be reported. */
  atomic_uint *first_failed;
  pthread_t thread;
  bool started;
};

static const uint32_t no_frames[1];

/* Room for n frames (n <= UINT32_MAX / 2), 4-byte aligned. */
static uint32_t *alloc_frames(struct builder *b, size_t n)
{
  if (n == 0)
    return (uint32_t *)no_frames; /* never written */
  return arena_alloc_aligned(b->a, n * sizeof(uint32_t), sizeof(uint32_t));
}

/*
 * Check every location id of sample i and count its frames into *total;
 * the frames themselves are stored by store_frames() if the sample keeps
 * them.
 */
static int check_frames(struct builder *b, const struct sample_plan *pl, const pb_sample *s,
                        size_t i, size_t *total)
{
  size_t n = s->n_location_id, t = 0;
  if (b->one_frame_per_location && n > UINT32_MAX / 2)
    return fail(b->err, b->errlen, b->name, -EFBIG, "sample %zu has too many frames", i + 1);
  if (b->one_frame_per_location && pl->locs->dense) {
    /* Ids 1..dense: a range check per id, no lookups (the common file). */
    uint64_t dense = pl->locs->dense, bad = 0;
    for (size_t j = 0; j < n; j++)
      bad |= s->location_id[j] - 1 >= dense;
    if (!bad) {
      *total = n;
      return 0;
    }
  }
  for (size_t j = 0; j < n; j++) {
    uint32_t li;
    if (!idmap_get(pl->locs, s->location_id[j], &li))
      return fail(b->err, b->errlen, b->name, -EINVAL,
                  "sample %zu refers to location id %" PRIu64 ", which does not exist", i + 1,
                  s->location_id[j]);
    if (!b->one_frame_per_location) {
      t += pl->loc_count[li];
      if (t > UINT32_MAX / 2)
        return fail(b->err, b->errlen, b->name, -EFBIG, "sample %zu has too many frames", i + 1);
    }
  }
  *total = b->one_frame_per_location ? n : t;
  return 0;
}

/* The `total` frames of a sample whose ids check_frames() accepted. */
static int store_frames(struct builder *b, const struct sample_plan *pl, const pb_sample *s,
                        size_t total, struct culpert__sample *out)
{
  uint32_t *frames = alloc_frames(b, total);
  if (!frames)
    return nomem(b, b->a);
  size_t k = 0;
  for (size_t j = 0; j < s->n_location_id && total; j++) {
    uint32_t li = 0;
    idmap_get(pl->locs, s->location_id[j], &li);
    if (b->one_frame_per_location)
      frames[k++] = li;
    else
      for (uint32_t m = 0; m < pl->loc_count[li]; m++)
        frames[k++] = pl->loc_first[li] + m;
  }
  out->frames = frames;
  out->nframes = (uint32_t)k;
  return 0;
}

/* One decoded Sample into p->samples[i]. */
static int load_sample(struct worker *w, struct labels *lt, const pb_sample *s, size_t i)
{
  struct builder *b = &w->b;
  const struct sample_plan *pl = w->plan;
  struct culpert__sample out = {.frames = no_frames};
  size_t nframes = 0;
  int rc;

  if (s->n_value != b->pb->n_sample_type)
    return fail(b->err, b->errlen, b->name, -EINVAL,
                "sample %zu has %zu values but the profile has %zu sample types", i + 1, s->n_value,
                b->pb->n_sample_type);

  if (b->one_frame_per_location && pl->stacks == CULPERT_STACKS_ALL) {
    /* The usual case for a full load (no inlined frames): frame index =
     * location index, checked and stored in one pass. */
    size_t n = s->n_location_id;
    if (n > UINT32_MAX / 2)
      return fail(b->err, b->errlen, b->name, -EFBIG, "sample %zu has too many frames", i + 1);
    uint32_t *frames = alloc_frames(b, n);
    if (!frames)
      return nomem(b, b->a);
    uint64_t bad = 1;
    if (pl->locs->dense) {
      uint64_t dense = pl->locs->dense;
      bad = 0;
      for (size_t j = 0; j < n; j++) {
        uint64_t li = s->location_id[j] - 1;
        bad |= li >= dense;
        frames[j] = (uint32_t)li;
      }
    }
    for (size_t j = 0; bad && j < n; j++) {
      uint32_t li;
      if (!idmap_get(pl->locs, s->location_id[j], &li))
        return fail(b->err, b->errlen, b->name, -EINVAL,
                    "sample %zu refers to location id %" PRIu64 ", which does not exist", i + 1,
                    s->location_id[j]);
      frames[j] = li;
    }
    out.frames = frames;
    out.nframes = (uint32_t)n;
  } else if ((rc = check_frames(b, pl, s, i, &nframes)))
    return rc;

  /* The label field was decoded as bytes (see struct labels). */
  const ProtobufCBinaryData *encoded = (const ProtobufCBinaryData *)(const void *)s->label;
  for (size_t j = 0; j < s->n_label; j++) {
    const struct label_slot *slot = NULL;
    if ((rc = label_get(b, lt, &encoded[j], &slot)))
      return rc;
    switch (slot->kind) {
    case LABEL_SPAN_NAME:
      if (!out.span_name && slot->str[0])
        out.span_name = slot->str;
      break;
    case LABEL_SPAN_ID:
      if (!out.span_id)
        out.span_id = slot->label->num;
      break;
    case LABEL_SPAN_PARENT:
      if (!out.span_parent_id)
        out.span_parent_id = slot->label->num;
      break;
    default:
      break;
    }
  }

  bool keep = pl->stacks == CULPERT_STACKS_OF_SPAN &&
              (pl->span ? out.span_name && strcmp(out.span_name, pl->span) == 0 : !out.span_name);
  if ((keep || (pl->stacks == CULPERT_STACKS_ALL && !b->one_frame_per_location)) &&
      (rc = store_frames(b, pl, s, nframes, &out)))
    return rc;

  out.bytes = value_at(s, pl->vi->bytes);
  out.objects = value_at(s, pl->vi->objects);
  out.inuse_bytes = value_at(s, pl->vi->inuse_bytes);
  out.inuse_objects = value_at(s, pl->vi->inuse_objects);
  out.samples = value_at(s, pl->vi->samples);
  wide_add(&w->totals[T_BYTES], out.bytes);
  wide_add(&w->totals[T_OBJECTS], out.objects);
  wide_add(&w->totals[T_INUSE_BYTES], out.inuse_bytes);
  wide_add(&w->totals[T_INUSE_OBJECTS], out.inuse_objects);
  wide_add(&w->totals[T_SAMPLES], out.samples);
  b->p->samples[i] = out;
  return 0;
}

/* Forget everything in `a` but keep its newest chunk for reuse. */
static void arena_reset(struct arena *a)
{
  if (!a->head)
    return;
  struct chunk *keep = a->head, *c = keep->next;
  while (c) {
    struct chunk *next = c->next;
    free(c);
    c = next;
  }
  keep->next = NULL;
  keep->used = 0;
  a->total = keep->size;
  a->over_budget = false;
}

/* Move every chunk of `from` into `to` (behind its current chunk). */
static void arena_adopt(struct arena *to, struct arena *from)
{
  struct chunk *last = from->head;
  if (!last)
    return;
  while (last->next)
    last = last->next;
  if (to->head) {
    last->next = to->head->next;
    to->head->next = from->head;
  } else {
    to->head = from->head;
  }
  to->total += from->total;
  from->head = NULL;
  from->total = 0;
}

/*
 * Give the pages of buf[*from, to) back to the system: the input is the
 * loader's own copy and nothing reads decoded samples again, so the model
 * can grow while the input shrinks (peak memory is about the larger of the
 * two, not their sum). Only whole pages inside the range go; the rest is
 * freed with the buffer.
 */
#define RELEASE_STEP ((size_t)8 << 20)
static void release_input(const uint8_t **from, const uint8_t *to)
{
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || (page & (page - 1)))
    return;
  uintptr_t mask = (uintptr_t)page - 1;
  uintptr_t lo = ((uintptr_t)*from + mask) & ~mask, hi = (uintptr_t)to & ~mask;
  if (hi > lo) {
    madvise((void *)lo, hi - lo, MADV_DONTNEED); /* advice: failure is harmless */
    *from = (const uint8_t *)hi;
  }
}

/* A worker: decode its samples one at a time into a scratch arena. */
static void *worker_run(void *arg)
{
  struct worker *w = arg;
  struct builder *b = &w->b;
  struct arena scratch = {0};
  struct labels lt = {0};
  const uint8_t *q = w->begin, *kept = w->begin;
  struct field f;
  size_t i = w->first;

  if (labels_init(&lt)) {
    w->rc =
        fail(b->err, b->errlen, b->name, -EINVAL, "internal error: unexpected Sample descriptor");
    goto out;
  }
  while (next_field(&q, w->end, &f) == 1) {
    if (f.num != F_SAMPLE)
      continue;
    if (i == w->limit) { /* the header walk counted differently: a bug */
      w->rc = decode_failed(b, "");
      goto out;
    }
    arena_reset(&scratch);
    scratch.budget = DECODE_BASE_BYTES + f.len * DECODE_BYTES_PER_INPUT_BYTE;
    if (scratch.budget > CULPERT_DECODE_MAX_BYTES)
      scratch.budget = CULPERT_DECODE_MAX_BYTES;
    pb_sample *s = unpack(&lt.sample, &scratch, &f);
    if (!s) {
      w->rc = scratch.over_budget ? nomem(b, &scratch) : decode_failed(b, " in a sample");
      goto out;
    }
    if ((w->rc = load_sample(w, &lt, s, i)))
      goto out;
    i++;
    if (b->release_input && (size_t)(q - kept) >= RELEASE_STEP)
      release_input(&kept, q);
    if (atomic_load_explicit(w->first_failed, memory_order_relaxed) < w->index)
      goto out;
  }
  w->done = i - w->first;
out:
  if (w->rc) {
    unsigned seen = atomic_load_explicit(w->first_failed, memory_order_relaxed);
    while (seen > w->index &&
           !atomic_compare_exchange_weak_explicit(w->first_failed, &seen, w->index,
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
  }
  arena_free(&scratch);
  labels_free(&lt);
  return NULL;
}

/* CPUs this process may run on. */
static unsigned online_cpus(void)
{
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    return (unsigned)CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
}

/* How many workers: 1, 2, 4 or 8. */
static unsigned pick_workers(const struct builder *b, unsigned asked)
{
  unsigned n = 1;
  if (!b->one_frame_per_location || b->nmarks == 0)
    return 1;
  if (asked) {
    while (n * 2 <= asked && n < MAX_WORKERS)
      n *= 2;
    return n;
  }
  unsigned cpus = online_cpus();
  while (n * 2 <= cpus && n < MAX_WORKERS && b->nsamples / (n * 2) >= MIN_SAMPLES_PER_WORKER)
    n *= 2;
  return n;
}

/* The second walk: the samples, by one or more workers. */
static int load_samples(struct builder *b, const struct sample_plan *plan, unsigned asked)
{
  struct culpert__profile *p = b->p;
  struct worker *workers = NULL;
  unsigned nw = pick_workers(b, asked);
  struct wide totals[NTOTALS] = {{0, 0}};
  atomic_uint first_failed;
  size_t labels_total = 0, frames_total = 0, n = b->nsamples;
  int rc = 0;

  /* Every slot is written whole by its worker: no need to clear. */
  if (n > SIZE_MAX / sizeof *p->samples ||
      !(p->samples = arena_alloc(b->a, (n ? n : 1) * sizeof *p->samples)))
    return nomem(b, b->a);
  if (!(workers = calloc(nw, sizeof *workers)))
    return nomem(b, b->a);
  atomic_init(&first_failed, nw);
  for (unsigned k = 0; k < nw; k++) {
    struct worker *w = &workers[k];
    /* Shares of about n / nw samples, each starting at a mark. */
    size_t lo = k * (n / nw) / SAMPLE_MARK_STRIDE, hi = (k + 1) * (n / nw) / SAMPLE_MARK_STRIDE;
    w->b = *b;
    w->plan = plan;
    w->index = k;
    w->first_failed = &first_failed;
    w->begin = k == 0 ? b->buf : b->marks[lo];
    w->end = k + 1 == nw ? b->buf + b->buflen : b->marks[hi];
    w->first = k == 0 ? 0 : lo * SAMPLE_MARK_STRIDE;
    w->limit = k + 1 == nw ? n : hi * SAMPLE_MARK_STRIDE;
    w->b.pb_arena = &w->labels;
    if (b->one_frame_per_location)
      w->b.a = &w->frames;
    if (b->err && b->errlen) {
      if (!(w->b.err = calloc(1, b->errlen))) {
        rc = nomem(b, b->a);
        goto out;
      }
    }
  }
  /* Worker 0 runs here; one that cannot be started runs here after it. */
  for (unsigned k = 1; k < nw; k++)
    workers[k].started = pthread_create(&workers[k].thread, NULL, worker_run, &workers[k]) == 0;
  worker_run(&workers[0]);
  for (unsigned k = 1; k < nw; k++) {
    if (workers[k].started)
      pthread_join(workers[k].thread, NULL);
    else
      worker_run(&workers[k]);
  }

  for (unsigned k = 0; k < nw; k++) {
    struct worker *w = &workers[k];
    if (w->rc) {
      if (b->err && b->errlen)
        snprintf(b->err, b->errlen, "%s", w->b.err);
      rc = w->rc;
      goto out;
    }
    p->nsamples += w->done;
    for (int t = 0; t < NTOTALS; t++)
      wide_merge(&totals[t], &w->totals[t]);
    labels_total += w->labels.total;
    frames_total += w->frames.total;
  }
  /* The budgets, charged with what the workers allocated. */
  if (b->pb_arena->budget && labels_total > b->pb_arena->budget - b->pb_arena->total) {
    b->pb_arena->over_budget = true;
    rc = nomem(b, b->pb_arena);
    goto out;
  }
  if (b->a->budget && frames_total > b->a->budget - b->a->total) {
    b->a->over_budget = true;
    rc = nomem(b, b->a);
    goto out;
  }
  for (unsigned k = 0; k < nw; k++)
    arena_adopt(b->a, &workers[k].frames);
  p->total_bytes = wide_clamp(&totals[T_BYTES]);
  p->total_objects = wide_clamp(&totals[T_OBJECTS]);
  p->total_inuse_bytes = wide_clamp(&totals[T_INUSE_BYTES]);
  p->total_inuse_objects = wide_clamp(&totals[T_INUSE_OBJECTS]);
  p->total_samples = wide_clamp(&totals[T_SAMPLES]);
out:
  for (unsigned k = 0; workers && k < nw; k++) {
    arena_free(&workers[k].frames);
    arena_free(&workers[k].labels);
    if (workers[k].b.err != b->err)
      free(workers[k].b.err);
  }
  free(workers);
  return rc;
}

static int build_model(struct builder *b, const struct culpert__load_opts *o)
{
  struct value_index vi = {-1, -1, -1, -1, -1};
  struct idmap locs = {0};
  uint32_t *loc_first = NULL, *loc_count = NULL;
  int rc;
  if ((rc = decode_header(b)) || (rc = check_strings(b)) || (rc = check_header(b)) ||
      (rc = pick_values(b, &vi)) || (rc = load_comments(b)) ||
      (rc = load_locations(b, &locs, &loc_first, &loc_count)))
    return rc;
  struct sample_plan plan = {.vi = &vi,
                             .locs = &locs,
                             .loc_first = loc_first,
                             .loc_count = loc_count,
                             .stacks = o->stacks,
                             .span = o->span};
  return load_samples(b, &plan, o->threads);
}

/* ---- entry points ------------------------------------------------------- */

/*
 * The loader proper. `*owned`, when not NULL, is a malloc'd copy of `data`
 * that is freed (and set to NULL) as soon as it has been inflated, so a
 * gzipped file and its decompressed form are not both held while the model
 * is built.
 */
static int load(const void *data, size_t len, unsigned char **owned, const char *name,
                const struct culpert__load_opts *opts, struct culpert__profile **out, char *err,
                size_t errlen)
{
  static const struct culpert__load_opts all = {0};
  unsigned char *inflated = NULL;
  const unsigned char *raw = data;
  size_t rawlen = len;
  struct arena pb_arena = {0};
  struct arena *model = NULL;
  struct culpert__profile *p = NULL;
  bool gzipped = is_gzip(data, len);
  int rc = 0;

  *out = NULL;
  if (err && errlen)
    err[0] = '\0';
  if (len == 0) {
    rc = fail(err, errlen, name, -EINVAL, "file is empty, not a profile");
    goto out;
  }
  if (len > CULPERT_PROFILE_MAX_BYTES) {
    rc = fail(err, errlen, name, -EFBIG, "file is larger than %u MiB (CULPERT_PROFILE_MAX_BYTES)",
              CULPERT_PROFILE_MAX_BYTES >> 20);
    goto out;
  }
  if (gzipped) {
    rc = gunzip(raw, len, CULPERT_PROFILE_MAX_BYTES, name, &inflated, &rawlen, err, errlen);
    if (rc)
      goto out;
    raw = inflated;
    if (owned) {
      free(*owned);
      *owned = NULL;
    }
    if (rawlen == 0) {
      rc = fail(err, errlen, name, -EINVAL, "gzip data is empty, not a profile");
      goto out;
    }
  }

  size_t budget = DECODE_BASE_BYTES + rawlen * DECODE_BYTES_PER_INPUT_BYTE;
  if (budget > CULPERT_DECODE_MAX_BYTES)
    budget = CULPERT_DECODE_MAX_BYTES;
  pb_arena.budget = budget;
  model = calloc(1, sizeof *model);
  if (!model) {
    rc = fail(err, errlen, name, -ENOMEM, "out of memory loading the profile");
    goto out;
  }
  model->budget = budget;
  p = arena_calloc(model, 1, sizeof *p);
  if (!p || !(p->path = arena_strdup(model, name))) {
    rc = fail(err, errlen, name, -ENOMEM, "out of memory loading the profile");
    goto out;
  }
  p->arena_ = model;
  struct builder b = {.p = p,
                      .a = model,
                      .pb_arena = &pb_arena,
                      .buf = raw,
                      .buflen = rawlen,
                      .gzipped = gzipped || (opts && opts->inflated),
                      .release_input = gzipped || owned,
                      .name = name,
                      .err = err,
                      .errlen = errlen};
  rc = build_model(&b, opts ? opts : &all);
out:
  free(inflated);
  arena_free(&pb_arena);
  if (rc) {
    if (model) {
      arena_free(model);
      free(model);
    }
    return rc;
  }
  *out = p;
  return 0;
}

int culpert__profile_load_buffer_with(const void *data, size_t len, const char *name,
                                      const struct culpert__load_opts *opts,
                                      struct culpert__profile **out, char *err, size_t errlen)
{
  return load(data, len, NULL, name, opts, out, err, errlen);
}

int culpert__profile_load_buffer(const void *data, size_t len, const char *name,
                                 struct culpert__profile **out, char *err, size_t errlen)
{
  return load(data, len, NULL, name, NULL, out, err, errlen);
}

int culpert__profile_load(const char *path, struct culpert__profile **out, char *err, size_t errlen)
{
  return culpert__profile_load_with(path, NULL, out, err, errlen);
}

/* Read the file at `path` ("-" is stdin, called `name` in messages) into
 * a malloc'd buffer, refusing more than CULPERT_PROFILE_MAX_BYTES. */
static int read_path(const char *path, const char *name, unsigned char **buf, size_t *len,
                     char *err, size_t errlen)
{
  bool is_stdin = strcmp(path, "-") == 0;
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  if (!f)
    return fail(err, errlen, name, -errno, "cannot open: %s", strerror(errno));
  int rc = read_all(f, CULPERT_PROFILE_MAX_BYTES, buf, len);
  if (!is_stdin)
    fclose(f);
  if (rc == -EFBIG)
    return fail(err, errlen, name, rc, "file is larger than %u MiB (CULPERT_PROFILE_MAX_BYTES)",
                CULPERT_PROFILE_MAX_BYTES >> 20);
  if (rc)
    return fail(err, errlen, name, rc, "cannot read: %s", strerror(-rc));
  return 0;
}

int culpert__profile_read_plain(const char *path, unsigned char **out, size_t *outlen,
                                bool *inflated, char *err, size_t errlen)
{
  unsigned char *buf = NULL;
  size_t len = 0;
  const char *name = strcmp(path, "-") == 0 ? "standard input" : path;

  *out = NULL;
  *outlen = 0;
  *inflated = false;
  int rc = read_path(path, name, &buf, &len, err, errlen);
  if (rc)
    return rc;
  if (len == 0) {
    free(buf);
    return fail(err, errlen, name, -EINVAL, "file is empty, not a profile");
  }
  if (!is_gzip(buf, len)) {
    *out = buf;
    *outlen = len;
    return 0;
  }
  *inflated = true;
  rc = gunzip(buf, len, CULPERT_PROFILE_MAX_BYTES, name, out, outlen, err, errlen);
  if (rc == 0 && *outlen == 0) {
    free(*out);
    *out = NULL;
    rc = fail(err, errlen, name, -EINVAL, "gzip data is empty, not a profile");
  }
  free(buf);
  return rc;
}

int culpert__profile_load_with(const char *path, const struct culpert__load_opts *opts,
                               struct culpert__profile **out, char *err, size_t errlen)
{
  unsigned char *buf = NULL;
  size_t len = 0;
  bool is_stdin = strcmp(path, "-") == 0;
  const char *name = is_stdin ? "standard input" : path;

  *out = NULL;
  int rc = read_path(path, name, &buf, &len, err, errlen);
  if (rc)
    return rc;
  rc = load(buf, len, &buf, name, opts, out, err, errlen);
  if (rc == 0 && is_stdin) {
    /* profile->path is what the caller passed. */
    (*out)->path = arena_strdup((*out)->arena_, path);
    if (!(*out)->path) {
      culpert__profile_free(*out);
      *out = NULL;
      rc = fail(err, errlen, name, -ENOMEM, "out of memory loading the profile");
    }
  }
  free(buf);
  return rc;
}

/* Free a model arena and the profiles it owns. */
static void model_free(struct arena *a)
{
  struct culpert__profile **parts = a->parts;
  size_t nparts = a->nparts;
  arena_free(a);
  free(a);
  for (size_t i = 0; i < nparts; i++)
    culpert__profile_free(parts[i]);
  free(parts);
}

void culpert__profile_free(struct culpert__profile *p)
{
  /* p itself lives in its arena. */
  if (p)
    model_free(p->arena_);
}

/* ---- merging profiles ---------------------------------------------------- */

/* Span ids of one file -> ids unique across the merge (open addressing;
 * key 0 = empty, as 0 means "no id" in the model). */
struct span_remap {
  int64_t *keys, *vals;
  size_t cap;
};

static int64_t remap_span(struct span_remap *m, int64_t id, int64_t *next)
{
  if (id == 0)
    return 0;
  size_t i = (size_t)((uint64_t)id * UINT64_C(0x9E3779B97F4A7C15) >> 32) & (m->cap - 1);
  while (m->keys[i] != 0 && m->keys[i] != id)
    i = (i + 1) & (m->cap - 1);
  if (m->keys[i] == 0) {
    m->keys[i] = id;
    m->vals[i] = ++*next;
  }
  return m->vals[i];
}

/* *sum += v, clamped to the int64 range like the loader's totals. */
static void sum_sat(int64_t *sum, int64_t v)
{
  if (__builtin_add_overflow(*sum, v, sum))
    *sum = v > 0 ? INT64_MAX : INT64_MIN;
}

static int add_size(size_t *sum, size_t n)
{
  return __builtin_add_overflow(*sum, n, sum) ? -EOVERFLOW : 0;
}

int culpert__profile_merge(struct culpert__profile **in, size_t n, struct culpert__profile **out,
                           char *err, size_t errlen)
{
  struct arena *a = calloc(1, sizeof *a);
  struct culpert__profile **parts = malloc(n * sizeof *parts);
  struct culpert__profile *m = NULL;
  size_t nsamples = 0, nframes = 0, nrefs = 0, paths = 0;
  *out = NULL;
  if (!a || !parts || n == 0) {
    free(a);
    free(parts);
    for (size_t i = 0; i < n; i++)
      culpert__profile_free(in[i]);
    snprintf(err, errlen, n == 0 ? "no profiles to merge" : "out of memory merging profiles");
    return n == 0 ? -EINVAL : -ENOMEM;
  }
  memcpy(parts, in, n * sizeof *parts);
  a->parts = parts;
  a->nparts = n;
  for (size_t i = 0; i < n; i++) {
    const struct culpert__profile *p = in[i];
    if (add_size(&nsamples, p->nsamples) || add_size(&nframes, p->nframes) ||
        add_size(&paths, strlen(p->path) + 2))
      goto too_big;
    for (size_t k = 0; k < p->nsamples; k++)
      if (add_size(&nrefs, p->samples[k].nframes))
        goto too_big;
  }
  if (nframes > UINT32_MAX)
    goto too_big;
  m = arena_calloc(a, 1, sizeof *m);
  if (!m)
    goto nomem;
  m->arena_ = a;
  m->samples = arena_calloc(a, nsamples ? nsamples : 1, sizeof *m->samples);
  m->frames = arena_calloc(a, nframes ? nframes : 1, sizeof *m->frames);
  uint32_t *refs = arena_calloc(a, nrefs ? nrefs : 1, sizeof *refs);
  char *path = arena_alloc(a, paths);
  const char **part_paths = arena_calloc(a, n, sizeof *part_paths);
  struct culpert__part *part = arena_calloc(a, n, sizeof *part);
  if (!m->samples || !m->frames || !refs || !path || !part_paths || !part)
    goto nomem;

  /* Header: the first file's, with what the others change. Values are
   * unbiased estimates in every file, so they add up whatever the rates. */
  const struct culpert__profile *first = in[0];
  m->producer = first->producer;
  m->rate = first->rate;
  m->has_objects = m->has_inuse = m->has_samples = true;
  int64_t start = INT64_MAX, end = INT64_MIN;
  path[0] = '\0';
  int64_t next_id = 0;
  for (size_t i = 0; i < n; i++) {
    const struct culpert__profile *p = in[i];
    if (p->rate != first->rate)
      m->mixed_rates = true;
    m->has_objects &= p->has_objects;
    m->has_inuse &= p->has_inuse;
    m->has_samples &= p->has_samples;
    /* Taken at time_nanos, covering the duration_nanos before it
     * (profile-format.md); time_nanos > 0, so the start cannot overflow. */
    if (p->time_nanos > 0) {
      int64_t s = p->time_nanos - (p->duration_nanos > 0 ? p->duration_nanos : 0);
      start = s < start ? s : start;
      end = p->time_nanos > end ? p->time_nanos : end;
    }
    if (i > 0)
      strcat(path, ", ");
    strcat(path, p->path);
    part_paths[i] = p->path;

    /* Spans are renumbered so no two files share an id; the tree still
     * merges spans of the same name under the same parent name. */
    struct span_remap map = {.cap = 16};
    while (map.cap < 2 * p->nsamples * 2 + 16)
      map.cap *= 2;
    map.keys = calloc(map.cap, sizeof *map.keys);
    map.vals = calloc(map.cap, sizeof *map.vals);
    if (!map.keys || !map.vals) {
      free(map.keys);
      free(map.vals);
      goto nomem;
    }
    uint32_t frame_base = (uint32_t)m->nframes;
    memcpy(m->frames + m->nframes, p->frames, p->nframes * sizeof *p->frames);
    m->nframes += p->nframes;
    for (size_t k = 0; k < p->nsamples; k++) {
      struct culpert__sample *d = &m->samples[m->nsamples++];
      *d = p->samples[k];
      d->span_id = remap_span(&map, d->span_id, &next_id);
      d->span_parent_id = remap_span(&map, d->span_parent_id, &next_id);
      for (uint32_t j = 0; j < d->nframes; j++)
        refs[j] = d->frames[j] + frame_base;
      d->frames = refs;
      refs += d->nframes;
    }
    free(map.keys);
    free(map.vals);
    part[i].rate = p->rate;
    part[i].end = m->nsamples;
    sum_sat(&m->total_bytes, p->total_bytes);
    sum_sat(&m->total_objects, p->total_objects);
    sum_sat(&m->total_inuse_bytes, p->total_inuse_bytes);
    sum_sat(&m->total_inuse_objects, p->total_inuse_objects);
    sum_sat(&m->total_samples, p->total_samples);
  }
  /* A kind of value counts only when every file has it: sample counts
   * from some files only (a Go profile among culpert's) would be a part
   * presented as the whole. */
  if (!m->has_samples) {
    for (size_t k = 0; k < m->nsamples; k++)
      m->samples[k].samples = 0;
    m->total_samples = 0;
  }
  /* Taken when the latest file was, covering from the earliest start (at
   * most INT64_MAX: hostile times and durations may span more). */
  if (start != INT64_MAX) {
    m->time_nanos = end;
    if (__builtin_sub_overflow(end, start, &m->duration_nanos))
      m->duration_nanos = INT64_MAX;
  }
  m->path = path;
  m->nparts = n;
  m->part_paths = part_paths;
  m->parts = part;
  *out = m;
  return 0;

too_big:
  snprintf(err, errlen, "the %zu profiles are too large to merge", n);
  model_free(a);
  return -EOVERFLOW;
nomem:
  snprintf(err, errlen, "out of memory merging %zu profiles", n);
  model_free(a);
  return -ENOMEM;
}

int64_t culpert__profile_sample_rate(const struct culpert__profile *p, size_t i)
{
  if (p->nparts == 0 || !p->mixed_rates)
    return p->rate;
  size_t lo = 0, hi = p->nparts - 1; /* the first file whose end lies past i */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->parts[mid].end > i)
      hi = mid;
    else
      lo = mid + 1;
  }
  return p->parts[lo].rate;
}

double culpert__estimate_var(int64_t rate, int64_t bytes)
{
  return rate > 0 && bytes > 0 ? (double)rate * (double)bytes : 0.0;
}

/* Whether `name` is a temporary file of a profile being written:
 * NAME.tmp.PID, as libculpert and this CLI write them before a rename. */
static bool temporary_name(const char *name)
{
  const char *last = NULL;
  for (const char *t = strstr(name, ".tmp."); t; t = strstr(t + 1, ".tmp."))
    last = t;
  return last && last[5] != '\0' && strspn(last + 5, "0123456789") == strlen(last + 5);
}

/* NAME.peak.pb.gz: the in-use-at-peak profile CULPERT_PEAK writes beside
 * NAME.pb.gz, with the same allocations: a directory leaves it out, or
 * its allocations would count twice. */
static bool peak_name(const char *name)
{
  static const char ext[] = ".peak.pb.gz";
  size_t n = strlen(name);
  return n > sizeof ext - 1 && strcmp(name + n - (sizeof ext - 1), ext) == 0;
}

static int name_cmp(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append `s` (taken over) to the list v[0..*n-1] of capacity *cap. */
static int push_path(char ***v, size_t *n, size_t *cap, char *s)
{
  if (*n == *cap) {
    size_t ncap = *cap ? 2 * *cap : 16;
    char **nv = realloc(*v, ncap * sizeof *nv);
    if (!nv) {
      free(s);
      return -ENOMEM;
    }
    *v = nv;
    *cap = ncap;
  }
  (*v)[(*n)++] = s;
  return 0;
}

/* Append the profiles of directory `dir` to v: its regular files but
 * hidden ones and profiles being written, in name order. */
static int push_dir(const char *dir, char ***v, size_t *n, size_t *cap, char *err, size_t errlen)
{
  DIR *d = opendir(dir);
  if (!d) {
    int e = errno;
    snprintf(err, errlen, "cannot read directory %s: %s", dir, strerror(e));
    return -e;
  }
  size_t first = *n, peaks = 0;
  int rc = 0;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    struct stat st;
    char *full;
    if (e->d_name[0] == '.' || temporary_name(e->d_name))
      continue;
    if (peak_name(e->d_name)) {
      peaks++;
      continue;
    }
    if (asprintf(&full, "%s/%s", dir, e->d_name) < 0) {
      rc = -ENOMEM;
    } else if (stat(full, &st) != 0 || !S_ISREG(st.st_mode)) {
      free(full);
    } else {
      rc = push_path(v, n, cap, full);
    }
  }
  closedir(d);
  if (rc == -ENOMEM)
    snprintf(err, errlen, "out of memory listing %s", dir);
  else if (*n == first && peaks > 0) {
    snprintf(err, errlen,
             "%s: a directory of in-use-at-peak profiles only (NAME.peak.pb.gz), which a "
             "directory leaves out; name the files instead",
             dir);
    rc = -ENOENT;
  } else if (*n == first) {
    snprintf(err, errlen, "%s: a directory with no profile in it", dir);
    rc = -ENOENT;
  }
  if (rc == 0)
    qsort(*v + first, *n - first, sizeof **v, name_cmp);
  return rc;
}

struct file_id {
  dev_t dev;
  ino_t ino;
  size_t at; /* index in the list */
};

static int file_id_cmp(const void *a, const void *b)
{
  const struct file_id *x = a, *y = b;
  if (x->dev != y->dev)
    return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino)
    return x->ino < y->ino ? -1 : 1;
  return x->at < y->at ? -1 : x->at > y->at;
}

/* Keep the first of the names in v[0..n-1] that reach one file (a file
 * named twice, or named and in a directory named too), whose allocations
 * would otherwise count twice; a note on `notes`, when not NULL, names
 * each one dropped. Returns the new count (n when out of memory). */
static size_t drop_repeats(char **v, size_t n, FILE *notes)
{
  struct file_id *ids = malloc(n * sizeof *ids);
  const char **first = calloc(n, sizeof *first);
  size_t nids = 0, kept = 0;
  if (!ids || !first) {
    free(ids);
    free(first);
    return n;
  }
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (strcmp(v[i], "-") != 0 && stat(v[i], &st) == 0)
      ids[nids++] = (struct file_id){st.st_dev, st.st_ino, i};
  }
  qsort(ids, nids, sizeof *ids, file_id_cmp);
  for (size_t k = 1, run = 0; k < nids; k++) {
    if (ids[k].dev != ids[run].dev || ids[k].ino != ids[run].ino)
      run = k;
    else
      first[ids[k].at] = v[ids[run].at];
  }
  for (size_t i = 0; i < n; i++) {
    if (!first[i]) {
      v[kept++] = v[i];
      continue;
    }
    if (notes && strcmp(v[i], first[i]) == 0)
      fprintf(notes, "culpert: note: %s is named twice; it is read once\n", v[i]);
    else if (notes)
      fprintf(notes, "culpert: note: %s is the same file as %s; it is read once\n", v[i], first[i]);
    free(v[i]);
  }
  free(ids);
  free(first);
  return kept;
}

/* paths[0..n-1] with each directory replaced by the profiles in it and
 * every file but once left out (noted on `notes`). */
static int expand_paths(const char *const *paths, size_t n, FILE *notes, char ***out, size_t *nout,
                        char *err, size_t errlen)
{
  char **v = NULL;
  size_t nv = 0, cap = 0, nstdin = 0;
  int rc = 0;
  for (size_t i = 0; i < n; i++)
    nstdin += strcmp(paths[i], "-") == 0;
  if (nstdin > 1) {
    snprintf(err, errlen, "standard input ('-') can be read only once");
    return -EINVAL;
  }
  for (size_t i = 0; i < n && rc == 0; i++) {
    struct stat st;
    if (strcmp(paths[i], "-") != 0 && stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      rc = push_dir(paths[i], &v, &nv, &cap, err, errlen);
    } else {
      char *copy = strdup(paths[i]);
      rc = copy ? push_path(&v, &nv, &cap, copy) : -ENOMEM;
      if (rc != 0)
        snprintf(err, errlen, "out of memory");
    }
  }
  if (rc != 0) {
    for (size_t i = 0; i < nv; i++)
      free(v[i]);
    free(v);
    return rc;
  }
  *out = v;
  *nout = drop_repeats(v, nv, notes);
  return 0;
}

int culpert__profile_expand_paths(const char *const *paths, size_t n, char ***out, size_t *nout,
                                  char *err, size_t errlen)
{
  return expand_paths(paths, n, stderr, out, nout, err, errlen);
}

void culpert__profile_paths_free(char **paths, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free(paths[i]);
  free(paths);
}

const char *culpert__profile_input_dir(const char *output, const char *const *inputs, size_t n)
{
  char target[PATH_MAX], dir[PATH_MAX];
  struct stat st, d;
  if (lstat(output, &st) == 0 && S_ISLNK(st.st_mode) && realpath(output, target) != NULL)
    output = target;
  if ((stat(output, &st) == 0 && !S_ISREG(st.st_mode)) || strlen(output) >= sizeof dir)
    return NULL; /* a device or FIFO: written through, no file appears */
  snprintf(dir, sizeof dir, "%s", output);
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == dir)
    dir[1] = '\0'; /* "/x" is in "/" */
  else
    *slash = '\0';
  if (stat(dir, &d) != 0)
    return NULL;
  for (size_t i = 0; i < n; i++)
    if (strcmp(inputs[i], "-") != 0 && stat(inputs[i], &st) == 0 && S_ISDIR(st.st_mode) &&
        st.st_dev == d.st_dev && st.st_ino == d.st_ino)
      return inputs[i];
  return NULL;
}

int culpert__profile_paths_name(const char *const *paths, size_t n, const char *file, char *which,
                                size_t len)
{
  struct stat out, st;
  char **v, err[256];
  size_t nv;
  int found = 0;
  if (stat(file, &out) != 0 || !S_ISREG(out.st_mode) ||
      expand_paths(paths, n, NULL, &v, &nv, err, sizeof err) != 0)
    return 0;
  for (size_t i = 0; i < nv && !found; i++) {
    if (strcmp(v[i], "-") != 0 && stat(v[i], &st) == 0 && st.st_dev == out.st_dev &&
        st.st_ino == out.st_ino) {
      snprintf(which, len, "%s", v[i]);
      found = 1;
    }
  }
  culpert__profile_paths_free(v, nv);
  return found;
}

int culpert__profile_load_all(const char *const *given, size_t ngiven,
                              const struct culpert__load_opts *opts,
                              culpert__profile_check_fn check, const void *arg,
                              struct culpert__profile **out, char *err, size_t errlen)
{
  char **paths;
  size_t n;
  *out = NULL;
  int rc = expand_paths(given, ngiven, stderr, &paths, &n, err, errlen);
  if (rc != 0)
    return rc;
  struct culpert__profile **v = calloc(n ? n : 1, sizeof *v);
  if (!v) {
    for (size_t i = 0; i < n; i++)
      free(paths[i]);
    free(paths);
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  for (size_t i = 0; i < n && rc == 0; i++) {
    rc = culpert__profile_load_with(paths[i], opts, &v[i], err, errlen);
    if (rc == 0 && check)
      rc = check(v[i], arg, err, errlen);
  }
  if (rc != 0) {
    for (size_t i = 0; i < n; i++)
      culpert__profile_free(v[i]); /* NULL for those not loaded */
  } else if (n == 1) {
    *out = v[0];
  } else {
    rc = culpert__profile_merge(v, n, out, err, errlen);
  }
  free(v);
  for (size_t i = 0; i < n; i++)
    free(paths[i]);
  free(paths);
  return rc;
}

const char *culpert__profile_prop(const struct culpert__profile *p, const char *key)
{
  for (size_t i = 0; i < p->nprops; i++)
    if (strcmp(p->props[i].key, key) == 0)
      return p->props[i].value;
  return NULL;
}

const char *culpert__profile_inuse_when(const struct culpert__profile *p, char *buf)
{
  const char *s = culpert__profile_prop(p, "culpert.inuse_at_peak");
  snprintf(buf, CULPERT_INUSE_WHEN_MAX, "%s",
           s == NULL ? "when the profile was written" : "at the in-use peak");
  if (s == NULL)
    return buf;
  if (strchr(s, ',') != NULL) {
    snprintf(buf, CULPERT_INUSE_WHEN_MAX, "at each process's in-use peak");
    return buf;
  }
  char *end, when[32];
  errno = 0;
  long long ns = strtoll(s, &end, 10);
  time_t t = (time_t)(ns / 1000000000);
  struct tm tm;
  if (errno == 0 && end != s && *end == '\0' && ns > 0 && gmtime_r(&t, &tm) &&
      strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm))
    snprintf(buf, CULPERT_INUSE_WHEN_MAX, "at the in-use peak, %s", when);
  return buf;
}

bool culpert__profile_exact(const struct culpert__profile *p)
{
  for (size_t i = 0; i < p->nparts; i++)
    if (p->parts[i].rate > 0)
      return false;
  return p->rate == 0;
}

int culpert__profile_peak_inuse(const struct culpert__profile *p, int64_t *bytes)
{
  const char *s = culpert__profile_prop(p, "culpert.peak_inuse_bytes");
  if (s == NULL)
    return 0;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 0)
    return -1;
  *bytes = (int64_t)v;
  return 1;
}
