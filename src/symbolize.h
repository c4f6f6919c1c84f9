/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * symbolize.h: the process's code mappings and the names of the functions
 * in them.
 *
 * Used by the profile writer at snapshot time (never inside malloc). A
 * symbolizer is a snapshot of what is loaded when it is opened: objects
 * unloaded later are still described by it, objects unloaded before are
 * not (their addresses are in no mapping), unless the dlclose wrapper
 * noted them (below). ELF files are read from disk
 * with every offset checked against the file size, so a truncated, replaced
 * or odd file gives fewer names, never a crash. No global state but the
 * loader-lock switch and the list of unloaded objects below: open one per
 * profile, close it afterwards; safe to repeat and safe after fork.
 */
#ifndef CULPERT_SYMBOLIZE_H
#define CULPERT_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "dwarf.h"

/* One executable segment of a loaded object, page aligned as the kernel
 * maps it (what /proc/self/maps shows). */
struct culpert__smap {
  uint64_t start;       /* first address */
  uint64_t limit;       /* one past the last address */
  uint64_t offset;      /* file offset mapped at `start` */
  const char *path;     /* the object's file, "[vdso]" for the vdso */
  char build_id[129];   /* GNU build-id as lowercase hex, "" when none */
  unsigned is_main : 1; /* the main executable */
  unsigned is_self : 1; /* the shared object this code lives in (libculpert.so) */
  unsigned is_vdso : 1;
};

/* The function symbol around one code address. */
struct culpert__symbol {
  const char *name; /* raw (mangled) symbol, NULL when unknown */
  uint64_t start;   /* run-time address where the symbol starts */
};

struct culpert__symbolizer;

/*
 * culpert__symbolize_open: snapshot the loaded objects (dl_iterate_phdr,
 * or the r_debug list, above) into a new symbolizer. Mapping 0 is the main executable; the rest
 * follow in load order, the vdso included. An object's files (symbols, DWARF) are read lazily, the
 * first time an address inside it is looked up. Returns 0 or -ENOMEM.
 */
int culpert__symbolize_open(struct culpert__symbolizer **out);

/*
 * Where the dynamic loader's locks may be held by threads that no longer
 * exist (culpert__loader_usable() is 0, loader.h), culpert__symbolize_open
 * walks the loader's r_debug list of objects, which needs no lock, instead
 * of calling dl_iterate_phdr; the symbol cache keeps nothing and the
 * demangler calls no dlsym.
 */

/*
 * Objects unloaded before a profile is written. The dlclose wrapper
 * (malloc.c) notes an object before it may go
 * (culpert__symbolize_unload_begin: its file, load bias, build id and
 * program headers, NULL when it cannot be described) and, after the real
 * dlclose, hands the note back (culpert__symbolize_unload_end), which keeps
 * it only if the object is gone. Every symbolizer opened later describes
 * the kept objects again, after the loaded ones, where no loaded object
 * has taken their place: the samples taken in their code keep names, file
 * and line, read from the file if it is still the same build. At most 64
 * are kept, each build at each address once.
 */
struct culpert__unload_note;
struct culpert__unload_note *culpert__symbolize_unload_begin(void *handle);
void culpert__symbolize_unload_end(struct culpert__unload_note *note);

/* The main executable's path into out[len]: the file mapped where its
 * program headers are (so `ld.so ./prog` names prog, not the loader), else
 * /proc/self/exe. 0, or -1 when neither is known. Uses no stdio and no
 * lock. */
int culpert__main_exe_path(char *out, size_t len);

/* Frees everything; names returned earlier become invalid. NULL is a no-op. */
void culpert__symbolize_close(struct culpert__symbolizer *s);

size_t culpert__symbolize_nmaps(const struct culpert__symbolizer *s);
const struct culpert__smap *culpert__symbolize_map(const struct culpert__symbolizer *s, size_t i);

/* Index of the mapping containing `addr`, or -1 when none does. */
long culpert__symbolize_find_map(const struct culpert__symbolizer *s, uint64_t addr);

/*
 * culpert__symbolize_addr: describe the code at `addr` (pass the address of
 * an instruction: the leaf ip, or a return address minus one). Looks in the
 * object's .symtab, else the .symtab of its separate debug file under
 * /usr/lib/debug/.build-id/, else its .dynsym; dladdr() only when the
 * object's file cannot be read at all. Returns 0 when a
 * name was found, -ENOENT otherwise (out->name is then NULL). Strings stay
 * valid until the next call or culpert__symbolize_close(), whichever comes
 * first (copy them to keep them).
 */
int culpert__symbolize_addr(struct culpert__symbolizer *s, uint64_t addr,
                            struct culpert__symbol *out);

/*
 * culpert__symbolize_lines: the source position of each of `n` addresses
 * (instruction addresses, as for culpert__symbolize_addr): file and line
 * from DWARF .debug_line, and the calls inlined there from .debug_info
 * (DWARF 2 to 5, zlib-compressed sections included), read from the object
 * or its separate debug file. Reads each object's DWARF once, whatever n.
 * Unknown parts are NULL / 0. Results stay valid until
 * culpert__symbolize_close(). Returns 0 or -ENOMEM; malformed DWARF loses
 * answers of the unit at fault, never crashes.
 */
int culpert__symbolize_lines(struct culpert__symbolizer *s, const uint64_t *addrs, size_t n,
                             struct culpert__srcpos *out);

/*
 * The function symbols and DWARF of one ELF file, addressed by the virtual
 * addresses the file itself uses (no load bias). Exposed for the
 * symbolizer's tests and for tools; the symbolizer uses the same code.
 */
struct culpert__symtab;

/* Reads `path`'s .symtab (else .dynsym). Returns 0, or a negative errno for
 * an unreadable file (-ENOEXEC: not a usable ELF file). */
int culpert__symtab_load(const char *path, struct culpert__symtab **out);
/* The FUNC symbol containing `vaddr`, or NULL. */
const char *culpert__symtab_lookup(const struct culpert__symtab *t, uint64_t vaddr);
/* Number of function symbols read. */
size_t culpert__symtab_count(const struct culpert__symtab *t);
/* Source positions of `n` addresses of the file, as for
 * culpert__symbolize_lines; results stay valid until the table is freed. */
int culpert__symtab_lines(struct culpert__symtab *t, const uint64_t *vaddrs, size_t n,
                          struct culpert__srcpos *out);
/* Whether the table came from a full .symtab (not only .dynsym). */
int culpert__symtab_is_full(const struct culpert__symtab *t);
void culpert__symtab_free(struct culpert__symtab *t);

#endif /* CULPERT_SYMBOLIZE_H */
