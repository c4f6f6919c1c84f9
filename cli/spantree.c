/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * spantree.c: rebuild the span hierarchy from span_id / span_parent_id.
 *
 * Every span (an id and a name) resolves to a node once (memoised), walking up its parent
 * chain iteratively; a chain that comes back to an id already on it (a cycle
 * or a span that is its own parent) is cut there and the span becomes a
 * root. Nothing here recurses, so hostile nesting depth cannot overflow the
 * stack, and every node is also kept in a flat list for totals and freeing.
 */
#include "spantree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The invisible top node and the bookkeeping that owns every node. */
struct tree {
  struct culpert__span_node top; /* first member: &tree->top == (struct tree *)tree */
  struct culpert__span_node **all;
  size_t nall, allocall;
  /* (parent, name) -> child, open addressing. */
  struct culpert__span_node **slots;
  size_t mask, nslots_used;
};

/* One distinct span id seen in the samples. */
struct span_rec {
  int64_t id;
  int64_t parent;
  const char *name;
  struct culpert__span_node *node; /* resolved node, NULL until then */
  size_t stamp;                    /* walk that last visited this id */
};

static uint64_t hash_str(const char *s, uint64_t h)
{
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
  return h;
}

static uint64_t hash_pair(const struct culpert__span_node *parent, const char *name)
{
  uint64_t h = 0xcbf29ce484222325ULL ^ ((uint64_t)(uintptr_t)parent * 0x9E3779B97F4A7C15ULL);
  return hash_str(name, h);
}

static int grow_slots(struct tree *t)
{
  size_t cap = t->slots ? (t->mask + 1) * 2 : 64;
  struct culpert__span_node **slots = calloc(cap, sizeof *slots);
  if (!slots)
    return -ENOMEM;
  for (size_t i = 0; t->slots && i <= t->mask; i++) {
    struct culpert__span_node *n = t->slots[i];
    if (!n)
      continue;
    size_t j = (size_t)hash_pair(n->parent, n->name) & (cap - 1);
    while (slots[j])
      j = (j + 1) & (cap - 1);
    slots[j] = n;
  }
  free(t->slots);
  t->slots = slots;
  t->mask = cap - 1;
  return 0;
}

/* The child of `parent` named `name`, created when missing; NULL on ENOMEM. */
static struct culpert__span_node *child_of(struct tree *t, struct culpert__span_node *parent,
                                           const char *name)
{
  if (!t->slots || (t->nslots_used + 1) * 2 > t->mask + 1)
    if (grow_slots(t))
      return NULL;
  size_t j = (size_t)hash_pair(parent, name) & t->mask;
  while (t->slots[j]) {
    struct culpert__span_node *n = t->slots[j];
    if (n->parent == parent && strcmp(n->name, name) == 0)
      return n;
    j = (j + 1) & t->mask;
  }
  struct culpert__span_node *n = calloc(1, sizeof *n);
  if (!n)
    return NULL;
  n->name = name;
  n->parent = parent;
  if (t->nall == t->allocall) {
    size_t cap = t->allocall ? t->allocall * 2 : 64;
    struct culpert__span_node **all = realloc(t->all, cap * sizeof *all);
    if (!all)
      goto fail;
    t->all = all;
    t->allocall = cap;
  }
  if (parent->nchildren % 8 == 0) {
    struct culpert__span_node **ch =
        realloc(parent->children, (parent->nchildren + 8) * sizeof *ch);
    if (!ch)
      goto fail;
    parent->children = ch;
  }
  parent->children[parent->nchildren++] = n;
  t->all[t->nall++] = n;
  t->slots[j] = n;
  t->nslots_used++;
  return n;
fail:
  free(n);
  return NULL;
}

/* Distinct span ids -> records, open addressing over record indices. */
struct recs {
  struct span_rec *v;
  size_t n, cap;
  uint32_t *slots; /* index + 1; 0 = empty */
  size_t mask;
};

static size_t id_hash(int64_t id)
{
  uint64_t x = (uint64_t)id * 0x9E3779B97F4A7C15ULL;
  return (size_t)(x ^ (x >> 29));
}

static int recs_grow_slots(struct recs *r)
{
  size_t cap = r->slots ? (r->mask + 1) * 2 : 256;
  uint32_t *slots = calloc(cap, sizeof *slots);
  if (!slots)
    return -ENOMEM;
  for (size_t i = 0; i < r->n; i++) {
    size_t j = id_hash(r->v[i].id) & (cap - 1);
    while (slots[j])
      j = (j + 1) & (cap - 1);
    slots[j] = (uint32_t)i + 1;
  }
  free(r->slots);
  r->slots = slots;
  r->mask = cap - 1;
  return 0;
}

/* The first record of span `id` named `name`, or of any name when `name`
 * is NULL. Records of one id are met in the order they were added. */
static struct span_rec *find_rec_named(const struct recs *r, int64_t id, const char *name)
{
  if (id == 0 || !r->slots)
    return NULL;
  size_t j = id_hash(id) & r->mask;
  while (r->slots[j]) {
    struct span_rec *rec = &r->v[r->slots[j] - 1];
    if (rec->id == id && (!name || strcmp(rec->name, name) == 0))
      return rec;
    j = (j + 1) & r->mask;
  }
  return NULL;
}

static struct span_rec *find_rec(const struct recs *r, int64_t id)
{
  return find_rec_named(r, id, NULL);
}

/* Record span `id` named `name` unless already known. One id may carry
 * several names: `go tool pprof -proto a b` keeps each file's ids, so two
 * processes' spans can share one, and each sample stays with its own
 * name (its parent is then the first record of the parent id). The first
 * sample wins when samples disagree about a named id's parent. */
static int recs_add(struct recs *r, int64_t id, int64_t parent, const char *name)
{
  if (find_rec_named(r, id, name))
    return 0;
  if (r->n >= UINT32_MAX - 1)
    return -ENOMEM;
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 64;
    struct span_rec *v = realloc(r->v, cap * sizeof *v);
    if (!v)
      return -ENOMEM;
    r->v = v;
    r->cap = cap;
  }
  r->v[r->n++] = (struct span_rec){id, parent, name, NULL, 0};
  if (!r->slots || r->n * 2 > r->mask + 1)
    return recs_grow_slots(r);
  size_t j = id_hash(id) & r->mask;
  while (r->slots[j])
    j = (j + 1) & r->mask;
  r->slots[j] = (uint32_t)r->n;
  return 0;
}

/*
 * Resolve the node of span record `r`: walk up to the first ancestor that is
 * already resolved, is a root, has an unknown parent, or closes a cycle;
 * then create the nodes top-down. `chain` has room for every record.
 */
static struct culpert__span_node *resolve(struct tree *t, const struct recs *recs,
                                          struct span_rec *r, struct span_rec **chain, size_t stamp)
{
  size_t depth = 0;
  struct culpert__span_node *base = &t->top;
  while (r && !r->node) {
    if (r->stamp == stamp)
      break; /* cycle: r is already on the chain; the chain's top becomes a root */
    r->stamp = stamp;
    chain[depth++] = r;
    r = r->parent != r->id ? find_rec(recs, r->parent) : NULL;
  }
  if (r && r->node && r->stamp != stamp)
    base = r->node;
  while (depth > 0) {
    struct span_rec *c = chain[--depth];
    base = child_of(t, base, c->name);
    if (!base)
      return NULL;
    c->node = base;
  }
  return base;
}

int culpert__spantree_build(const struct culpert__profile *p, bool inuse,
                            struct culpert__span_node **root)
{
  struct tree *t = calloc(1, sizeof *t);
  struct recs recs = {0};
  struct span_rec **chain = NULL;
  int rc = 0;

  *root = NULL;
  if (!t)
    return -ENOMEM;
  t->top.name = "";

  for (size_t i = 0; i < p->nsamples; i++) {
    const struct culpert__sample *s = &p->samples[i];
    if (s->span_name && s->span_id != 0 &&
        (rc = recs_add(&recs, s->span_id, s->span_parent_id, s->span_name)))
      goto out;
  }
  chain = malloc((recs.n ? recs.n : 1) * sizeof *chain);
  if (!chain) {
    rc = -ENOMEM;
    goto out;
  }

  size_t stamp = 0;
  for (size_t i = 0; i < p->nsamples; i++) {
    const struct culpert__sample *s = &p->samples[i];
    struct culpert__span_node *node;
    if (!s->span_name) {
      node = child_of(t, &t->top, CULPERT_NO_SPAN_NAME);
    } else if (s->span_id != 0) {
      node = resolve(t, &recs, find_rec_named(&recs, s->span_id, s->span_name), chain, ++stamp);
    } else {
      /* A span name without an id: place it under its parent, if known. */
      struct span_rec *parent = find_rec(&recs, s->span_parent_id);
      struct culpert__span_node *base =
          parent ? resolve(t, &recs, parent, chain, ++stamp) : &t->top;
      node = base ? child_of(t, base, s->span_name) : NULL;
    }
    if (!node) {
      rc = -ENOMEM;
      goto out;
    }
    int64_t bytes = inuse ? s->inuse_bytes : s->bytes;
    if (__builtin_add_overflow(node->self_bytes, bytes, &node->self_bytes))
      node->self_bytes = bytes > 0 ? INT64_MAX : INT64_MIN;
    node->self_var += culpert__estimate_var(culpert__profile_sample_rate(p, i), bytes);
    if (__builtin_add_overflow(node->self_samples, s->samples, &node->self_samples))
      node->self_samples = s->samples > 0 ? INT64_MAX : INT64_MIN;
  }

  /* Totals: a child is always created after its parent, so one pass in
   * reverse creation order adds every subtree into its parent. */
  for (size_t i = 0; i < t->nall; i++) {
    t->all[i]->total_bytes = t->all[i]->self_bytes;
    t->all[i]->total_samples = t->all[i]->self_samples;
    t->all[i]->total_var = t->all[i]->self_var;
  }
  for (size_t i = t->nall; i-- > 0;) {
    struct culpert__span_node *n = t->all[i], *up = n->parent;
    if (__builtin_add_overflow(up->total_bytes, n->total_bytes, &up->total_bytes))
      up->total_bytes = n->total_bytes > 0 ? INT64_MAX : INT64_MIN;
    if (__builtin_add_overflow(up->total_samples, n->total_samples, &up->total_samples))
      up->total_samples = n->total_samples > 0 ? INT64_MAX : INT64_MIN;
    up->total_var += n->total_var;
  }
out:
  free(recs.v);
  free(recs.slots);
  free(chain);
  if (rc) {
    culpert__spantree_free(&t->top);
    return rc;
  }
  *root = &t->top;
  return 0;
}

struct culpert__span_node *culpert__spantree_child(const struct culpert__span_node *node,
                                                   const char *name)
{
  for (size_t i = 0; i < node->nchildren; i++)
    if (strcmp(node->children[i]->name, name) == 0)
      return node->children[i];
  return NULL;
}

void culpert__spantree_free(struct culpert__span_node *root)
{
  if (!root)
    return;
  struct tree *t = (struct tree *)root;
  for (size_t i = 0; i < t->nall; i++) {
    free(t->all[i]->children);
    free(t->all[i]);
  }
  free(t->top.children);
  free(t->all);
  free(t->slots);
  free(t);
}

static int name_cmp(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void culpert__span_names_note(const struct culpert__profile *p, const char *wanted)
{
  enum { SHOWN = 12 };
  const char **names = NULL;
  size_t n = 0, cap = 0;
  for (size_t i = 0; i < p->nsamples; i++) {
    const char *s = p->samples[i].span_name;
    if (!s)
      continue;
    if (strcmp(s, wanted) == 0) {
      free(names);
      return; /* the span exists: nothing to say */
    }
    if (n == cap) {
      size_t ncap = cap ? 2 * cap : 64;
      const char **nv = realloc(names, ncap * sizeof *nv);
      if (!nv)
        break; /* the note is a courtesy: say what fits */
      names = nv;
      cap = ncap;
    }
    names[n++] = s;
  }
  if (n)
    qsort(names, n, sizeof *names, name_cmp);
  size_t distinct = 0;
  for (size_t i = 0; i < n; i++)
    if (i == 0 || strcmp(names[i], names[distinct - 1]) != 0)
      names[distinct++] = names[i];
  if (distinct == 0) {
    fprintf(stderr, "culpert: note: no span is named \"%s\": this profile has no spans\n", wanted);
  } else {
    fprintf(stderr, "culpert: note: no span is named \"%s\"; the profile's spans:", wanted);
    for (size_t i = 0; i < distinct && i < SHOWN; i++)
      fprintf(stderr, "%s \"%s\"", i ? "," : "", names[i]);
    if (distinct > SHOWN)
      fprintf(stderr, " and %zu more", distinct - SHOWN);
    fputc('\n', stderr);
  }
  free(names);
}
