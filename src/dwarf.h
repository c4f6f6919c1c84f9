/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * dwarf.h: source positions of code addresses from DWARF debug sections:
 * file and line from .debug_line, and the chain of inlined calls from the
 * DW_TAG_inlined_subroutine entries of .debug_info.
 *
 * Used by the symbolizer at snapshot time (never inside malloc). Reads
 * DWARF 2 to 5 as gcc and clang emit it for x86-64 (32- and 64-bit DWARF,
 * DWARF 5 string/address index forms and range lists); split DWARF (.dwo)
 * and supplementary files are not followed. The bytes are untrusted: every
 * read is bounds-checked, and a malformed unit only loses its own answers.
 */
#ifndef CULPERT_DWARF_H
#define CULPERT_DWARF_H

#include <stddef.h>
#include <stdint.h>

/*
 * A section filled on demand (a compressed section inflated as far as the
 * reader needs). fill() makes at least bytes [0, upto) of the section's
 * buffer valid and returns how many are; it returns the section's length
 * once nothing more will come (the whole section, or a corrupt stream
 * whose rest stays zero). It is called before any read. `piecewise`: the
 * reader asks for one unit, table, string, list or set at a time
 * (.debug_info, .debug_line, .debug_abbrev, .debug_str, .debug_line_str,
 * .debug_rnglists, .debug_aranges); otherwise the whole section is asked
 * for on first use.
 */
struct culpert__dwarf_lazy {
  size_t (*fill)(struct culpert__dwarf_lazy *lazy, size_t upto);
  int piecewise;
};

/* One debug section; p NULL when absent. With `lazy` NULL all `len` bytes
 * are there; otherwise p is a zero-filled buffer of the section's full size
 * that lazy->fill() fills. */
struct culpert__dwarf_section {
  const unsigned char *p;
  size_t len;
  struct culpert__dwarf_lazy *lazy;
};

struct culpert__dwarf {
  struct culpert__dwarf_section info, abbrev, line, line_str, str, str_offsets, addr, ranges,
      rnglists, aranges;
};

/* Owns every string and array the results point to. Zero-initialize. */
struct culpert__pool {
  void **items;
  size_t n;
  size_t cap;
};

/* Frees everything in the pool and empties it. */
void culpert__pool_free(struct culpert__pool *p);

/* One inlined call around an address. */
struct culpert__inline {
  /* The inlined function: its linkage (mangled) name when the DWARF has
   * one (`mangled` set), else its plain name qualified with the names of
   * the namespaces, classes and functions around its declaration
   * ("main::<lambda>::operator()": GCC gives no linkage name to functions
   * whose signature involves a local type); NULL if unknown. */
  const char *name;
  int mangled;
  const char *call_file; /* the call site, NULL when unknown */
  uint32_t call_line;
};

/* The source position of one address. */
struct culpert__srcpos {
  const char *file; /* of the innermost code (after inlining), NULL if unknown */
  uint32_t line;    /* 0 when unknown */
  /* The line of the first row at exactly this address when several rows
   * share it (for a function's first instruction: its definition), else 0. */
  uint32_t first_line;
  const struct culpert__inline *inl; /* inlined calls, outermost first */
  uint32_t ninl;
};

/*
 * culpert__dwarf_resolve: the source position of each of `n` addresses
 * (virtual addresses of the file the sections come from). Reads only the
 * units that contain a wanted address: found with .debug_aranges when it
 * covers the address, else by reading every unit's header and ranges. For
 * each such unit it runs its own line program and walks its DIEs for
 * inlined calls. Only an address still without a line after that makes it
 * run every line program. Where several line rows share an address the
 * last one gives file and line, as addr2line does. Results point into
 * `pool`. Returns 0 or -ENOMEM; bad DWARF gives fewer answers, never an
 * error.
 */
int culpert__dwarf_resolve(const struct culpert__dwarf *d, const uint64_t *vaddrs, size_t n,
                           struct culpert__srcpos *out, struct culpert__pool *pool);

#endif /* CULPERT_DWARF_H */
