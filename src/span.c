/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * span.c: the public span API, each thread's span stack, and the global
 * table of span path nodes.
 *
 * A path node is (parent node, name): all instances of
 * handle_request -> parse_input share one node. Nodes live in a fixed-size,
 * lock-free open-addressing table; names are copied into a static arena the
 * first time a node is created. A span id is the node index in its low
 * CULPERT__SPAN_NODE_BITS bits and a process-unique sequence number above,
 * so a parent id handed to another thread leads straight to its node. The
 * ids the API hands out are those XORed with a key drawn once per process:
 * an id from another process (which numbers its spans the same way) or a
 * made-up one decodes to a sequence number never issued here, so it makes
 * a root span as the header promises.
 *
 * Span calls never allocate, never lock and cannot fail: a full table
 * attributes the new span to its parent and counts it.
 */
#include <string.h>
#include <time.h>

#include "internal.h"

#define NAME_ARENA_SIZE (1u << 20)
#define SEQ_BLOCK       4096u

enum { SLOT_EMPTY = 0, SLOT_CLAIMED = 1, SLOT_READY = 2 };

static _Atomic uint32_t slot_state[CULPERT__SPAN_NODES];
static uint32_t slot_parent[CULPERT__SPAN_NODES];
static uint32_t slot_hash[CULPERT__SPAN_NODES];
static const char *slot_name[CULPERT__SPAN_NODES];
static atomic_uint nodes_used;

static char name_arena[NAME_ARENA_SIZE];
static atomic_size_t name_arena_used;

/* Sequence numbers are handed to threads in blocks of SEQ_BLOCK starting at
 * multiples of it; 0 is never one. */
static atomic_uint_fast64_t seq_next = SEQ_BLOCK;
/* See the top: 0 until the first id is made or read; its top bit is set,
 * and sequence numbers never reach bit 63, so no id is 0. */
static _Atomic uint64_t id_key;
static atomic_uint_fast64_t overflows;
static atomic_uint_fast64_t underflows;
static atomic_uint_fast64_t table_full;

/* FNV-1a over the (cut) name, mixed with the parent index. */
static uint32_t name_hash(uint32_t parent, const char *name, size_t *len)
{
  uint32_t h = 2166136261u ^ (parent * 0x9E3779B1u);
  size_t n = 0;
  for (; n < CULPERT__SPAN_NAME_MAX && name[n] != '\0'; n++) {
    h ^= (unsigned char)name[n];
    h *= 16777619u;
  }
  *len = n;
  return h;
}

static int name_equal(const char *stored, const char *name, size_t len)
{
  return memcmp(stored, name, len) == 0 && stored[len] == '\0';
}

/* Reserve len+1 bytes of the name arena and copy the name; NULL when full. */
static const char *arena_copy(const char *name, size_t len)
{
  size_t at = atomic_fetch_add(&name_arena_used, len + 1);
  if (at + len + 1 > NAME_ARENA_SIZE)
    return NULL;
  memcpy(name_arena + at, name, len);
  name_arena[at + len] = '\0';
  return name_arena + at;
}

uint32_t culpert__span_lookup(uint32_t parent, const char *name)
{
  size_t len;
  uint32_t h = name_hash(parent, name, &len);
  uint32_t mask = CULPERT__SPAN_NODES - 1;
  uint32_t i = (h * 0x9E3779B1u) >> (32 - CULPERT__SPAN_NODE_BITS);
  for (uint32_t probes = 0; probes < CULPERT__SPAN_NODES; probes++, i = (i + 1) & mask) {
    if (i == 0)
      continue; /* node 0 means "no span" */
    uint32_t st = atomic_load_explicit(&slot_state[i], memory_order_acquire);
    if (st == SLOT_READY) {
      if (slot_hash[i] == h && slot_parent[i] == parent && name_equal(slot_name[i], name, len))
        return i;
      continue;
    }
    if (st == SLOT_CLAIMED)
      continue; /* being published by another thread; at worst a duplicate node */
    /* Empty: the name is new under this parent. Keep the table at most 3/4
     * full so that probes for known names stay short. */
    if (atomic_load_explicit(&nodes_used, memory_order_relaxed) >= CULPERT__SPAN_NODES / 4 * 3)
      return 0;
    const char *copy = arena_copy(name, len);
    if (copy == NULL)
      return 0;
    uint32_t expect = SLOT_EMPTY;
    if (!atomic_compare_exchange_strong(&slot_state[i], &expect, SLOT_CLAIMED))
      continue; /* lost the race; the copy stays unused */
    atomic_fetch_add_explicit(&nodes_used, 1, memory_order_relaxed);
    slot_parent[i] = parent;
    slot_hash[i] = h;
    slot_name[i] = copy;
    atomic_store_explicit(&slot_state[i], SLOT_READY, memory_order_release);
    return i;
  }
  return 0;
}

/* The process's id key, drawn at the first call: from the clock and a
 * stack address (the stack is placed at random), mixed (splitmix64's
 * finaliser). No system call beyond the vDSO's clock, no allocation, no
 * lock. A fork child keeps its parent's key, with its parent's spans. */
static uint64_t key(void)
{
  uint64_t k = atomic_load_explicit(&id_key, memory_order_relaxed);
  if (k != 0)
    return k;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t z = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)&ts;
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  z = (z ^ (z >> 31)) | UINT64_C(1) << 63;
  uint64_t none = 0;
  if (atomic_compare_exchange_strong(&id_key, &none, z))
    return z;
  return none; /* another thread drew it first */
}

uint32_t culpert__span_node_of(uint64_t public_id)
{
  /* An id this process issued: its sequence number was handed out (in a
   * thread's block, at least), and its node is a published slot. */
  uint64_t id = public_id ^ key();
  uint64_t seq = id >> CULPERT__SPAN_NODE_BITS;
  uint32_t node = (uint32_t)(id & (CULPERT__SPAN_NODES - 1));
  if (node == 0 || seq == 0 || seq >= atomic_load_explicit(&seq_next, memory_order_relaxed) ||
      atomic_load_explicit(&slot_state[node], memory_order_acquire) != SLOT_READY)
    return 0;
  return node;
}

uint32_t culpert__span_current_node(void)
{
  struct culpert__thread *t = &culpert__tls;
  uint32_t d = t->span_depth;
  if (d == 0)
    return 0;
  if (d > CULPERT_SPAN_MAX_DEPTH)
    d = CULPERT_SPAN_MAX_DEPTH;
  return (uint32_t)(t->spans[d - 1] & (CULPERT__SPAN_NODES - 1));
}

uint32_t culpert__span_capacity(void)
{
  return CULPERT__SPAN_NODES;
}

const char *culpert__span_name(uint32_t node, uint32_t *parent)
{
  if (node == 0 || node >= CULPERT__SPAN_NODES ||
      atomic_load_explicit(&slot_state[node], memory_order_acquire) != SLOT_READY)
    return NULL;
  *parent = slot_parent[node];
  return slot_name[node];
}

uint64_t culpert__span_overflows(void)
{
  return atomic_load(&overflows);
}

uint64_t culpert__span_underflows(void)
{
  return atomic_load(&underflows);
}

uint64_t culpert__span_table_full(void)
{
  return atomic_load(&table_full);
}

void culpert__span_reset_counters(void)
{
  atomic_store(&overflows, 0);
  atomic_store(&underflows, 0);
  atomic_store(&table_full, 0);
}

/* The next sequence number of this thread. From the global counter in
 * blocks, so most enters write only thread-local memory; but one step at a
 * time, a compare-and-swap on the thread's own counter, since a signal
 * handler may enter a span between this thread's read and write of it
 * (with a plain increment the two spans got the same id). */
static uint64_t next_seq(struct culpert__thread *t)
{
  uint64_t cur = __atomic_load_n(&t->span_seq_next, __ATOMIC_RELAXED);
  for (;;) {
    uint64_t seq = cur, next = cur + 1;
    if (cur % SEQ_BLOCK == 0) { /* the block is used up (or none yet) */
      seq = atomic_fetch_add_explicit(&seq_next, SEQ_BLOCK, memory_order_relaxed);
      next = seq + 1;
    }
    /* a handler that took numbers meanwhile makes this fail: look again
     * (a fresh block taken here is then left unused) */
    if (__atomic_compare_exchange_n(&t->span_seq_next, &cur, next, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      return seq;
  }
}

/* Push a span under path node `parent`. */
static void span_push(uint32_t parent, const char *name)
{
  struct culpert__thread *t = &culpert__tls;
  if (t->span_depth >= CULPERT_SPAN_MAX_DEPTH) {
    atomic_fetch_add_explicit(&overflows, 1, memory_order_relaxed);
    t->span_depth++;
    return;
  }
  uint32_t node =
      culpert__span_lookup(parent, name != NULL && name[0] != '\0' ? name : "(unnamed)");
  if (node == 0) {
    atomic_fetch_add_explicit(&table_full, 1, memory_order_relaxed);
    node = parent;
  }
  uint64_t id = next_seq(t) << CULPERT__SPAN_NODE_BITS | node;
  /* A signal handler's span entered between the store of the slot and the
   * store of the depth lands in the same slot and is gone again when its
   * handler returns: store the slot once more after the depth. */
  uint32_t d = t->span_depth;
  t->spans[d] = id;
  atomic_signal_fence(memory_order_seq_cst);
  t->span_depth = d + 1;
  atomic_signal_fence(memory_order_seq_cst);
  t->spans[d] = id;
}

CULPERT__EXPORT void culpert_span_enter(const char *name)
{
  span_push(culpert__span_current_node(), name);
}

CULPERT__EXPORT void culpert_span_enter_child_of(const char *name, uint64_t parent_id)
{
  span_push(culpert__span_node_of(parent_id), name);
}

CULPERT__EXPORT void culpert_span_exit(void)
{
  struct culpert__thread *t = &culpert__tls;
  if (t->span_depth == 0) {
    atomic_fetch_add_explicit(&underflows, 1, memory_order_relaxed);
    return;
  }
  t->span_depth--;
}

CULPERT__EXPORT uint64_t culpert_span_current(void)
{
  struct culpert__thread *t = &culpert__tls;
  uint32_t d = t->span_depth;
  if (d == 0)
    return 0;
  if (d > CULPERT_SPAN_MAX_DEPTH)
    d = CULPERT_SPAN_MAX_DEPTH;
  return t->spans[d - 1] ^ key();
}
