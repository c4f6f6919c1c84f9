/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cmd_report.c: `culpert report FILE`, where the bytes go by span.
 *
 * Three views of one loaded profile: the span tree (default), the flat table
 * of spans (--flat) and the callsites inside one span or outside every span
 * (--span NAME, --no-span); each as text (cli.md layouts, byte for byte) or
 * as JSON (schema in cli/README.md). Output is deterministic: every sort
 * breaks ties by name. Hostile span data (cycles, absurd depth, control
 * characters, huge names) never hangs, overflows the stack or breaks the
 * columns.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "format.h"
#include "profile.h"
#include "spantree.h"

#define TREE_NAME_COLS  40 /* name column of the tree, prefix included */
#define TREE_BYTES_COLS 14 /* bytes column of the tree */
#define TREE_MAX_DEPTH  12 /* deeper spans are summarised, columns stay put */
#define LABEL_MAX_COLS  80 /* longer span names and callsites are cut */
#define LABEL_BUF       1024

/* Allocation machinery: frames skipped when looking for the callsite.
 * POSIX extended regexes matched against the function name. */
static const char *const default_skips[] = {
    "^(malloc|calloc|realloc|reallocarray|free|posix_memalign|aligned_alloc|memalign|valloc|"
    "pvalloc|malloc_usable_size)$",
    "^__libc_(malloc|calloc|realloc|memalign|valloc|pvalloc)$",
    "^(__)?(strdup|strndup|wcsdup)$",
    "(^|::)operator new", /* also a class's own: icu::UMemory::operator new(unsigned long) */
    "^_Zn[wa]",
    "::(_M_)?allocate(\\(|$)",
    "^__rust_(alloc|alloc_zeroed|realloc)$",
    "^__r(dl|g)_(alloc|alloc_zeroed|realloc)$",
    "^alloc::(alloc|raw_vec)::",
    "^<alloc::alloc::Global as core::alloc::Allocator>::",
    "^std::alloc::",
    "^runtime\\.(mallocgc|newobject|newarray|makeslice|makeslicecopy|growslice|makemap|"
    "makemap_small|makechan|rawstring|rawbyteslice|rawruneslice)$",
    /* Wrappers of widely used C libraries: gnulib, libiberty and git; GLib;
     * OpenSSL; the CPython, Perl and Ruby interpreters. */
    "^x(malloc|calloc|zalloc|realloc|reallocarray|nmalloc|strdup|strndup|memdup|charalloc)$",
    "^g_(try_)?(malloc|malloc0|realloc)(_n)?$",
    "^g_(strdup|strndup|memdup|memdup2|slice_alloc|slice_alloc0)$",
    "^CRYPTO_(malloc|zalloc|realloc|clear_realloc|memdup|strdup|strndup|secure_malloc|"
    "secure_zalloc)$",
    "^_?Py(Mem|Object)_(Raw)?(Malloc|Calloc|Realloc)$",
    "^_PyMem_(Raw|Debug)(Malloc|Calloc|Realloc)$",
    "^Perl_safesys(malloc|calloc|realloc)$",
    "^ruby_x(malloc|malloc2|calloc|realloc|realloc2)$",
    /* and of widely used servers and the libraries they share: Redis (and
     * its forks, whose zmalloc.c this is; zlib's zcalloc too), nginx and its
     * pools, PostgreSQL's memory contexts (backend) and pg_malloc family
     * (client programs), libevent (memcached, tmux). */
    "^z(try)?(malloc|calloc|realloc)(_usable|_num|_no_tcache)?(_internal)?$",
    "^zstrdup$",
    "^ngx_(alloc|calloc|memalign|palloc|pnalloc|pcalloc|pmemalign|palloc_small|palloc_block|"
    "palloc_large)$",
    "^(palloc|palloc0|palloc_extended|palloc_aligned|repalloc|repalloc_extended|repalloc_huge|"
    "pstrdup|pnstrdup)$",
    "^MemoryContext(Alloc|AllocZero|AllocZeroAligned|AllocExtended|AllocHuge|AllocAligned|"
    "Strdup)$",
    "^(AllocSet|Generation|Slab|Bump)(Alloc|AllocLarge|AllocFromNewBlock|Realloc)$",
    "^pg_(malloc|malloc0|malloc_extended|realloc|strdup)$",
    "^event_mm_(malloc|calloc|realloc|strdup)_$",
    /* the JVM's native heap (HotSpot): every C-heap allocation of the VM
     * goes through os::malloc, most of them through AllocateHeap first */
    "^os::(malloc|realloc|strdup|strdup_check_oom)\\(",
    "^(AllocateHeap|ReallocateHeap)\\(",
};
#define NDEFAULT_SKIPS (sizeof default_skips / sizeof default_skips[0])

enum view { VIEW_TREE, VIEW_FLAT, VIEW_CALLSITES };

struct opts {
  char **files; /* FILE..., nfiles of them */
  int nfiles;
  enum view view;
  const char *span; /* --span NAME; NULL with --no-span */
  long top;         /* 0 = no limit */
  bool inuse;
  bool json;
  regex_t *skips;
  size_t nskips;
};

static void help(FILE *f)
{
  fprintf(f,
          "usage: culpert report [options] FILE...\n"
          "\n"
          "Where a profile's bytes go, by span. FILE is a pprof profile, gzipped or\n"
          "plain, from culpert, the Rust culpert or Go (heap/allocs); '-' reads stdin.\n"
          "Several FILEs are merged (the processes of one run, say): their samples\n"
          "add up, and spans of the same name under the same parent name merge.\n"
          "A FILE that is a directory stands for the profiles in it (but the\n"
          "NAME.peak.pb.gz files of CULPERT_PEAK, which repeat NAME.pb.gz's\n"
          "allocations).\n"
          "When no sample lies in a span (a program run unmodified), the text tree,\n"
          "one line, goes on to the --no-span view.\n"
          "Files that decompress to more than %u MiB are refused (a limit built\n"
          "into culpert, against gzip bombs).\n"
          "\n"
          "Views:\n"
          "  (default)          span tree: spans nested under their parents\n"
          "  --flat             table of spans by the bytes they allocated directly\n"
          "  --span NAME        top callsites within span NAME (innermost span);\n"
          "                     '(no span)' is the same as --no-span\n"
          "  --no-span          top callsites outside every span\n"
          "\n"
          "Options:\n"
          "  --top N            rows, or children per tree node, to show (default 20;\n"
          "                     0 = all)\n"
          "  --inuse            use in-use bytes instead of allocated bytes\n"
          "  --format FMT       text (default) or json (stable schema, see cli/README.md)\n"
          "  --skip REGEX       also treat functions matching REGEX (POSIX extended) as\n"
          "                     allocation machinery when finding callsites; repeatable\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 success, 2 error (unreadable or invalid profile, bad option).\n",
          CULPERT_PROFILE_MAX_BYTES >> 20);
}

/* ---- text helpers ----------------------------------------------------- */

/* `s` cut to `cols` display columns, control characters shown as '?'. */
static const char *label_for(const char *s, size_t cols, char out[LABEL_BUF])
{
  culpert__truncate(s, cols, out, LABEL_BUF);
  return culpert__printable(out);
}

static double pct(int64_t part, int64_t whole)
{
  return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

static void rate_and_samples(const struct culpert__profile *p, char *buf, size_t len)
{
  char r[CULPERT_FMT_RATES_MAX];
  culpert__fmt_merged_rate(r, p->rate, p->nparts, p->mixed_rates);
  if (p->has_samples)
    snprintf(buf, len, "%" PRId64 " sample%s, sample rate %s", p->total_samples,
             p->total_samples == 1 ? "" : "s", r);
  else
    snprintf(buf, len, "sample counts not recorded, sample rate %s", r);
}

/* ---- JSON helpers ------------------------------------------------------ */

/* The keys every JSON view shares, in two runs so that each document keeps
 * its keys sorted: "file", "inuse", "rate_bytes" ... "samples_recorded",
 * "schema_version". */
static void json_common_a(FILE *f, const struct culpert__profile *p, const struct opts *o)
{
  fputs("\"file\":", f);
  culpert__put_json_string(f, p->path);
  if (p->nparts > 1) {
    fputs(",\"files\":[", f);
    for (size_t i = 0; i < p->nparts; i++) {
      if (i)
        fputc(',', f);
      culpert__put_json_string(f, p->part_paths[i]);
    }
    fputc(']', f);
  }
  fprintf(f, ",\"inuse\":%s,\"rate_bytes\":", o->inuse ? "true" : "false");
  if (p->mixed_rates)
    fputs("null", f);
  else
    fprintf(f, "%" PRId64, p->rate);
}

static void json_common_b(FILE *f, const struct culpert__profile *p)
{
  fprintf(f, "\"samples_recorded\":%s,\"schema_version\":1", p->has_samples ? "true" : "false");
}

/* ---- tree -------------------------------------------------------------- */

static int node_cmp(const void *x, const void *y)
{
  const struct culpert__span_node *a = *(struct culpert__span_node *const *)x;
  const struct culpert__span_node *b = *(struct culpert__span_node *const *)y;
  if (a->total_bytes != b->total_bytes)
    return a->total_bytes > b->total_bytes ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* A sorted copy of node's children (caller frees); NULL on ENOMEM. */
static struct culpert__span_node **sorted_children(const struct culpert__span_node *node)
{
  struct culpert__span_node **v = malloc((node->nchildren ? node->nchildren : 1) * sizeof *v);
  if (!v)
    return NULL;
  if (node->nchildren)
    memcpy(v, node->children, node->nchildren * sizeof *v);
  qsort(v, node->nchildren, sizeof *v, node_cmp);
  return v;
}

/* Tree glyphs, three display columns each. */
#define GLYPH_MID   "\xe2\x94\x9c\xe2\x94\x80 " /* "├─ " */
#define GLYPH_LAST  "\xe2\x94\x94\xe2\x94\x80 " /* "└─ " */
#define GLYPH_PIPE  "\xe2\x94\x82  "            /* "│  " */
#define GLYPH_SPACE "   "

struct tree_ctx {
  FILE *f;
  int64_t whole;
  long top;
  char prefix[TREE_MAX_DEPTH * sizeof GLYPH_PIPE + 1];
};

static void tree_line(struct tree_ctx *c, const char *glyph, const struct culpert__span_node *n)
{
  char name[LABEL_BUF], head[LABEL_BUF + sizeof c->prefix + 8];
  char b[CULPERT_FMT_MAX], s[CULPERT_FMT_MAX];
  size_t used = culpert__display_width(c->prefix) + culpert__display_width(glyph);
  size_t room = used < TREE_NAME_COLS ? TREE_NAME_COLS - used : 1;
  snprintf(head, sizeof head, "%s%s%s", c->prefix, glyph, label_for(n->name, room, name));
  culpert__put_padded(c->f, head, TREE_NAME_COLS, 0);
  culpert__put_padded(c->f, culpert__fmt_bytes(b, n->total_bytes), TREE_BYTES_COLS, 1);
  fprintf(c->f, "  %6.2f%%  (self %s)\n", pct(n->total_bytes, c->whole),
          culpert__fmt_bytes(s, n->self_bytes));
}

static void tree_hidden(struct tree_ctx *c, const char *glyph, size_t k)
{
  fprintf(c->f, "%s%s... (%zu more children hidden)\n", c->prefix, glyph, k);
}

/* Print the children of `n` at `depth` (0 = the roots). Depth is bounded by
 * TREE_MAX_DEPTH, so the recursion is too. */
static int tree_children(struct tree_ctx *c, const struct culpert__span_node *n, int depth)
{
  if (n->nchildren == 0)
    return 0;
  if (depth > TREE_MAX_DEPTH) {
    tree_hidden(c, GLYPH_LAST, n->nchildren);
    return 0;
  }
  struct culpert__span_node **kids = sorted_children(n);
  if (!kids)
    return -ENOMEM;
  size_t shown = n->nchildren;
  if (c->top > 0 && shown > (size_t)c->top)
    shown = (size_t)c->top;
  bool hidden = shown < n->nchildren;
  int rc = 0;
  size_t plen = strlen(c->prefix);
  for (size_t i = 0; i < shown && rc == 0; i++) {
    bool last = i + 1 == shown && !hidden;
    tree_line(c, depth == 0 ? "" : last ? GLYPH_LAST : GLYPH_MID, kids[i]);
    if (depth > 0)
      strcat(c->prefix, last ? GLYPH_SPACE : GLYPH_PIPE);
    rc = tree_children(c, kids[i], depth + 1);
    c->prefix[plen] = '\0';
  }
  if (hidden)
    tree_hidden(c, depth == 0 ? "" : GLYPH_LAST, n->nchildren - shown);
  free(kids);
  return rc;
}

static int tree_text(FILE *f, const struct culpert__profile *p, const struct opts *o,
                     const struct culpert__span_node *root)
{
  char hs[160], when[CULPERT_INUSE_WHEN_MAX];
  rate_and_samples(p, hs, sizeof hs);
  fprintf(f, "Hierarchical span report%s (%s):\n", o->inuse ? ", in-use bytes" : "", hs);
  fprintf(f, "  Each span shows the bytes allocated in it and in the spans it opened,\n"
             "  its share of the whole profile, and (self) what it allocated directly.\n");
  if (o->inuse)
    fprintf(f, "  In-use bytes were still allocated %s.\n", culpert__profile_inuse_when(p, when));
  if (culpert__profile_exact(p))
    fprintf(f, "  Bytes are exact: every allocation was recorded (sample rate 0).\n\n");
  else
    fprintf(f, "  Bytes are unbiased estimates scaled up from the sampled allocations.\n\n");
  if (root->nchildren == 0) {
    fprintf(f, "No samples in this profile.\n");
    return 0;
  }
  struct tree_ctx c = {.f = f, .whole = root->total_bytes, .top = o->top};
  return tree_children(&c, root, 0);
}

/* JSON tree without recursion: an explicit stack of (sorted children, next),
 * so hostile nesting depth costs heap, not stack. */
struct jframe {
  struct culpert__span_node **kids;
  size_t n, next;
};

static void json_node_close(FILE *f, const struct culpert__span_node *n)
{
  fputs("],\"name\":", f);
  culpert__put_json_string(f, n->name);
  fprintf(f,
          ",\"self_bytes\":%" PRId64 ",\"self_samples\":%" PRId64 ",\"total_bytes\":%" PRId64
          ",\"total_samples\":%" PRId64 "}",
          n->self_bytes, n->self_samples, n->total_bytes, n->total_samples);
}

static int tree_json(FILE *f, const struct culpert__profile *p, const struct opts *o,
                     const struct culpert__span_node *root)
{
  size_t depth = 0, cap = 16;
  struct jframe *st = malloc(cap * sizeof *st);
  int rc = 0;

  if (!st)
    return -ENOMEM;
  fputc('{', f);
  json_common_a(f, p, o);
  fputc(',', f);
  json_common_b(f, p);
  fputs(",\"spans\":[", f);
  st[0] = (struct jframe){sorted_children(root), root->nchildren, 0};
  if (!st[0].kids) {
    rc = -ENOMEM;
    goto out;
  }
  depth = 1;
  while (depth > 0) {
    struct jframe *top = &st[depth - 1];
    if (top->next == top->n) {
      free(top->kids);
      depth--;
      if (depth > 0)
        json_node_close(f, st[depth - 1].kids[st[depth - 1].next - 1]);
      continue;
    }
    struct culpert__span_node *n = top->kids[top->next++];
    fputs(top->next > 1 ? ",{\"children\":[" : "{\"children\":[", f);
    if (depth == cap) {
      struct jframe *ns = realloc(st, cap * 2 * sizeof *ns);
      if (!ns) {
        rc = -ENOMEM;
        goto out;
      }
      st = ns;
      cap *= 2;
    }
    st[depth] = (struct jframe){sorted_children(n), n->nchildren, 0};
    if (!st[depth].kids) {
      rc = -ENOMEM;
      goto out;
    }
    depth++;
  }
  fprintf(f, "],\"total_bytes\":%" PRId64 ",\"total_samples\":%" PRId64 ",\"view\":\"tree\"}\n",
          root->total_bytes, root->total_samples);
out:
  while (depth > 0)
    free(st[--depth].kids);
  free(st);
  return rc;
}

/* ---- flat --------------------------------------------------------------- */

struct row {
  const char *name; /* span name or callsite label */
  const char *function, *file;
  int64_t line;
  int64_t bytes, samples;
  char *owned; /* label storage owned by the row */
};

static int row_name_cmp(const void *x, const void *y)
{
  const struct row *a = x, *b = y;
  return strcmp(a->name, b->name);
}

static int row_bytes_cmp(const void *x, const void *y)
{
  const struct row *a = x, *b = y;
  if (a->bytes != b->bytes)
    return a->bytes > b->bytes ? -1 : 1;
  return strcmp(a->name, b->name);
}

static int64_t add_sat(int64_t a, int64_t b)
{
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

/* Merge rows with equal names (summing), then sort by bytes, then name. */
static size_t merge_rows(struct row *rows, size_t n)
{
  if (n == 0)
    return 0; /* rows may be NULL: qsort must not see it */
  qsort(rows, n, sizeof *rows, row_name_cmp);
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    if (w > 0 && strcmp(rows[w - 1].name, rows[i].name) == 0) {
      rows[w - 1].bytes = add_sat(rows[w - 1].bytes, rows[i].bytes);
      rows[w - 1].samples = add_sat(rows[w - 1].samples, rows[i].samples);
      free(rows[i].owned);
      continue;
    }
    rows[w++] = rows[i];
  }
  qsort(rows, w, sizeof *rows, row_bytes_cmp);
  return w;
}

/* The flat/callsite table: name column max(10, widest shown), samples 10,
 * bytes 14, percent 7. */
static void table_text(FILE *f, const char *title, const struct row *rows, size_t n, long top,
                       int64_t whole, bool has_samples)
{
  size_t shown = top > 0 && n > (size_t)top ? (size_t)top : n;
  size_t width = 10;
  char lab[LABEL_BUF], b[CULPERT_FMT_MAX];
  for (size_t i = 0; i < shown; i++) {
    size_t w = culpert__display_width(label_for(rows[i].name, LABEL_MAX_COLS, lab));
    if (w > width)
      width = w;
  }
  fputs("  ", f);
  culpert__put_padded(f, title, width, 0);
  fprintf(f, "  %10s  %14s  %7s\n", "samples", "bytes", "bytes %");
  fputs("  ", f);
  for (size_t i = 0; i < width; i++)
    fputc('-', f);
  fprintf(f, "  ----------  --------------  -------\n");
  for (size_t i = 0; i < shown; i++) {
    fputs("  ", f);
    culpert__put_padded(f, label_for(rows[i].name, LABEL_MAX_COLS, lab), width, 0);
    if (has_samples)
      fprintf(f, "  %10" PRId64 "  ", rows[i].samples);
    else
      fprintf(f, "  %10s  ", "-");
    culpert__put_padded(f, culpert__fmt_bytes(b, rows[i].bytes), 14, 1);
    fprintf(f, "  %6.2f%%\n", pct(rows[i].bytes, whole));
  }
  if (shown < n)
    fprintf(f, "  ... (%zu more rows hidden)\n", n - shown);
}

static int flat(FILE *f, const struct culpert__profile *p, const struct opts *o,
                const struct culpert__span_node *root)
{
  /* Every node, by an explicit stack; rows by name over all of them. */
  struct row *rows = NULL;
  const struct culpert__span_node **stack = NULL;
  size_t nrows = 0, caprows = 0, depth = 0, cap = 0;
  int rc = 0;

  for (size_t i = 0; i < root->nchildren; i++) {
    if (depth == cap) {
      cap = cap ? cap * 2 : 64;
      const struct culpert__span_node **ns = realloc(stack, cap * sizeof *ns);
      if (!ns) {
        rc = -ENOMEM;
        goto out;
      }
      stack = ns;
    }
    stack[depth++] = root->children[i];
  }
  while (depth > 0) {
    const struct culpert__span_node *n = stack[--depth];
    if (n->self_bytes != 0 || n->self_samples != 0) {
      if (nrows == caprows) {
        caprows = caprows ? caprows * 2 : 64;
        struct row *nr = realloc(rows, caprows * sizeof *nr);
        if (!nr) {
          rc = -ENOMEM;
          goto out;
        }
        rows = nr;
      }
      rows[nrows++] =
          (struct row){.name = n->name, .bytes = n->self_bytes, .samples = n->self_samples};
    }
    for (size_t i = 0; i < n->nchildren; i++) {
      if (depth == cap) {
        cap *= 2;
        const struct culpert__span_node **ns = realloc(stack, cap * sizeof *ns);
        if (!ns) {
          rc = -ENOMEM;
          goto out;
        }
        stack = ns;
      }
      stack[depth++] = n->children[i];
    }
  }
  nrows = merge_rows(rows, nrows);

  int64_t whole = root->total_bytes;
  if (o->json) {
    fputc('{', f);
    json_common_a(f, p, o);
    fputs(",\"rows\":[", f);
    for (size_t i = 0; i < nrows; i++) {
      fputs(i ? ",{\"bytes\":" : "{\"bytes\":", f);
      fprintf(f, "%" PRId64 ",\"name\":", rows[i].bytes);
      culpert__put_json_string(f, rows[i].name);
      fprintf(f, ",\"pct\":%.2f,\"samples\":%" PRId64 "}", pct(rows[i].bytes, whole),
              rows[i].samples);
    }
    fputs("],", f);
    json_common_b(f, p);
    fprintf(f, ",\"total_bytes\":%" PRId64 ",\"total_samples\":%" PRId64 ",\"view\":\"flat\"}\n",
            whole, root->total_samples);
    goto out;
  }
  char hs[160];
  rate_and_samples(p, hs, sizeof hs);
  fprintf(f, "Top spans by %s (%s):\n", o->inuse ? "in-use bytes" : "allocation", hs);
  char when[CULPERT_INUSE_WHEN_MAX];
  bool exact = culpert__profile_exact(p);
  if (o->inuse && culpert__profile_prop(p, "culpert.inuse_at_peak") != NULL)
    fprintf(f,
            "  Bytes allocated directly in each span (its child spans not included)\n"
            "  and still allocated %s,\n"
            "  %s.\n\n",
            culpert__profile_inuse_when(p, when),
            exact ? "exact: every allocation was recorded (sample rate 0)"
                  : "as unbiased estimates; samples are the raw sampled allocations");
  else if (o->inuse && exact)
    fprintf(f, "  Bytes allocated directly in each span (its child spans not included)\n"
               "  and still allocated when the profile was written, exact: every\n"
               "  allocation was recorded (sample rate 0).\n\n");
  else if (o->inuse)
    fprintf(f, "  Bytes allocated directly in each span (its child spans not included)\n"
               "  and still allocated when the profile was written, as unbiased\n"
               "  estimates; samples are the raw sampled allocations, freed or not.\n\n");
  else
    fprintf(f,
            "  Bytes allocated directly in each span (its child spans not included),\n"
            "  %s.\n\n",
            exact ? "exact: every allocation was recorded (sample rate 0)"
                  : "as unbiased estimates; samples are the raw sampled allocations");
  if (nrows == 0)
    fprintf(f, "No samples in this profile.\n");
  else
    table_text(f, "span", rows, nrows, o->top, whole, p->has_samples);
out:
  free(rows);
  free(stack);
  return rc;
}

/* ---- callsites ---------------------------------------------------------- */

#define NO_STACK_LABEL "(no stack)"
/* A stack whose frames are all machinery ends inside it (a walk that
 * stopped there: frame pointers through code built without them, or the
 * depth limit): named by the frame it ends at. */
#define MACHINERY_ONLY_FORMAT "(stack ends at %s)"

/* A Rust primitive type, t[0..n): str, bool, char, the integers and floats,
 * or a slice or array ([u8], [T; 4], [_]). Only the standard library gives
 * them inherent methods. */
static bool rust_primitive(const char *t, size_t n)
{
  static const char *const prims[] = {"str",  "bool",  "char",  "u8",  "u16", "u32",
                                      "u64",  "u128",  "i8",    "i16", "i32", "i64",
                                      "i128", "usize", "isize", "f32", "f64"};
  if (n > 0 && t[0] == '[')
    return true;
  for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
    if (strlen(prims[i]) == n && strncmp(t, prims[i], n) == 0)
      return true;
  return false;
}

/* Code of the C++ and Rust standard libraries: std::, __gnu_cxx::,
 * alloc::, core::, hashbrown:: (the crate std builds its HashMap and
 * HashSet from: its frames lie between HashMap::insert and the
 * allocator) (and a Rust trait impl on one of their types, "<alloc::
 * vec::Vec<T> as core::clone::Clone>::clone"; an inherent method of a
 * primitive type, "<str>::to_lowercase", "<[T]>::to_vec"; a trait of the
 * slice type's own, "<u8 as <[_]>::to_vec_in::ConvertVec>::to_vec"). A
 * container or string allocates on behalf of the code that called it,
 * which is the callsite worth naming: std::_Rb_tree<...>::
 * _M_emplace_hint_unique is not. The name is the part after a C++
 * template function's return type, which the demangler puts first
 * ("std::pair<...> shop::lookup<...>(...)"): the text after the last
 * space outside <...> and [...] and before the parameters. */
static bool is_standard_library(const char *function)
{
  const char *f = function[0] == '<' ? function + 1 : function;
  const char *name = f, *close = NULL;
  int depth = 0;
  for (const char *c = f; *c != '\0' && !(*c == '(' && depth == 0); c++) {
    if (*c == '<' || *c == '[')
      depth++;
    else if ((*c == '>' || *c == ']') && depth > 0)
      depth--;
    else if (*c == '>' && depth == 0 && !close)
      close = c; /* the end of "<Type as Trait>" or "<Type>" */
    else if (*c == ' ' && depth == 0)
      name = c + 1;
  }
  static const char *const prefixes[] = {
      "std::", "__gnu_cxx::", "alloc::", "core::", "hashbrown::", "<[_]>::"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
      return true;
  return f != function && name == f && close && rust_primitive(f, (size_t)(close - f));
}

static bool is_machinery(const struct opts *o, const char *function)
{
  if (is_standard_library(function))
    return true;
  for (size_t i = 0; i < o->nskips; i++)
    if (regexec(&o->skips[i], function, 0, NULL, 0) == 0)
      return true;
  return false;
}

/* "function  (file:line)", "function  (file)" or "function". */
static char *callsite_label(const struct culpert__frame *fr)
{
  char *s = NULL;
  int n;
  if (fr->file && fr->line > 0)
    n = asprintf(&s, "%s  (%s:%" PRId64 ")", fr->function, fr->file, fr->line);
  else if (fr->file)
    n = asprintf(&s, "%s  (%s)", fr->function, fr->file);
  else
    n = asprintf(&s, "%s", fr->function);
  return n < 0 ? NULL : s;
}

static int callsites(FILE *f, const struct culpert__profile *p, const struct opts *o)
{
  signed char *machinery = NULL; /* per frame: -1 unknown, 0 no, 1 yes */
  /* per frame: as the callsite, and as the end of a machinery-only stack */
  int64_t *fbytes = NULL, *fsamples = NULL, *ebytes = NULL, *esamples = NULL;
  bool *fused = NULL, *eused = NULL;
  struct row *rows = NULL;
  size_t nrows = 0;
  int64_t nostack_b = 0, nostack_s = 0, whole = 0, whole_s = 0;
  bool any = false, any_nostack = false;
  int rc = 0;

  size_t nf = p->nframes ? p->nframes : 1;
  machinery = malloc(nf);
  fbytes = calloc(nf, sizeof *fbytes);
  fsamples = calloc(nf, sizeof *fsamples);
  fused = calloc(nf, sizeof *fused);
  ebytes = calloc(nf, sizeof *ebytes);
  esamples = calloc(nf, sizeof *esamples);
  eused = calloc(nf, sizeof *eused);
  if (!machinery || !fbytes || !fsamples || !fused || !ebytes || !esamples || !eused) {
    rc = -ENOMEM;
    goto out;
  }
  memset(machinery, -1, nf);

  for (size_t i = 0; i < p->nsamples; i++) {
    const struct culpert__sample *s = &p->samples[i];
    if (o->span ? !s->span_name || strcmp(s->span_name, o->span) != 0 : s->span_name != NULL)
      continue;
    int64_t bytes = o->inuse ? s->inuse_bytes : s->bytes;
    any = true;
    whole = add_sat(whole, bytes);
    whole_s = add_sat(whole_s, s->samples);
    if (s->nframes == 0) {
      nostack_b = add_sat(nostack_b, bytes);
      nostack_s = add_sat(nostack_s, s->samples);
      any_nostack = true;
      continue;
    }
    uint32_t k = 0;
    for (; k < s->nframes; k++) {
      uint32_t fi = s->frames[k];
      if (machinery[fi] < 0)
        machinery[fi] = is_machinery(o, p->frames[fi].function);
      if (!machinery[fi])
        break;
    }
    if (k == s->nframes) {
      uint32_t end = s->frames[s->nframes - 1];
      ebytes[end] = add_sat(ebytes[end], bytes);
      esamples[end] = add_sat(esamples[end], s->samples);
      eused[end] = true;
      continue;
    }
    uint32_t fi = s->frames[k];
    fbytes[fi] = add_sat(fbytes[fi], bytes);
    fsamples[fi] = add_sat(fsamples[fi], s->samples);
    fused[fi] = true;
  }

  char r[CULPERT_FMT_RATES_MAX];
  culpert__fmt_merged_rate(r, p->rate, p->nparts, p->mixed_rates);
  if (!any) {
    if (o->json)
      goto json;
    if (p->nsamples == 0)
      fprintf(f, "No samples in this profile.\n");
    else if (o->span) {
      fprintf(f, "No samples found for span_name = \"%s\".\n", o->span);
      culpert__span_names_note(p, o->span);
    } else
      fprintf(f, "No unattributed samples \xe2\x80\x94 every sample has a span_name.\n");
    goto out;
  }

  size_t ncand = (size_t)any_nostack;
  for (size_t i = 0; i < p->nframes; i++)
    ncand += (size_t)fused[i] + (size_t)eused[i];
  rows = calloc(ncand ? ncand : 1, sizeof *rows);
  if (!rows) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < p->nframes; i++) {
    if (!fused[i])
      continue;
    char *label = callsite_label(&p->frames[i]);
    if (!label) {
      rc = -ENOMEM;
      goto out;
    }
    rows[nrows++] = (struct row){.name = label,
                                 .owned = label,
                                 .function = p->frames[i].function,
                                 .file = p->frames[i].file,
                                 .line = p->frames[i].line,
                                 .bytes = fbytes[i],
                                 .samples = fsamples[i]};
  }
  if (any_nostack)
    rows[nrows++] = (struct row){.name = NO_STACK_LABEL, .bytes = nostack_b, .samples = nostack_s};
  for (size_t i = 0; i < p->nframes; i++) {
    char *label;
    if (!eused[i])
      continue;
    if (asprintf(&label, MACHINERY_ONLY_FORMAT, p->frames[i].function) < 0) {
      rc = -ENOMEM;
      goto out;
    }
    rows[nrows++] =
        (struct row){.name = label, .owned = label, .bytes = ebytes[i], .samples = esamples[i]};
  }
  nrows = merge_rows(rows, nrows);

json:
  if (o->json) {
    fputs("{\"callsites\":[", f);
    for (size_t i = 0; i < nrows; i++) {
      fprintf(f, "%s{\"bytes\":%" PRId64 ",\"file\":", i ? "," : "", rows[i].bytes);
      if (rows[i].file)
        culpert__put_json_string(f, rows[i].file);
      else
        fputs("null", f);
      fputs(",\"function\":", f);
      culpert__put_json_string(f, rows[i].function ? rows[i].function : rows[i].name);
      fputs(",\"label\":", f);
      culpert__put_json_string(f, rows[i].name);
      fprintf(f, ",\"line\":%" PRId64 ",\"pct\":%.2f,\"samples\":%" PRId64 "}", rows[i].line,
              pct(rows[i].bytes, whole), rows[i].samples);
    }
    fputs("],", f);
    json_common_a(f, p, o);
    fputc(',', f);
    json_common_b(f, p);
    fputs(",\"span\":", f);
    if (o->span)
      culpert__put_json_string(f, o->span);
    else
      fputs("null", f);
    fprintf(f,
            ",\"total_bytes\":%" PRId64 ",\"total_samples\":%" PRId64 ",\"view\":\"callsites\"}\n",
            whole, whole_s);
    goto out;
  }
  if (o->span) {
    char name[LABEL_BUF];
    fprintf(f, "Top callsites within span \"%s\"%s (sample rate %s):\n\n",
            label_for(o->span, LABEL_MAX_COLS, name), o->inuse ? ", in-use bytes" : "", r);
  } else {
    fprintf(f,
            "Top callsites in unattributed samples \xe2\x80\x94 outside any span%s (sample "
            "rate %s):\n\n",
            o->inuse ? ", in-use bytes" : "", r);
  }
  table_text(f, "callsite", rows, nrows, o->top, whole, p->has_samples);
out:
  for (size_t i = 0; rows && i < nrows; i++)
    free(rows[i].owned);
  free(rows);
  free(machinery);
  free(fbytes);
  free(fsamples);
  free(fused);
  free(ebytes);
  free(esamples);
  free(eused);
  return rc;
}

/* ---- options and entry point --------------------------------------------- */

/* Parse argv into o. Returns 0, 1 for --help (done), or -EINVAL after
 * printing the error. */
static int parse(int argc, char **argv, struct opts *o)
{
  static const struct option longopts[] = {
      {"flat", no_argument, NULL, 'f'},
      {"span", required_argument, NULL, 's'},
      {"no-span", no_argument, NULL, 'n'},
      {"top", required_argument, NULL, 't'},
      {"inuse", no_argument, NULL, 'i'},
      {"format", required_argument, NULL, 'F'},
      {"skip", required_argument, NULL, 'k'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  bool want_span = false, want_nospan = false, want_flat = false;
  int c;
  optind = 0; /* reinitialise getopt (GNU) */
  opterr = 0;
  while ((c = culpert__getopt(argc, argv, ":h", longopts)) != -1) {
    switch (c) {
    case 'f':
      want_flat = true;
      break;
    case 's':
      want_span = true;
      o->span = optarg;
      break;
    case 'n':
      want_nospan = true;
      break;
    case 't': {
      char *end;
      errno = 0;
      long v = strtol(optarg, &end, 10);
      if (errno || end == optarg || *end || v < 0) {
        culpert__error("--top: '%s' is not a count (a whole number, 0 = all)", optarg);
        return -EINVAL;
      }
      o->top = v;
      break;
    }
    case 'i':
      o->inuse = true;
      break;
    case 'F':
      if (strcmp(optarg, "json") == 0)
        o->json = true;
      else if (strcmp(optarg, "text") == 0)
        o->json = false;
      else {
        culpert__error("--format: '%s' is not text or json", optarg);
        return -EINVAL;
      }
      break;
    case 'k': {
      regex_t *ns = realloc(o->skips, (o->nskips + 1) * sizeof *ns);
      if (!ns) {
        culpert__error("out of memory");
        return -ENOMEM;
      }
      o->skips = ns;
      int e = regcomp(&o->skips[o->nskips], optarg, REG_EXTENDED | REG_NOSUB);
      if (e) {
        char msg[256];
        regerror(e, &o->skips[o->nskips], msg, sizeof msg);
        culpert__error("--skip: invalid regular expression '%s': %s", optarg, msg);
        return -EINVAL;
      }
      o->nskips++;
      break;
    }
    case 'h':
      help(stdout);
      return 1;
    case ':':
      culpert__error("%s needs a value (see 'culpert report --help')", argv[optind - 1]);
      return -EINVAL;
    default:
      culpert__error("unknown option '%s' (see 'culpert report --help')", argv[optind - 1]);
      return -EINVAL;
    }
  }
  if (want_span && want_nospan) {
    culpert__error("--span and --no-span cannot be used together");
    return -EINVAL;
  }
  if (want_flat && (want_span || want_nospan)) {
    culpert__error("--flat cannot be combined with %s", want_span ? "--span" : "--no-span");
    return -EINVAL;
  }
  o->view = want_span || want_nospan ? VIEW_CALLSITES : want_flat ? VIEW_FLAT : VIEW_TREE;
  /* The tree's name for samples outside every span selects them too. */
  if (o->span && strcmp(o->span, CULPERT_NO_SPAN_NAME) == 0)
    o->span = NULL;
  if (optind >= argc) {
    culpert__error("report needs a profile FILE (see 'culpert report --help')");
    return -EINVAL;
  }
  o->files = argv + optind;
  o->nfiles = argc - optind;
  return 0;
}

/* --inuse needs in-use values in every file. */
static int has_inuse(const struct culpert__profile *p, const void *arg, char *err, size_t errlen)
{
  (void)arg;
  if (p->has_inuse)
    return 0;
  snprintf(err, errlen,
           "%s: --inuse: this profile has no in-use values (no inuse_space sample type)", p->path);
  return -EINVAL;
}

/* Whether the tree is the one line "(no span)" with bytes under it (of
 * the kind shown: with --inuse, nothing may be left): a program that
 * never opened a span. */
static bool spanless(const struct culpert__span_node *root)
{
  return root->nchildren == 1 && strcmp(root->children[0]->name, CULPERT_NO_SPAN_NAME) == 0 &&
         root->children[0]->nchildren == 0 && root->children[0]->total_bytes > 0;
}

/*
 * After the tree of a profile without spans, which says nothing but its
 * total, the view that does say something: where the bytes were
 * allocated, by callsite (this command again with --no-span and the same
 * options and files). Standard input cannot be read twice; a hint then.
 * Returns the second view's status.
 */
static int callsites_after_tree(int argc, char **argv, const struct opts *o,
                                const struct culpert__profile *p)
{
  for (int i = 0; i < o->nfiles; i++) {
    if (strcmp(o->files[i], "-") == 0) {
      printf("\nNo span in this profile: 'culpert report --no-span' shows where its bytes were\n"
             "allocated, by callsite.\n");
      return CULPERT_EXIT_OK;
    }
  }
  char **again = calloc((size_t)argc + 2, sizeof *again);
  if (again == NULL) {
    culpert__error("out of memory");
    return CULPERT_EXIT_ERROR;
  }
  again[0] = argv[0];
  again[1] = "--no-span";
  for (int i = 1; i < argc; i++)
    again[i + 1] = argv[i];
  printf("\nNo span in %s (nothing was allocated inside one): where the bytes\n"
         "were allocated, by callsite ('culpert report --no-span' shows this view alone):\n\n",
         p->nparts > 1 ? "these profiles" : "this profile");
  fflush(stdout);
  int r = culpert__cmd_report(argc + 1, again);
  free(again);
  return r;
}

int culpert__cmd_report(int argc, char **argv)
{
  struct opts o = {.top = 20};
  struct culpert__profile *p = NULL;
  struct culpert__span_node *root = NULL;
  char err[512];
  int status = CULPERT_EXIT_ERROR;

  int rc = parse(argc, argv, &o);
  if (rc == 1) {
    status = CULPERT_EXIT_OK;
    goto out;
  }
  if (rc)
    goto out;
  if (o.view == VIEW_CALLSITES) {
    regex_t *ns = realloc(o.skips, (o.nskips + NDEFAULT_SKIPS) * sizeof *ns);
    if (!ns) {
      culpert__error("out of memory");
      goto out;
    }
    o.skips = ns;
    for (size_t i = 0; i < NDEFAULT_SKIPS; i++) {
      if (regcomp(&o.skips[o.nskips], default_skips[i], REG_EXTENDED | REG_NOSUB)) {
        culpert__error("internal: bad built-in skip pattern %zu", i);
        goto out;
      }
      o.nskips++;
    }
  }
  /* The span views never read stacks; the callsite views only those of
   * the span they show. */
  struct culpert__load_opts lo = {.stacks = o.view == VIEW_CALLSITES ? CULPERT_STACKS_OF_SPAN
                                                                     : CULPERT_STACKS_NONE,
                                  .span = o.span};
  if (culpert__profile_load_all((const char *const *)o.files, (size_t)o.nfiles, &lo,
                                o.inuse ? has_inuse : NULL, NULL, &p, err, sizeof err) != 0) {
    culpert__error("%s", err);
    goto out;
  }
  if (o.view == VIEW_CALLSITES) {
    rc = callsites(stdout, p, &o);
  } else {
    rc = culpert__spantree_build(p, o.inuse, &root);
    if (rc == 0)
      rc = o.view == VIEW_FLAT ? flat(stdout, p, &o, root)
           : o.json            ? tree_json(stdout, p, &o, root)
                               : tree_text(stdout, p, &o, root);
  }
  if (rc) {
    culpert__error("%s: %s", p->path, strerror(-rc));
    goto out;
  }
  status = CULPERT_EXIT_OK;
  if (o.view == VIEW_TREE && !o.json && spanless(root))
    status = callsites_after_tree(argc, argv, &o, p);
out:
  for (size_t i = 0; i < o.nskips; i++)
    regfree(&o.skips[i]);
  free(o.skips);
  culpert__spantree_free(root);
  culpert__profile_free(p);
  return status;
}
