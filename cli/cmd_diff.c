/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cmd_diff.c: `culpert diff BEFORE AFTER`, the CI regression gate.
 *
 * Compares per-span allocation totals of two profiles (flat by span_name, or
 * as a merged span tree), classifies every span with the rules of cli.md
 * ("culpert diff") and exits 1 when a regression or a new span passes the
 * gates. An optional noise gate (--noise-sigma K) also ignores changes that
 * are within K standard errors of the sampling noise.
 *
 * Promises: every span name with bytes in either profile gets exactly one
 * row (JSON shows them all); output is deterministic (every sort breaks ties by name); the
 * exit status never depends on --top, --tree or --format; nothing read from
 * a profile reaches the terminal or a markdown page unescaped.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "bytesize.h"
#include "cli.h"
#include "format.h"
#include "profile.h"
#include "spantree.h"

/* Span labels are cut to this many columns in text and markdown. */
#define DIFF_LABEL_COLS 80
/* Minimum width of the flat table's span column (cli.md layout). */
#define DIFF_FLAT_NAME_COLS 20
/* Width of the tree view's span column, prefix included (cli.md). */
#define DIFF_TREE_NAME_COLS 40
/* Deeper nodes keep their share in their ancestors' subtree totals but are
 * not shown: bounds recursion on hostile span data. */
#define DIFF_TREE_MAX_DEPTH 24
/* A tree label keeps at least this many columns however deep it is. */
#define DIFF_TREE_MIN_LABEL 16
/* Without --noise-sigma, flagged changes within this many standard errors
 * get a note on stderr (the culpert-diff action's default gate). */
#define HINT_SIGMA 3

enum diff_format { FORMAT_TEXT, FORMAT_MARKDOWN, FORMAT_JSON };

/* The order is the order of the summary line in the tree views. */
enum diff_kind { KIND_QUIET, KIND_REGRESSION, KIND_NEW, KIND_IMPROVEMENT, KIND_GONE };

static const char *const kind_names[] = {"quiet", "regression", "new", "improvement", "gone"};

struct diff_opts {
  int64_t threshold_bytes;
  double threshold_pct;
  int64_t min_span_bytes; /* 0: off */
  size_t top;             /* 0: no limit */
  enum diff_format format;
  bool tree, no_fail, inuse;
  bool noise_on;
  double noise_sigma;
  const char *paths[2]; /* before, after */
};

struct diff_row {
  const char *name; /* span_name, or "(no span)"; borrowed from a profile */
  char *label;      /* name made safe for a terminal, cut to 80 columns */
  int64_t before, after, delta;
  double pct; /* delta / before in percent; meaningful when before > 0 */
  double se;  /* standard error of delta, bytes */
  enum diff_kind kind;
  bool noise; /* passed the rules, then ignored as sampling noise */
};

struct diff {
  const struct diff_opts *o;
  struct culpert__profile *prof[2];
  int64_t total[2];
  struct diff_row *rows;
  size_t nrows;
  size_t count[5]; /* rows per kind */
  size_t noise_suppressed;
  size_t noise_flagged; /* without --noise-sigma: flagged, within HINT_SIGMA */
};

/* A node of the merged before/after span tree. */
struct tnode {
  const char *name; /* borrowed from the span trees, which outlive this one */
  char *label;
  int64_t before, after; /* subtree totals */
  double var;            /* of after - before (culpert__estimate_var) */
  struct tnode **kids;
  size_t nkids;
  size_t nshow;    /* kids shown after --top (kids are sorted) */
  bool cut_deeper; /* had children below DIFF_TREE_MAX_DEPTH */
};

/* ---------------------------------------------------------------- numbers */

static int64_t sat_add(int64_t a, int64_t b)
{
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return b > 0 ? INT64_MAX : -INT64_MAX;
  return r;
}

/* after - before, kept within [-INT64_MAX, INT64_MAX] so it can be negated. */
static int64_t sat_delta(int64_t after, int64_t before)
{
  int64_t r;
  if (__builtin_sub_overflow(after, before, &r) || r == INT64_MIN)
    return after > before ? INT64_MAX : -INT64_MAX;
  return r;
}

static int64_t abs64(int64_t v)
{
  return v < 0 ? -v : v; /* callers pass values from sat_delta */
}

/* A non-negative byte count in the shared syntax (src/bytesize.h) that
 * fits an int64_t. Returns 0 or -EINVAL. */
static int parse_bytes(const char *s, int64_t *out)
{
  uint64_t v;
  if (culpert__bytesize_parse(s, &v) != 0 || v > (uint64_t)INT64_MAX)
    return -EINVAL;
  *out = (int64_t)v;
  return 0;
}

/* Parse a finite non-negative decimal number ("5", "2.5", "1e1"),
 * optionally followed by '%'. No hex, no "inf" or "nan". */
static int parse_nonneg_double(const char *s, bool allow_percent, double *out)
{
  if (!s || !((*s >= '0' && *s <= '9') || *s == '.') || strspn(s, "0123456789.eE+-%") != strlen(s))
    return -EINVAL;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno == ERANGE || !isfinite(v) || v < 0)
    return -EINVAL;
  if (allow_percent && *end == '%')
    end++;
  if (*end != '\0')
    return -EINVAL;
  *out = v;
  return 0;
}

/* ----------------------------------------------------------------- labels */

/*
 * A copy of `s` safe to print on a terminal or in markdown: control
 * characters and invalid UTF-8 become '?', then the text is cut to
 * `max_cols` display columns with "…". Returns NULL when out of memory.
 */
static char *make_label(const char *s, size_t max_cols)
{
  char *clean = strdup(s);
  char *out = NULL;
  if (!clean)
    return NULL;
  culpert__printable(clean);
  size_t outlen = strlen(clean) + 4; /* room for the ellipsis */
  out = malloc(outlen);
  if (out)
    culpert__truncate(clean, max_cols, out, outlen);
  free(clean);
  return out;
}

/* ------------------------------------------------------------------- flat */

struct name_value {
  const char *name;
  int64_t value;
  double var; /* of the estimate value (culpert__estimate_var) */
  int side;   /* 0 before, 1 after */
};

static int cmp_name_value(const void *x, const void *y)
{
  const struct name_value *a = x, *b = y;
  int c = strcmp(a->name, b->name);
  if (c)
    return c;
  return a->side - b->side;
}

static int cmp_rows(const void *x, const void *y)
{
  const struct diff_row *a = x, *b = y;
  int64_t da = abs64(a->delta), db = abs64(b->delta);
  if (da != db)
    return da > db ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* Classify one row with the rules of cli.md, then the noise gate. */
static void classify(struct diff_row *r, const struct diff_opts *o)
{
  r->kind = KIND_QUIET;
  r->noise = false;
  int64_t biggest = r->before > r->after ? r->before : r->after;
  if (o->min_span_bytes > 0 && biggest < o->min_span_bytes)
    return;
  if (r->before <= 0 && r->after <= 0)
    return;
  if (r->before <= 0) {
    if (r->after >= o->threshold_bytes)
      r->kind = KIND_NEW;
  } else if (r->after <= 0) {
    if (r->before >= o->threshold_bytes)
      r->kind = KIND_GONE;
  } else if (r->delta != 0 && abs64(r->delta) >= o->threshold_bytes &&
             fabs(r->pct) >= o->threshold_pct) {
    /* delta 0 is no change even with both thresholds at 0. */
    r->kind = r->delta > 0 ? KIND_REGRESSION : KIND_IMPROVEMENT;
  }
  if (r->kind != KIND_QUIET && o->noise_on && !((double)abs64(r->delta) > o->noise_sigma * r->se)) {
    r->kind = KIND_QUIET;
    r->noise = true;
  }
}

/*
 * Build one row per span_name over the union of both profiles, classify
 * them and sort by |delta| descending, then name. Returns 0 or -ENOMEM.
 */
static int build_rows(struct diff *d)
{
  const struct diff_opts *o = d->o;
  struct name_value *nv = NULL;
  size_t n = 0, cap = d->prof[0]->nsamples + d->prof[1]->nsamples;
  int rc = -ENOMEM;

  nv = malloc((cap ? cap : 1) * sizeof *nv);
  if (!nv)
    goto out;
  for (int side = 0; side < 2; side++) {
    const struct culpert__profile *p = d->prof[side];
    for (size_t i = 0; i < p->nsamples; i++) {
      const struct culpert__sample *s = &p->samples[i];
      nv[n].name = s->span_name ? s->span_name : CULPERT_NO_SPAN_NAME;
      nv[n].value = o->inuse ? s->inuse_bytes : s->bytes;
      nv[n].var = culpert__estimate_var(culpert__profile_sample_rate(p, i), nv[n].value);
      nv[n].side = side;
      n++;
    }
  }
  qsort(nv, n, sizeof *nv, cmp_name_value);

  d->rows = calloc(n ? n : 1, sizeof *d->rows);
  if (!d->rows)
    goto out;
  for (size_t i = 0; i < n;) {
    struct diff_row *r = &d->rows[d->nrows];
    memset(r, 0, sizeof *r);
    r->name = nv[i].name;
    size_t j = i;
    double var = 0;
    for (; j < n && strcmp(nv[j].name, r->name) == 0; j++) {
      if (nv[j].side == 0)
        r->before = sat_add(r->before, nv[j].value);
      else
        r->after = sat_add(r->after, nv[j].value);
      var += nv[j].var;
    }
    i = j;
    /* A span with nothing on either side (a parent that only carries the
     * writer's synthetic all-zero sample) has nothing to compare: no row. */
    if (r->before == 0 && r->after == 0)
      continue;
    d->nrows++;
    r->delta = sat_delta(r->after, r->before);
    r->pct = r->before > 0 ? (double)r->delta * 100.0 / (double)r->before : 0.0;
    r->se = sqrt(var);
    r->label = make_label(r->name, DIFF_LABEL_COLS);
    if (!r->label)
      goto out;
    classify(r, o);
    d->count[r->kind]++;
    if (r->noise)
      d->noise_suppressed++;
    if (!o->noise_on && r->kind != KIND_QUIET && r->se > 0 &&
        (double)abs64(r->delta) <= HINT_SIGMA * r->se)
      d->noise_flagged++;
  }
  qsort(d->rows, d->nrows, sizeof *d->rows, cmp_rows);
  rc = 0;
out:
  free(nv);
  return rc;
}

static bool gate_failed(const struct diff *d)
{
  return d->count[KIND_REGRESSION] + d->count[KIND_NEW] > 0;
}

/* ------------------------------------------------------------ shared text */

/* How the text and markdown headers introduce the gate settings. */
struct gate_labels {
  const char *gate;    /* tree view: the flat rules still decide the exit */
  const char *filter;  /* flat view */
  const char *minimum; /* --min-span-bytes */
  const char *noise;   /* --noise-sigma */
};

static const struct gate_labels text_gate_labels = {
    "  gate:    ", "  filter:  ", "           minimum span total: ", "           noise: "};
static const struct gate_labels markdown_gate_labels = {
    "- **gate:** ", "- **filter:** ", "- **minimum span total:** ", "- **noise:** "};

/* The header lines that state the thresholds, the minimum span total and
 * the noise gate, the same in every format but for their labels. */
static void put_gate_lines(FILE *f, const struct diff_opts *o, const struct gate_labels *l)
{
  char b[CULPERT_FMT_MAX];
  if (o->tree)
    fprintf(f, "%schanges ≥ %s AND ≥ %.2f%% (flat rules; they decide the exit status)\n", l->gate,
            culpert__fmt_bytes(b, o->threshold_bytes), o->threshold_pct);
  else
    fprintf(f, "%sshow changes ≥ %s AND ≥ %.2f%%\n", l->filter,
            culpert__fmt_bytes(b, o->threshold_bytes), o->threshold_pct);
  if (o->min_span_bytes > 0)
    fprintf(f, "%s%s in either profile\n", l->minimum, culpert__fmt_bytes(b, o->min_span_bytes));
  if (o->noise_on)
    fprintf(f, "%sa change must exceed %.2f standard errors (± is one)\n", l->noise,
            o->noise_sigma);
}

/* A side's rate, or, for a directory of profiles taken at several rates,
 * that it has none. */
static const char *side_rate(char buf[CULPERT_FMT_RATES_MAX], const struct culpert__profile *p)
{
  if (p->mixed_rates)
    snprintf(buf, CULPERT_FMT_RATES_MAX, "differs between its %zu profiles", p->nparts);
  else
    culpert__fmt_rate(buf, p->rate);
  return buf;
}

static bool rates_differ(const struct diff *d)
{
  return d->prof[0]->mixed_rates || d->prof[1]->mixed_rates || d->prof[0]->rate != d->prof[1]->rate;
}

static void put_rate_line(FILE *f, const struct diff *d, const char *lead)
{
  char rb[CULPERT_FMT_RATES_MAX], ra[CULPERT_FMT_RATES_MAX];
  side_rate(rb, d->prof[0]);
  side_rate(ra, d->prof[1]);
  if (!rates_differ(d))
    fprintf(f, "%s%s\n", lead, rb);
  else
    fprintf(f, "%sbefore %s, after %s (differ: compared on unbiased estimates)\n", lead, rb, ra);
}

/* "1.50 MB (estimated)", "1.50 MB in use (estimated)", "... (exact)". */
static void put_total(FILE *f, const struct diff *d, int side)
{
  char b[CULPERT_FMT_MAX];
  fprintf(f, "total %s%s %s", culpert__fmt_bytes(b, d->total[side]), d->o->inuse ? " in use" : "",
          culpert__profile_exact(d->prof[side]) ? "(exact)" : "(estimated)");
}

/* A side's rate in JSON: null for one taken at several rates. */
static void put_json_rate(FILE *f, const struct culpert__profile *p)
{
  if (p->mixed_rates)
    fputs("null", f);
  else
    fprintf(f, "%" PRId64, p->rate);
}

/* "+256.00 KB  (+16.67%)" (text) or "+256.00 KB (+16.67%)" (markdown). */
static void put_net_delta(FILE *f, const struct diff *d, const char *gap)
{
  char b[CULPERT_FMT_MAX];
  int64_t delta = sat_delta(d->total[1], d->total[0]);
  fputs(culpert__fmt_delta(b, delta), f);
  if (d->total[0] > 0)
    fprintf(f, "%s(%+.2f%%)", gap, (double)delta * 100.0 / (double)d->total[0]);
  else
    fprintf(f, "%s(—)", gap);
}

static const char *pct_cell(char buf[CULPERT_FMT_MAX], int64_t before, int64_t after)
{
  if (before <= 0 && after <= 0)
    return "—";
  if (before <= 0)
    return "NEW";
  if (after <= 0)
    return "GONE";
  snprintf(buf, CULPERT_FMT_MAX, "%+.2f%%",
           (double)sat_delta(after, before) * 100.0 / (double)before);
  return buf;
}

/* The Δ% cell of a classified row: NEW and GONE name the kind. */
static const char *row_pct_cell(char buf[CULPERT_FMT_MAX], const struct diff_row *r)
{
  if (r->kind == KIND_NEW)
    return "NEW";
  if (r->kind == KIND_GONE)
    return "GONE";
  return pct_cell(buf, r->before, r->after);
}

static const char *se_cell(char buf[CULPERT_FMT_MAX], double se)
{
  char b[CULPERT_FMT_MAX];
  double r = nearbyint(se);
  snprintf(buf, CULPERT_FMT_MAX, "±%s",
           culpert__fmt_bytes(b, r >= 9.2e18 ? INT64_MAX : (int64_t)r));
  return buf;
}

static void put_text_header(FILE *f, const struct diff *d, const char *title)
{
  const struct diff_opts *o = d->o;
  fprintf(f, "%s\n", title);
  for (int side = 0; side < 2; side++) {
    char *label = make_label(d->prof[side]->path, SIZE_MAX / 8);
    fprintf(f, "  %s  %s\n           ", side ? "after: " : "before:", label ? label : "?");
    free(label);
    put_total(f, d, side);
    if (side) {
      fputs("  Δ = ", f);
      put_net_delta(f, d, "  ");
    }
    fputc('\n', f);
  }
  put_rate_line(f, d, "  rate:    ");
  put_gate_lines(f, o, &text_gate_labels);
}

/* ------------------------------------------------------------- text flat */

static bool in_section(const struct diff_row *r, int section)
{
  if (section == 0)
    return r->kind == KIND_REGRESSION || r->kind == KIND_NEW;
  return r->kind == KIND_IMPROVEMENT || r->kind == KIND_GONE;
}

/* Widths of the span and Δ% columns: the cli.md widths, or the widest cell
 * any section shows (a long name, a change of +25600.00%). */
static void flat_widths(const struct diff *d, size_t *name_w, size_t *pct_w)
{
  *name_w = DIFF_FLAT_NAME_COLS;
  *pct_w = 8;
  for (int section = 0; section < 2; section++) {
    size_t shown = 0;
    for (size_t i = 0; i < d->nrows; i++) {
      const struct diff_row *r = &d->rows[i];
      if (!in_section(r, section) || (d->o->top && shown >= d->o->top))
        continue;
      shown++;
      char pb[CULPERT_FMT_MAX];
      size_t lw = culpert__display_width(r->label), pw = strlen(row_pct_cell(pb, r));
      *name_w = lw > *name_w ? lw : *name_w;
      *pct_w = pw > *pct_w ? pw : *pct_w;
    }
  }
}

static void put_text_cells(FILE *f, const char *const *cells, const size_t *widths, size_t ncells)
{
  fputs("  ", f);
  for (size_t i = 0; i < ncells; i++) {
    if (i)
      fputs("  ", f);
    culpert__put_padded(f, cells[i], widths[i], i != 0); /* numbers to the right */
  }
  fputc('\n', f);
}

static void put_text_section(FILE *f, const struct diff *d, int section, size_t name_w,
                             size_t pct_w)
{
  const struct diff_opts *o = d->o;
  const char *title = section == 0 ? "Regressions" : "Improvements";
  size_t total = d->count[section == 0 ? KIND_REGRESSION : KIND_IMPROVEMENT] +
                 d->count[section == 0 ? KIND_NEW : KIND_GONE];
  if (total == 0) {
    fprintf(f, "%s: none\n", title);
    return;
  }
  fprintf(f, "%s:\n", title);
  size_t ncols = o->noise_on ? 6 : 5;
  size_t widths[6] = {name_w, 12, 12, 12, pct_w, 12};
  const char *head[6] = {"span", "before", "after", "Δ", "Δ%", "±"};
  put_text_cells(f, head, widths, ncols);
  char dashes[6][128];
  const char *rule[6];
  for (size_t i = 0; i < ncols; i++) {
    size_t n = widths[i] < sizeof dashes[i] ? widths[i] : sizeof dashes[i] - 1;
    memset(dashes[i], '-', n);
    dashes[i][n] = '\0';
    rule[i] = dashes[i];
  }
  put_text_cells(f, rule, widths, ncols);

  size_t shown = 0;
  for (size_t i = 0; i < d->nrows; i++) {
    const struct diff_row *r = &d->rows[i];
    if (!in_section(r, section))
      continue;
    if (o->top && shown >= o->top)
      break;
    shown++;
    char b[4][CULPERT_FMT_MAX], pb[CULPERT_FMT_MAX];
    const char *cells[6] = {
        r->label,
        culpert__fmt_bytes(b[0], r->before),
        culpert__fmt_bytes(b[1], r->after),
        culpert__fmt_delta(b[2], r->delta),
        row_pct_cell(pb, r),
        se_cell(b[3], r->se),
    };
    put_text_cells(f, cells, widths, ncols);
  }
  if (shown < total)
    fprintf(f, "  ... (%zu more rows hidden)\n", total - shown);
}

static void put_suppressed(FILE *f, const struct diff *d, const char *pre, const char *post)
{
  fprintf(f, "%s%zu span(s) suppressed by thresholds", pre, d->count[KIND_QUIET]);
  if (d->o->noise_on)
    fprintf(f, " (%zu of them as sampling noise)", d->noise_suppressed);
  fprintf(f, ".%s\n", post);
}

static void put_text_flat(FILE *f, const struct diff *d)
{
  put_text_header(f, d, "Allocation diff:");
  size_t name_w, pct_w;
  flat_widths(d, &name_w, &pct_w);
  fputc('\n', f);
  put_text_section(f, d, 0, name_w, pct_w);
  fputc('\n', f);
  put_text_section(f, d, 1, name_w, pct_w);
  fputc('\n', f);
  put_suppressed(f, d, "", "");
}

/* --------------------------------------------------------------- markdown */

/* Longest run of backticks in s. */
static size_t backtick_run(const char *s)
{
  size_t best = 0, run = 0;
  for (; *s; s++) {
    run = *s == '`' ? run + 1 : 0;
    if (run > best)
      best = run;
  }
  return best;
}

/*
 * Write `s` as a markdown code span. The fence is longer than any backtick
 * run inside; a space pads content that starts or ends with a backtick or a
 * space (markdown strips exactly one on each side). In a table cell `|`
 * would end the cell even inside a code span, so it is escaped.
 */
static void put_md_code(FILE *f, const char *s, bool in_table)
{
  size_t fence = backtick_run(s) + 1;
  size_t len = strlen(s);
  bool pad = len == 0 || s[0] == '`' || s[0] == ' ' || s[len - 1] == '`' || s[len - 1] == ' ';
  for (size_t i = 0; i < fence; i++)
    fputc('`', f);
  if (pad)
    fputc(' ', f);
  for (; *s; s++) {
    if (*s == '|' && in_table)
      fputs("\\|", f);
    else
      fputc(*s, f);
  }
  if (pad)
    fputc(' ', f);
  for (size_t i = 0; i < fence; i++)
    fputc('`', f);
}

static void put_md_header(FILE *f, const struct diff *d, const char *title)
{
  const struct diff_opts *o = d->o;
  fprintf(f, "### %s\n\n", title);
  for (int side = 0; side < 2; side++) {
    char *label = make_label(d->prof[side]->path, SIZE_MAX / 8);
    fputs(side ? "- **after:**  " : "- **before:** ", f);
    put_md_code(f, label ? label : "?", false);
    free(label);
    fputs(" — ", f);
    put_total(f, d, side);
    fputc('\n', f);
  }
  fputs("- **net Δ:** ", f);
  put_net_delta(f, d, " ");
  fputc('\n', f);
  put_rate_line(f, d, "- **sample rate:** ");
  put_gate_lines(f, o, &markdown_gate_labels);
}

static void put_md_section(FILE *f, const struct diff *d, int section)
{
  const struct diff_opts *o = d->o;
  size_t total = d->count[section == 0 ? KIND_REGRESSION : KIND_IMPROVEMENT] +
                 d->count[section == 0 ? KIND_NEW : KIND_GONE];
  fprintf(f, "#### %s\n\n", section == 0 ? "Regressions" : "Improvements");
  if (total == 0) {
    fputs("_None._\n", f);
    return;
  }
  if (o->noise_on)
    fputs("| Span | Before | After | Δ | Δ% | ± |\n|------|-------:|------:|--:|---:|--:|\n", f);
  else
    fputs("| Span | Before | After | Δ | Δ% |\n|------|-------:|------:|--:|---:|\n", f);
  size_t shown = 0;
  for (size_t i = 0; i < d->nrows; i++) {
    const struct diff_row *r = &d->rows[i];
    if (!in_section(r, section))
      continue;
    if (o->top && shown >= o->top)
      break;
    shown++;
    char b[4][CULPERT_FMT_MAX], pb[CULPERT_FMT_MAX];
    fputs("| ", f);
    put_md_code(f, r->label, true);
    fprintf(f, " | %s | %s | %s | %s |", culpert__fmt_bytes(b[0], r->before),
            culpert__fmt_bytes(b[1], r->after), culpert__fmt_delta(b[2], r->delta),
            row_pct_cell(pb, r));
    if (o->noise_on)
      fprintf(f, " %s |", se_cell(b[3], r->se));
    fputc('\n', f);
  }
  if (shown < total)
    fprintf(f, "\n_%zu more row(s) hidden (--top %zu)._\n", total - shown, o->top);
}

static void put_md_flat(FILE *f, const struct diff *d)
{
  put_md_header(f, d, "culpert: allocation diff");
  fputc('\n', f);
  put_md_section(f, d, 0);
  fputc('\n', f);
  put_md_section(f, d, 1);
  fputc('\n', f);
  put_suppressed(f, d, "<sub>", "</sub>");
}

/* ------------------------------------------------------------------- JSON */

static int cmp_kv(const void *x, const void *y)
{
  const struct culpert__kv *a = x, *b = y;
  return strcmp(a->key, b->key);
}

/* The metadata object, keys sorted; a repeated key keeps its first value. */
static int put_json_metadata(FILE *f, const struct culpert__profile *p)
{
  if (p->nmetadata == 0) {
    fputs("{}", f);
    return 0;
  }
  struct culpert__kv *kv = malloc(p->nmetadata * sizeof *kv);
  if (!kv)
    return -ENOMEM;
  memcpy(kv, p->metadata, p->nmetadata * sizeof *kv);
  /* Stable order among equal keys is not promised by qsort; a repeated key
   * is rare, and its first value after sorting is kept. */
  qsort(kv, p->nmetadata, sizeof *kv, cmp_kv);
  fputs("{", f);
  for (size_t i = 0; i < p->nmetadata; i++) {
    if (i && strcmp(kv[i].key, kv[i - 1].key) == 0)
      continue;
    fputs(i ? ",\n      " : "\n      ", f);
    culpert__put_json_string(f, kv[i].key);
    fputs(": ", f);
    culpert__put_json_string(f, kv[i].value);
  }
  fputs("\n    }", f);
  free(kv);
  return 0;
}

static int put_json(FILE *f, const struct diff *d)
{
  const struct diff_opts *o = d->o;
  int rc = 0;
  fputs("{\n", f);
  for (int side = 1; side >= 0; side--) {
    const struct culpert__profile *p = d->prof[side];
    fprintf(f, "  \"%s\": {\n    \"metadata\": ", side ? "after" : "before");
    rc = put_json_metadata(f, p);
    if (rc < 0)
      return rc;
    fputs(",\n    \"path\": ", f);
    culpert__put_json_string(f, p->path);
    int64_t peak;
    if (culpert__profile_peak_inuse(p, &peak) > 0)
      fprintf(f, ",\n    \"peak_inuse_bytes\": %" PRId64, peak);
    else
      fputs(",\n    \"peak_inuse_bytes\": null", f);
    fputs(",\n    \"rate_bytes\": ", f);
    put_json_rate(f, p);
    fprintf(f, ",\n    \"total_bytes\": %" PRId64 "\n  },\n", d->total[side]);
  }
  fprintf(f, "  \"inuse\": %s,\n", o->inuse ? "true" : "false");
  fputs("  \"rate_bytes\": ", f);
  put_json_rate(f, d->prof[1]);
  fprintf(f, ",\n  \"rates_differ\": %s,\n", rates_differ(d) ? "true" : "false");
  fputs("  \"rows\": [", f);
  for (size_t i = 0; i < d->nrows; i++) {
    const struct diff_row *r = &d->rows[i];
    fprintf(f,
            "%s\n    {\"after\": %" PRId64 ", \"before\": %" PRId64 ", \"delta\": %" PRId64
            ", \"kind\": \"%s\", \"name\": ",
            i ? "," : "", r->after, r->before, r->delta, kind_names[r->kind]);
    culpert__put_json_string(f, r->name);
    fprintf(f, ", \"noise\": %s, \"pct\": ", r->noise ? "true" : "false");
    if (r->before > 0)
      fprintf(f, "%.2f", r->pct);
    else
      fputs("null", f);
    fprintf(f, ", \"stderr\": %.0f}", r->se);
  }
  fputs(d->nrows ? "\n  ],\n" : "],\n", f);
  fputs("  \"schema_version\": 1,\n", f);
  fprintf(f,
          "  \"summary\": {\n    \"gone\": %zu,\n    \"had_regressions\": %s,\n    "
          "\"improvements\": %zu,\n"
          "    \"new\": %zu,\n    \"noise_suppressed\": %zu,\n    \"quiet\": %zu,\n    "
          "\"regressions\": %zu,\n"
          "    \"total_delta_bytes\": %" PRId64 "\n  },\n",
          d->count[KIND_GONE], gate_failed(d) ? "true" : "false", d->count[KIND_IMPROVEMENT],
          d->count[KIND_NEW], d->noise_suppressed, d->count[KIND_QUIET], d->count[KIND_REGRESSION],
          sat_delta(d->total[1], d->total[0]));
  fprintf(
      f, "  \"thresholds\": {\n    \"bytes\": %" PRId64 ",\n    \"min_span_bytes\": %" PRId64 ",\n",
      o->threshold_bytes, o->min_span_bytes);
  if (o->noise_on)
    fprintf(f, "    \"noise_sigma\": %.15g,\n", o->noise_sigma);
  else
    fputs("    \"noise_sigma\": null,\n", f);
  fprintf(f, "    \"pct\": %.15g\n  }\n}\n", o->threshold_pct);
  return 0;
}

/* ------------------------------------------------------------------- tree */

static void tnode_free(struct tnode *n)
{
  if (!n)
    return;
  for (size_t i = 0; i < n->nkids; i++)
    tnode_free(n->kids[i]);
  free(n->kids);
  free(n->label);
  free(n);
}

struct side_child {
  const struct culpert__span_node *node;
  int side;
};

static int cmp_side_child(const void *x, const void *y)
{
  const struct side_child *a = x, *b = y;
  int c = strcmp(a->node->name, b->node->name);
  return c ? c : a->side - b->side;
}

/*
 * Merge the before node `b` and the after node `a` (either may be NULL, not
 * both; same name) into *out, children paired by name. Returns 0 or -ENOMEM.
 */
static int tree_merge(const struct culpert__span_node *b, const struct culpert__span_node *a,
                      unsigned depth, struct tnode **out)
{
  struct side_child *all = NULL;
  struct tnode *n = calloc(1, sizeof *n);
  int rc = -ENOMEM;
  if (!n)
    goto out;
  n->name = (b ? b : a)->name;
  n->label = make_label(n->name, DIFF_LABEL_COLS);
  if (!n->label)
    goto out;
  n->before = b ? b->total_bytes : 0;
  n->after = a ? a->total_bytes : 0;
  n->var = (b ? b->total_var : 0) + (a ? a->total_var : 0);
  size_t nb = b ? b->nchildren : 0, na = a ? a->nchildren : 0;
  if (depth >= DIFF_TREE_MAX_DEPTH || nb + na == 0) {
    n->cut_deeper = nb + na > 0;
    rc = 0;
    goto out;
  }
  all = malloc((nb + na) * sizeof *all);
  n->kids = calloc(nb + na, sizeof *n->kids);
  if (!all || !n->kids)
    goto out;
  for (size_t i = 0; i < nb; i++)
    all[i] = (struct side_child){b->children[i], 0};
  for (size_t i = 0; i < na; i++)
    all[nb + i] = (struct side_child){a->children[i], 1};
  qsort(all, nb + na, sizeof *all, cmp_side_child);
  for (size_t i = 0; i < nb + na;) {
    const struct culpert__span_node *cb = NULL, *ca = NULL;
    if (all[i].side == 0)
      cb = all[i++].node;
    if (i < nb + na && all[i].side == 1 && (!cb || strcmp(all[i].node->name, cb->name) == 0))
      ca = all[i++].node;
    rc = tree_merge(cb, ca, depth + 1, &n->kids[n->nkids]);
    if (rc < 0)
      goto out;
    n->nkids++;
  }
  rc = 0;
out:
  free(all);
  if (rc < 0) {
    tnode_free(n);
    n = NULL;
  }
  *out = n;
  return rc;
}

static int cmp_tnodes(const void *x, const void *y)
{
  const struct tnode *a = *(const struct tnode *const *)x, *b = *(const struct tnode *const *)y;
  int64_t da = abs64(sat_delta(a->after, a->before)), db = abs64(sat_delta(b->after, b->before));
  if (da != db)
    return da > db ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* Hide subtrees below the minimum on both sides, sort siblings by |Δ| then
 * name, and apply --top. Counts the hidden subtrees in *hidden_min. */
static void tree_shape(struct tnode *n, const struct diff_opts *o, size_t *hidden_min)
{
  size_t keep = 0;
  for (size_t i = 0; i < n->nkids; i++) {
    struct tnode *k = n->kids[i];
    if (o->min_span_bytes > 0 && k->before < o->min_span_bytes && k->after < o->min_span_bytes) {
      (*hidden_min)++;
      tnode_free(k);
      continue;
    }
    n->kids[keep++] = k;
  }
  n->nkids = keep;
  if (n->nkids > 1)
    qsort(n->kids, n->nkids, sizeof *n->kids, cmp_tnodes);
  n->nshow = o->top && n->nkids > o->top ? o->top : n->nkids;
  for (size_t i = 0; i < n->nshow; i++)
    tree_shape(n->kids[i], o, hidden_min);
}

/* Columns a label may take at prefix width `pcols`. */
static size_t tree_label_cols(size_t pcols)
{
  if (pcols + 1 + DIFF_TREE_MIN_LABEL <= DIFF_TREE_NAME_COLS)
    return DIFF_TREE_NAME_COLS - 1 - pcols;
  return DIFF_TREE_MIN_LABEL;
}

struct tree_layout {
  size_t name_w; /* 40, or wider when a deep prefix leaves a label too little */
  size_t pct_w;  /* 9, or the widest Δ% cell */
};

/* Measure the shown children of `n`; mirrors tree_print(), where `top`
 * children carry no glyph. */
static void tree_measure(const struct tnode *n, size_t pcols, bool top, struct tree_layout *lay)
{
  size_t cols = pcols + (top ? 0 : 3);
  for (size_t i = 0; i < n->nshow; i++) {
    const struct tnode *k = n->kids[i];
    char cut[512], pb[CULPERT_FMT_MAX];
    culpert__truncate(k->label, tree_label_cols(cols), cut, sizeof cut);
    size_t need = cols + culpert__display_width(cut) + 1;
    size_t pw = strlen(pct_cell(pb, k->before, k->after)) + 1;
    lay->name_w = need > lay->name_w ? need : lay->name_w;
    lay->pct_w = pw > lay->pct_w ? pw : lay->pct_w;
    tree_measure(k, cols, false, lay);
  }
}

static void put_tree_numbers(FILE *f, const struct diff *d, const struct tree_layout *lay,
                             int64_t before, int64_t after, double var)
{
  char b[4][CULPERT_FMT_MAX], pb[CULPERT_FMT_MAX];
  culpert__put_padded(f, culpert__fmt_bytes(b[0], before), 12, 1);
  culpert__put_padded(f, culpert__fmt_bytes(b[1], after), 12, 1);
  culpert__put_padded(f, culpert__fmt_delta(b[2], sat_delta(after, before)), 12, 1);
  culpert__put_padded(f, pct_cell(pb, before, after), lay->pct_w, 1);
  if (d->o->noise_on)
    culpert__put_padded(f, se_cell(b[3], sqrt(var)), 12, 1);
  fputc('\n', f);
}

/*
 * Print the shown children of `n`. `prefix` (plen bytes, pcols columns)
 * holds the continuation glyphs of the ancestors; `top` is true for the
 * root spans, which carry no glyph, as in `culpert report`.
 */
static void tree_print(FILE *f, const struct diff *d, const struct tnode *n, char *prefix,
                       size_t plen, size_t pcols, bool top, const struct tree_layout *lay)
{
  size_t hidden = n->nkids - n->nshow;
  for (size_t i = 0; i < n->nshow; i++) {
    const struct tnode *k = n->kids[i];
    bool last = i + 1 == n->nshow && hidden == 0;
    const char *glyph = top ? "" : last ? "└─ " : "├─ ";
    const char *cont = top ? "" : last ? "   " : "│  ";
    size_t gcols = top ? 0 : 3;
    char cut[512];
    culpert__truncate(k->label, tree_label_cols(pcols + gcols), cut, sizeof cut);
    fwrite(prefix, 1, plen, f);
    fputs(glyph, f);
    culpert__put_padded(f, cut, lay->name_w - pcols - gcols, 0);
    put_tree_numbers(f, d, lay, k->before, k->after, k->var);
    size_t clen = strlen(cont);
    memcpy(prefix + plen, cont, clen);
    tree_print(f, d, k, prefix, plen + clen, pcols + gcols, false, lay);
  }
  if (hidden) {
    fwrite(prefix, 1, plen, f);
    fprintf(f, "%s... (%zu more children hidden)\n", top ? "" : "└─ ", hidden);
  }
  if (n->cut_deeper) {
    fwrite(prefix, 1, plen, f);
    fprintf(f, "└─ ... (deeper spans not shown; their bytes are in the totals above)\n");
  }
}

static void put_tree_body(FILE *f, const struct diff *d, const struct tnode *root,
                          size_t hidden_min)
{
  /* Every level adds at most "│  " (5 bytes); depth is capped. */
  static char prefix[(DIFF_TREE_MAX_DEPTH + 2) * 5];
  struct tree_layout lay = {DIFF_TREE_NAME_COLS, 9};
  tree_measure(root, 0, true, &lay);
  culpert__put_padded(f, "span", lay.name_w, 0);
  culpert__put_padded(f, "before", 12, 1);
  culpert__put_padded(f, "after", 12, 1);
  culpert__put_padded(f, "Δ", 12, 1);
  culpert__put_padded(f, "Δ%", lay.pct_w, 1);
  if (d->o->noise_on)
    culpert__put_padded(f, "±", 12, 1);
  fputc('\n', f);
  if (root->nkids == 0)
    fputs("(no samples in either profile)\n", f);
  tree_print(f, d, root, prefix, 0, 0, true, &lay);
  if (hidden_min)
    fprintf(f, "%zu span(s) below the minimum span total hidden.\n", hidden_min);
}

static void put_classification(FILE *f, const struct diff *d, const char *pre, const char *post)
{
  fprintf(
      f,
      "%sFlat classification: %zu regression(s), %zu new, %zu improvement(s), %zu gone, %zu quiet",
      pre, d->count[KIND_REGRESSION], d->count[KIND_NEW], d->count[KIND_IMPROVEMENT],
      d->count[KIND_GONE], d->count[KIND_QUIET]);
  if (d->o->noise_on)
    fprintf(f, " (%zu as sampling noise)", d->noise_suppressed);
  fprintf(f, ".%s\n", post);
}

/* Longest backtick run among the shown labels of a tree. */
static size_t tree_backticks(const struct tnode *n)
{
  size_t best = backtick_run(n->label);
  for (size_t i = 0; i < n->nshow; i++) {
    size_t k = tree_backticks(n->kids[i]);
    if (k > best)
      best = k;
  }
  return best;
}

static int put_tree(FILE *f, const struct diff *d)
{
  struct culpert__span_node *sb = NULL, *sa = NULL;
  struct tnode *root = NULL;
  size_t hidden_min = 0;
  int rc = culpert__spantree_build(d->prof[0], d->o->inuse, &sb);
  if (rc < 0)
    goto out;
  rc = culpert__spantree_build(d->prof[1], d->o->inuse, &sa);
  if (rc < 0)
    goto out;
  rc = tree_merge(sb, sa, 0, &root);
  if (rc < 0)
    goto out;
  tree_shape(root, d->o, &hidden_min);

  if (d->o->format == FORMAT_MARKDOWN) {
    put_md_header(f, d, "culpert: allocation diff (tree view)");
    size_t fence = tree_backticks(root) + 1;
    fence = fence < 3 ? 3 : fence;
    fputc('\n', f);
    for (size_t i = 0; i < fence; i++)
      fputc('`', f);
    fputs("text\n", f);
    put_tree_body(f, d, root, hidden_min);
    for (size_t i = 0; i < fence; i++)
      fputc('`', f);
    fputs("\n\n", f);
    put_classification(f, d, "<sub>", "</sub>");
  } else {
    put_text_header(f, d, "Allocation diff (tree view):");
    fputc('\n', f);
    put_tree_body(f, d, root, hidden_min);
    fputc('\n', f);
    put_classification(f, d, "", "");
  }
out:
  tnode_free(root);
  if (sb)
    culpert__spantree_free(sb);
  if (sa)
    culpert__spantree_free(sa);
  return rc;
}

/* ---------------------------------------------------------------- options */

static void usage(FILE *f)
{
  fputs("usage: culpert diff [OPTIONS] BEFORE AFTER\n"
        "\n"
        "Compare the per-span allocation totals of two profiles. Exit status 1\n"
        "when a span regressed or is new beyond the thresholds (a CI gate),\n"
        "0 otherwise, 2 on any error. BEFORE or AFTER may be a directory: every\n"
        "profile in it, merged (the processes of one 'culpert run -o DIR/NAME').\n"
        "\n"
        "A change counts when |Δ| ≥ --threshold-bytes AND |Δ%| ≥ --threshold-pct;\n"
        "a new or gone span when its one total ≥ --threshold-bytes.\n"
        "\n"
        "  --threshold-bytes N  smallest change that counts (default 4096)\n"
        "  --threshold-pct P    smallest relative change, percent (default 5.0)\n"
        "  --min-span-bytes N   ignore spans below N bytes in both profiles\n"
        "                       (default: $CULPERT_MIN_SPAN_BYTES, else off;\n"
        "                       the flag, even 0, overrides the environment)\n"
        "  --noise-sigma K      also ignore changes within K standard errors of\n"
        "                       the sampling noise, and show ± (one standard\n"
        "                       error) per row; 2 to 3 is a good start\n"
        "  --top N              rows per table, children per tree node\n"
        "                       (default 20; 0 = no limit); never affects the exit status\n"
        "  --format F           text (default), markdown or json (json: every row, flat)\n"
        "  --tree               nest spans as `culpert report` does (text, markdown)\n"
        "  --inuse              compare in-use bytes instead of allocated bytes\n"
        "  --no-fail            exit 0 even when a regression is found\n"
        "  -h, --help           show this help\n"
        "\n"
        "Byte values accept a K, M, G or T suffix (base 1024). Profiles at different\n"
        "sample rates are compared on their unbiased estimates.\n",
        f);
}

/*
 * If argv[*i] is option `name` ("--name VALUE" or "--name=VALUE"), store its
 * value in *val and return 1 (advancing *i past a separate value); return 0
 * when it is another option, -EINVAL when the value is missing.
 */
static int opt_value(int argc, char **argv, int *i, const char *name, const char **val)
{
  const char *arg = argv[*i];
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0)
    return 0;
  if (arg[n] == '=') {
    *val = arg + n + 1;
    return 1;
  }
  if (arg[n] != '\0')
    return 0;
  if (*i + 1 >= argc) {
    culpert__error("%s needs a value", name);
    return -EINVAL;
  }
  *val = argv[++*i];
  return 1;
}

static int bad_value(const char *name, const char *val, const char *expected)
{
  culpert__error("%s: expected %s, got '%s'", name, expected, val);
  return -EINVAL;
}

/* Parse argv into *o. Returns 0, 1 when --help was shown, or -EINVAL. */
static int parse_args(int argc, char **argv, struct diff_opts *o)
{
  const char *val;
  int npaths = 0, m;
  bool min_given = false, options_done = false;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (options_done || arg[0] != '-' || strcmp(arg, "-") == 0) {
      if (npaths == 2) {
        culpert__error("diff takes two profiles (BEFORE AFTER); unexpected '%s'", arg);
        return -EINVAL;
      }
      o->paths[npaths++] = arg;
      continue;
    }
    if (strcmp(arg, "--") == 0) {
      options_done = true;
    } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage(stdout);
      return 1;
    } else if (strcmp(arg, "--tree") == 0) {
      o->tree = true;
    } else if (strcmp(arg, "--no-fail") == 0) {
      o->no_fail = true;
    } else if (strcmp(arg, "--inuse") == 0) {
      o->inuse = true;
    } else if ((m = opt_value(argc, argv, &i, "--threshold-bytes", &val)) != 0) {
      if (m < 0 || parse_bytes(val, &o->threshold_bytes) < 0)
        return m < 0 ? m : bad_value("--threshold-bytes", val, "a non-negative byte count");
    } else if ((m = opt_value(argc, argv, &i, "--threshold-pct", &val)) != 0) {
      if (m < 0 || parse_nonneg_double(val, true, &o->threshold_pct) < 0)
        return m < 0 ? m : bad_value("--threshold-pct", val, "a non-negative percentage");
    } else if ((m = opt_value(argc, argv, &i, "--min-span-bytes", &val)) != 0) {
      if (m < 0 || parse_bytes(val, &o->min_span_bytes) < 0)
        return m < 0 ? m : bad_value("--min-span-bytes", val, "a non-negative byte count");
      min_given = true;
    } else if ((m = opt_value(argc, argv, &i, "--noise-sigma", &val)) != 0) {
      if (m < 0 || parse_nonneg_double(val, false, &o->noise_sigma) < 0)
        return m < 0 ? m
                     : bad_value("--noise-sigma", val, "a non-negative number of standard errors");
      o->noise_on = true;
    } else if ((m = opt_value(argc, argv, &i, "--top", &val)) != 0) {
      int64_t top;
      if (m < 0 || parse_bytes(val, &top) < 0 || strspn(val, "0123456789") != strlen(val))
        return m < 0 ? m : bad_value("--top", val, "a non-negative integer");
      o->top = (size_t)top;
    } else if ((m = opt_value(argc, argv, &i, "--format", &val)) != 0) {
      if (m < 0)
        return m;
      if (strcmp(val, "text") == 0)
        o->format = FORMAT_TEXT;
      else if (strcmp(val, "markdown") == 0)
        o->format = FORMAT_MARKDOWN;
      else if (strcmp(val, "json") == 0)
        o->format = FORMAT_JSON;
      else
        return bad_value("--format", val, "text, markdown or json");
    } else {
      culpert__error("unknown option '%s' for diff (try 'culpert diff --help')", arg);
      return -EINVAL;
    }
  }
  if (npaths != 2) {
    culpert__error("diff needs two profiles: culpert diff [OPTIONS] BEFORE AFTER");
    return -EINVAL;
  }
  if (strcmp(o->paths[0], "-") == 0 && strcmp(o->paths[1], "-") == 0) {
    culpert__error("BEFORE and AFTER cannot both be standard input ('-')");
    return -EINVAL;
  }
  if (!min_given) {
    const char *env = getenv("CULPERT_MIN_SPAN_BYTES");
    if (env && *env && parse_bytes(env, &o->min_span_bytes) < 0)
      return bad_value("CULPERT_MIN_SPAN_BYTES", env, "a non-negative byte count");
  }
  return 0;
}

/* ------------------------------------------------------------------ entry */

int culpert__cmd_diff(int argc, char **argv)
{
  struct diff_opts o = {
      .threshold_bytes = 4096,
      .threshold_pct = 5.0,
      .top = 20,
      .format = FORMAT_TEXT,
  };
  struct diff d = {.o = &o};
  char *dir_label[2] = {NULL, NULL};
  char err[512];
  int status = CULPERT_EXIT_ERROR;

  int rc = parse_args(argc, argv, &o);
  if (rc != 0) {
    status = rc > 0 ? CULPERT_EXIT_OK : CULPERT_EXIT_ERROR;
    goto out;
  }
  for (int side = 0; side < 2; side++) {
    err[0] = '\0';
    static const struct culpert__load_opts lo = {.stacks = CULPERT_STACKS_NONE}; /* spans only */
    rc = culpert__profile_load_all(&o.paths[side], 1, &lo, NULL, NULL, &d.prof[side], err,
                                   sizeof err);
    if (rc < 0) {
      culpert__error("%s", err[0] ? err : o.paths[side]);
      goto out;
    }
    /* A directory's side is named by the directory, not by every file:
     * with the count of its profiles for a reader, as given in JSON. */
    struct stat st;
    if (strcmp(o.paths[side], "-") != 0 && stat(o.paths[side], &st) == 0 && S_ISDIR(st.st_mode)) {
      size_t nfiles = d.prof[side]->nparts > 1 ? d.prof[side]->nparts : 1;
      int m = o.format == FORMAT_JSON ? asprintf(&dir_label[side], "%s", o.paths[side])
              : nfiles == 1
                  ? asprintf(&dir_label[side], "%s (1 profile)", o.paths[side])
                  : asprintf(&dir_label[side], "%s (%zu profiles merged)", o.paths[side], nfiles);
      if (m < 0) {
        dir_label[side] = NULL;
        culpert__error("out of memory");
        goto out;
      }
      d.prof[side]->path = dir_label[side];
    }
    if (o.inuse && !d.prof[side]->has_inuse) {
      culpert__error("--inuse: %s has no in-use values", o.paths[side]);
      goto out;
    }
    d.total[side] = o.inuse ? d.prof[side]->total_inuse_bytes : d.prof[side]->total_bytes;
  }
  if (build_rows(&d) < 0) {
    culpert__error("out of memory comparing %s and %s", o.paths[0], o.paths[1]);
    goto out;
  }

  if (o.format == FORMAT_JSON) {
    rc = put_json(stdout, &d);
  } else if (o.tree) {
    rc = put_tree(stdout, &d);
  } else {
    if (o.format == FORMAT_MARKDOWN)
      put_md_flat(stdout, &d);
    else
      put_text_flat(stdout, &d);
    rc = 0;
  }
  if (rc < 0) {
    culpert__error("out of memory comparing %s and %s", o.paths[0], o.paths[1]);
    goto out;
  }
  /* Without --noise-sigma the rules flag changes a sampling error alone
   * could make, and the exit status follows them as cli.md says; the
   * reader is told on stderr, which leaves the report as specified. The
   * report is flushed first, so a write error is told here with its own
   * errno (a full disk), which a later check could only call EIO. */
  if (fflush(stdout) != 0) {
    culpert__error("cannot write to standard output: %s", strerror(errno));
    goto out;
  }
  if (d.noise_flagged > 0)
    fprintf(stderr,
            "culpert: note: %zu of the %zu flagged change%s %s within %d standard errors of "
            "sampling noise; --noise-sigma %d would leave %s quiet\n",
            d.noise_flagged, d.nrows - d.count[KIND_QUIET],
            d.nrows - d.count[KIND_QUIET] == 1 ? "" : "s", d.noise_flagged == 1 ? "is" : "are",
            HINT_SIGMA, HINT_SIGMA, d.noise_flagged == 1 ? "it" : "them");
  status = gate_failed(&d) && !o.no_fail ? CULPERT_EXIT_REGRESSION : CULPERT_EXIT_OK;
out:
  for (size_t i = 0; i < d.nrows; i++)
    free(d.rows[i].label);
  free(d.rows);
  for (int side = 0; side < 2; side++) {
    if (d.prof[side])
      culpert__profile_free(d.prof[side]);
    free(dir_label[side]);
  }
  return status;
}
