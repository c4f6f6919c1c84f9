/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * unwind.c: culpert's own walk of the DWARF call-frame information
 * (.eh_frame), the fast path of CULPERT_STACK=libunwind on x86-64.
 *
 * For each return address the walk needs one rule: where the caller's
 * stack pointer (the CFA) is, relative to rsp or rbp, and where rbp was
 * saved. Rules are cached in one process-wide table of 4096 words, each
 * word a whole entry (address tag and rule), so readers need no lock and
 * never see a torn entry, and in a memo of 32 per thread. A miss finds
 * the object with _dl_find_object, the FDE through .eh_frame_hdr's sorted
 * table, and runs the CIE's and the FDE's instructions up to the
 * address.
 *
 * Anything the rules cannot express (a DWARF expression, a CFA based on
 * another register, a signal frame, code without call-frame information,
 * a stack pointer outside the thread's stack) makes the walk give up and
 * return -1: stack.c then asks libunwind for the whole stack, so the
 * result is always what libunwind would give, only faster when the rules
 * suffice.
 *
 * Runs inside malloc with the guard set: no allocation, no stdio, and a
 * lock only on a miss. Every read of the stack is bounds-checked against the thread's
 * stack and every read of call-frame data against the object's mapping,
 * so a corrupt stack ends the walk instead of faulting.
 */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "internal.h"
#include "loader.h"

#if defined(__x86_64__) && defined(__GLIBC__) &&                                                   \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define HAVE_CFI_WALK 1
#else
#define HAVE_CFI_WALK 0
#endif

#if HAVE_CFI_WALK

/* DWARF register numbers on x86-64 and the call-frame opcodes used. */
enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };
enum {
  CFA_ADVANCE_LOC = 0x40,
  CFA_OFFSET = 0x80,
  CFA_RESTORE = 0xc0,
  CFA_NOP = 0x00,
  CFA_SET_LOC = 0x01,
  CFA_ADVANCE_LOC1 = 0x02,
  CFA_ADVANCE_LOC2 = 0x03,
  CFA_ADVANCE_LOC4 = 0x04,
  CFA_OFFSET_EXTENDED = 0x05,
  CFA_RESTORE_EXTENDED = 0x06,
  CFA_UNDEFINED = 0x07,
  CFA_SAME_VALUE = 0x08,
  CFA_REGISTER = 0x09,
  CFA_REMEMBER_STATE = 0x0a,
  CFA_RESTORE_STATE = 0x0b,
  CFA_DEF_CFA = 0x0c,
  CFA_DEF_CFA_REGISTER = 0x0d,
  CFA_DEF_CFA_OFFSET = 0x0e,
  CFA_DEF_CFA_EXPRESSION = 0x0f,
  CFA_EXPRESSION = 0x10,
  CFA_OFFSET_EXTENDED_SF = 0x11,
  CFA_DEF_CFA_SF = 0x12,
  CFA_DEF_CFA_OFFSET_SF = 0x13,
  CFA_VAL_OFFSET = 0x14,
  CFA_VAL_OFFSET_SF = 0x15,
  CFA_VAL_EXPRESSION = 0x16,
  CFA_GNU_ARGS_SIZE = 0x2e,
  CFA_GNU_NEGATIVE_OFFSET_EXTENDED = 0x2f,
};
/* Pointer encodings (DW_EH_PE_*). */
enum {
  PE_OMIT = 0xff,
  PE_ABSPTR = 0x00,
  PE_ULEB128 = 0x01,
  PE_UDATA2 = 0x02,
  PE_UDATA4 = 0x03,
  PE_UDATA8 = 0x04,
  PE_SLEB128 = 0x09,
  PE_SDATA2 = 0x0a,
  PE_SDATA4 = 0x0b,
  PE_SDATA8 = 0x0c,
  PE_PCREL = 0x10,
  PE_DATAREL = 0x30,
  PE_INDIRECT = 0x80,
};

/* ---------------------------------------------------------------- rules */

/* What a frame's rule says. */
enum kind { RULE_STEP, RULE_END, RULE_GIVE_UP };

struct rule {
  enum kind kind;
  int cfa_rbp;      /* CFA = (cfa_rbp ? rbp : rsp) + cfa_off */
  uint32_t cfa_off; /* a multiple of 8 */
  uint32_t rbp_at;  /* 0: rbp unchanged; k: caller's rbp at CFA - 8k */
};

/*
 * A rule as one word, which is also a cache entry: bits 0-34 the
 * address's bits 12-46 (the cache index holds bits 0-11), bit 35 set in
 * every filled entry, bits 36-37 the kind, bit 38 cfa_rbp, bits 39-54
 * cfa_off / 8, bits 55-62 rbp_at. The walk reads the offsets straight
 * out of it: (w >> 36) & 0x7fff8 is cfa_off, (w >> 52) & 0x7f8 is 8 *
 * rbp_at. The return address is always at CFA - 8 (anything else gives
 * up).
 */
#define CACHE_BITS   12u
#define CACHE_SIZE   (1u << CACHE_BITS)
#define TAG_BITS     35u
#define FILLED       (UINT64_C(1) << 35)
#define KEY_MASK     (FILLED | (FILLED - 1u))
#define KIND_SHIFT   36u
#define KIND_MASK    (UINT64_C(3) << KIND_SHIFT)
#define CFA_RBP      (UINT64_C(1) << 38)
#define CFA_OFF(w)   (((w) >> 36) & 0x7fff8u)
#define RBP_SLOT(w)  (((w) >> 52) & 0x7f8u)
#define MAX_ADDR     (UINT64_C(1) << (CACHE_BITS + TAG_BITS))
#define GIVE_UP_WORD ((uint64_t)RULE_GIVE_UP << KIND_SHIFT)

static _Atomic uint64_t cache[CACHE_SIZE];
/* Bumped by every flush; a fill that raced a flush takes its word back. */
static _Atomic uint64_t generation;
/* dlpi_subs when the cache was last flushed: objects unloaded since. */
static _Atomic unsigned long long seen_subs;
/* Held by a miss (which takes the loader's lock in dl_iterate_phdr) and
 * across fork(), so a child never inherits a loader lock held by a thread
 * that does not exist there. */
static culpert__lock_t miss_lock;

static uint64_t key_of(uintptr_t addr)
{
  return ((uint64_t)addr >> CACHE_BITS) | FILLED;
}

/* The rule's word, or GIVE_UP_WORD if its offsets do not fit. */
static uint64_t encode(uintptr_t addr, const struct rule *r)
{
  if (r->kind == RULE_STEP && (r->cfa_off / 8u >= (1u << 16) || r->rbp_at >= (1u << 8)))
    return GIVE_UP_WORD;
  return key_of(addr) | (uint64_t)r->kind << KIND_SHIFT | (r->cfa_rbp ? CFA_RBP : 0) |
         (uint64_t)(r->cfa_off / 8u) << 39 | (uint64_t)r->rbp_at << 55;
}

/* ---------------------------------------------------------------- reading .eh_frame */

/* A bounded reader over an object's mapping: any read past `end` sets
 * `bad` and yields zero. */
struct reader {
  const uint8_t *p, *end;
  int bad;
};

static int need(struct reader *r, size_t n)
{
  if (r->bad || (size_t)(r->end - r->p) < n) {
    r->bad = 1;
    return 0;
  }
  return 1;
}

static uint64_t rd_fixed(struct reader *r, size_t n)
{
  uint64_t v = 0;
  if (!need(r, n))
    return 0;
  memcpy(&v, r->p, n); /* little-endian host */
  r->p += n;
  return v;
}

static uint64_t rd_uleb(struct reader *r)
{
  uint64_t v = 0;
  for (unsigned shift = 0; need(r, 1); shift += 7) {
    uint8_t b = *r->p++;
    if (shift < 64)
      v |= (uint64_t)(b & 0x7fu) << shift;
    if (!(b & 0x80u))
      return v;
  }
  return 0;
}

static int64_t rd_sleb(struct reader *r)
{
  uint64_t v = 0;
  unsigned shift = 0;
  while (need(r, 1)) {
    uint8_t b = *r->p++;
    if (shift < 64)
      v |= (uint64_t)(b & 0x7fu) << shift;
    shift += 7;
    if (!(b & 0x80u)) {
      if (shift < 64 && (b & 0x40u))
        v |= ~UINT64_C(0) << shift;
      return (int64_t)v;
    }
  }
  return 0;
}

/* A pointer in encoding `enc`; `datarel` is the base of DW_EH_PE_datarel
 * (.eh_frame_hdr's start). Indirect pointers are not followed: only
 * personality routines use them, and those are only skipped. */
static uintptr_t rd_pointer(struct reader *r, uint8_t enc, uintptr_t datarel)
{
  uintptr_t here = (uintptr_t)r->p;
  uint64_t v;
  switch (enc & 0x0fu) {
  case PE_ABSPTR:
  case PE_UDATA8:
  case PE_SDATA8:
    v = rd_fixed(r, 8);
    break;
  case PE_ULEB128:
    v = rd_uleb(r);
    break;
  case PE_SLEB128:
    v = (uint64_t)rd_sleb(r);
    break;
  case PE_UDATA2:
    v = rd_fixed(r, 2);
    break;
  case PE_SDATA2:
    v = (uint64_t)(int64_t)(int16_t)rd_fixed(r, 2);
    break;
  case PE_UDATA4:
    v = rd_fixed(r, 4);
    break;
  case PE_SDATA4:
    v = (uint64_t)(int64_t)(int32_t)rd_fixed(r, 4);
    break;
  default:
    r->bad = 1;
    return 0;
  }
  switch (enc & 0x70u) {
  case 0:
    break;
  case PE_PCREL:
    v += here;
    break;
  case PE_DATAREL:
    v += datarel;
    break;
  default:
    r->bad = 1; /* textrel, funcrel, aligned: not used in .eh_frame on x86-64 */
  }
  return (uintptr_t)v;
}

/* One register's rule while the instructions run. */
enum reg_how { REG_SAME, REG_UNDEFINED, REG_AT_CFA, REG_OTHER };
struct reg_rule {
  enum reg_how how;
  int64_t off; /* REG_AT_CFA: saved at CFA + off */
};

struct row {
  int cfa_reg;     /* -1: an expression or no CFA yet */
  int64_t cfa_off; /* CFA = cfa_reg + cfa_off */
  struct reg_rule rbp, ra;
  int rsp_rule; /* rsp has a rule of its own (it is the CFA otherwise) */
};

struct cie {
  uint64_t code_align;
  int64_t data_align;
  uint8_t fde_enc; /* DW_EH_PE_* of the FDE's addresses */
  int has_aug;     /* 'z': FDEs carry augmentation data to skip */
  const uint8_t *insns, *insns_end;
};

/* An entry's start and end: a 32-bit length, or 0xffffffff and a 64-bit
 * one. Returns 0 on a bad or zero-length (terminator) entry. */
static int entry_bounds(struct reader *r, const uint8_t **end)
{
  uint64_t len = rd_fixed(r, 4);
  if (len == 0xffffffffu)
    len = rd_fixed(r, 8);
  if (r->bad || len == 0 || len > (uint64_t)(r->end - r->p))
    return 0;
  *end = r->p + len;
  return 1;
}

static int parse_cie(const uint8_t *at, const uint8_t *map_end, struct cie *c)
{
  struct reader r = {at, map_end, 0};
  const uint8_t *end;
  if (!entry_bounds(&r, &end))
    return 0;
  r.end = end;
  if (rd_fixed(&r, 4) != 0)
    return 0; /* not a CIE */
  uint8_t version = (uint8_t)rd_fixed(&r, 1);
  if (version != 1 && version != 3)
    return 0;
  const char *aug = (const char *)r.p;
  size_t aug_len = strnlen(aug, (size_t)(r.end - r.p));
  if (!need(&r, aug_len + 1))
    return 0;
  r.p += aug_len + 1;
  c->code_align = rd_uleb(&r);
  c->data_align = rd_sleb(&r);
  uint64_t ra_reg = version == 1 ? rd_fixed(&r, 1) : rd_uleb(&r);
  if (ra_reg != REG_RA)
    return 0;
  c->fde_enc = PE_ABSPTR;
  c->has_aug = aug[0] == 'z';
  if (c->has_aug) {
    uint64_t len = rd_uleb(&r);
    if (!need(&r, len))
      return 0;
    const uint8_t *aug_end = r.p + len;
    for (size_t i = 1; i < aug_len && !r.bad; i++) {
      switch (aug[i]) {
      case 'R':
        c->fde_enc = (uint8_t)rd_fixed(&r, 1);
        break;
      case 'L':
        (void)rd_fixed(&r, 1); /* LSDA encoding: only exceptions need it */
        break;
      case 'P': {
        uint8_t enc = (uint8_t)rd_fixed(&r, 1);
        (void)rd_pointer(&r, enc & (uint8_t)~PE_INDIRECT, 0);
        break;
      }
      default:
        return 0; /* 'S' (a signal frame) and anything unknown: libunwind's */
      }
    }
    r.p = aug_end;
  } else if (aug_len != 0) {
    return 0;
  }
  if (r.bad)
    return 0;
  c->insns = r.p;
  c->insns_end = r.end;
  return 1;
}

static void set_reg(struct row *row, uint64_t reg, enum reg_how how, int64_t off)
{
  struct reg_rule rule = {how, off};
  if (reg == REG_RBP)
    row->rbp = rule;
  else if (reg == REG_RA)
    row->ra = rule;
  else if (reg == REG_RSP)
    row->rsp_rule = 1;
}

/* v * factor, wrapping instead of overflowing on garbage input. */
static int64_t scaled(uint64_t v, int64_t factor)
{
  return (int64_t)(v * (uint64_t)factor);
}

#define STATE_DEPTH 8

/*
 * Runs call-frame instructions [p, end) from location `loc`, stopping
 * before the first row that starts beyond `target`. `init` is the row
 * after the CIE's instructions (what DW_CFA_restore returns to), NULL
 * while running them. Returns 0 on anything it cannot follow.
 */
static int run(const struct cie *c, const uint8_t *p, const uint8_t *end, uintptr_t loc,
               uintptr_t target, struct row *row, const struct row *init)
{
  struct reader r = {p, end, 0};
  struct row saved[STATE_DEPTH];
  unsigned depth = 0;
  while (r.p < r.end && !r.bad) {
    uint8_t op = *r.p++;
    uint64_t reg, delta = 0;
    switch (op & 0xc0u) {
    case CFA_ADVANCE_LOC:
      delta = op & 0x3fu;
      goto advance;
    case CFA_OFFSET:
      set_reg(row, op & 0x3fu, REG_AT_CFA, scaled(rd_uleb(&r), c->data_align));
      continue;
    case CFA_RESTORE:
      reg = op & 0x3fu;
      goto restore;
    default:
      break;
    }
    switch (op) {
    case CFA_NOP:
      continue;
    case CFA_ADVANCE_LOC1:
      delta = rd_fixed(&r, 1);
      goto advance;
    case CFA_ADVANCE_LOC2:
      delta = rd_fixed(&r, 2);
      goto advance;
    case CFA_ADVANCE_LOC4:
      delta = rd_fixed(&r, 4);
      goto advance;
    case CFA_OFFSET_EXTENDED:
      reg = rd_uleb(&r);
      set_reg(row, reg, REG_AT_CFA, scaled(rd_uleb(&r), c->data_align));
      continue;
    case CFA_OFFSET_EXTENDED_SF:
      reg = rd_uleb(&r);
      set_reg(row, reg, REG_AT_CFA, scaled((uint64_t)rd_sleb(&r), c->data_align));
      continue;
    case CFA_GNU_NEGATIVE_OFFSET_EXTENDED:
      reg = rd_uleb(&r);
      set_reg(row, reg, REG_AT_CFA, scaled(0u - rd_uleb(&r), c->data_align));
      continue;
    case CFA_RESTORE_EXTENDED:
      reg = rd_uleb(&r);
      goto restore;
    case CFA_UNDEFINED:
      set_reg(row, rd_uleb(&r), REG_UNDEFINED, 0);
      continue;
    case CFA_SAME_VALUE:
      set_reg(row, rd_uleb(&r), REG_SAME, 0);
      continue;
    case CFA_REGISTER:
      reg = rd_uleb(&r);
      (void)rd_uleb(&r);
      set_reg(row, reg, REG_OTHER, 0);
      continue;
    case CFA_VAL_OFFSET:
    case CFA_VAL_OFFSET_SF:
      reg = rd_uleb(&r);
      (void)(op == CFA_VAL_OFFSET ? (int64_t)rd_uleb(&r) : rd_sleb(&r));
      set_reg(row, reg, REG_OTHER, 0);
      continue;
    case CFA_EXPRESSION:
    case CFA_VAL_EXPRESSION: {
      reg = rd_uleb(&r);
      uint64_t len = rd_uleb(&r);
      if (!need(&r, len))
        return 0;
      r.p += len;
      set_reg(row, reg, REG_OTHER, 0);
      continue;
    }
    case CFA_REMEMBER_STATE:
      if (depth == STATE_DEPTH)
        return 0;
      saved[depth++] = *row;
      continue;
    case CFA_RESTORE_STATE:
      if (depth == 0)
        return 0;
      *row = saved[--depth]; /* the CFA too, as GCC's and LLVM's output assume */
      continue;
    case CFA_DEF_CFA:
      row->cfa_reg = (int)rd_uleb(&r);
      row->cfa_off = (int64_t)rd_uleb(&r);
      continue;
    case CFA_DEF_CFA_SF:
      row->cfa_reg = (int)rd_uleb(&r);
      row->cfa_off = scaled((uint64_t)rd_sleb(&r), c->data_align);
      continue;
    case CFA_DEF_CFA_REGISTER:
      row->cfa_reg = (int)rd_uleb(&r);
      continue;
    case CFA_DEF_CFA_OFFSET:
      row->cfa_off = (int64_t)rd_uleb(&r);
      continue;
    case CFA_DEF_CFA_OFFSET_SF:
      row->cfa_off = scaled((uint64_t)rd_sleb(&r), c->data_align);
      continue;
    case CFA_DEF_CFA_EXPRESSION: {
      uint64_t len = rd_uleb(&r);
      if (!need(&r, len))
        return 0;
      r.p += len;
      row->cfa_reg = -1;
      continue;
    }
    case CFA_GNU_ARGS_SIZE:
      (void)rd_uleb(&r);
      continue;
    default:
      return 0; /* DW_CFA_set_loc, vendor opcodes */
    }
  advance:
    if (init == NULL)
      return 0; /* a CIE does not advance */
    delta *= c->code_align;
    if (delta > target - loc)
      return 1; /* the next row starts beyond the target */
    loc += delta;
    continue;
  restore:
    if (init == NULL)
      return 0;
    if (reg == REG_RBP)
      row->rbp = init->rbp;
    else if (reg == REG_RA)
      row->ra = init->ra;
  }
  return !r.bad;
}

/* The FDE whose range holds `addr`, through .eh_frame_hdr's table sorted
 * by start address (encoded datarel|sdata4, as every linker writes it). */
static const uint8_t *find_fde(const uint8_t *hdr, const uint8_t *map_end, uintptr_t addr)
{
  struct reader r = {hdr, map_end, 0};
  uint8_t version = (uint8_t)rd_fixed(&r, 1);
  uint8_t frame_enc = (uint8_t)rd_fixed(&r, 1);
  uint8_t count_enc = (uint8_t)rd_fixed(&r, 1);
  uint8_t table_enc = (uint8_t)rd_fixed(&r, 1);
  if (r.bad || version != 1 || count_enc == PE_OMIT || table_enc != (PE_DATAREL | PE_SDATA4))
    return NULL;
  (void)rd_pointer(&r, frame_enc, (uintptr_t)hdr);
  uint64_t count = rd_pointer(&r, count_enc, (uintptr_t)hdr);
  if (r.bad || count == 0 || count > (uint64_t)(r.end - r.p) / 8u)
    return NULL;
  const uint8_t *table = r.p;
  int64_t rel = (int64_t)addr - (int64_t)(uintptr_t)hdr;
  uint64_t lo = 0, hi = count; /* find the last entry starting at or before addr */
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    int32_t start;
    memcpy(&start, table + mid * 8u, 4);
    if ((int64_t)start <= rel)
      lo = mid;
    else
      hi = mid;
  }
  int32_t start, fde;
  memcpy(&start, table + lo * 8u, 4);
  memcpy(&fde, table + lo * 8u + 4u, 4);
  if ((int64_t)start > rel)
    return NULL;
  return hdr + fde;
}

/* The rule at `addr` from one object's call-frame information: its
 * .eh_frame_hdr at `hdr`, every read inside [map_start, map_end). */
static void rule_from(const uint8_t *hdr, const uint8_t *map_start, const uint8_t *map_end,
                      uintptr_t addr, struct rule *out)
{
  out->kind = RULE_GIVE_UP;
  if (hdr < map_start || hdr >= map_end)
    return;
  const uint8_t *fde = find_fde(hdr, map_end, addr);
  if (fde == NULL || fde < map_start || fde >= map_end)
    return;
  struct reader r = {fde, map_end, 0};
  const uint8_t *end;
  if (!entry_bounds(&r, &end))
    return;
  r.end = end;
  const uint8_t *cie_field = r.p;
  uint32_t cie_off = (uint32_t)rd_fixed(&r, 4);
  if (r.bad || cie_off == 0 || cie_off > (uintptr_t)(cie_field - map_start))
    return;
  struct cie c;
  if (!parse_cie(cie_field - cie_off, map_end, &c))
    return;
  uintptr_t begin = rd_pointer(&r, c.fde_enc, 0);
  uintptr_t range = rd_pointer(&r, c.fde_enc & 0x0fu, 0);
  if (r.bad || addr < begin || addr - begin >= range)
    return;
  if (c.has_aug) {
    uint64_t len = rd_uleb(&r);
    if (!need(&r, len))
      return;
    r.p += len;
  }
  struct row init = {-1, 0, {REG_SAME, 0}, {REG_UNDEFINED, 0}, 0};
  if (!run(&c, c.insns, c.insns_end, begin, addr, &init, NULL))
    return;
  struct row row = init;
  if (!run(&c, r.p, r.end, begin, addr, &row, &init))
    return;
  if (row.ra.how == REG_UNDEFINED) {
    out->kind = RULE_END; /* the outermost frame: _start, a thread's start */
    return;
  }
  if ((row.cfa_reg != REG_RSP && row.cfa_reg != REG_RBP) || row.cfa_off <= 0 ||
      row.cfa_off > UINT32_MAX || row.cfa_off % 8 != 0 || row.ra.how != REG_AT_CFA ||
      row.ra.off != -8 || row.rsp_rule)
    return;
  out->cfa_rbp = row.cfa_reg == REG_RBP;
  out->cfa_off = (uint32_t)row.cfa_off;
  if (row.rbp.how == REG_SAME) {
    out->rbp_at = 0;
  } else if (row.rbp.how == REG_AT_CFA && row.rbp.off < 0 && row.rbp.off >= -8 * 255 &&
             row.rbp.off % 8 == 0) {
    out->rbp_at = (uint32_t)(-row.rbp.off / 8);
  } else {
    return;
  }
  out->kind = RULE_STEP;
}

/* The bounds of the loaded segment that holds `at`. */
struct segment {
  uintptr_t at, lo, hi;
};

static int segment_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  struct segment *seg = data;
  (void)size;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && seg->at >= lo && seg->at - lo < ph->p_memsz) {
      seg->lo = lo;
      seg->hi = lo + ph->p_memsz;
      return 1;
    }
  }
  return 0;
}

/* The rule at `addr` (a return address minus one, or the exact address
 * of the walk's first frame), read from the call-frame information of the
 * object that holds it. _dl_find_object's range is the whole object,
 * except for an executable whose segments leave gaps between them (linked
 * with -z max-page-size=0x200000 for huge pages, as node is): glibc then
 * gives only the segment that holds `addr`, which is code, and never its
 * .eh_frame_hdr. The reads are then bounded by the segment that holds
 * .eh_frame_hdr (and .eh_frame, which the linker puts beside it). */
static void lookup_slow(uintptr_t addr, struct rule *out)
{
  struct dl_find_object obj;
  out->kind = RULE_GIVE_UP;
  if (_dl_find_object((void *)addr, &obj) != 0 || obj.dlfo_eh_frame == NULL)
    return;
  const uint8_t *lo = obj.dlfo_map_start, *hi = obj.dlfo_map_end;
  const uint8_t *hdr = obj.dlfo_eh_frame;
  if (hdr < lo || hdr >= hi) {
    struct segment seg = {(uintptr_t)hdr, 0, 0};
    if (!culpert__loader_usable() || dl_iterate_phdr(segment_cb, &seg) == 0)
      return;
    lo = (const uint8_t *)seg.lo;
    hi = (const uint8_t *)seg.hi;
  }
  rule_from(hdr, lo, hi, addr, out);
}

uint64_t culpert__unwind_rule_word(const void *eh_frame_hdr, const void *lo, const void *hi,
                                   uintptr_t addr)
{
  struct rule rule;
  rule_from(eh_frame_hdr, lo, hi, addr, &rule);
  return encode(addr, &rule);
}

static int subs_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
    *(unsigned long long *)data = info->dlpi_subs;
  return 1; /* the counters are the same in every call: one is enough */
}

void culpert__unwind_flush(void)
{
  atomic_fetch_add(&generation, 1);
  for (unsigned i = 0; i < CACHE_SIZE; i++)
    atomic_store_explicit(&cache[i], 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
}

/* A cache miss: flush first if an object was unloaded since the last
 * flush (its addresses may now hold other code), then read the rule and
 * publish it unless a flush ran meanwhile. Returns the rule's word. Where
 * the loader's lock is held for good (loader.h) nothing can be unloaded:
 * dlclose would wait for that lock too. */
static uint64_t lookup_miss_locked(uintptr_t addr)
{
  unsigned long long subs = atomic_load(&seen_subs);
  if (culpert__loader_usable())
    dl_iterate_phdr(subs_cb, &subs);
  if (subs != atomic_load(&seen_subs)) {
    atomic_store(&seen_subs, subs);
    culpert__unwind_flush();
  }
  uint64_t gen = atomic_load(&generation);
  struct rule rule;
  lookup_slow(addr, &rule);
  uint64_t word = encode(addr, &rule);
  if (addr >= MAX_ADDR || word == GIVE_UP_WORD)
    return word; /* not cached: no tag holds the address, or no word the offsets */
  _Atomic uint64_t *slot = &cache[addr & (CACHE_SIZE - 1u)];
  atomic_store(slot, word);
  if (atomic_load(&generation) != gen) {
    uint64_t mine = word;
    atomic_compare_exchange_strong(slot, &mine, 0);
  }
  return word;
}

static CULPERT__NOINLINE uint64_t lookup_miss(uintptr_t addr)
{
  culpert__lock(&miss_lock);
  uint64_t word = lookup_miss_locked(addr);
  culpert__unlock(&miss_lock);
  return word;
}

/* A word of the stack; the caller has checked it lies in bounds. */
__attribute__((no_sanitize("address"))) static inline uintptr_t stack_word(uintptr_t at)
{
  return *(const uintptr_t *)at;
}

/*
 * Per frame: one word from the memo (or the cache), the CFA, its bounds,
 * one or two stack reads. A CFA is checked once: above the previous one (so the
 * walk always moves up and ends), at most hi and 8-aligned, which puts
 * the return address at CFA - 8 inside [lo, hi); the saved rbp, below
 * that, is checked against lo.
 */
int culpert__unwind_walk(struct culpert__regs regs, uintptr_t lo, uintptr_t hi, uintptr_t *ips,
                         uint32_t max, struct culpert__unwind_memo *memo)
{
  if (hi < lo || hi - lo < 2 * sizeof(uintptr_t) || (lo & (sizeof(uintptr_t) - 1u)) != 0 ||
      regs.sp < lo || regs.sp >= hi)
    return -1;
  uintptr_t ip = regs.ip, sp = regs.sp, bp = regs.bp;
  uintptr_t addr = ip; /* the first frame's own address, then return address - 1 */
  uint64_t gen = atomic_load_explicit(&generation, memory_order_relaxed);
  if (memo->generation != gen) {
    memset(memo->frame, 0, sizeof memo->frame);
    memo->generation = gen;
  }
  uint32_t n = 0;
  while (n < max) {
    uint64_t w;
    size_t m = (size_t)((addr * UINT64_C(0x9E3779B97F4A7C15)) >> (64u - CULPERT__UNWIND_MEMO_BITS));
    if (memo->frame[m].addr == addr) {
      w = memo->frame[m].word;
    } else {
      w = atomic_load_explicit(&cache[addr & (CACHE_SIZE - 1u)], memory_order_relaxed);
      if (CULPERT__UNLIKELY((w & KEY_MASK) != key_of(addr) || addr >= MAX_ADDR))
        w = lookup_miss(addr);
      memo->frame[m].addr = addr;
      memo->frame[m].word = w;
    }
    ips[n++] = ip;
    if (CULPERT__UNLIKELY(w & KIND_MASK)) {
      if ((w & KIND_MASK) == (uint64_t)RULE_END << KIND_SHIFT)
        break;
      return -1;
    }
    uintptr_t cfa = ((w & CFA_RBP) ? bp : sp) + CFA_OFF(w);
    if (cfa <= sp || cfa > hi || (cfa & (sizeof(uintptr_t) - 1u)) != 0)
      return -1;
    uintptr_t slot = RBP_SLOT(w);
    if (slot != 0) {
      if (cfa - slot < lo)
        return -1;
      bp = stack_word(cfa - slot);
    }
    ip = stack_word(cfa - sizeof(uintptr_t));
    sp = cfa;
    if (ip == 0)
      break;
    addr = ip - 1;
  }
  return (int)n;
}

int culpert__unwind_available(void)
{
  return 1;
}

void culpert__unwind_lock(void)
{
  culpert__lock(&miss_lock);
}

void culpert__unwind_unlock(void)
{
  culpert__unlock(&miss_lock);
}

void culpert__unwind_reinit_lock(void)
{
  culpert__lock_reinit(&miss_lock);
}

#else /* !HAVE_CFI_WALK */

void culpert__unwind_flush(void)
{
}

int culpert__unwind_walk(struct culpert__regs regs, uintptr_t lo, uintptr_t hi, uintptr_t *ips,
                         uint32_t max, struct culpert__unwind_memo *memo)
{
  (void)regs, (void)lo, (void)hi, (void)ips, (void)max, (void)memo;
  return -1;
}

int culpert__unwind_available(void)
{
  return 0;
}

uint64_t culpert__unwind_rule_word(const void *eh_frame_hdr, const void *lo, const void *hi,
                                   uintptr_t addr)
{
  (void)eh_frame_hdr, (void)lo, (void)hi, (void)addr;
  return 0;
}

void culpert__unwind_lock(void)
{
}

void culpert__unwind_unlock(void)
{
}

void culpert__unwind_reinit_lock(void)
{
}

#endif
