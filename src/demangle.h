/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * demangle.h: readable names for C++ and Rust symbols.
 *
 * Used by the profile writer, outside malloc's hot path; allocates with
 * malloc. Keeps no state between calls (safe after fork, safe to repeat).
 */
#ifndef CULPERT_DEMANGLE_H
#define CULPERT_DEMANGLE_H

/*
 * culpert__demangle: the demangled form of `sym`, or NULL when `sym` is not
 * a mangled name this module can decode (plain C names, undecodable input)
 * or memory ran out; the caller then keeps the raw name.
 *
 *   - Rust legacy `_ZN...17h<16 hex>E`: path joined with "::", the hash
 *     dropped, `$LT$`-style escapes decoded.
 *   - Rust v0 `_R...`: paths, impls, generic arguments and types, printed
 *     without crate disambiguators and const arguments without their type
 *     (`core::ptr::swap_chunk::<8>`).
 *   - C++ `_Z...`: `__cxa_demangle` looked up at run time in the process
 *     (only present when it loaded libstdc++); without it, NULL.
 *
 * A trailing LLVM/GCC suffix (`.llvm.123`, `.cold`) of a Rust symbol is
 * dropped. The result is malloc'd; free() it.
 */
char *culpert__demangle(const char *sym);

/* Look up __cxa_demangle once at start-up, for a writer that cannot use
 * the loader (culpert__loader_usable, loader.h). */
void culpert__demangle_prepare(void);

#endif /* CULPERT_DEMANGLE_H */
