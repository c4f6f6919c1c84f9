/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * loader.h: whether culpert may take the dynamic loader's locks, and the
 * loader's write lock as a fork child inherits it.
 *
 * dl_iterate_phdr takes the loader's write lock, and so do dlopen and
 * dlclose while they change the list of objects. glibc (2.36) does not
 * reset that lock in a fork child: a child forked while another thread
 * held it, or by a thread that held it itself (inside a dl_iterate_phdr
 * callback, or in a signal handler that interrupted one), would wait for
 * good at culpert's first dl_iterate_phdr. So culpert finds the lock once
 * at start-up, and a fork child that finds it held stops using the loader
 * (culpert__loader_set_usable(0)): the unwinder skips what needs it and
 * the writer walks the loader's r_debug list instead (symbolize.h).
 */
#ifndef CULPERT_LOADER_H
#define CULPERT_LOADER_H

/* Find the loader's write lock: inside a dl_iterate_phdr callback it is
 * the one recursive mutex in the loader's data that this thread holds,
 * once, then twice inside a nested call, and not at all outside. Returns
 * 0 when found, -1 when not (another C library, another layout): then
 * culpert__loader_lock_held always says 0. */
int culpert__loader_find_lock(void);

/* Whether the lock found has an owner. In a fork child, where the only
 * thread has a new thread id, any owner means it is held for good. */
int culpert__loader_lock_held(void);

/* 0: the loader's locks may be held by a thread that no longer exists
 * (a fork child that inherited one, or output.c's copy forked at a
 * signal). Nothing in culpert calls dl_iterate_phdr, dlsym or libunwind
 * from then on; the flag is inherited by further children. 1 (the
 * default) restores the normal ways. */
void culpert__loader_set_usable(int usable);
int culpert__loader_usable(void);

#endif
