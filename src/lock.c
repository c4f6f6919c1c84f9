/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * lock.c: the contended half of culpert__lock (internal.h). A waiter
 * spins briefly (the holders are short: a table probe, a bucket update),
 * then marks the lock contended and sleeps on a futex until the holder's
 * unlock wakes it.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* Spins before sleeping: about the time a holder needs on the slow path. */
#define SPINS 100

void culpert__lock_wait(culpert__lock_t *l)
{
  for (int i = 0; i < SPINS; i++) {
    uint32_t c = 0;
    if (atomic_load_explicit(&l->state, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_weak_explicit(&l->state, &c, 1, memory_order_acquire,
                                              memory_order_relaxed))
      return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  /* Contended from now on: whoever unlocks sees 2 and wakes a sleeper.
   * The exchange takes the lock when it returns 0, still marked 2, which
   * costs at most one needless wake. */
  while (atomic_exchange_explicit(&l->state, 2, memory_order_acquire) != 0)
    syscall(SYS_futex, &l->state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void culpert__lock_wake(culpert__lock_t *l)
{
  syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
