/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * flame.h: the merged call tree behind `culpert flamegraph`, and the SVG
 * renderer that draws it.
 *
 * cmd_flamegraph.c builds the tree (span ancestry first, then code frames,
 * root first) and writes the folded form itself; flame_svg.c turns the same
 * tree into a self-contained interactive SVG. Names in the tree are the raw
 * names from the profile file: untrusted, any bytes. The renderer escapes
 * them; it never trusts them.
 */
#ifndef CULPERT_CLI_FLAME_H
#define CULPERT_CLI_FLAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What one unit of weight is; decides how the SVG prints values. */
enum culpert__flame_unit {
  CULPERT_FLAME_BYTES,   /* formatted like the CLI: "1.50 MB" */
  CULPERT_FLAME_SAMPLES, /* raw sample counts: "24 samples" */
  CULPERT_FLAME_OBJECTS, /* estimated object counts: "1024 objects" */
};

/*
 * One frame of the merged tree. Node 0 is the invisible root ("all"); every
 * other node's parent has a smaller index, so one backward pass sums totals.
 * Siblings are distinct by (name, is_span).
 */
struct culpert__flame_node {
  const char *name; /* raw name from the profile; never NULL */
  uint32_t parent;  /* index of the parent node; 0 for top-level frames */
  bool is_span;     /* a span from the sample's span ancestry, not code */
  int64_t self;     /* weight of stacks that end exactly here */
  int64_t total;    /* self plus every descendant (saturating) */
  /* The same two in the base profile of a differential graph (--diff-base);
   * 0 otherwise. A frame only the base has is in the tree with total 0. */
  int64_t base_self;
  int64_t base_total;
};

struct culpert__flame {
  struct culpert__flame_node *nodes;
  size_t nnodes;
  enum culpert__flame_unit unit;
  bool diff; /* differential: colour by total - base_total */
};

/* What the SVG header says about the graph; every string may be NULL. */
struct culpert__flame_svg_info {
  const char *title;    /* --title, or NULL for the default */
  const char *subtitle; /* e.g. "allocated bytes - rate 64.00 KB/alloc - file" */
};

/*
 * culpert__flame_svg_write: write `fg` as one self-contained SVG document
 * (inline CSS and script, nothing fetched) to `out`. Widths are `total`;
 * a differential graph colours each frame by its change against the base,
 * red for growth and blue for shrinkage, the largest change deepest, and
 * names both weights in its tooltip. Frames narrower than
 * 0.1% of the total are merged per parent into one grey frame; if the graph
 * would still exceed CULPERT_FLAME_SVG_MAX_RECTS frames, the threshold
 * doubles until it fits. Returns 0, -ENOMEM, or -EIO when writing failed.
 */
#define CULPERT_FLAME_SVG_MAX_RECTS 40000
int culpert__flame_svg_write(FILE *out, const struct culpert__flame *fg,
                             const struct culpert__flame_svg_info *info);

#endif /* CULPERT_CLI_FLAME_H */
