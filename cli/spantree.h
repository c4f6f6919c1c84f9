/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * spantree.h: the span hierarchy of a profile, as `report` and `diff --tree`
 * show it.
 *
 * Spans are rebuilt from span_id / span_parent_id labels. Nodes with the same
 * name under the same parent name merge, whichever producer numbered them
 * (culpert: one id per path; the Rust culpert: one id per instance).
 * Samples without a span go to a root named "(no span)". Cycles and
 * self-nesting in the labels are cut, never followed forever.
 */
#ifndef CULPERT_CLI_SPANTREE_H
#define CULPERT_CLI_SPANTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile.h"

#define CULPERT_NO_SPAN_NAME "(no span)"

struct culpert__span_node {
  const char *name;    /* "" for the invisible top node */
  int64_t self_bytes;  /* bytes of samples whose innermost span is this node */
  int64_t total_bytes; /* self plus every descendant */
  int64_t self_samples;
  int64_t total_samples;
  double self_var, total_var; /* variance of the byte estimates (culpert__estimate_var) */
  struct culpert__span_node *parent;
  struct culpert__span_node **children; /* unsorted */
  size_t nchildren;
};

/*
 * culpert__spantree_build: build the tree of `p` using allocated bytes, or
 * in-use bytes when `inuse`. *root is an invisible node (name "") whose
 * children are the root spans and "(no span)". Returns 0 or -ENOMEM.
 */
int culpert__spantree_build(const struct culpert__profile *p, bool inuse,
                            struct culpert__span_node **root);

/* Child of `node` named `name`, or NULL. */
struct culpert__span_node *culpert__spantree_child(const struct culpert__span_node *node,
                                                   const char *name);

void culpert__spantree_free(struct culpert__span_node *root);

/*
 * culpert__span_names_note: when no sample of `p` has the span name
 * `wanted` (a --span that matched nothing, a typo most often), say so on
 * stderr with the span names the profile has, sorted (the first 12).
 * Prints nothing when some sample has that name.
 */
void culpert__span_names_note(const struct culpert__profile *p, const char *wanted);

#endif /* CULPERT_CLI_SPANTREE_H */
