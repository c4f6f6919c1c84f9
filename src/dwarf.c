/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * dwarf.c: file, line and inlined calls of code addresses from DWARF.
 *
 * Runs in the profile writer (never inside malloc). All input is untrusted
 * bytes from files on disk: every read goes through a bounds-checked
 * reader, lengths are checked before anything is allocated from them,
 * recursion (DW_FORM_indirect, abstract origin chains) is capped, and a
 * malformed unit is skipped without affecting the others.
 */
#include "dwarf.h"
#include "demangle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------- */
/* Pool                                                                    */

/* Takes ownership of `item`; NULL (and `item` freed) when out of memory. */
static void *pool_keep(struct culpert__pool *p, void *item)
{
  if (!item)
    return NULL;
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 64;
    void **g = realloc(p->items, cap * sizeof *g);
    if (!g) {
      free(item);
      return NULL;
    }
    p->items = g;
    p->cap = cap;
  }
  p->items[p->n++] = item;
  return item;
}

static const char *pool_strdup(struct culpert__pool *p, const char *s)
{
  return s ? pool_keep(p, strdup(s)) : NULL;
}

void culpert__pool_free(struct culpert__pool *p)
{
  for (size_t i = 0; i < p->n; i++)
    free(p->items[i]);
  free(p->items);
  p->items = NULL;
  p->n = p->cap = 0;
}

/* ---------------------------------------------------------------------- */
/* Bounds-checked reader; errors are sticky                                */

struct rd {
  const unsigned char *p;
  const unsigned char *end;
  int err;
};

static uint64_t rd_u(struct rd *r, size_t n)
{
  uint64_t v = 0;
  if (r->err || n > 8 || (size_t)(r->end - r->p) < n) {
    r->err = 1;
    return 0;
  }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  /* The common sizes as single loads (address tables are read whole). */
  if (n == 8) {
    memcpy(&v, r->p, 8);
    r->p += 8;
    return v;
  }
  if (n == 4) {
    uint32_t x;
    memcpy(&x, r->p, 4);
    r->p += 4;
    return x;
  }
#endif
  for (size_t i = 0; i < n; i++)
    v |= (uint64_t)r->p[i] << (8 * i);
  r->p += n;
  return v;
}

static uint64_t rd_uleb(struct rd *r)
{
  uint64_t v = 0;
  for (unsigned shift = 0; !r->err; shift += 7) {
    if (r->p >= r->end) {
      r->err = 1;
      break;
    }
    unsigned char b = *r->p++;
    if (shift < 64)
      v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80))
      break;
  }
  return v;
}

static int64_t rd_sleb(struct rd *r)
{
  uint64_t v = 0;
  unsigned shift = 0;
  unsigned char b = 0;
  do {
    if (r->err || r->p >= r->end) {
      r->err = 1;
      return 0;
    }
    b = *r->p++;
    if (shift < 64)
      v |= (uint64_t)(b & 0x7f) << shift;
    shift += 7;
  } while (b & 0x80);
  if (shift < 64 && (b & 0x40))
    v |= ~(uint64_t)0 << shift;
  return (int64_t)v;
}

static const char *rd_cstr(struct rd *r)
{
  if (r->err)
    return NULL;
  const unsigned char *nul = memchr(r->p, '\0', (size_t)(r->end - r->p));
  if (!nul) {
    r->err = 1;
    return NULL;
  }
  const char *s = (const char *)r->p;
  r->p = nul + 1;
  return s;
}

static void rd_skip(struct rd *r, uint64_t n)
{
  if (r->err || (uint64_t)(r->end - r->p) < n) {
    r->err = 1;
    return;
  }
  r->p += n;
}

/* Makes [0, upto) of a lazily filled section readable; returns how many
 * bytes from its start are readable now (at most its length). */
static size_t sec_need(const struct culpert__dwarf_section *sec, uint64_t upto)
{
  if (!sec->lazy || !sec->p)
    return sec->len;
  size_t have = sec->lazy->fill(sec->lazy, upto < sec->len ? (size_t)upto : sec->len);
  return have < sec->len ? have : sec->len;
}

/* Longest unit header before its length is known (64-bit DWARF). */
#define UNIT_HEADER 12u

/* A unit's initial length: 32-bit, or 0xffffffff then a 64-bit length.
 * Returns the unit's offset size (4 or 8) with *len set, or 0 when the
 * length cannot be read or runs past the section. */
static int unit_length(struct rd *r, uint64_t *len)
{
  int offsize = 4;
  *len = rd_u(r, 4);
  if (*len == 0xffffffff) {
    offsize = 8;
    *len = rd_u(r, 8);
  }
  if (r->err || *len > (uint64_t)(r->end - r->p))
    return 0;
  return offsize;
}

/* A reader over [off, end of section). For a section read piecewise only
 * a unit header's worth is made readable: the caller asks for the rest
 * with sec_need once it knows how much it needs. */
static struct rd rd_at(const struct culpert__dwarf_section *sec, uint64_t off)
{
  sec_need(sec, sec->lazy && sec->lazy->piecewise ? off + UNIT_HEADER : sec->len);
  struct rd r = {NULL, NULL, 1};
  if (sec->p && off <= sec->len) {
    r.p = sec->p + off;
    r.end = sec->p + sec->len;
    r.err = 0;
  }
  return r;
}

/* A NUL-terminated string at `off` in a string section, or NULL. */
static const char *section_str(const struct culpert__dwarf_section *sec, uint64_t off)
{
  if (!sec->p || off >= sec->len)
    return NULL;
  /* Strings are short: ask for a little past `off`, more only when the
   * NUL is not there yet. */
  size_t avail = sec_need(sec, off + 256);
  while (avail < sec->len && (avail <= off || !memchr(sec->p + off, '\0', avail - off)))
    avail = sec_need(sec, avail + (avail - off) + 4096);
  if (avail <= off || !memchr(sec->p + off, '\0', avail - off))
    return NULL;
  return (const char *)sec->p + off;
}

/* ---------------------------------------------------------------------- */
/* Wanted addresses                                                        */

struct want {
  uint64_t vaddr;
  size_t index; /* into the caller's arrays */
};

static int want_cmp(const void *a, const void *b)
{
  const struct want *x = a, *y = b;
  return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* First wanted address >= v. */
static size_t lower_bound(const struct want *w, size_t n, uint64_t v)
{
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (w[mid].vaddr < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* ---------------------------------------------------------------------- */
/* Line program headers                                                    */

/* A directory or file entry. Its name is either in the header itself
 * (`name`) or a string of .debug_line_str / .debug_str at `str_off` in
 * `str_sec`, read only when the file is used: a compressed string section
 * is then inflated only as far as the strings a profile needs. */
struct lentry {
  const char *name;
  const struct culpert__dwarf_section *str_sec;
  uint64_t str_off;
  uint64_t dir;
};

static const char *lentry_name(const struct lentry *e)
{
  return e->str_sec ? section_str(e->str_sec, e->str_off) : e->name;
}

struct lhdr {
  int version;
  unsigned min_inst;
  int line_base;
  unsigned line_range;
  unsigned opcode_base;
  unsigned char std_len[256];
  struct lentry *dirs, *files;
  size_t ndirs, nfiles;
  const char **cache; /* formatted path per file index (pool strings) */
  struct rd prog;     /* the line number program */
};

/* Reads one attribute of a DWARF 5 entry format. */
static int entry_form(struct rd *r, uint64_t form, int offsize, const struct culpert__dwarf *d,
                      struct lentry *sv, uint64_t *nv)
{
  switch (form) {
  case 0x08: /* DW_FORM_string */
    sv->name = rd_cstr(r);
    return 0;
  case 0x1f: /* DW_FORM_line_strp */
    sv->str_sec = &d->line_str;
    sv->str_off = rd_u(r, (size_t)offsize);
    return 0;
  case 0x0e: /* DW_FORM_strp */
    sv->str_sec = &d->str;
    sv->str_off = rd_u(r, (size_t)offsize);
    return 0;
  case 0x0b: /* DW_FORM_data1 */
  case 0x25: /* DW_FORM_strx1 (no string offsets base here: no name) */
    *nv = rd_u(r, 1);
    return 0;
  case 0x05: /* DW_FORM_data2 */
  case 0x26: /* DW_FORM_strx2 */
    *nv = rd_u(r, 2);
    return 0;
  case 0x27: /* DW_FORM_strx3 */
    *nv = rd_u(r, 3);
    return 0;
  case 0x06: /* DW_FORM_data4 */
  case 0x28: /* DW_FORM_strx4 */
    *nv = rd_u(r, 4);
    return 0;
  case 0x07: /* DW_FORM_data8 */
    *nv = rd_u(r, 8);
    return 0;
  case 0x1e: /* DW_FORM_data16 (MD5) */
    rd_skip(r, 16);
    return 0;
  case 0x0f: /* DW_FORM_udata */
  case 0x1a: /* DW_FORM_strx */
    *nv = rd_uleb(r);
    return 0;
  case 0x09: /* DW_FORM_block */
    rd_skip(r, rd_uleb(r));
    return 0;
  default:
    return -1;
  }
}

/* A DWARF 5 directory or file table. */
static struct lentry *entries_v5(struct rd *r, int offsize, const struct culpert__dwarf *d,
                                 size_t *count)
{
  uint64_t formats[16][2];
  unsigned nformats = (unsigned)rd_u(r, 1);
  *count = 0;
  if (nformats > 16) {
    r->err = 1;
    return NULL;
  }
  for (unsigned i = 0; i < nformats; i++) {
    formats[i][0] = rd_uleb(r);
    formats[i][1] = rd_uleb(r);
  }
  uint64_t n = rd_uleb(r);
  /* Every entry takes at least one byte per format. */
  if (r->err || n > (uint64_t)(r->end - r->p)) {
    r->err = 1;
    return NULL;
  }
  struct lentry *e = calloc(n ? n : 1, sizeof *e);
  if (!e) {
    r->err = 1;
    return NULL;
  }
  for (uint64_t k = 0; k < n && !r->err; k++) {
    for (unsigned i = 0; i < nformats; i++) {
      struct lentry sv = {NULL, NULL, 0, 0};
      uint64_t nv = 0;
      if (entry_form(r, formats[i][1], offsize, d, &sv, &nv)) {
        r->err = 1;
        break;
      }
      if (formats[i][0] == 1) { /* DW_LNCT_path */
        e[k].name = sv.name;
        e[k].str_sec = sv.str_sec;
        e[k].str_off = sv.str_off;
      } else if (formats[i][0] == 2) { /* DW_LNCT_directory_index */
        e[k].dir = nv;
      }
    }
  }
  *count = (size_t)n;
  return e;
}

/* A DWARF 2-4 include_directories or file_names list. */
static struct lentry *entries_v4(struct rd *r, int files, size_t *count)
{
  size_t n = 0, cap = 16;
  struct lentry *e = malloc(cap * sizeof *e);
  *count = 0;
  if (!e) {
    r->err = 1;
    return NULL;
  }
  for (;;) {
    const char *name = rd_cstr(r);
    if (!name || !name[0])
      break;
    if (n == cap) {
      struct lentry *g = realloc(e, cap * 2 * sizeof *e);
      if (!g) {
        r->err = 1;
        break;
      }
      e = g;
      cap *= 2;
    }
    e[n].name = name;
    e[n].str_sec = NULL;
    e[n].str_off = 0;
    e[n].dir = 0;
    if (files) {
      e[n].dir = rd_uleb(r);
      rd_uleb(r); /* mtime */
      rd_uleb(r); /* length */
    }
    n++;
  }
  *count = n;
  return e;
}

static void lhdr_free(struct lhdr *h)
{
  free(h->dirs);
  free(h->files);
  free(h->cache);
  h->dirs = h->files = NULL;
  h->cache = NULL;
}

/* Reads the line program header at `off` of .debug_line. *next is set to
 * the following unit whenever the unit length could be read. Returns 0,
 * -1 for an unusable unit, or -ENOMEM. */
static int lhdr_read(const struct culpert__dwarf *d, uint64_t off, struct lhdr *h, uint64_t *next)
{
  memset(h, 0, sizeof *h);
  struct rd all = rd_at(&d->line, off);
  uint64_t len;
  int offsize = unit_length(&all, &len);
  if (offsize == 0)
    return -1;
  *next = (uint64_t)(all.p - d->line.p) + len;
  sec_need(&d->line, *next);
  struct rd r = {all.p, all.p + len, 0};

  h->version = (int)rd_u(&r, 2);
  if (h->version < 2 || h->version > 5)
    return -1;
  if (h->version >= 5) {
    unsigned addr_size = (unsigned)rd_u(&r, 1);
    rd_u(&r, 1); /* segment selector size */
    if (addr_size != 8)
      return -1;
  }
  uint64_t header_len = rd_u(&r, (size_t)offsize);
  if (r.err || header_len > (uint64_t)(r.end - r.p))
    return -1;
  h->prog = (struct rd){r.p + header_len, r.end, 0};
  h->min_inst = (unsigned)rd_u(&r, 1);
  if (h->version >= 4)
    rd_u(&r, 1); /* maximum_operations_per_instruction: 1 on x86 */
  rd_u(&r, 1);   /* default_is_stmt */
  h->line_base = (int)(int8_t)rd_u(&r, 1);
  h->line_range = (unsigned)rd_u(&r, 1);
  h->opcode_base = (unsigned)rd_u(&r, 1);
  if (r.err || h->line_range == 0 || h->opcode_base == 0 ||
      (size_t)(r.end - r.p) < h->opcode_base - 1)
    return -1;
  memcpy(h->std_len, r.p, h->opcode_base - 1);
  r.p += h->opcode_base - 1;

  if (h->version >= 5) {
    h->dirs = entries_v5(&r, offsize, d, &h->ndirs);
    h->files = entries_v5(&r, offsize, d, &h->nfiles);
  } else {
    h->dirs = entries_v4(&r, 0, &h->ndirs);
    h->files = entries_v4(&r, 1, &h->nfiles);
  }
  h->cache = calloc(h->nfiles + 1, sizeof *h->cache);
  if (!h->cache) {
    lhdr_free(h);
    return -ENOMEM;
  }
  if (r.err || !h->dirs || !h->files) {
    lhdr_free(h);
    return -1;
  }
  return 0;
}

/* "dir/name" of file `idx` (numbered as the unit's version numbers them). */
static const char *lhdr_file(struct lhdr *h, uint64_t idx, struct culpert__pool *pool)
{
  if (h->version < 5) {
    if (idx == 0)
      return NULL;
    idx--;
  }
  if (idx >= h->nfiles)
    return NULL;
  if (h->cache[idx])
    return h->cache[idx];
  const struct lentry *f = &h->files[idx];
  const char *name = lentry_name(f);
  if (!name)
    return NULL;
  uint64_t dnum = f->dir;
  const char *dir = NULL;
  if (h->version >= 5)
    dir = dnum < h->ndirs ? lentry_name(&h->dirs[dnum]) : NULL;
  else
    dir = dnum >= 1 && dnum - 1 < h->ndirs ? h->dirs[dnum - 1].name : NULL;
  size_t len = strlen(name) + (dir ? strlen(dir) : 0) + 2;
  char *path = malloc(len);
  if (!path)
    return NULL;
  if (name[0] == '/' || !dir || !dir[0])
    snprintf(path, len, "%s", name);
  else
    snprintf(path, len, "%s/%s", dir, name);
  h->cache[idx] = pool_keep(pool, path);
  return h->cache[idx];
}

/* ---------------------------------------------------------------------- */
/* Line programs                                                           */

struct job {
  const struct culpert__dwarf *d;
  const struct want *w;
  size_t nw;
  struct culpert__srcpos *out;
  struct culpert__pool *pool;
  struct lhdr *h;
  /* where the last row fell in `w`, valid within one sequence */
  size_t cursor;
  uint64_t cursor_from;
  int cursor_valid;
};

/* Rows [from, to) share a file and line: give them to the wanted addresses
 * in that range that have none yet. */
static void assign_range(struct job *j, uint64_t from, uint64_t to, uint64_t file, uint64_t line)
{
  /* Most rows are nowhere near a wanted address. */
  if (to <= j->w[0].vaddr || from > j->w[j->nw - 1].vaddr)
    return;
  /* Rows of a sequence go up: walk on from the previous row's position,
   * searching only at the start of a sequence (or if addresses go back). */
  size_t lo;
  if (j->cursor_valid && from >= j->cursor_from) {
    lo = j->cursor;
    while (lo < j->nw && j->w[lo].vaddr < from)
      lo++;
  } else {
    lo = lower_bound(j->w, j->nw, from);
  }
  j->cursor = lo;
  j->cursor_from = from;
  j->cursor_valid = 1;
  for (size_t i = lo; i < j->nw && j->w[i].vaddr < to; i++) {
    struct culpert__srcpos *o = &j->out[j->w[i].index];
    if (o->line || o->file)
      continue;
    o->file = lhdr_file(j->h, file, j->pool);
    o->line = line > UINT32_MAX ? UINT32_MAX : (uint32_t)line;
  }
}

/* The first row at exactly `addr`: its line becomes first_line of the
 * wanted addresses equal to addr. */
static void note_first(struct job *j, uint64_t addr, uint64_t line)
{
  if (addr < j->w[0].vaddr || addr > j->w[j->nw - 1].vaddr)
    return;
  for (size_t i = lower_bound(j->w, j->nw, addr); i < j->nw && j->w[i].vaddr == addr; i++) {
    struct culpert__srcpos *o = &j->out[j->w[i].index];
    if (!o->first_line)
      o->first_line = line > UINT32_MAX ? UINT32_MAX : (uint32_t)line;
  }
}

/* Runs the line program of one unit. */
static void run_program(struct job *j)
{
  struct lhdr *h = j->h;
  struct rd *r = &h->prog;
  uint64_t addr = 0, file = 1, line = 1;
  uint64_t prev_addr = 0, prev_file = 0, prev_line = 0;
  int have_prev = 0;

  /* Several rows at one address (views): the last one describes the
   * instruction, the first one is noted as first_line (for a function's
   * first instruction, the line of its definition). */
#define ROW(end)                                                                                   \
  do {                                                                                             \
    if (!(end) && (!have_prev || addr != prev_addr))                                               \
      note_first(j, addr, line);                                                                   \
    if (have_prev && addr > prev_addr)                                                             \
      assign_range(j, prev_addr, addr, prev_file, prev_line);                                      \
    have_prev = !(end);                                                                            \
    prev_addr = addr;                                                                              \
    prev_file = file;                                                                              \
    prev_line = line;                                                                              \
  } while (0)

  j->cursor_valid = 0;
  while (!r->err && r->p < r->end) {
    unsigned op = *r->p++;
    if (op >= h->opcode_base) {
      unsigned adj = op - h->opcode_base;
      addr += (uint64_t)(adj / h->line_range) * h->min_inst;
      line += (uint64_t)(int64_t)(h->line_base + (int)(adj % h->line_range));
      ROW(0);
      continue;
    }
    switch (op) {
    case 0: { /* extended */
      uint64_t len = rd_uleb(r);
      if (r->err || len == 0 || len > (uint64_t)(r->end - r->p)) {
        r->err = 1;
        break;
      }
      const unsigned char *next = r->p + len;
      unsigned sub = *r->p++;
      if (sub == 1) { /* DW_LNE_end_sequence */
        ROW(1);
        j->cursor_valid = 0;
        addr = 0;
        file = 1;
        line = 1;
      } else if (sub == 2 && len == 9) { /* DW_LNE_set_address */
        addr = rd_u(r, 8);
      }
      r->p = next;
      break;
    }
    case 1: /* DW_LNS_copy */
      ROW(0);
      break;
    case 2: /* DW_LNS_advance_pc */
      addr += rd_uleb(r) * h->min_inst;
      break;
    case 3: /* DW_LNS_advance_line */
      line += (uint64_t)rd_sleb(r);
      break;
    case 4: /* DW_LNS_set_file */
      file = rd_uleb(r);
      break;
    case 8: /* DW_LNS_const_add_pc */
      addr += (uint64_t)((255 - h->opcode_base) / h->line_range) * h->min_inst;
      break;
    case 9: /* DW_LNS_fixed_advance_pc */
      addr += rd_u(r, 2);
      break;
    default: /* known ones without effect here, and unknown ones */
      for (unsigned k = 0; k < h->std_len[op - 1]; k++)
        rd_uleb(r);
    }
  }
#undef ROW
}

/* Sorted .debug_info or .debug_line offsets. */
struct offsets {
  uint64_t *v;
  size_t n;
  size_t cap;
};

static int offsets_add(struct offsets *o, uint64_t v)
{
  if (o->n == o->cap) {
    size_t cap = o->cap ? o->cap * 2 : 64;
    uint64_t *g = realloc(o->v, cap * sizeof *g);
    if (!g)
      return -ENOMEM;
    o->v = g;
    o->cap = cap;
  }
  o->v[o->n++] = v;
  return 0;
}

static int u64_cmp(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorts and drops duplicates. */
static void offsets_sort(struct offsets *o)
{
  if (o->n == 0)
    return;
  qsort(o->v, o->n, sizeof *o->v, u64_cmp);
  size_t k = 1;
  for (size_t i = 1; i < o->n; i++)
    if (o->v[i] != o->v[k - 1])
      o->v[k++] = o->v[i];
  o->n = k;
}

static int offsets_has(const struct offsets *o, uint64_t v)
{
  size_t lo = 0, hi = o->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (o->v[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < o->n && o->v[lo] == v;
}

/* Runs the line program at `off` for the job's wanted addresses. */
static int lines_unit(struct job *j, uint64_t off)
{
  struct lhdr h;
  uint64_t next;
  int rc = lhdr_read(j->d, off, &h, &next);
  if (rc != 0)
    return rc == -ENOMEM ? rc : 0;
  j->h = &h;
  run_program(j);
  j->h = NULL;
  lhdr_free(&h);
  return 0;
}

/* Runs every line program except those at the offsets in `done` (sorted). */
static int lines_pass(struct job *j, const struct offsets *done)
{
  uint64_t off = 0;
  while (j->d->line.p && off < j->d->line.len) {
    struct lhdr h;
    uint64_t next = j->d->line.len;
    int rc = lhdr_read(j->d, off, &h, &next);
    if (rc == -ENOMEM)
      return rc;
    if (rc == 0 && offsets_has(done, off)) {
      lhdr_free(&h);
    } else if (rc == 0) {
      j->h = &h;
      run_program(j);
      j->h = NULL;
      lhdr_free(&h);
    }
    if (next <= off)
      break;
    off = next;
  }
  return 0;
}

/* ---------------------------------------------------------------------- */
/* .debug_abbrev                                                           */

struct aspec {
  uint64_t attr;
  uint64_t form;
  int64_t implicit;
};

struct abbrev {
  uint64_t code;
  uint64_t tag;
  int children;
  size_t spec; /* first index in abbrevs.specs */
  size_t nspec;
};

struct abbrevs {
  struct abbrev *a;
  size_t n;
  struct aspec *specs;
  size_t nspecs;
  int dense; /* a[i].code == i + 1 for all i */
};

static void abbrevs_free(struct abbrevs *t)
{
  free(t->a);
  free(t->specs);
  memset(t, 0, sizeof *t);
}

static int abbrev_cmp(const void *x, const void *y)
{
  const struct abbrev *a = x, *b = y;
  return a->code < b->code ? -1 : a->code > b->code;
}

/* Reads the abbreviation table at `off`. Returns 0, -1, or -ENOMEM. */
/* Reads the abbreviation table at `off` from the first `avail` bytes of
 * .debug_abbrev. Returns 0, -1 (malformed, or cut by `avail`), -ENOMEM. */
static int abbrevs_parse(const struct culpert__dwarf *d, uint64_t off, size_t avail,
                         struct abbrevs *t)
{
  size_t cap = 0, scap = 0;
  struct rd r = rd_at(&d->abbrev, off);
  if (!r.err && avail < d->abbrev.len)
    r.end = d->abbrev.p + (avail > off ? avail : off);
  memset(t, 0, sizeof *t);
  t->dense = 1;
  while (!r.err) {
    uint64_t code = rd_uleb(&r);
    if (code == 0 || r.err)
      break;
    if (t->n == cap) {
      cap = cap ? cap * 2 : 64;
      struct abbrev *g = realloc(t->a, cap * sizeof *g);
      if (!g)
        goto nomem;
      t->a = g;
    }
    struct abbrev *a = &t->a[t->n];
    a->code = code;
    a->tag = rd_uleb(&r);
    a->children = (int)rd_u(&r, 1);
    a->spec = t->nspecs;
    a->nspec = 0;
    for (;;) {
      uint64_t attr = rd_uleb(&r), form = rd_uleb(&r);
      if (r.err || (attr == 0 && form == 0))
        break;
      if (t->nspecs == scap) {
        scap = scap ? scap * 2 : 256;
        struct aspec *g = realloc(t->specs, scap * sizeof *g);
        if (!g)
          goto nomem;
        t->specs = g;
      }
      struct aspec *s = &t->specs[t->nspecs++];
      s->attr = attr;
      s->form = form;
      s->implicit = form == 0x21 ? rd_sleb(&r) : 0; /* DW_FORM_implicit_const */
      a->nspec++;
    }
    if (a->code != t->n + 1)
      t->dense = 0;
    t->n++;
  }
  if (r.err) {
    abbrevs_free(t);
    return -1;
  }
  if (!t->dense)
    qsort(t->a, t->n, sizeof *t->a, abbrev_cmp);
  return 0;

nomem:
  abbrevs_free(t);
  return -ENOMEM;
}

/* The abbreviation table at `off`: a lazily filled .debug_abbrev is read
 * only as far as the table goes (tables end where their zero code is). */
static int abbrevs_read(const struct culpert__dwarf *d, uint64_t off, struct abbrevs *t)
{
  for (uint64_t ask = 16384;; ask *= 4) {
    size_t avail = sec_need(&d->abbrev, off + ask);
    int rc = abbrevs_parse(d, off, avail, t);
    if (rc != -1 || avail >= d->abbrev.len)
      return rc;
  }
}

static const struct abbrev *abbrev_find(const struct abbrevs *t, uint64_t code)
{
  if (t->dense)
    return code >= 1 && code <= t->n ? &t->a[code - 1] : NULL;
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->a[mid].code < code)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < t->n && t->a[lo].code == code ? &t->a[lo] : NULL;
}

/* ---------------------------------------------------------------------- */
/* .debug_info units and attributes                                        */

enum {
  TAG_CLASS_TYPE = 0x02,
  TAG_COMPILE_UNIT = 0x11,
  TAG_STRUCTURE_TYPE = 0x13,
  TAG_UNION_TYPE = 0x17,
  TAG_INLINED_SUBROUTINE = 0x1d,
  TAG_SUBPROGRAM = 0x2e,
  TAG_NAMESPACE = 0x39,
  TAG_PARTIAL_UNIT = 0x3c,
  AT_SIBLING = 0x01,
  AT_NAME = 0x03,
  AT_LANGUAGE = 0x13,
  AT_STMT_LIST = 0x10,
  AT_LOW_PC = 0x11,
  AT_HIGH_PC = 0x12,
  AT_ABSTRACT_ORIGIN = 0x31,
  AT_SPECIFICATION = 0x47,
  AT_RANGES = 0x55,
  AT_CALL_FILE = 0x58,
  AT_CALL_LINE = 0x59,
  AT_LINKAGE_NAME = 0x6e,
  AT_STR_OFFSETS_BASE = 0x72,
  AT_ADDR_BASE = 0x73,
  AT_RNGLISTS_BASE = 0x74,
  AT_MIPS_LINKAGE_NAME = 0x2007,
};

struct cu {
  uint64_t off;     /* unit header in .debug_info */
  uint64_t end;     /* one past the unit */
  uint64_t die_off; /* first DIE */
  int version;
  int offsize;
  unsigned addr_size;
  struct abbrevs ab;
  /* from the unit DIE */
  uint64_t low_pc;
  uint64_t str_offsets_base;
  uint64_t addr_base;
  uint64_t rnglists_base;
  uint64_t stmt_list;
  int has_stmt_list;
  uint64_t language; /* DW_AT_language, 0 when absent */
};

enum { V_NONE, V_CONST, V_ADDR, V_STR, V_STRP, V_STRX, V_ADDRX, V_REF, V_SEC, V_RNGX };

/* An attribute value. A string in a string section (V_STRP: offset `u` in
 * `sec`) is looked up only by val_str: most attributes read are skipped,
 * and a compressed string section should be inflated only as far as the
 * names a profile uses. */
struct val {
  int kind;
  uint64_t u;
  const char *s;
  const struct culpert__dwarf_section *sec;
};

/* Reads one attribute value of form `form`. Returns -1 for a form that
 * cannot be skipped (the rest of the unit is then unreadable). */
static int read_val(struct rd *r, uint64_t form, int64_t implicit, const struct cu *cu,
                    const struct culpert__dwarf *d, struct val *v, int depth)
{
  v->kind = V_NONE;
  v->s = NULL;
  v->sec = NULL;
  v->u = 0;
  switch (form) {
  case 0x01: /* addr */
    v->kind = V_ADDR;
    v->u = rd_u(r, cu->addr_size);
    break;
  case 0x03: /* block2 */
    rd_skip(r, rd_u(r, 2));
    break;
  case 0x04: /* block4 */
    rd_skip(r, rd_u(r, 4));
    break;
  case 0x09: /* block */
  case 0x18: /* exprloc */
    rd_skip(r, rd_uleb(r));
    break;
  case 0x0a: /* block1 */
    rd_skip(r, rd_u(r, 1));
    break;
  case 0x05: /* data2 */
    v->kind = V_CONST;
    v->u = rd_u(r, 2);
    break;
  case 0x06: /* data4 */
    v->kind = V_CONST;
    v->u = rd_u(r, 4);
    break;
  case 0x07: /* data8 */
    v->kind = V_CONST;
    v->u = rd_u(r, 8);
    break;
  case 0x0b: /* data1 */
  case 0x0c: /* flag */
    v->kind = V_CONST;
    v->u = rd_u(r, 1);
    break;
  case 0x1e: /* data16 */
    rd_skip(r, 16);
    break;
  case 0x08: /* string */
    v->kind = V_STR;
    v->s = rd_cstr(r);
    break;
  case 0x0d: /* sdata */
    v->kind = V_CONST;
    v->u = (uint64_t)rd_sleb(r);
    break;
  case 0x0f: /* udata */
    v->kind = V_CONST;
    v->u = rd_uleb(r);
    break;
  case 0x0e: /* strp */
    v->kind = V_STRP;
    v->sec = &d->str;
    v->u = rd_u(r, (size_t)cu->offsize);
    break;
  case 0x1f: /* line_strp */
    v->kind = V_STRP;
    v->sec = &d->line_str;
    v->u = rd_u(r, (size_t)cu->offsize);
    break;
  case 0x10: /* ref_addr */
    v->kind = V_REF;
    v->u = rd_u(r, cu->version <= 2 ? cu->addr_size : (size_t)cu->offsize);
    break;
  case 0x11: /* ref1 */
  case 0x12: /* ref2 */
  case 0x13: /* ref4 */
  case 0x14: /* ref8 */
    v->kind = V_REF;
    v->u = cu->off + rd_u(r, (size_t)1 << (form - 0x11));
    break;
  case 0x15: /* ref_udata */
    v->kind = V_REF;
    v->u = cu->off + rd_uleb(r);
    break;
  case 0x16: /* indirect */
    if (depth > 4)
      return -1;
    return read_val(r, rd_uleb(r), implicit, cu, d, v, depth + 1);
  case 0x17: /* sec_offset */
    v->kind = V_SEC;
    v->u = rd_u(r, (size_t)cu->offsize);
    break;
  case 0x19: /* flag_present */
    v->kind = V_CONST;
    v->u = 1;
    break;
  case 0x1a:   /* strx */
  case 0x1f02: /* GNU_str_index */
    v->kind = V_STRX;
    v->u = rd_uleb(r);
    break;
  case 0x25: /* strx1 */
  case 0x26: /* strx2 */
  case 0x27: /* strx3 */
  case 0x28: /* strx4 */
    v->kind = V_STRX;
    v->u = rd_u(r, form - 0x24);
    break;
  case 0x1b:   /* addrx */
  case 0x1f01: /* GNU_addr_index */
    v->kind = V_ADDRX;
    v->u = rd_uleb(r);
    break;
  case 0x29: /* addrx1 */
  case 0x2a: /* addrx2 */
  case 0x2b: /* addrx3 */
  case 0x2c: /* addrx4 */
    v->kind = V_ADDRX;
    v->u = rd_u(r, form - 0x28);
    break;
  case 0x1c: /* ref_sup4 */
    rd_skip(r, 4);
    break;
  case 0x24: /* ref_sup8 */
  case 0x20: /* ref_sig8 */
    rd_skip(r, 8);
    break;
  case 0x1d:   /* strp_sup */
  case 0x1f20: /* GNU_ref_alt */
  case 0x1f21: /* GNU_strp_alt */
    rd_skip(r, (uint64_t)cu->offsize);
    break;
  case 0x21: /* implicit_const */
    v->kind = V_CONST;
    v->u = (uint64_t)implicit;
    break;
  case 0x22: /* loclistx */
    rd_uleb(r);
    break;
  case 0x23: /* rnglistx */
    v->kind = V_RNGX;
    v->u = rd_uleb(r);
    break;
  default:
    return -1;
  }
  return r->err ? -1 : 0;
}

static const char *val_str(const struct culpert__dwarf *d, const struct cu *cu, const struct val *v)
{
  if (v->kind == V_STR)
    return v->s;
  if (v->kind == V_STRP)
    return section_str(v->sec, v->u);
  if (v->kind != V_STRX || !d->str_offsets.p)
    return NULL;
  uint64_t at = cu->str_offsets_base + v->u * (uint64_t)cu->offsize;
  if (v->u > d->str_offsets.len)
    return NULL;
  struct rd r = rd_at(&d->str_offsets, at);
  uint64_t off = rd_u(&r, (size_t)cu->offsize);
  return r.err ? NULL : section_str(&d->str, off);
}

/* An address attribute (DW_FORM_addr or an index into .debug_addr). */
static int val_addr(const struct culpert__dwarf *d, const struct cu *cu, const struct val *v,
                    uint64_t *out)
{
  if (v->kind == V_ADDR) {
    *out = v->u;
    return 0;
  }
  if (v->kind != V_ADDRX || v->u > d->addr.len)
    return -1;
  struct rd r = rd_at(&d->addr, cu->addr_base + v->u * cu->addr_size);
  *out = rd_u(&r, cu->addr_size);
  return r.err ? -1 : 0;
}

/* ---------------------------------------------------------------------- */
/* Address ranges of a DIE                                                 */

struct ranges {
  uint64_t lo[64];
  uint64_t hi[64];
  size_t n;
};

static void ranges_add(struct ranges *rg, uint64_t lo, uint64_t hi)
{
  if (hi > lo && rg->n < 64) {
    rg->lo[rg->n] = lo;
    rg->hi[rg->n] = hi;
    rg->n++;
  }
}

/* DWARF 5 range list at `off` of .debug_rnglists. */
static void rnglist(const struct culpert__dwarf *d, const struct cu *cu, uint64_t off,
                    struct ranges *rg)
{
  struct rd r = rd_at(&d->rnglists, off);
  uint64_t base = cu->low_pc;
  for (int guard = 0; !r.err && guard < 4096; guard++) {
    /* A lazily filled section is read list by list: make the next entry
     * readable (a kind byte and two operands of at most 10 bytes each). */
    sec_need(&d->rnglists, (uint64_t)(r.p - d->rnglists.p) + 24);
    unsigned kind = (unsigned)rd_u(&r, 1);
    uint64_t a = 0, b = 0;
    struct val va = {V_ADDRX, 0, NULL, NULL}, vb = {V_ADDRX, 0, NULL, NULL};
    switch (kind) {
    case 0: /* end_of_list */
      return;
    case 1: /* base_addressx */
      va.u = rd_uleb(&r);
      if (val_addr(d, cu, &va, &base))
        return;
      break;
    case 2: /* startx_endx */
      va.u = rd_uleb(&r);
      vb.u = rd_uleb(&r);
      if (val_addr(d, cu, &va, &a) || val_addr(d, cu, &vb, &b))
        return;
      ranges_add(rg, a, b);
      break;
    case 3: /* startx_length */
      va.u = rd_uleb(&r);
      if (val_addr(d, cu, &va, &a))
        return;
      ranges_add(rg, a, a + rd_uleb(&r));
      break;
    case 4: /* offset_pair */
      a = rd_uleb(&r);
      b = rd_uleb(&r);
      ranges_add(rg, base + a, base + b);
      break;
    case 5: /* base_address */
      base = rd_u(&r, cu->addr_size);
      break;
    case 6: /* start_end */
      a = rd_u(&r, cu->addr_size);
      b = rd_u(&r, cu->addr_size);
      ranges_add(rg, a, b);
      break;
    case 7: /* start_length */
      a = rd_u(&r, cu->addr_size);
      ranges_add(rg, a, a + rd_uleb(&r));
      break;
    default:
      return;
    }
  }
}

/* DWARF 2-4 range list at `off` of .debug_ranges. */
static void ranges_v4(const struct culpert__dwarf *d, const struct cu *cu, uint64_t off,
                      struct ranges *rg)
{
  struct rd r = rd_at(&d->ranges, off);
  uint64_t base = cu->low_pc;
  uint64_t max = cu->addr_size == 8 ? UINT64_MAX : UINT32_MAX;
  for (int guard = 0; !r.err && guard < 4096; guard++) {
    uint64_t a = rd_u(&r, cu->addr_size), b = rd_u(&r, cu->addr_size);
    if (r.err || (a == 0 && b == 0))
      return;
    if (a == max)
      base = b;
    else
      ranges_add(rg, base + a, base + b);
  }
}

/* The ranges of a DIE from its low_pc/high_pc or ranges attributes. */
static void die_ranges(const struct culpert__dwarf *d, const struct cu *cu, const struct val *low,
                       const struct val *high, const struct val *ranges, struct ranges *rg)
{
  rg->n = 0;
  uint64_t lo;
  if (low->kind != V_NONE && high->kind != V_NONE && val_addr(d, cu, low, &lo) == 0) {
    uint64_t hi;
    if (high->kind == V_CONST)
      ranges_add(rg, lo, lo + high->u);
    else if (val_addr(d, cu, high, &hi) == 0)
      ranges_add(rg, lo, hi);
  } else if (ranges->kind == V_RNGX && d->rnglists.p) {
    struct rd r = rd_at(&d->rnglists, cu->rnglists_base + ranges->u * (uint64_t)cu->offsize);
    uint64_t rel = rd_u(&r, (size_t)cu->offsize);
    if (!r.err && ranges->u <= d->rnglists.len)
      rnglist(d, cu, cu->rnglists_base + rel, rg);
  } else if (ranges->kind == V_SEC || ranges->kind == V_CONST) {
    if (cu->version >= 5)
      rnglist(d, cu, ranges->u, rg);
    else
      ranges_v4(d, cu, ranges->u, rg);
  }
}

/* Whether any wanted address lies in the ranges. */
static int ranges_hit(const struct ranges *rg, const struct want *w, size_t nw)
{
  for (size_t k = 0; k < rg->n; k++) {
    size_t i = lower_bound(w, nw, rg->lo[k]);
    if (i < nw && w[i].vaddr < rg->hi[k])
      return 1;
  }
  return 0;
}

/* ---------------------------------------------------------------------- */
/* Units                                                                   */

/* Reads the unit header at `off` and its unit DIE. Returns 0, -1 for a
 * unit to skip (*next still set when its length was readable), -ENOMEM. */
static int cu_open(const struct culpert__dwarf *d, uint64_t off, struct cu *cu, uint64_t *next,
                   struct ranges *rg)
{
  memset(cu, 0, sizeof *cu);
  rg->n = 0;
  struct rd r = rd_at(&d->info, off);
  uint64_t len;
  cu->offsize = unit_length(&r, &len);
  if (cu->offsize == 0)
    return -1;
  cu->off = off;
  cu->end = (uint64_t)(r.p - d->info.p) + len;
  *next = cu->end;
  sec_need(&d->info, cu->end);
  r.end = r.p + len;
  cu->version = (int)rd_u(&r, 2);
  uint64_t abbrev_off;
  if (cu->version >= 5) {
    unsigned type = (unsigned)rd_u(&r, 1);
    cu->addr_size = (unsigned)rd_u(&r, 1);
    abbrev_off = rd_u(&r, (size_t)cu->offsize);
    if (type != 1 && type != 3) /* DW_UT_compile, DW_UT_partial */
      return -1;
  } else if (cu->version >= 2) {
    abbrev_off = rd_u(&r, (size_t)cu->offsize);
    cu->addr_size = (unsigned)rd_u(&r, 1);
  } else {
    return -1;
  }
  if (r.err || (cu->addr_size != 8 && cu->addr_size != 4))
    return -1;
  cu->die_off = (uint64_t)(r.p - d->info.p);
  int rc = abbrevs_read(d, abbrev_off, &cu->ab);
  if (rc)
    return rc;

  /* The unit DIE: bases first, since other attributes may need them. */
  const struct abbrev *a = abbrev_find(&cu->ab, rd_uleb(&r));
  if (r.err || !a || (a->tag != TAG_COMPILE_UNIT && a->tag != TAG_PARTIAL_UNIT))
    goto bad;
  struct val low = {V_NONE, 0, NULL, NULL}, high = low, ranges = low;
  for (size_t k = 0; k < a->nspec; k++) {
    const struct aspec *s = &cu->ab.specs[a->spec + k];
    struct val v;
    if (read_val(&r, s->form, s->implicit, cu, d, &v, 0))
      goto bad;
    switch (s->attr) {
    case AT_LOW_PC:
      low = v;
      break;
    case AT_HIGH_PC:
      high = v;
      break;
    case AT_RANGES:
      ranges = v;
      break;
    case AT_STMT_LIST:
      cu->stmt_list = v.u;
      cu->has_stmt_list = 1;
      break;
    case AT_STR_OFFSETS_BASE:
      cu->str_offsets_base = v.u;
      break;
    case AT_ADDR_BASE:
      cu->addr_base = v.u;
      break;
    case AT_RNGLISTS_BASE:
      cu->rnglists_base = v.u;
      break;
    case AT_LANGUAGE:
      cu->language = v.u;
      break;
    }
  }
  if (low.kind != V_NONE)
    val_addr(d, cu, &low, &cu->low_pc);
  die_ranges(d, cu, &low, &high, &ranges, rg);
  return 0;

bad:
  abbrevs_free(&cu->ab);
  return -1;
}

/* For references from one unit into another (common with LTO): where
 * every unit starts, found once, and the last such unit kept open. */
struct units {
  uint64_t *start; /* sorted header offsets; NULL until first needed */
  size_t n;
  int indexed;
  struct cu other;
  int other_open;
};

static void units_free(struct units *u)
{
  free(u->start);
  if (u->other_open)
    abbrevs_free(&u->other.ab);
  memset(u, 0, sizeof *u);
}

/* The unit containing .debug_info offset `off`, or NULL. */
static const struct cu *units_find(const struct culpert__dwarf *d, struct units *u, uint64_t off)
{
  if (u->other_open && off >= u->other.die_off && off < u->other.end)
    return &u->other;
  if (!u->indexed) {
    size_t cap = 0;
    u->indexed = 1;
    for (uint64_t at = 0; at < d->info.len;) {
      struct rd r = rd_at(&d->info, at);
      uint64_t len;
      if (unit_length(&r, &len) == 0)
        break;
      if (u->n == cap) {
        cap = cap ? cap * 2 : 256;
        uint64_t *g = realloc(u->start, cap * sizeof *g);
        if (!g)
          break;
        u->start = g;
      }
      u->start[u->n++] = at;
      at = (uint64_t)(r.p - d->info.p) + len;
    }
  }
  /* Last unit starting at or before off. */
  size_t lo = 0, hi = u->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (u->start[mid] <= off)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return NULL;
  if (u->other_open)
    abbrevs_free(&u->other.ab);
  uint64_t next;
  struct ranges rg;
  u->other_open = cu_open(d, u->start[lo - 1], &u->other, &next, &rg) == 0;
  if (!u->other_open || off < u->other.die_off || off >= u->other.end)
    return NULL;
  return &u->other;
}

/* The unit holding .debug_info offset `off`: `home` or another one (which
 * stays valid only until the next units_find). */
static const struct cu *unit_at(const struct culpert__dwarf *d, const struct cu *home,
                                struct units *units, uint64_t off)
{
  if (off >= home->die_off && off < home->end)
    return home;
  return units_find(d, units, off);
}

/* What the abstract origin / specification chain from a DIE says about
 * its name. The strings live in the sections. */
struct dname {
  const char *linkage; /* the first linkage name along the chain, or NULL */
  const char *plain;   /* the first plain name, or NULL */
  uint64_t plain_off;  /* the DIE that carries `plain` (its declaration) */
};

static void die_chain(const struct culpert__dwarf *d, const struct cu *home, struct units *units,
                      uint64_t off, struct dname *dn)
{
  const struct cu *cu = home;
  *dn = (struct dname){NULL, NULL, 0};
  for (int hop = 0; hop < 8 && !dn->linkage; hop++) {
    if (off < cu->die_off || off >= cu->end) {
      cu = unit_at(d, home, units, off);
      if (!cu)
        break;
    }
    struct rd r = rd_at(&d->info, off);
    r.end = d->info.p + cu->end;
    const struct abbrev *a = abbrev_find(&cu->ab, rd_uleb(&r));
    if (r.err || !a)
      break;
    uint64_t next_ref = 0;
    for (size_t k = 0; k < a->nspec; k++) {
      const struct aspec *s = &cu->ab.specs[a->spec + k];
      struct val v;
      if (read_val(&r, s->form, s->implicit, cu, d, &v, 0))
        break;
      if (s->attr == AT_LINKAGE_NAME || s->attr == AT_MIPS_LINKAGE_NAME) {
        dn->linkage = val_str(d, cu, &v);
      } else if (s->attr == AT_NAME && !dn->plain) {
        dn->plain = val_str(d, cu, &v);
        dn->plain_off = off;
      } else if ((s->attr == AT_ABSTRACT_ORIGIN || s->attr == AT_SPECIFICATION) &&
                 v.kind == V_REF) {
        next_ref = v.u;
      }
    }
    if (dn->linkage || !next_ref || next_ref == off)
      break;
    off = next_ref;
  }
}

/* ---------------------------------------------------------------------- */
/* Qualified names                                                         */

/* DIE nesting followed when looking for a DIE's parents; scopes named
 * through another DIE (a function's declaration, its enclosing function)
 * followed from one name; longest qualified name. */
#define SCOPE_DEPTH   64
#define SCOPE_HOPS    6
#define QUALIFIED_MAX (64u * 1024u)

/* A DIE around another one. */
struct scope {
  uint64_t off;
  uint64_t tag;
};

/* Where the last walk for a DIE's parents stopped: the next one in the
 * same unit, for a DIE further on, goes on from there. */
struct walk {
  uint64_t unit; /* .debug_info offset of the unit's header */
  uint64_t at;   /* the DIE it stopped at */
  int depth;     /* -1: nothing to go on from */
  struct scope up[SCOPE_DEPTH];
};

/* Names worked out in one culpert__dwarf_resolve call, by DIE offset: an
 * open-addressed table (keys are offsets + 1, 0 is free); the strings are
 * in the pool or the sections, NULL for a DIE without a name. */
struct names {
  uint64_t *key;
  const char **val;
  size_t n;
  size_t cap;
  struct walk *walk; /* allocated on first use */
};

static void names_free(struct names *t)
{
  free(t->key);
  free(t->val);
  free(t->walk);
  memset(t, 0, sizeof *t);
}

static size_t names_slot(const struct names *t, uint64_t off)
{
  size_t i = (size_t)((off + 1) * 0x9e3779b97f4a7c15u >> 20) & (t->cap - 1);
  while (t->key[i] && t->key[i] != off + 1)
    i = (i + 1) & (t->cap - 1);
  return i;
}

static int names_get(const struct names *t, uint64_t off, const char **name)
{
  if (t->cap == 0)
    return 0;
  size_t i = names_slot(t, off);
  if (!t->key[i])
    return 0;
  *name = t->val[i];
  return 1;
}

/* Best effort: a name that cannot be kept is worked out again next time. */
static void names_put(struct names *t, uint64_t off, const char *name)
{
  if (2 * (t->n + 1) > t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 64;
    struct names g = {calloc(cap, sizeof *g.key), calloc(cap, sizeof *g.val), 0, cap, t->walk};
    if (!g.key || !g.val) {
      free(g.key);
      free(g.val);
      return;
    }
    for (size_t i = 0; i < t->cap; i++) {
      if (t->key[i]) {
        size_t j = names_slot(&g, t->key[i] - 1);
        g.key[j] = t->key[i];
        g.val[j] = t->val[i];
        g.n++;
      }
    }
    free(t->key);
    free(t->val);
    *t = g;
  }
  size_t i = names_slot(t, off);
  t->n += !t->key[i];
  t->key[i] = off + 1;
  t->val[i] = name;
}

/* The DIEs enclosing the one at `target` in unit `cu`, outermost (the
 * unit DIE) first, in w->up: DIEs have no parent links, so the unit's
 * tree is walked, skipping by DW_AT_sibling the subtrees that end before
 * `target` (only ever forward), from its start or from where the last
 * walk in the unit stopped when that was before `target`. Returns how
 * many there are, or -1 when `target` is not the start of a DIE or lies
 * deeper than SCOPE_DEPTH. */
static int die_parents(const struct culpert__dwarf *d, const struct cu *cu, uint64_t target,
                       struct walk *w)
{
  struct rd r = rd_at(&d->info, cu->die_off);
  r.end = d->info.p + cu->end;
  if (w->depth >= 0 && w->unit == cu->off && w->at >= cu->die_off && w->at <= target)
    r.p = d->info.p + w->at;
  else
    w->depth = 0;
  w->unit = cu->off;
  while (!r.err && r.p < r.end) {
    uint64_t off = (uint64_t)(r.p - d->info.p);
    if (off > target)
      break;
    uint64_t code = rd_uleb(&r);
    if (code == 0) {
      if (w->depth > 0)
        w->depth--;
      continue;
    }
    if (off == target) {
      w->at = off;
      return w->depth;
    }
    const struct abbrev *a = abbrev_find(&cu->ab, code);
    if (!a)
      break;
    uint64_t sibling = 0;
    size_t k = 0;
    for (; k < a->nspec; k++) {
      const struct aspec *s = &cu->ab.specs[a->spec + k];
      struct val v;
      if (read_val(&r, s->form, s->implicit, cu, d, &v, 0))
        break;
      if (s->attr == AT_SIBLING && v.kind == V_REF)
        sibling = v.u;
    }
    if (k < a->nspec || (a->children && w->depth == SCOPE_DEPTH))
      break;
    if (!a->children)
      continue;
    if (sibling > (uint64_t)(r.p - d->info.p) && sibling <= target)
      r.p = d->info.p + sibling;
    else
      w->up[w->depth++] = (struct scope){off, a->tag};
  }
  w->depth = -1;
  return -1;
}

/* Whether the unnamed class at `off` is the closure type of a lambda:
 * GCC names its constructor "<lambda>" and destructor "~<lambda>",
 * declared before its other members. */
static int is_closure(const struct culpert__dwarf *d, const struct cu *cu, uint64_t off)
{
  struct rd r = rd_at(&d->info, off);
  r.end = d->info.p + cu->end;
  int depth = 0;
  for (int n = 0; n < 64 && !r.err && r.p < r.end; n++) {
    uint64_t code = rd_uleb(&r);
    if (code == 0) {
      if (--depth <= 0)
        return 0;
      continue;
    }
    const struct abbrev *a = abbrev_find(&cu->ab, code);
    if (!a)
      return 0;
    for (size_t k = 0; k < a->nspec; k++) {
      const struct aspec *s = &cu->ab.specs[a->spec + k];
      struct val v;
      if (read_val(&r, s->form, s->implicit, cu, d, &v, 0))
        return 0;
      if (depth == 1 && a->tag == TAG_SUBPROGRAM && s->attr == AT_NAME) {
        const char *name = val_str(d, cu, &v);
        if (name && strncmp(name + (name[0] == '~'), "<lambda", 7) == 0)
          return 1;
      }
    }
    if (a->children)
      depth++;
    else if (depth == 0)
      return 0;
  }
  return 0;
}

/* Languages whose functions live in no namespace or class. */
static int flat_language(uint64_t lang)
{
  switch (lang) {
  case 0x01: /* DW_LANG_C89 */
  case 0x02: /* DW_LANG_C */
  case 0x0c: /* DW_LANG_C99 */
  case 0x10: /* DW_LANG_ObjC */
  case 0x1d: /* DW_LANG_C11 */
  case 0x2c: /* DW_LANG_C17 */
    return 1;
  default:
    return 0;
  }
}

/* Everything one name needs. */
struct namer {
  const struct culpert__dwarf *d;
  const struct cu *home;
  struct units *units;
  struct names *names;
  struct culpert__pool *pool;
};

static const char *display_name(struct namer *nm, uint64_t off, int hops, const struct scope *up,
                                int n);

/* `name` with the names of the namespaces, classes and function in
 * up[1..n) (the parents of its DIE, outermost first) in front, joined by
 * "::": "std::vector<int, std::allocator<int> >::_M_realloc_insert<...>",
 * "main::<lambda>::operator()". A function among them (around a local
 * class such as a lambda's closure) is named as display_name names it,
 * with its own scopes in front, and ends the list. Unnamed scopes are
 * "(anonymous namespace)", "<lambda>", "(anonymous struct)" and the like.
 * Returns `name` itself when nothing is in front, or on any failure. */
static const char *qualify_in(struct namer *nm, const char *name, const struct scope *up, int n,
                              int hops)
{
  const char *outer = NULL, *q = name;
  int nparts = 0;
  /* On the heap: this recurses, and a snapshot may be written from a
   * thread with a small stack. */
  const char **part = n > 1 ? malloc((size_t)n * sizeof *part) : NULL;
  if (!part)
    return name;
  for (int i = n - 1; i >= 1 && !outer; i--) {
    uint64_t tag = up[i].tag;
    if (tag != TAG_NAMESPACE && tag != TAG_CLASS_TYPE && tag != TAG_STRUCTURE_TYPE &&
        tag != TAG_UNION_TYPE && tag != TAG_SUBPROGRAM)
      continue; /* lexical blocks and the like */
    struct dname dn;
    die_chain(nm->d, nm->home, nm->units, up[i].off, &dn);
    if (tag == TAG_SUBPROGRAM || (dn.plain && dn.plain_off != up[i].off)) {
      /* A function, or a scope declared elsewhere: named with its own
       * scopes, which are up[1..i) when it declares itself. */
      outer = hops < SCOPE_HOPS ? display_name(nm, up[i].off, hops + 1, up, i) : NULL;
      if (!outer)
        break;
    } else if (dn.plain) {
      part[nparts++] = dn.plain;
    } else if (tag == TAG_NAMESPACE) {
      part[nparts++] = "(anonymous namespace)";
    } else {
      const struct cu *cu = unit_at(nm->d, nm->home, nm->units, up[i].off);
      if (cu && tag != TAG_UNION_TYPE && is_closure(nm->d, cu, up[i].off))
        part[nparts++] = "<lambda>";
      else
        part[nparts++] = tag == TAG_CLASS_TYPE   ? "(anonymous class)"
                         : tag == TAG_UNION_TYPE ? "(anonymous union)"
                                                 : "(anonymous struct)";
    }
  }
  size_t len = strlen(name) + 1;
  if (outer)
    len += strlen(outer) + 2;
  for (int i = 0; i < nparts; i++)
    len += strlen(part[i]) + 2;
  char *buf = (outer || nparts) && len <= QUALIFIED_MAX ? malloc(len) : NULL, *at = buf;
  if (buf) {
    if (outer)
      at += sprintf(at, "%s::", outer);
    for (int i = nparts; i-- > 0;)
      at += sprintf(at, "%s::", part[i]);
    strcpy(at, name);
    if (pool_keep(nm->pool, buf))
      q = buf;
  }
  free(part);
  return q;
}

/* `name`, the plain name of the DIE at `off`, qualified (qualify_in)
 * with the scopes its unit's tree puts it in. */
static const char *qualify(struct namer *nm, uint64_t off, const char *name, int hops)
{
  const struct cu *cu = unit_at(nm->d, nm->home, nm->units, off);
  if (!cu || flat_language(cu->language))
    return name;
  struct walk *w = nm->names->walk;
  if (!w && (w = nm->names->walk = malloc(sizeof *w)) != NULL)
    w->depth = -1;
  if (!w)
    return name;
  int n = die_parents(nm->d, cu, off, w);
  if (n <= 1)
    return name;
  /* A copy: the next walk overwrites w->up. */
  struct scope *up = malloc((size_t)n * sizeof *up);
  if (!up)
    return name;
  memcpy(up, w->up, (size_t)n * sizeof *up);
  const char *q = qualify_in(nm, name, up, n, hops);
  free(up);
  return q;
}

/* The name of the function or scope at `off` as a profile shows it: its
 * demangled linkage name when it has one (a function around a lambda:
 * "app::Shop::run(int)"), else the qualified plain name of its
 * declaration; NULL when it has none. up[0..n), when n > 0, are the
 * parents of `off`, already known. Kept per offset. */
static const char *display_name(struct namer *nm, uint64_t off, int hops, const struct scope *up,
                                int n)
{
  const char *name = NULL;
  if (names_get(nm->names, off, &name))
    return name;
  struct dname dn;
  die_chain(nm->d, nm->home, nm->units, off, &dn);
  char *pretty = dn.linkage ? culpert__demangle(dn.linkage) : NULL;
  if (pretty)
    name = pool_keep(nm->pool, pretty);
  else if (dn.plain && dn.plain_off != off)
    name = display_name(nm, dn.plain_off, hops + 1, NULL, 0);
  else if (dn.plain && n > 0)
    name = qualify_in(nm, dn.plain, up, n, hops);
  else if (dn.plain)
    name = qualify(nm, off, dn.plain, hops);
  names_put(nm->names, off, name);
  return name;
}

/* The name of the inlined function whose abstract instance is at `off`:
 * its linkage name (*mangled set), else its qualified plain name. */
static const char *inline_name(struct namer *nm, uint64_t off, int *mangled)
{
  struct dname dn;
  die_chain(nm->d, nm->home, nm->units, off, &dn);
  *mangled = dn.linkage != NULL;
  if (dn.linkage || !dn.plain)
    return dn.linkage;
  const char *name = NULL;
  if (names_get(nm->names, dn.plain_off, &name))
    return name;
  name = qualify(nm, dn.plain_off, dn.plain, 0);
  names_put(nm->names, dn.plain_off, name);
  return name;
}

/* An inlined call found around a wanted address, before names are known. */
struct pending {
  size_t index;    /* into out[] */
  size_t seq;      /* DIE order */
  uint64_t origin; /* .debug_info offset of the inlined function, 0 if none */
  uint64_t call_file;
  uint64_t call_line;
};

struct pendings {
  struct pending *p;
  size_t n;
  size_t cap;
};

/* Walks the DIEs of one unit, recording each inlined call whose ranges
 * contain a wanted address (outer calls come first in DIE order). */
static int walk_unit(const struct culpert__dwarf *d, const struct cu *cu, const struct want *w,
                     size_t nw, struct pendings *pend)
{
  struct rd r = rd_at(&d->info, cu->die_off);
  r.end = d->info.p + cu->end;
  int depth = 0;
  while (!r.err && r.p < r.end) {
    uint64_t code = rd_uleb(&r);
    if (code == 0) {
      if (depth > 0)
        depth--;
      continue;
    }
    const struct abbrev *a = abbrev_find(&cu->ab, code);
    if (!a)
      return 0;
    struct val low = {V_NONE, 0, NULL, NULL}, high = low, ranges = low;
    uint64_t origin = 0, call_file = 0, call_line = 0;
    for (size_t k = 0; k < a->nspec; k++) {
      const struct aspec *s = &cu->ab.specs[a->spec + k];
      struct val v;
      if (read_val(&r, s->form, s->implicit, cu, d, &v, 0))
        return 0;
      if (a->tag != TAG_INLINED_SUBROUTINE)
        continue;
      switch (s->attr) {
      case AT_LOW_PC:
        low = v;
        break;
      case AT_HIGH_PC:
        high = v;
        break;
      case AT_RANGES:
        ranges = v;
        break;
      case AT_ABSTRACT_ORIGIN:
        origin = v.kind == V_REF ? v.u : 0;
        break;
      case AT_CALL_FILE:
        call_file = v.u;
        break;
      case AT_CALL_LINE:
        call_line = v.u;
        break;
      }
    }
    if (a->tag == TAG_INLINED_SUBROUTINE) {
      struct ranges rg;
      die_ranges(d, cu, &low, &high, &ranges, &rg);
      for (size_t k = 0; k < rg.n; k++) {
        for (size_t i = lower_bound(w, nw, rg.lo[k]); i < nw && w[i].vaddr < rg.hi[k]; i++) {
          if (pend->n == pend->cap) {
            size_t cap = pend->cap ? pend->cap * 2 : 256;
            struct pending *g = realloc(pend->p, cap * sizeof *g);
            if (!g)
              return -ENOMEM;
            pend->p = g;
            pend->cap = cap;
          }
          pend->p[pend->n] = (struct pending){w[i].index, pend->n, origin, call_file, call_line};
          pend->n++;
        }
      }
    }
    if (a->children && ++depth > 1024)
      return 0;
  }
  return 0;
}

static int pending_cmp(const void *x, const void *y)
{
  const struct pending *a = x, *b = y;
  if (a->index != b->index)
    return a->index < b->index ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* A plain name to qualify. */
struct plain {
  uint64_t off;
  const char *name;
};

static int plain_cmp(const void *x, const void *y)
{
  const struct plain *a = x, *b = y;
  return a->off < b->off ? -1 : a->off > b->off;
}

/* Qualifies the plain names of the pending calls in the order of their
 * declarations, so that the walks for their parents go on from one
 * another (see die_parents) instead of each starting over. Best effort:
 * inline_name finds what this leaves out. */
static void name_in_order(struct namer *nm, const struct pendings *pend)
{
  if (flat_language(nm->home->language))
    return;
  struct plain *v = malloc(pend->n * sizeof *v);
  size_t n = 0;
  if (!v)
    return;
  for (size_t i = 0; i < pend->n; i++) {
    struct dname dn;
    if (!pend->p[i].origin)
      continue;
    die_chain(nm->d, nm->home, nm->units, pend->p[i].origin, &dn);
    if (!dn.linkage && dn.plain)
      v[n++] = (struct plain){dn.plain_off, dn.plain};
  }
  qsort(v, n, sizeof *v, plain_cmp);
  for (size_t i = 0; i < n; i++) {
    const char *name;
    if (!names_get(nm->names, v[i].off, &name))
      names_put(nm->names, v[i].off, qualify(nm, v[i].off, v[i].name, 0));
  }
  free(v);
}

/* Turns the pending calls of one unit into results: names, call files. */
static int finish_unit(const struct culpert__dwarf *d, const struct cu *cu, struct units *units,
                       struct names *names, struct pendings *pend, struct culpert__srcpos *out,
                       struct culpert__pool *pool)
{
  struct namer nm = {d, cu, units, names, pool};
  struct lhdr h;
  uint64_t next;
  int have_lines = 0;
  int rc = 0;
  if (pend->n == 0)
    return 0;
  if (cu->has_stmt_list) {
    rc = lhdr_read(d, cu->stmt_list, &h, &next);
    if (rc == -ENOMEM)
      return rc;
    have_lines = rc == 0;
    rc = 0;
  }
  name_in_order(&nm, pend);
  /* Group by address, keeping DIE order (outermost call first). */
  qsort(pend->p, pend->n, sizeof *pend->p, pending_cmp);
  for (size_t i = 0, end; i < pend->n && rc == 0; i = end) {
    size_t index = pend->p[i].index;
    for (end = i; end < pend->n && pend->p[end].index == index; end++)
      ;
    struct culpert__srcpos *o = &out[index];
    struct culpert__inline *inl = pool_keep(pool, calloc(o->ninl + (end - i), sizeof *inl));
    if (!inl) {
      rc = -ENOMEM;
      break;
    }
    if (o->ninl)
      memcpy(inl, o->inl, o->ninl * sizeof *inl);
    size_t n = o->ninl;
    for (size_t k = i; k < end; k++) {
      const struct pending *p = &pend->p[k];
      int mangled = 0;
      inl[n].name = p->origin ? pool_strdup(pool, inline_name(&nm, p->origin, &mangled)) : NULL;
      inl[n].mangled = mangled;
      inl[n].call_file = have_lines ? lhdr_file(&h, p->call_file, pool) : NULL;
      inl[n].call_line = p->call_line > UINT32_MAX ? UINT32_MAX : (uint32_t)p->call_line;
      n++;
    }
    o->inl = inl;
    o->ninl = (uint32_t)n;
  }
  if (have_lines)
    lhdr_free(&h);
  pend->n = 0;
  return rc;
}

/* ---------------------------------------------------------------------- */

/* ---------------------------------------------------------------------- */
/* .debug_aranges                                                          */

/* The unit each wanted address falls in according to .debug_aranges. */
struct arange_hit {
  uint64_t lo;   /* start of the range that placed it */
  uint64_t unit; /* .debug_info offset of the unit header */
  int found;
};

/* Goes through the address ranges of .debug_aranges and places each
 * wanted address (sorted) in the unit of the range that contains it, and
 * stops once every address is placed: ranges do not overlap, and the sets
 * come in unit order, so addresses in early units (and a compressed
 * section is inflated only that far). No table of ranges is built or
 * sorted: a big object has thousands of ranges and a profile a handful of
 * addresses in it. A bad set only loses its own ranges. With `listed`,
 * reads every set instead and adds to `listed` each unit that has at
 * least one range (best effort: what memory refuses is left out). */
static void aranges_place(const struct culpert__dwarf *d, const struct want *w, size_t nw,
                          struct arange_hit *hit, struct offsets *listed)
{
  const struct culpert__dwarf_section *sec = &d->aranges;
  uint64_t off = 0;
  size_t placed = 0;
  int rc = 0;
  while (sec->p && off < sec->len && (listed ? rc == 0 : placed < nw)) {
    struct rd r = rd_at(sec, off);
    uint64_t len;
    size_t offsize = (size_t)unit_length(&r, &len);
    if (offsize == 0)
      break;
    uint64_t next = (uint64_t)(r.p - sec->p) + len;
    sec_need(sec, next);
    r.end = r.p + len;
    unsigned version = (unsigned)rd_u(&r, 2);
    uint64_t unit = rd_u(&r, offsize);
    size_t asize = (size_t)rd_u(&r, 1);
    unsigned ssize = (unsigned)rd_u(&r, 1);
    if (!r.err && version == 2 && (asize == 8 || asize == 4) && ssize == 0 && unit <= INT64_MAX) {
      /* Tuples start at a multiple of twice the address size. */
      uint64_t at = (uint64_t)(r.p - sec->p) - off;
      rd_skip(&r, (2 * asize - at % (2 * asize)) % (2 * asize));
      int listed_here = 0;
      for (;;) {
        uint64_t lo = rd_u(&r, asize), size = rd_u(&r, asize);
        if (r.err || (lo == 0 && size == 0))
          break;
        if (size == 0 || lo + size < lo)
          continue;
        if (listed && !listed_here) {
          rc = offsets_add(listed, unit);
          listed_here = 1;
        }
        for (size_t i = lower_bound(w, nw, lo); i < nw && w[i].vaddr < lo + size; i++) {
          placed += !hit[i].found;
          if (!hit[i].found || lo >= hit[i].lo)
            hit[i] = (struct arange_hit){lo, unit, 1};
        }
      }
    }
    if (next <= off)
      break;
    off = next;
  }
}

/* ---------------------------------------------------------------------- */
/* Units to read                                                           */

/*
 * The units that may describe a wanted address: from .debug_aranges for
 * the addresses it covers; for the others, every unit whose own ranges
 * contain one (or that states no ranges), which means reading every unit
 * header (what .debug_aranges lets us skip).
 */
static int units_wanted(const struct culpert__dwarf *d, const struct want *w, size_t nw,
                        struct offsets *units)
{
  struct arange_hit *hit = NULL;
  struct want *left = NULL;
  struct offsets listed = {0};
  size_t nleft = 0;
  int rc = 0;
  hit = calloc(nw, sizeof *hit);
  left = malloc(nw * sizeof *left);
  if (!hit || !left) {
    rc = -ENOMEM;
    goto out;
  }
  aranges_place(d, w, nw, hit, NULL);
  for (size_t i = 0; i < nw && rc == 0; i++) {
    if (hit[i].found)
      rc = offsets_add(units, hit[i].unit);
    else
      left[nleft++] = w[i];
  }
  /* A unit with ranges in .debug_aranges has them all there: only the
   * others can hold an address no range covers (the executable's _start,
   * which every libunwind stack ends in, comes from crt1.o, which has no
   * DWARF: without this, every profile read every unit of the program). */
  if (rc == 0 && nleft > 0) {
    aranges_place(d, NULL, 0, NULL, &listed);
    offsets_sort(&listed);
  }
  for (uint64_t off = 0; rc == 0 && nleft > 0 && off < d->info.len;) {
    struct cu cu;
    struct ranges rg;
    uint64_t next = 0;
    if (offsets_has(&listed, off)) {
      struct rd r = rd_at(&d->info, off);
      uint64_t len;
      if (unit_length(&r, &len) == 0)
        break;
      off = (uint64_t)(r.p - d->info.p) + len;
      continue;
    }
    int orc = cu_open(d, off, &cu, &next, &rg);
    if (orc == -ENOMEM) {
      rc = orc;
      break;
    }
    if (orc == 0) {
      if (rg.n == 0 || ranges_hit(&rg, left, nleft))
        rc = offsets_add(units, off);
      abbrevs_free(&cu.ab);
    }
    if (next <= off)
      break;
    off = next;
  }
  offsets_sort(units);

out:
  free(hit);
  free(left);
  free(listed.v);
  return rc;
}

/* Reads one unit: its line program (unless already run, as listed in
 * `done`) and its inlined calls around wanted addresses. */
static int unit_resolve(struct job *j, uint64_t off, struct units *units, struct names *names,
                        struct pendings *pend, struct offsets *done)
{
  struct cu cu;
  struct ranges rg;
  uint64_t next = 0;
  int rc = cu_open(j->d, off, &cu, &next, &rg);
  if (rc != 0)
    return rc == -ENOMEM ? rc : 0;
  if (cu.has_stmt_list && !offsets_has(done, cu.stmt_list)) {
    rc = offsets_add(done, cu.stmt_list);
    offsets_sort(done);
    if (rc == 0)
      rc = lines_unit(j, cu.stmt_list);
  }
  if (rc == 0)
    rc = walk_unit(j->d, &cu, j->w, j->nw, pend);
  if (rc == 0)
    rc = finish_unit(j->d, &cu, units, names, pend, j->out, j->pool);
  abbrevs_free(&cu.ab);
  return rc;
}

int culpert__dwarf_resolve(const struct culpert__dwarf *d, const uint64_t *vaddrs, size_t n,
                           struct culpert__srcpos *out, struct culpert__pool *pool)
{
  struct offsets wanted = {0}, done = {0};
  struct pendings pend = {0};
  struct units units = {0};
  struct names names = {0};
  struct want *w = NULL;
  int rc = 0;
  for (size_t i = 0; i < n; i++)
    out[i] = (struct culpert__srcpos){NULL, 0, 0, NULL, 0};
  if (n == 0 || !d->line.p)
    return 0;
  w = malloc(n * sizeof *w);
  if (!w)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++)
    w[i] = (struct want){vaddrs[i], i};
  qsort(w, n, sizeof *w, want_cmp);
  struct job j = {.d = d, .w = w, .nw = n, .out = out, .pool = pool};
  if (d->info.p && d->abbrev.p) {
    rc = units_wanted(d, w, n, &wanted);
    for (size_t i = 0; i < wanted.n && rc == 0; i++)
      rc = unit_resolve(&j, wanted.v[i], &units, &names, &pend, &done);
  }
  if (rc != 0)
    goto out;

  /* Addresses no unit's line program placed: try every other program. */
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!out[w[i].index].file && !out[w[i].index].line)
      w[k++] = w[i];
  if (k > 0) {
    j.nw = k;
    rc = lines_pass(&j, &done);
  }

out:
  free(w);
  free(wanted.v);
  free(done.v);
  free(pend.p);
  units_free(&units);
  names_free(&names);
  return rc;
}
