/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cmd_flamegraph.c: `culpert flamegraph FILE`, folded stacks or an
 * interactive SVG (cli.md, "flamegraph").
 *
 * Every sample becomes one path: its span ancestry (root span first, resolved
 * through span_parent_id) and then its code frames, root first. The paths
 * merge into one tree (flame.h) that both output formats are drawn from.
 * Span labels come from untrusted files: a parent chain that loops or nests
 * a span in itself is cut, never followed forever. The output file is
 * written under a temporary name and renamed, so a failure never leaves a
 * half-written file behind (a device or FIFO is written through).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive.h"
#include "cli.h"
#include "flame.h"
#include "format.h"
#include "profile.h"
#include "spantree.h"

/* Deepest span ancestry followed per sample; deeper chains are cut there. */
#define SPAN_DEPTH_MAX 256
/* The pseudo-root of samples outside every span (as `report` names it). */
#define NO_SPAN_NAME "(no span)"
/* The single frame of a sample that has neither spans nor code frames. */
#define NO_STACK_NAME "(no stack)"
/* The name shown for a frame whose name is the empty string. */
#define EMPTY_NAME "(unnamed)"

enum weight_kind { WEIGHT_BYTES, WEIGHT_SAMPLES, WEIGHT_OBJECTS };

struct options {
  const char **paths; /* FILE..., npaths of them (merged when several) */
  size_t npaths;
  const char *output; /* NULL or "-": standard output */
  const char *span;   /* --span filter, NULL for every sample */
  const char *title;
  const char *diff_base; /* --diff-base: the profile (or directory) to compare with */
  enum weight_kind weight;
  bool svg;
  bool format_given; /* --format was given: -o's extension does not choose */
  bool inuse;
  bool annotate;
};

static void usage(FILE *f)
{
  fprintf(f,
          "usage: culpert flamegraph [options] FILE...\n"
          "\n"
          "Folded stacks (one 'root;...;leaf weight' line per distinct stack, sorted\n"
          "in byte order) or a self-contained interactive SVG flame graph of the\n"
          "profile FILE ('-' reads standard input). Several FILEs, or a directory\n"
          "of them, are merged.\n"
          "\n"
          "  --format folded|svg     output format (default folded, or svg when the\n"
          "                          -o FILE ends in .svg)\n"
          "  --weight bytes|samples|objects\n"
          "                          what a frame's width measures (default bytes:\n"
          "                          unbiased byte estimates; samples: raw samples;\n"
          "                          objects: estimated allocation count)\n"
          "  --inuse                 in-use (live at snapshot) bytes or objects\n"
          "                          instead of allocated ones\n"
          "  --span NAME             only samples taken inside span NAME: its\n"
          "                          innermost span is NAME or has NAME as an\n"
          "                          ancestor; '(no span)' selects samples outside\n"
          "                          every span\n"
          "  --annotate-spans[=true|false]\n"
          "                          prepend each sample's span ancestry, root span\n"
          "                          first, to its code stack (default true); samples\n"
          "                          outside every span start with '(no span)' when\n"
          "                          the file has span labels at all\n"
          "  --diff-base BEFORE      a differential graph: widths from FILE, each frame\n"
          "                          coloured by its change since BEFORE (a profile\n"
          "                          or a directory of them): red grew, blue shrank;\n"
          "                          folded lines become 'stack before after'\n"
          "  --title TEXT            SVG title (default 'Allocation flame graph')\n"
          "  -o, --output FILE       write to FILE instead of standard output\n"
          "  -h, --help              show this help\n"
          "\n"
          "Folded names: ';' becomes ':'; control characters and bytes that are not UTF-8\n"
          "become '?'.\n"
          "SVG: frames narrower than 0.1%% of the total are merged into one grey\n"
          "frame per parent; hover shows name, weight and share, click zooms.\n"
          "Profiles larger than %u MiB decompressed are refused.\n"
          "Exit status: 0 success, 2 error.\n",
          CULPERT_PROFILE_MAX_BYTES / (1024u * 1024u));
}

/* Parse a boolean option value; returns 0 or -EINVAL. */
static int parse_bool(const char *v, bool *out)
{
  if (strcmp(v, "true") == 0) {
    *out = true;
    return 0;
  }
  if (strcmp(v, "false") == 0) {
    *out = false;
    return 0;
  }
  return -EINVAL;
}

/*
 * Take the value of option `name` at argv[*i]: either name=value in one
 * argument, or the next argument. Returns the value, or NULL after printing
 * an error.
 */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
  const char *arg = argv[*i];
  size_t n = strlen(name);
  if (strncmp(arg, name, n) == 0 && arg[n] == '=')
    return arg + n + 1;
  if (*i + 1 >= argc) {
    culpert__error("%s needs a value (try 'culpert flamegraph --help')", name);
    return NULL;
  }
  return argv[++*i];
}

/* True when argv's `arg` is option `name`, alone or as "name=value". */
static bool is_option(const char *arg, const char *name)
{
  size_t n = strlen(name);
  return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

/* Returns 0 to run, 1 when --help was shown, -EINVAL after an error. */
static int parse_args(int argc, char **argv, struct options *o)
{
  bool only_files = false;
  const char *v;

  o->paths = calloc((size_t)argc, sizeof *o->paths);
  if (!o->paths) {
    culpert__error("out of memory");
    return -ENOMEM;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (only_files || a[0] != '-' || strcmp(a, "-") == 0) {
      o->paths[o->npaths++] = a;
    } else if (strcmp(a, "--") == 0) {
      only_files = true;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 1;
    } else if (is_option(a, "--format")) {
      if (!(v = option_value(argc, argv, &i, "--format")))
        return -EINVAL;
      o->format_given = true;
      if (strcmp(v, "folded") == 0) {
        o->svg = false;
      } else if (strcmp(v, "svg") == 0) {
        o->svg = true;
      } else {
        culpert__error("--format must be folded or svg, not '%s'", v);
        return -EINVAL;
      }
    } else if (is_option(a, "--weight")) {
      if (!(v = option_value(argc, argv, &i, "--weight")))
        return -EINVAL;
      if (strcmp(v, "bytes") == 0) {
        o->weight = WEIGHT_BYTES;
      } else if (strcmp(v, "samples") == 0) {
        o->weight = WEIGHT_SAMPLES;
      } else if (strcmp(v, "objects") == 0) {
        o->weight = WEIGHT_OBJECTS;
      } else {
        culpert__error("--weight must be bytes, samples or objects, not '%s'", v);
        return -EINVAL;
      }
    } else if (is_option(a, "--span")) {
      if (!(v = option_value(argc, argv, &i, "--span")))
        return -EINVAL;
      if (v[0] == '\0') {
        culpert__error("--span needs a non-empty span name");
        return -EINVAL;
      }
      o->span = v;
    } else if (strcmp(a, "--inuse") == 0) {
      o->inuse = true;
    } else if (strcmp(a, "--annotate-spans") == 0) {
      /* Bare flag means true; a following "true"/"false" is its value. */
      o->annotate = true;
      if (i + 1 < argc && parse_bool(argv[i + 1], &o->annotate) == 0)
        i++;
    } else if (strncmp(a, "--annotate-spans=", 17) == 0) {
      if (parse_bool(a + 17, &o->annotate) != 0) {
        culpert__error("--annotate-spans must be true or false, not '%s'", a + 17);
        return -EINVAL;
      }
    } else if (is_option(a, "--diff-base")) {
      if (!(v = option_value(argc, argv, &i, "--diff-base")))
        return -EINVAL;
      if (v[0] == '\0') {
        culpert__error("--diff-base needs a profile");
        return -EINVAL;
      }
      o->diff_base = v;
    } else if (is_option(a, "--title")) {
      if (!(v = option_value(argc, argv, &i, "--title")))
        return -EINVAL;
      o->title = v;
    } else if (strcmp(a, "-o") == 0 || is_option(a, "--output")) {
      if (!(v = option_value(argc, argv, &i, a[1] == 'o' ? "-o" : "--output")))
        return -EINVAL;
      if (v[0] == '\0') {
        culpert__error("%s needs a file name", a[1] == 'o' ? "-o" : "--output");
        return -EINVAL;
      }
      o->output = v;
    } else if (strncmp(a, "-o", 2) == 0) {
      o->output = a + 2;
    } else {
      culpert__error("unknown option '%s' (try 'culpert flamegraph --help')", a);
      return -EINVAL;
    }
  }
  if (o->npaths == 0) {
    culpert__error("flamegraph needs a profile FILE (try 'culpert flamegraph --help')");
    return -EINVAL;
  }
  /* `-o flame.svg` means a picture: folded text under that name would
   * open in a browser as an error. */
  size_t olen = o->output ? strlen(o->output) : 0;
  if (!o->format_given && olen > 4 && strcasecmp(o->output + olen - 4, ".svg") == 0)
    o->svg = true;
  if (o->inuse && o->weight == WEIGHT_SAMPLES) {
    culpert__error("--inuse cannot be combined with --weight samples: raw samples count "
                   "allocations, not live memory (use --weight bytes or objects)");
    return -EINVAL;
  }
  return 0;
}

/* ---- span ancestry ------------------------------------------------------ */

struct span_entry {
  int64_t id; /* 0: empty slot */
  int64_t parent;
  const char *name;
  uint64_t mark; /* walk generation that last visited this entry */
};

struct span_table {
  struct span_entry *slots;
  size_t cap; /* power of two */
  uint64_t generation;
};

static size_t span_slot(const struct span_table *t, int64_t id)
{
  uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15u;
  size_t i = (size_t)(h >> 17) & (t->cap - 1);
  while (t->slots[i].id != 0 && t->slots[i].id != id)
    i = (i + 1) & (t->cap - 1);
  return i;
}

static struct span_entry *span_find(const struct span_table *t, int64_t id)
{
  if (id == 0 || t->cap == 0)
    return NULL;
  struct span_entry *e = &t->slots[span_slot(t, id)];
  return e->id == id ? e : NULL;
}

/*
 * Index every (span_id -> name, parent) the samples carry. The first sample
 * naming an id wins, so a file that contradicts itself still gives one
 * deterministic answer. Returns 0 or -ENOMEM.
 */
static int span_table_build(struct span_table *t, const struct culpert__profile *p)
{
  size_t n = 0;
  for (size_t i = 0; i < p->nsamples; i++)
    if (p->samples[i].span_name && p->samples[i].span_id != 0)
      n++;
  t->cap = 16;
  while (t->cap < n * 2)
    t->cap *= 2;
  t->slots = calloc(t->cap, sizeof *t->slots);
  if (!t->slots)
    return -ENOMEM;
  for (size_t i = 0; i < p->nsamples; i++) {
    const struct culpert__sample *s = &p->samples[i];
    if (!s->span_name || s->span_id == 0)
      continue;
    struct span_entry *e = &t->slots[span_slot(t, s->span_id)];
    if (e->id == 0) {
      e->id = s->span_id;
      e->parent = s->span_parent_id;
      e->name = s->span_name;
    }
  }
  return 0;
}

/*
 * The span names of sample `s`, root span first, into chain[]; returns how
 * many (0 outside every span). Each ancestor is visited at most once per
 * walk, so loops and self-nesting end the chain where they would repeat; an
 * unknown parent id ends it too.
 */
static size_t span_chain(struct span_table *t, const struct culpert__sample *s,
                         const char *chain[SPAN_DEPTH_MAX])
{
  if (!s->span_name)
    return 0;
  uint64_t gen = ++t->generation;
  size_t n = 0;
  chain[n++] = s->span_name;
  struct span_entry *self = span_find(t, s->span_id);
  if (self)
    self->mark = gen;
  int64_t cur = s->span_parent_id;
  while (cur != 0 && n < SPAN_DEPTH_MAX) {
    struct span_entry *e = span_find(t, cur);
    if (!e || e->mark == gen)
      break;
    e->mark = gen;
    chain[n++] = e->name;
    cur = e->parent;
  }
  for (size_t i = 0; i < n / 2; i++) {
    const char *tmp = chain[i];
    chain[i] = chain[n - 1 - i];
    chain[n - 1 - i] = tmp;
  }
  return n;
}

/* ---- the merged tree ---------------------------------------------------- */

/* A slot of the tree's index: the node and the low 32 bits of its hash, so
 * probing and growing rarely touch the nodes or their names. */
struct slot {
  uint32_t node; /* UINT32_MAX: empty */
  uint32_t tag;
};

struct tree {
  struct culpert__flame fg;
  size_t cap;
  struct slot *index; /* open addressing over (parent, name, is_span) */
  size_t index_cap;   /* power of two, at most half full */
};

static uint64_t name_hash(const char *s)
{
  uint64_t h = 0xcbf29ce484222325u;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    h = (h ^ *p) * 0x100000001b3u;
  return h;
}

static uint64_t node_hash(uint32_t parent, uint64_t nh, bool is_span)
{
  /* A full 64-bit finaliser: the index uses the low bits, and sequential
   * parents with equal names must not fall into one probe cluster. */
  uint64_t h = nh ^ ((uint64_t)parent * 0x9E3779B97F4A7C15u) ^ (is_span ? 0x5bd1e995u : 0);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdu;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53u;
  return h ^ (h >> 33);
}

static int64_t sat_add(int64_t a, int64_t b)
{
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

static struct slot *slots_new(size_t cap)
{
  struct slot *sl = malloc(cap * sizeof *sl);
  if (sl)
    for (size_t i = 0; i < cap; i++)
      sl[i].node = UINT32_MAX;
  return sl;
}

static int tree_init(struct tree *t)
{
  t->cap = 1024;
  t->fg.nodes = calloc(t->cap, sizeof *t->fg.nodes);
  t->index_cap = 2048;
  t->index = slots_new(t->index_cap);
  if (!t->fg.nodes || !t->index)
    return -ENOMEM;
  t->fg.nodes[0].name = "all";
  t->fg.nnodes = 1;
  return 0;
}

static void tree_free(struct tree *t)
{
  free(t->fg.nodes);
  free(t->index);
}

/* Double the index and re-insert every node but the root. */
static int tree_grow_index(struct tree *t)
{
  size_t cap = t->index_cap * 2;
  struct slot *idx = slots_new(cap);
  if (!idx)
    return -ENOMEM;
  for (size_t k = 0; k < t->index_cap; k++) {
    if (t->index[k].node == UINT32_MAX)
      continue;
    size_t i = t->index[k].tag & (cap - 1);
    while (idx[i].node != UINT32_MAX)
      i = (i + 1) & (cap - 1);
    idx[i] = t->index[k];
  }
  free(t->index);
  t->index = idx;
  t->index_cap = cap;
  return 0;
}

/* The child of `parent` named `name` (hash `nh`), created when missing,
 * in *out. The index holds at most 2^31 slots, so 32-bit tags place them. */
static int tree_child(struct tree *t, uint32_t parent, const char *name, uint64_t nh, bool is_span,
                      uint32_t *out)
{
  uint32_t tag = (uint32_t)node_hash(parent, nh, is_span);
  size_t i = tag & (t->index_cap - 1);
  for (; t->index[i].node != UINT32_MAX; i = (i + 1) & (t->index_cap - 1)) {
    if (t->index[i].tag != tag)
      continue;
    const struct culpert__flame_node *n = &t->fg.nodes[t->index[i].node];
    if (n->parent == parent && n->is_span == is_span && strcmp(n->name, name) == 0) {
      *out = t->index[i].node;
      return 0;
    }
  }
  if (t->fg.nnodes >= (1u << 30))
    return -ENOMEM;
  if (t->fg.nnodes == t->cap) {
    struct culpert__flame_node *nodes = realloc(t->fg.nodes, t->cap * 2 * sizeof *nodes);
    if (!nodes)
      return -ENOMEM;
    t->fg.nodes = nodes;
    t->cap *= 2;
  }
  uint32_t id = (uint32_t)t->fg.nnodes++;
  t->fg.nodes[id] =
      (struct culpert__flame_node){.name = name, .parent = parent, .is_span = is_span};
  t->index[i] = (struct slot){.node = id, .tag = tag};
  *out = id;
  /* Keep the index at most half full. */
  if (t->fg.nnodes * 2 > t->index_cap)
    return tree_grow_index(t);
  return 0;
}

/* The name a frame is shown under: the empty string gets a visible one. */
static const char *frame_name(const char *name)
{
  return name[0] ? name : EMPTY_NAME;
}

/* Insert one stack, root first (names already through frame_name(), with
 * their name_hash()); `w` goes to its last frame. */
static int tree_add(struct tree *t, const char *const *names, const uint64_t *hashes,
                    const bool *spans, size_t n, int64_t w, bool base)
{
  uint32_t cur = 0;
  for (size_t i = 0; i < n; i++) {
    int rc = tree_child(t, cur, names[i], hashes[i], spans[i], &cur);
    if (rc != 0)
      return rc;
  }
  int64_t *self = base ? &t->fg.nodes[cur].base_self : &t->fg.nodes[cur].self;
  *self = sat_add(*self, w);
  return 0;
}

static void tree_sum(struct tree *t)
{
  for (size_t i = 0; i < t->fg.nnodes; i++) {
    t->fg.nodes[i].total = t->fg.nodes[i].self;
    t->fg.nodes[i].base_total = t->fg.nodes[i].base_self;
  }
  for (size_t i = t->fg.nnodes; i-- > 1;) {
    struct culpert__flame_node *n = &t->fg.nodes[i], *up = &t->fg.nodes[n->parent];
    up->total = sat_add(up->total, n->total);
    up->base_total = sat_add(up->base_total, n->base_total);
  }
}

static int64_t sample_weight(const struct culpert__sample *s, const struct options *o)
{
  switch (o->weight) {
  case WEIGHT_SAMPLES:
    return s->samples;
  case WEIGHT_OBJECTS:
    return o->inuse ? s->inuse_objects : s->objects;
  case WEIGHT_BYTES:
  default:
    return o->inuse ? s->inuse_bytes : s->bytes;
  }
}

/*
 * Add every sample of `p` that passes --span and has a positive weight to
 * the tree `t` (made by tree_init; tree_sum totals it once every profile is
 * in): to the frames' own weights, or with `base` to their base weights.
 * *matched counts those samples.
 */
static int build_tree(const struct culpert__profile *p, const struct options *o, struct tree *t,
                      bool base, size_t *matched)
{
  struct span_table spans = {0};
  const char **names = NULL;
  uint64_t *hashes = NULL;
  uint64_t *frame_hash = NULL; /* name_hash of every profile frame */
  bool *kinds = NULL;
  bool any_span = false;
  size_t maxframes = 0;
  int rc = 0;
  for (size_t i = 0; i < p->nsamples; i++) {
    if (p->samples[i].nframes > maxframes)
      maxframes = p->samples[i].nframes;
    if (p->samples[i].span_name)
      any_span = true;
  }
  rc = span_table_build(&spans, p);
  if (rc != 0)
    goto out;
  /* Room for the span chain, "(no span)" and the code frames. */
  size_t room = SPAN_DEPTH_MAX + 1 + maxframes;
  names = malloc(room * sizeof *names);
  hashes = malloc(room * sizeof *hashes);
  kinds = malloc(room * sizeof *kinds);
  frame_hash = malloc((p->nframes ? p->nframes : 1) * sizeof *frame_hash);
  if (!names || !hashes || !kinds || !frame_hash) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t f = 0; f < p->nframes; f++)
    frame_hash[f] = name_hash(frame_name(p->frames[f].function));

  *matched = 0;
  for (size_t i = 0; i < p->nsamples; i++) {
    const struct culpert__sample *s = &p->samples[i];
    int64_t w = sample_weight(s, o);
    if (w <= 0)
      continue;
    size_t n = span_chain(&spans, s, names);
    if (o->span) {
      bool hit = n == 0 && strcmp(o->span, NO_SPAN_NAME) == 0;
      for (size_t k = 0; k < n && !hit; k++)
        hit = strcmp(names[k], o->span) == 0;
      if (!hit)
        continue;
    }
    if (!o->annotate) {
      n = 0;
    } else if (n == 0 && any_span) {
      names[n++] = NO_SPAN_NAME;
    }
    for (size_t k = 0; k < n; k++) {
      names[k] = frame_name(names[k]);
      hashes[k] = name_hash(names[k]);
      kinds[k] = true;
    }
    for (uint32_t f = s->nframes; f-- > 0;) {
      uint32_t fi = s->frames[f];
      names[n] = fi < p->nframes ? frame_name(p->frames[fi].function) : "?";
      hashes[n] = fi < p->nframes ? frame_hash[fi] : name_hash("?");
      kinds[n++] = false;
    }
    if (n == 0) {
      names[n] = NO_STACK_NAME;
      hashes[n] = name_hash(NO_STACK_NAME);
      kinds[n++] = false;
    }
    rc = tree_add(t, names, hashes, kinds, n, w, base);
    if (rc != 0)
      goto out;
    (*matched)++;
  }
out:
  free(spans.slots);
  free(names);
  free(hashes);
  free(frame_hash);
  free(kinds);
  return rc;
}

/* ---- folded output ------------------------------------------------------ */

struct folded_line {
  char *text; /* the stack, later the whole line */
  int64_t weight;
  int64_t base; /* a differential graph's base weight */
};

static int cmp_line(const void *a, const void *b)
{
  return strcmp(((const struct folded_line *)a)->text, ((const struct folded_line *)b)->text);
}

/* Append `name` to buf at *len with ';' -> ':', and control characters
 * and bytes that are not UTF-8 -> '?' (culpert__printable; never longer). */
static void put_folded_name(char *buf, size_t *len, const char *name)
{
  char *start = buf + *len;
  size_t n = strlen(name);
  memcpy(start, name, n + 1);
  culpert__printable(start);
  for (char *c = start; *c; c++)
    if (*c == ';')
      *c = ':';
  *len += strlen(start);
}

/* Whether the stack ending at `n` gets a folded line. */
static bool line_wanted(const struct culpert__flame *fg, const struct culpert__flame_node *n)
{
  return n->self > 0 || (fg->diff && n->base_self > 0);
}

/*
 * One line per distinct stack with a positive weight: 'stack weight', or
 * for a differential graph 'stack before after' (the form flamegraph.pl
 * reads for one), for every stack with a weight in either profile. Stacks
 * that become equal only after name sanitising merge too. Lines are in
 * byte order of the whole line, as `LC_ALL=C sort` would put them.
 */
static int write_folded(FILE *out, const struct culpert__flame *fg)
{
  struct folded_line *lines = NULL;
  uint32_t *path = NULL;
  size_t nlines = 0;
  int rc = 0;

  for (size_t i = 1; i < fg->nnodes; i++)
    if (line_wanted(fg, &fg->nodes[i]))
      nlines++;
  lines = calloc(nlines ? nlines : 1, sizeof *lines);
  path = malloc(fg->nnodes * sizeof *path);
  if (!lines || !path) {
    rc = -ENOMEM;
    goto out;
  }

  size_t k = 0;
  for (uint32_t i = 1; i < fg->nnodes; i++) {
    if (!line_wanted(fg, &fg->nodes[i]))
      continue;
    size_t depth = 0, bytes = 0;
    for (uint32_t n = i; n != 0; n = fg->nodes[n].parent) {
      path[depth++] = n;
      bytes += strlen(fg->nodes[n].name) + 1;
    }
    /* Room for the stack, two times " " and up to 20 digits, and the NUL. */
    char *text = malloc(bytes + 48);
    if (!text) {
      rc = -ENOMEM;
      goto out;
    }
    size_t len = 0;
    while (depth-- > 0) {
      put_folded_name(text, &len, fg->nodes[path[depth]].name);
      if (depth > 0)
        text[len++] = ';';
    }
    text[len] = '\0';
    lines[k].text = text;
    lines[k].weight = fg->nodes[i].self;
    lines[k].base = fg->nodes[i].base_self;
    k++;
  }

  qsort(lines, nlines, sizeof *lines, cmp_line);
  size_t m = 0;
  for (size_t i = 0; i < nlines; i++) {
    if (m > 0 && strcmp(lines[m - 1].text, lines[i].text) == 0) {
      lines[m - 1].weight = sat_add(lines[m - 1].weight, lines[i].weight);
      lines[m - 1].base = sat_add(lines[m - 1].base, lines[i].base);
      free(lines[i].text);
      lines[i].text = NULL;
      continue;
    }
    if (m != i) {
      lines[m] = lines[i];
      lines[i].text = NULL;
    }
    m++;
  }
  for (size_t i = 0; i < m; i++) {
    size_t len = strlen(lines[i].text);
    if (fg->diff)
      snprintf(lines[i].text + len, 48, " %lld %lld", (long long)lines[i].base,
               (long long)lines[i].weight);
    else
      snprintf(lines[i].text + len, 48, " %lld", (long long)lines[i].weight);
  }
  qsort(lines, m, sizeof *lines, cmp_line);
  for (size_t i = 0; i < m; i++) {
    fputs(lines[i].text, out);
    fputc('\n', out);
  }
  if (ferror(out))
    rc = -EIO;
out:
  if (lines)
    for (size_t i = 0; i < nlines; i++)
      free(lines[i].text);
  free(lines);
  free(path);
  return rc;
}

/* ---- output file -------------------------------------------------------- */

/*
 * Open the destination: standard output; a device or FIFO, written through;
 * or a temporary file beside the file `path` names (through a symbolic
 * link, its target), which finish_output() renames into place. *tmp
 * receives the temporary name and *final the name it takes (NULL for the
 * first two).
 */
static int open_output(const char *path, FILE **out, char **tmp, char **final)
{
  char target[PATH_MAX];
  *out = NULL;
  *tmp = NULL;
  *final = NULL;
  if (!path || strcmp(path, "-") == 0) {
    *out = stdout;
    return 0;
  }
  int kind = culpert__output_target(path, target);
  if (kind < 0)
    return kind;
  if (kind == 1) {
    *out = fopen(path, "w");
    if (*out)
      return 0;
    int err = errno;
    culpert__error("cannot write output file '%s': %s", path, strerror(err));
    return -err;
  }
  size_t n = strlen(target) + sizeof ".tmp.XXXXXX";
  char *name = malloc(n);
  *final = strdup(target);
  if (!name || !*final) {
    free(name);
    free(*final);
    *final = NULL;
    return -ENOMEM;
  }
  snprintf(name, n, "%s.tmp.XXXXXX", target);
  int fd = mkstemp(name);
  if (fd < 0) {
    int err = errno;
    culpert__error("cannot create output file '%s': %s", path, strerror(err));
    free(name);
    free(*final);
    *final = NULL;
    return -err;
  }
  /* mkstemp creates 0600; give the file the mode a plain create would. */
  mode_t mask = umask(0);
  umask(mask);
  (void)fchmod(fd, 0666 & ~mask);
  *out = fdopen(fd, "w");
  if (!*out) {
    int err = errno;
    close(fd);
    unlink(name);
    free(name);
    free(*final);
    *final = NULL;
    culpert__error("cannot write output file '%s': %s", path, strerror(err));
    return -err;
  }
  *tmp = name;
  return 0;
}

/*
 * Flush and close. When `ok`, rename the temporary into place (as `final`)
 * and report any write error naming the file (or standard output);
 * otherwise, or on any error, remove the temporary so no half-written file
 * is left. Returns 0 or a negative errno.
 */
static int finish_output(const char *path, FILE *out, char *tmp, char *final, bool ok)
{
  int rc = 0;
  errno = 0;
  if (fflush(out) != 0)
    rc = errno ? -errno : -EIO;
  else if (ferror(out))
    rc = -EIO;
  if (out == stdout) {
    if (ok && rc != 0)
      culpert__error("cannot write to standard output: %s", strerror(-rc));
    return rc;
  }
  if (fclose(out) != 0 && rc == 0)
    rc = errno ? -errno : -EIO;
  if (ok && rc == 0 && tmp && rename(tmp, final) != 0)
    rc = -errno;
  if (ok && rc != 0)
    culpert__error("cannot write output file '%s': %s", path, strerror(-rc));
  if (tmp && (!ok || rc != 0))
    unlink(tmp);
  free(tmp);
  free(final);
  return rc;
}

/* ---- the command -------------------------------------------------------- */

/* What the widths measure; in-use values of the file CULPERT_PEAK writes
 * are those of the in-use peak. */
static const char *weight_label(const struct options *o, const struct culpert__profile *p)
{
  bool peak = o->inuse && culpert__profile_prop(p, "culpert.inuse_at_peak") != NULL;
  switch (o->weight) {
  case WEIGHT_SAMPLES:
    return "raw samples";
  case WEIGHT_OBJECTS:
    return peak       ? "objects in use at the in-use peak"
           : o->inuse ? "in-use objects"
                      : "allocated objects";
  case WEIGHT_BYTES:
  default:
    return peak ? "bytes in use at the in-use peak" : o->inuse ? "in-use bytes" : "allocated bytes";
  }
}

/* After the weight label: whether the widths are estimates, or exact
 * counts because every profile shown recorded every allocation (rate 0). */
static const char *weight_kind(const struct options *o, const struct culpert__profile *p,
                               const struct culpert__profile *base)
{
  if (o->weight == WEIGHT_SAMPLES)
    return "";
  return culpert__profile_exact(p) && (base == NULL || culpert__profile_exact(base))
             ? " (exact)"
             : " (estimated)";
}

/* Refuse a weight the file does not carry, naming the flag and the file. */
static int check_weight(const struct culpert__profile *p, const void *arg, char *err, size_t errlen)
{
  const struct options *o = arg;
  if (o->inuse && !p->has_inuse)
    snprintf(err, errlen, "--inuse: '%s' has no in-use values", p->path);
  else if (o->weight == WEIGHT_SAMPLES && !p->has_samples)
    snprintf(err, errlen, "--weight samples: '%s' has no raw sample counts", p->path);
  else if (o->weight == WEIGHT_OBJECTS && !(o->inuse ? p->has_inuse : p->has_objects))
    snprintf(err, errlen, "--weight objects: '%s' has no object counts", p->path);
  else
    return 0;
  return -EINVAL;
}

int culpert__cmd_flamegraph(int argc, char **argv)
{
  struct options o = {.annotate = true, .weight = WEIGHT_BYTES};
  struct culpert__profile *p = NULL, *base = NULL;
  struct tree t = {0};
  FILE *out = NULL;
  char *tmp = NULL, *final = NULL;
  char err[512];
  char *subtitle = NULL;
  int status = CULPERT_EXIT_ERROR;
  size_t matched = 0, base_matched = 0;

  int rc = parse_args(argc, argv, &o);
  if (rc != 0) {
    free(o.paths);
    return rc == 1 ? CULPERT_EXIT_OK : CULPERT_EXIT_ERROR;
  }

  for (size_t i = 0; o.diff_base && strcmp(o.diff_base, "-") == 0 && i < o.npaths; i++) {
    if (strcmp(o.paths[i], "-") == 0) {
      culpert__error("standard input ('-') can be read only once: not both FILE and --diff-base");
      goto out;
    }
  }
  /* Folded text or a picture in place of a profile it reads would lose
   * that profile; the file is still intact here. */
  if (o.output && strcmp(o.output, "-") != 0 &&
      (culpert__profile_paths_name((const char *const *)o.paths, o.npaths, o.output, err,
                                   sizeof err) ||
       (o.diff_base && culpert__profile_paths_name(&o.diff_base, 1, o.output, err, sizeof err)))) {
    culpert__error("-o '%s' is the profile '%s' this flame graph reads: writing the graph would "
                   "replace it; give another output file",
                   o.output, err);
    goto out;
  }
  const char *dir = NULL;
  if (o.output && strcmp(o.output, "-") != 0) {
    dir = culpert__profile_input_dir(o.output, (const char *const *)o.paths, o.npaths);
    if (!dir && o.diff_base)
      dir = culpert__profile_input_dir(o.output, &o.diff_base, 1);
  }
  if (dir) {
    culpert__error("-o '%s' is in the directory '%s' this flame graph reads: every command "
                   "given '%s' would then read the graph as one of its profiles, and refuse "
                   "it; write it elsewhere",
                   o.output, dir, dir);
    goto out;
  }
  if (culpert__profile_load_all(o.paths, o.npaths, NULL, check_weight, &o, &p, err, sizeof err) !=
      0) {
    culpert__error("%s", err);
    goto out;
  }
  if (o.diff_base && culpert__profile_load_all(&o.diff_base, 1, NULL, check_weight, &o, &base, err,
                                               sizeof err) != 0) {
    culpert__error("--diff-base: %s", err);
    goto out;
  }
  if (tree_init(&t) != 0 || build_tree(p, &o, &t, false, &matched) != 0 ||
      (base && build_tree(base, &o, &t, true, &base_matched) != 0)) {
    culpert__error("out of memory building the flame graph of '%s'", p->path);
    goto out;
  }
  tree_sum(&t);
  t.fg.diff = base != NULL;
  t.fg.unit = o.weight == WEIGHT_SAMPLES   ? CULPERT_FLAME_SAMPLES
              : o.weight == WEIGHT_OBJECTS ? CULPERT_FLAME_OBJECTS
                                           : CULPERT_FLAME_BYTES;
  if (matched == 0) {
    if (o.span) {
      fprintf(stderr, "culpert: note: no samples with a positive weight in span \"%s\"\n", o.span);
      if (strcmp(o.span, NO_SPAN_NAME) != 0)
        culpert__span_names_note(p, o.span);
    } else
      fprintf(stderr, "culpert: note: no samples with a positive weight in '%s'\n", p->path);
  }
  if (base && o.weight == WEIGHT_SAMPLES && base->rate != p->rate)
    fprintf(stderr,
            "culpert: note: --weight samples compares raw sample counts, and '%s' and '%s' "
            "were sampled at different rates; bytes or objects compare estimates\n",
            base->path, p->path);

  if (open_output(o.output, &out, &tmp, &final) != 0)
    goto out;
  if (o.svg) {
    char rate[CULPERT_FMT_RATES_MAX];
    size_t n =
        strlen(p->path) + (o.span ? strlen(o.span) : 0) + (base ? strlen(base->path) : 0) + 256;
    subtitle = malloc(n);
    if (!subtitle) {
      rc = -ENOMEM;
    } else {
      snprintf(subtitle, n, "%s%s \xC2\xB7 sample rate %s%s%s%s \xC2\xB7 %s%s%s",
               weight_label(&o, p), weight_kind(&o, p, base),
               culpert__fmt_merged_rate(rate, p->rate, p->nparts, p->mixed_rates),
               o.span ? " \xC2\xB7 span \xE2\x80\x9C" : "", o.span ? o.span : "",
               o.span ? "\xE2\x80\x9D" : "", p->path, base ? " against " : "",
               base ? base->path : "");
      struct culpert__flame_svg_info info = {
          .title = o.title,
          .subtitle = subtitle,
      };
      rc = culpert__flame_svg_write(out, &t.fg, &info);
    }
  } else {
    rc = write_folded(out, &t.fg);
  }
  if (rc == -ENOMEM) {
    culpert__error("out of memory writing the flame graph of '%s'", p->path);
    finish_output(o.output, out, tmp, final, false);
    goto out;
  }
  /* A write error (-EIO) shows in the stream's error flag: finish_output
   * reports it, naming the file, and removes the temporary. */
  if (finish_output(o.output, out, tmp, final, true) != 0)
    goto out;
  status = CULPERT_EXIT_OK;
out:
  free(o.paths);
  free(subtitle);
  tree_free(&t);
  culpert__profile_free(p);
  culpert__profile_free(base);
  return status;
}
