/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * symcache.h: what the writer learnt about code addresses, kept from one
 * profile to the next.
 *
 * Symbolizing is most of a profile's cost (symbol tables, DWARF, zlib
 * sections), and a process that writes many profiles (CULPERT_INTERVAL,
 * or culpert_snapshot() served over HTTP) asks about the same addresses
 * each time. The cache keeps, per run-time address, the function symbol
 * around it and its source position, copied out of the symbolizer, so a
 * profile whose addresses were all seen before opens no object at all.
 *
 * Valid while the process loads and unloads nothing: each use compares
 * the loader's counts of objects added and removed (dl_iterate_phdr) with
 * those of the last use and empties the cache when they differ. One
 * profile at a time uses it: culpert__symcache_begin only try-locks, so a
 * profile written while another holds the cache (or in a forked copy of
 * the process, where the holder no longer exists) symbolizes everything
 * itself, as without a cache. Memory: strings are kept once each; at most
 * SYMCACHE_MAX_ENTRIES addresses are kept.
 */
#ifndef CULPERT_SYMCACHE_H
#define CULPERT_SYMCACHE_H

#include <stdint.h>

#include "symbolize.h"

/* Take the cache for one profile: 1 when it may be used (then call
 * culpert__symcache_end), 0 when another profile has it. */
int culpert__symcache_begin(void);
void culpert__symcache_end(void);

/* The function symbol around addr, as culpert__symbolize_addr gave it:
 * 1 and *rc, *out filled when cached, 0 when not. */
int culpert__symcache_symbol(uint64_t addr, struct culpert__symbol *out, int *rc);
void culpert__symcache_put_symbol(uint64_t addr, const struct culpert__symbol *sym, int rc);

/* The source position of addr: 1 and *out filled when cached, 0 when not.
 * The strings stay valid until culpert__symcache_end. */
int culpert__symcache_srcpos(uint64_t addr, struct culpert__srcpos *out);
void culpert__symcache_put_srcpos(uint64_t addr, const struct culpert__srcpos *pos);

/* Counts for tests: look-ups answered from the cache since start-up. */
uint64_t culpert__symcache_hits(void);

#endif /* CULPERT_SYMCACHE_H */
