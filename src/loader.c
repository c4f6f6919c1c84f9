/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * loader.c: the dynamic loader's write lock after fork (loader.h).
 *
 * The lock lives in ld.so's _rtld_global, whose layout is glibc's own and
 * changes between versions, so it is found by how it behaves rather than
 * where it sits: a glibc mutex begins with five ints (lock word, count,
 * owner thread id, users, kind), and the write lock is recursive. Inside a
 * dl_iterate_phdr callback exactly one such mutex of _rtld_global has this
 * thread as owner and a count of 1; inside a nested call the same one has
 * 2; after both return it is free. A place that passes all three is the
 * lock; anything else (no candidate, or more than one) finds nothing.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "loader.h"

#define MAX_CANDIDATES 4

struct mutex_head {
  int lock;
  unsigned count;
  int owner;
  unsigned users;
  int kind;
};

struct probe {
  const unsigned char *base;
  size_t size;
  int tid;
  size_t at[MAX_CANDIDATES];
  int n;
  int nested_ok[MAX_CANDIDATES];
};

static const int *owner_word; /* the lock's owner field, or NULL */
static atomic_int unusable;

static struct mutex_head read_head(const unsigned char *p)
{
  struct mutex_head h;
  memcpy(&h, p, sizeof h);
  return h;
}

static int held_by(const unsigned char *p, int tid, unsigned count)
{
  struct mutex_head h = read_head(p);
  return h.lock != 0 && h.count == count && h.owner == tid &&
         (h.kind & 3) == PTHREAD_MUTEX_RECURSIVE_NP;
}

static int nested(struct dl_phdr_info *info, size_t size, void *data)
{
  struct probe *pr = data;
  (void)info;
  (void)size;
  for (int i = 0; i < pr->n; i++)
    pr->nested_ok[i] = held_by(pr->base + pr->at[i], pr->tid, 2);
  return 1;
}

static int outer(struct dl_phdr_info *info, size_t size, void *data)
{
  struct probe *pr = data;
  (void)info;
  (void)size;
  for (size_t off = 0; off + sizeof(struct mutex_head) <= pr->size; off += sizeof(int)) {
    if (!held_by(pr->base + off, pr->tid, 1))
      continue;
    if (pr->n == MAX_CANDIDATES)
      return 1;
    pr->at[pr->n++] = off;
  }
  dl_iterate_phdr(nested, pr);
  return 1;
}

int culpert__loader_find_lock(void)
{
  const unsigned char *base = dlsym(RTLD_DEFAULT, "_rtld_global");
  Dl_info where;
  const ElfW(Sym) *sym = NULL;
  if (base == NULL || dladdr1(base, &where, (void **)&sym, RTLD_DL_SYMENT) == 0 || sym == NULL ||
      sym->st_size < sizeof(struct mutex_head))
    return -1;
  struct probe pr = {.base = base, .size = sym->st_size, .tid = (int)gettid()};
  dl_iterate_phdr(outer, &pr);
  const unsigned char *found = NULL;
  for (int i = 0; i < pr.n; i++) {
    struct mutex_head h = read_head(base + pr.at[i]);
    if (!pr.nested_ok[i] || h.lock != 0 || h.count != 0 || h.owner != 0)
      continue;
    if (found != NULL)
      return -1; /* two places behave alike: neither is sure */
    found = base + pr.at[i];
  }
  if (found == NULL)
    return -1;
  owner_word = (const int *)(const void *)(found + offsetof(struct mutex_head, owner));
  return 0;
}

int culpert__loader_lock_held(void)
{
  return owner_word != NULL && __atomic_load_n(owner_word, __ATOMIC_RELAXED) != 0;
}

void culpert__loader_set_usable(int usable)
{
  atomic_store(&unusable, !usable);
}

int culpert__loader_usable(void)
{
  return !atomic_load(&unusable);
}
