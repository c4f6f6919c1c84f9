/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * fuzz_profile: libFuzzer target for the profile loader (profile.c), the
 * span tree (spantree.c) and the width/truncation helpers the views apply
 * to names from the file (format.c). Any input must give either an error
 * message or a model whose every index is in range; a crash, leak, hang or
 * sanitizer report is a bug. Build and run: tests/README.md ("Fuzzing").
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "profile.h"
#include "spantree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Walk the model the way the views do, touching every string. */
static size_t touch(const struct culpert__profile *p)
{
  size_t sum = 0;
  char out[256];
  for (size_t i = 0; i < p->nsamples; i++) {
    const struct culpert__sample *s = &p->samples[i];
    for (uint32_t k = 0; k < s->nframes; k++) {
      if (s->frames[k] >= p->nframes)
        abort(); /* the loader promised valid frame indices */
      const struct culpert__frame *f = &p->frames[s->frames[k]];
      sum += culpert__display_width(f->function);
      if (f->file)
        sum += strlen(f->file);
    }
    if (s->span_name)
      sum += strlen(culpert__truncate(s->span_name, 40, out, sizeof out));
  }
  for (size_t i = 0; i < p->nprops; i++)
    sum += strlen(p->props[i].key) + strlen(p->props[i].value);
  for (size_t i = 0; i < p->nmetadata; i++)
    sum += strlen(p->metadata[i].key) + strlen(p->metadata[i].value);
  return sum;
}

/* Visit every node without recursion; check the totals add up. */
static void walk(const struct culpert__span_node *root)
{
  size_t cap = 64, n = 0;
  const struct culpert__span_node **stack = malloc(cap * sizeof *stack);
  if (!stack)
    return;
  stack[n++] = root;
  while (n > 0) {
    const struct culpert__span_node *node = stack[--n];
    for (size_t i = 0; i < node->nchildren; i++) {
      if (node->children[i]->parent != node)
        abort();
      if (n == cap) {
        const struct culpert__span_node **ns = realloc(stack, cap * 2 * sizeof *ns);
        if (!ns)
          break;
        stack = ns;
        cap *= 2;
      }
      stack[n++] = node->children[i];
    }
  }
  free(stack);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct culpert__profile *p = NULL;
  struct culpert__span_node *root = NULL;
  char err[512];
  if (culpert__profile_load_buffer(data, size, "fuzz", &p, err, sizeof err) != 0) {
    if (err[0] == '\0')
      abort(); /* every failure has a message */
    return 0;
  }
  volatile size_t sink = touch(p);
  (void)sink;
  for (int inuse = 0; inuse < 2; inuse++) {
    if (culpert__spantree_build(p, inuse, &root) == 0) {
      walk(root);
      culpert__spantree_free(root);
    }
  }
  culpert__profile_free(p);
  return 0;
}
