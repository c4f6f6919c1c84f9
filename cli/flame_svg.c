/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * flame_svg.c: the merged call tree as one self-contained, interactive SVG
 * flame graph (root at the bottom, siblings in name order).
 *
 * The document must open in any browser with nothing fetched: CSS and script
 * are inline, and the script reads every name from the DOM, never from
 * generated code. Names come from untrusted files, so every byte of a name
 * goes through xml_text(): markup characters become entities, and bytes that
 * are not valid UTF-8 or not allowed in XML become U+FFFD. The output is
 * deterministic: the same tree always gives the same bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "flame.h"
#include "format.h"

#define SVG_WIDTH 1200.0
#define SVG_PAD   10.0
#define FRAME_H   16.0 /* row pitch; the rectangle is one pixel less */
#define CHAR_W    7.2  /* advance of the 12px monospace font, for labels */
#define TOP       76.0 /* title, subtitle and controls above the frames */
#define BOTTOM    34.0 /* the details line below them */
#define MIN_SHARE 1e-3 /* frames narrower than 0.1% of the total merge */

/* Children of every node, sorted, as ranges into one array. */
struct kids {
  uint32_t *first; /* first[n]..first[n+1] index into list */
  uint32_t *list;
};

/* One frame to draw: a tree node, or the merged small children of one. */
struct rect {
  uint32_t node; /* tree node, or the parent for a merged frame */
  bool merged;   /* stands for `count` children below the threshold */
  uint32_t count;
  int64_t value;
  double x, w; /* in pixels */
  uint32_t depth;
};

struct layout {
  struct rect *rects;
  size_t nrects, cap;
  uint32_t maxdepth;
};

static int cmp_child(const void *a, const void *b, void *nodes)
{
  const struct culpert__flame_node *x =
      (const struct culpert__flame_node *)nodes + *(const uint32_t *)a;
  const struct culpert__flame_node *y =
      (const struct culpert__flame_node *)nodes + *(const uint32_t *)b;
  int c = strcmp(x->name, y->name);
  if (c != 0)
    return c;
  /* A span sorts before a code frame of the same name. */
  return (int)y->is_span - (int)x->is_span;
}

static int kids_build(const struct culpert__flame *fg, struct kids *k)
{
  k->first = calloc(fg->nnodes + 1, sizeof *k->first);
  k->list = malloc((fg->nnodes ? fg->nnodes : 1) * sizeof *k->list);
  uint32_t *fill = calloc(fg->nnodes + 1, sizeof *fill);
  int rc = 0;
  if (!k->first || !k->list || !fill) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 1; i < fg->nnodes; i++)
    k->first[fg->nodes[i].parent + 1]++;
  for (size_t i = 0; i < fg->nnodes; i++)
    k->first[i + 1] += k->first[i];
  for (uint32_t i = 1; i < fg->nnodes; i++) {
    uint32_t p = fg->nodes[i].parent;
    k->list[k->first[p] + fill[p]++] = i;
  }
  for (size_t i = 0; i < fg->nnodes; i++)
    qsort_r(k->list + k->first[i], k->first[i + 1] - k->first[i], sizeof *k->list, cmp_child,
            fg->nodes);
out:
  free(fill);
  return rc;
}

static int push_rect(struct layout *l, struct rect r)
{
  if (l->nrects == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 256;
    struct rect *nr = realloc(l->rects, cap * sizeof *nr);
    if (!nr)
      return -ENOMEM;
    l->rects = nr;
    l->cap = cap;
  }
  l->rects[l->nrects++] = r;
  if (r.depth > l->maxdepth)
    l->maxdepth = r.depth;
  return 0;
}

/*
 * Lay out every frame at least `min` wide, depth first with an explicit
 * stack (stacks from files can be very deep). Children narrower than `min`
 * become one merged frame after their drawn siblings, drawn only if the
 * merged frame itself reaches `min`. Stops early with -E2BIG once more than
 * `max_rects` frames would be drawn.
 */
static int layout_build(const struct culpert__flame *fg, const struct kids *k, double min,
                        size_t max_rects, struct layout *l)
{
  const double scale = (SVG_WIDTH - 2 * SVG_PAD) / (double)fg->nodes[0].total;
  uint32_t *stack = malloc(fg->nnodes * sizeof *stack);
  int rc = 0;
  if (!stack)
    return -ENOMEM;
  l->nrects = 0;
  l->maxdepth = 0;
  rc = push_rect(
      l, (struct rect){
             .node = 0, .value = fg->nodes[0].total, .x = SVG_PAD, .w = SVG_WIDTH - 2 * SVG_PAD});
  size_t top = 0;
  if (rc == 0)
    stack[top++] = 0; /* indices into l->rects */
  while (rc == 0 && top > 0) {
    const struct rect parent = l->rects[stack[--top]];
    double x = parent.x;
    int64_t small = 0;
    uint32_t nsmall = 0;
    for (uint32_t c = k->first[parent.node]; c < k->first[parent.node + 1] && rc == 0; c++) {
      const struct culpert__flame_node *n = &fg->nodes[k->list[c]];
      if (n->total <= 0)
        continue;
      if ((double)n->total < min) {
        if (__builtin_add_overflow(small, n->total, &small))
          small = INT64_MAX;
        nsmall++;
        continue;
      }
      double w = (double)n->total * scale;
      rc = push_rect(
          l, (struct rect){
                 .node = k->list[c], .value = n->total, .x = x, .w = w, .depth = parent.depth + 1});
      stack[top++] = (uint32_t)(l->nrects - 1);
      x += w;
    }
    if (rc == 0 && nsmall > 0 && (double)small >= min)
      rc = push_rect(l, (struct rect){.node = parent.node,
                                      .merged = true,
                                      .count = nsmall,
                                      .value = small,
                                      .x = x,
                                      .w = (double)small * scale,
                                      .depth = parent.depth + 1});
    if (rc == 0 && l->nrects > max_rects)
      rc = -E2BIG;
  }
  free(stack);
  return rc;
}

/*
 * Write `s` as XML character data or attribute text. Markup characters
 * become entities; control characters, invalid UTF-8, surrogates and
 * U+FFFE/U+FFFF become U+FFFD, so the document stays well-formed whatever
 * the input holds.
 */
static void xml_text(FILE *f, const char *s)
{
  static const char fffd[] = "\xEF\xBF\xBD";
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned char c = *p;
    if (c < 0x80) {
      switch (c) {
      case '&':
        fputs("&amp;", f);
        break;
      case '<':
        fputs("&lt;", f);
        break;
      case '>':
        fputs("&gt;", f);
        break;
      case '"':
        fputs("&quot;", f);
        break;
      case '\'':
        fputs("&#39;", f);
        break;
      default:
        if (c < 0x20 || c == 0x7f)
          fputs(fffd, f);
        else
          fputc(c, f);
      }
      p++;
      continue;
    }
    uint32_t cp = 0;
    size_t n = culpert__utf8_char(p, &cp);
    bool ok = n != 0 && cp != 0xFFFE && cp != 0xFFFF && !(cp >= 0x80 && cp <= 0x9F);
    if (ok) {
      fwrite(p, 1, n, f);
      p += n;
    } else {
      fputs(fffd, f);
      p += 1;
    }
  }
}

/* A colour from the name, so a function keeps its colour across graphs.
 * Code frames take warm colours, spans cool ones. */
static void frame_colour(const char *name, bool is_span, char out[8])
{
  uint32_t h = 2166136261u;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++)
    h = (h ^ *p) * 16777619u;
  unsigned v1 = h & 0xff, v2 = (h >> 8) & 0xff, v3 = (h >> 16) & 0xff;
  unsigned r, g, b;
  if (is_span) {
    r = 70 + v1 * 70 / 255;
    g = 130 + v2 * 80 / 255;
    b = 205 + v3 * 45 / 255;
  } else {
    r = 205 + v1 * 50 / 255;
    g = 90 + v2 * 130 / 255;
    b = 40 + v3 * 50 / 255;
  }
  snprintf(out, 8, "#%02x%02x%02x", r & 0xff, g & 0xff, b & 0xff);
}

/* A differential graph's colour: red for growth, blue for shrinkage, the
 * deeper the nearer the change comes to the largest one in the graph (at
 * most #ff6060 and #6060ff, light enough for black text), and a pale grey
 * for none. */
static void diff_colour(int64_t now, int64_t before, double maxdelta, char out[8])
{
  double d = (double)now - (double)before;
  double t = maxdelta > 0 ? (d < 0 ? -d : d) / maxdelta : 0;
  if (t > 1)
    t = 1;
  unsigned fade = (unsigned)(228.0 - 132.0 * t + 0.5);
  unsigned r = 228, g = 226, b = 222;
  if (d > 0) {
    r = 255;
    g = b = fade;
  } else if (d < 0) {
    b = 255;
    r = g = fade;
  }
  snprintf(out, 8, "#%02x%02x%02x", r & 0xff, g & 0xff, b & 0xff);
}

static void fmt_value(char buf[CULPERT_FMT_MAX], enum culpert__flame_unit unit, int64_t v)
{
  switch (unit) {
  case CULPERT_FLAME_SAMPLES:
    snprintf(buf, CULPERT_FMT_MAX, "%" PRId64 " sample%s", v, v == 1 ? "" : "s");
    break;
  case CULPERT_FLAME_OBJECTS:
    snprintf(buf, CULPERT_FMT_MAX, "%" PRId64 " object%s", v, v == 1 ? "" : "s");
    break;
  case CULPERT_FLAME_BYTES:
  default:
    culpert__fmt_bytes(buf, v);
  }
}

/* "before 1.00 MB, +512.00 KB (+50.0%)" for a differential graph's frame. */
static void fmt_change(char *buf, size_t len, enum culpert__flame_unit unit, int64_t now,
                       int64_t before)
{
  char was[CULPERT_FMT_MAX], delta[CULPERT_FMT_MAX];
  fmt_value(was, unit, before);
  int64_t d;
  if (__builtin_sub_overflow(now, before, &d))
    d = now > before ? INT64_MAX : INT64_MIN;
  if (unit == CULPERT_FLAME_BYTES)
    culpert__fmt_delta(delta, d);
  else
    snprintf(delta, sizeof delta, "%+" PRId64, d);
  if (before <= 0)
    snprintf(buf, len, "new: none before");
  else if (d == 0)
    snprintf(buf, len, "before %s, unchanged", was);
  else
    snprintf(buf, len, "before %s, %s (%+.1f%%)", was, delta,
             100.0 * ((double)now - (double)before) / (double)before);
}

static void write_frame(FILE *f, const struct culpert__flame *fg, const struct rect *r, double y,
                        double maxdelta)
{
  const struct culpert__flame_node *n = &fg->nodes[r->node];
  char name[64];
  const char *shown = n->name;
  const char *cls = "f";
  const char *kind = "";
  char colour[8];
  if (r->merged) {
    snprintf(name, sizeof name, "(%" PRIu32 " small frames)", r->count);
    shown = name;
    cls = "f g";
    snprintf(colour, sizeof colour, "#c4c4c4");
  } else if (r->node == 0) {
    snprintf(colour, sizeof colour, "#d8d0c0");
  } else {
    if (fg->diff)
      diff_colour(n->total, n->base_total, maxdelta, colour);
    else
      frame_colour(n->name, n->is_span, colour);
    if (n->is_span) {
      cls = "f s";
      kind = "span ";
    }
  }
  char value[CULPERT_FMT_MAX], change[160] = "";
  fmt_value(value, fg->unit, r->value);
  double pct = 100.0 * (double)r->value / (double)fg->nodes[0].total;
  if (fg->diff && !r->merged)
    fmt_change(change, sizeof change, fg->unit, n->total, n->base_total);

  fprintf(f, "<g class=\"%s\" data-n=\"", cls);
  xml_text(f, shown);
  fprintf(f, "\"><title>%s", kind);
  xml_text(f, shown);
  fprintf(f, "&#10;%s (%.2f%%)%s%s</title>", value, pct, change[0] ? "&#10;" : "", change);
  char x[32], w[32];
  snprintf(x, sizeof x, "%.2f", r->x);
  snprintf(w, sizeof w, "%.2f", r->w);
  fprintf(f, "<rect x=\"%s\" y=\"%.1f\" width=\"%s\" height=\"%.0f\" fill=\"%s\"/>", x, y, w,
          FRAME_H - 1, colour);
  /* The label as the script cuts it (CHAR_W per column), from the width as
   * written, so both always agree. */
  char label[1024];
  label[0] = '\0';
  double cols = (strtod(w, NULL) - 6) / CHAR_W + 1e-6;
  if (cols >= 3)
    culpert__truncate(shown, cols > 200 ? 200 : (size_t)cols, label, sizeof label);
  fprintf(f, "<text x=\"%.2f\" y=\"%.1f\">", strtod(x, NULL) + 3, y + FRAME_H - 4.5);
  xml_text(f, label);
  fputs("</text></g>\n", f);
}

/* Everything fixed in the document: style, legend, controls. */
static const char svg_style[] =
    "<style type=\"text/css\"><![CDATA[\n"
    "text { font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; font-size: 12px;"
    " fill: #000; }\n"
    "#title { font-size: 17px; font-family: sans-serif; }\n"
    "#subtitle, #details, .legend, .ctl { font-family: sans-serif; fill: #333; }\n"
    ".ctl { cursor: pointer; fill: #1a4fa0; text-decoration: underline; }\n"
    "g.f { cursor: pointer; }\n"
    "g.f text { pointer-events: none; }\n"
    "g.f:hover rect { stroke: #000; stroke-width: 0.8; }\n"
    "g.s rect { stroke: #1d3f78; stroke-width: 0.6; }\n"
    "g.dim rect { opacity: 0.45; }\n"
    "g.m rect { fill: #e040e0; }\n"
    "]]></style>\n";

/* The script only reads the DOM: data-n for names, <title> for details. */
static const char *const svg_script[] = {
    "<script type=\"text/ecmascript\"><![CDATA[\n",
    "(function () {\n",
    "  'use strict';\n",
    "  var W = 1200, PAD = 10, CW = 7.2;\n",
    "  var doc = document;\n",
    "  var details = doc.getElementById('details');\n",
    "  var reset = doc.getElementById('reset');\n",
    "  var search = doc.getElementById('search');\n",
    "  var matched = doc.getElementById('matched');\n",
    "  var frames = [];\n",
    "  var gs = doc.getElementsByTagName('g');\n",
    "  for (var i = 0; i < gs.length; i++) {\n",
    "    var g = gs[i];\n",
    "    if (!/(^| )f( |$)/.test(g.getAttribute('class') || '')) continue;\n",
    "    var r = g.getElementsByTagName('rect')[0];\n",
    "    frames.push({ g: g, r: r, t: g.getElementsByTagName('text')[0],\n",
    "      x: parseFloat(r.getAttribute('x')), w: parseFloat(r.getAttribute('width')),\n",
    "      y: parseFloat(r.getAttribute('y')), name: g.getAttribute('data-n') || '',\n",
    "      tip: g.getElementsByTagName('title')[0].textContent });\n",
    "  }\n",
    "  function fit(name, w) {\n",
    "    var n = Math.floor((w - 6) / CW + 1e-6);\n",
    "    if (n < 3) return '';\n",
    "    var cs = Array.from(name);\n",
    "    return cs.length <= n ? name : cs.slice(0, n - 1).join('') + '\\u2026';\n",
    "  }\n",
    "  function place(f, x, w) {\n",
    "    x = +x.toFixed(2);\n",
    "    w = +w.toFixed(2);\n",
    "    f.r.setAttribute('x', x.toFixed(2));\n",
    "    f.r.setAttribute('width', w.toFixed(2));\n",
    "    f.t.setAttribute('x', (x + 3).toFixed(2));\n",
    "    f.t.textContent = fit(f.name, w);\n",
    "  }\n",
    "  function setClass(g, c, on) {\n",
    "    var cl = (g.getAttribute('class') || '').split(' ').filter(function (s) {\n",
    "      return s && s !== c; });\n",
    "    if (on) cl.push(c);\n",
    "    g.setAttribute('class', cl.join(' '));\n",
    "  }\n",
    "  /* Zoom: z fills the width; its descendants scale with it, its\n",
    "     ancestors stay full width and dimmed, everything else hides. */\n",
    "  function zoom(z) {\n",
    "    var scale = (W - 2 * PAD) / z.w, eps = 0.05; /* coordinates have 2 decimals */\n",
    "    frames.forEach(function (f) {\n",
    "      var inside = f.x >= z.x - eps && f.x + f.w <= z.x + z.w + eps;\n",
    "      var covers = f.x <= z.x + eps && f.x + f.w >= z.x + z.w - eps;\n",
    "      if (f.y <= z.y && inside) {\n",
    "        f.g.removeAttribute('display');\n",
    "        setClass(f.g, 'dim', false);\n",
    "        place(f, PAD + (f.x - z.x) * scale, f.w * scale);\n",
    "      } else if (f.y > z.y && covers) {\n",
    "        f.g.removeAttribute('display');\n",
    "        setClass(f.g, 'dim', true);\n",
    "        place(f, PAD, W - 2 * PAD);\n",
    "      } else {\n",
    "        f.g.setAttribute('display', 'none');\n",
    "      }\n",
    "    });\n",
    "    reset.removeAttribute('display');\n",
    "  }\n",
    "  function unzoom() {\n",
    "    frames.forEach(function (f) {\n",
    "      f.g.removeAttribute('display');\n",
    "      setClass(f.g, 'dim', false);\n",
    "      place(f, f.x, f.w);\n",
    "    });\n",
    "    reset.setAttribute('display', 'none');\n",
    "  }\n",
    "  var byG = new Map();\n",
    "  frames.forEach(function (f) { byG.set(f.g, f); });\n",
    "  function frameOf(el) {\n",
    "    for (; el && el.getAttribute; el = el.parentNode) if (byG.has(el)) return byG.get(el);\n",
    "    return null;\n",
    "  }\n",
    "  function doSearch() {\n",
    "    if (search.textContent === 'Clear search') {\n",
    "      frames.forEach(function (f) { setClass(f.g, 'm', false); });\n",
    "      search.textContent = 'Search';\n",
    "      matched.textContent = '';\n",
    "      return;\n",
    "    }\n",
    "    var q = window.prompt('Frames matching (regular expression):', '');\n",
    "    if (!q) return;\n",
    "    var re;\n",
    "    try { re = new RegExp(q); } catch (e) {\n",
    "      re = new RegExp(q.replace(/[.*+?^${}()|[\\]\\\\]/g, '\\\\$&')); }\n",
    "    var spans = [];\n",
    "    frames.forEach(function (f) {\n",
    "      var hit = f.y < frames[0].y && re.test(f.name);\n",
    "      setClass(f.g, 'm', hit);\n",
    "      if (hit) spans.push([f.x, f.x + f.w]);\n",
    "    });\n",
    "    spans.sort(function (a, b) { return a[0] - b[0]; });\n",
    "    var sum = 0, end = -1;\n",
    "    spans.forEach(function (s) {\n",
    "      if (s[0] >= end) { sum += s[1] - s[0]; end = s[1]; }\n",
    "      else if (s[1] > end) { sum += s[1] - end; end = s[1]; }\n",
    "    });\n",
    "    matched.textContent = 'Matched: ' + (100 * sum / (W - 2 * PAD)).toFixed(2) + '%';\n",
    "    search.textContent = 'Clear search';\n",
    "  }\n",
    "  doc.documentElement.addEventListener('click', function (e) {\n",
    "    if (e.target === reset) { unzoom(); return; }\n",
    "    if (e.target === search) { doSearch(); return; }\n",
    "    var f = frameOf(e.target);\n",
    "    if (!f) return;\n",
    "    if (f === frames[0]) unzoom(); else zoom(f);\n",
    "  });\n",
    "  doc.documentElement.addEventListener('mouseover', function (e) {\n",
    "    var f = frameOf(e.target);\n",
    "    details.textContent = f ? f.tip.replace('\\n', ' \\u2014 ').replace(/\\n/g, ' \\u00b7 ') "
    ": '';\n",
    "  });\n",
    "  doc.addEventListener('keydown', function (e) {\n",
    "    if (e.key === 'Escape') unzoom();\n",
    "  });\n",
    "})();\n",
    "]]></script>\n",
    NULL,
};

static void write_script(FILE *f)
{
  for (size_t i = 0; svg_script[i]; i++)
    fputs(svg_script[i], f);
}

static void write_header(FILE *f, double height, const struct culpert__flame *fg,
                         const struct culpert__flame_svg_info *info)
{
  char total[CULPERT_FMT_MAX];
  fmt_value(total, fg->unit, fg->nodes[0].total);
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" "
          "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
          SVG_WIDTH, height, SVG_WIDTH, height);
  /* The document's own title: what a browser tab shows. */
  fputs("<title>", f);
  xml_text(f, info && info->title ? info->title : "Allocation flame graph");
  fputs("</title>\n", f);
  fputs(svg_style, f);
  fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fbfaf7\"/>\n", SVG_WIDTH,
          height);
  fprintf(f, "<text id=\"title\" x=\"%.0f\" y=\"24\" text-anchor=\"middle\">", SVG_WIDTH / 2);
  xml_text(f, info && info->title ? info->title : "Allocation flame graph");
  fputs("</text>\n", f);
  fprintf(f, "<text id=\"subtitle\" x=\"%.0f\" y=\"44\" text-anchor=\"middle\">", SVG_WIDTH / 2);
  /* At most 170 columns of the 12px sans-serif line fit the width. */
  char line[1024], cut[1024], before[CULPERT_FMT_MAX + 16] = "";
  if (fg->diff) {
    char was[CULPERT_FMT_MAX];
    fmt_value(was, fg->unit, fg->nodes[0].base_total);
    snprintf(before, sizeof before, " (before %s)", was);
  }
  snprintf(line, sizeof line, "total %s%s%s%s", total, before,
           info && info->subtitle ? " \xC2\xB7 " : "",
           info && info->subtitle ? info->subtitle : "");
  xml_text(f, culpert__truncate(line, 170, cut, sizeof cut));
  fputs("</text>\n", f);
  /* Legend: what the colours mean. */
  if (fg->diff)
    fputs("<g class=\"legend\">"
          "<rect x=\"10\" y=\"56\" width=\"14\" height=\"12\" fill=\"#ff6060\"/>"
          "<text class=\"legend\" x=\"28\" y=\"66\">grew</text>"
          "<rect x=\"68\" y=\"56\" width=\"14\" height=\"12\" fill=\"#6060ff\"/>"
          "<text class=\"legend\" x=\"86\" y=\"66\">shrank</text>"
          "<rect x=\"136\" y=\"56\" width=\"14\" height=\"12\" fill=\"#e4e2de\" "
          "stroke=\"#1d3f78\" stroke-width=\"0.6\"/>"
          "<text class=\"legend\" x=\"154\" y=\"66\">unchanged (outlined: span)</text>"
          "<rect x=\"330\" y=\"56\" width=\"14\" height=\"12\" fill=\"#c4c4c4\"/>"
          "<text class=\"legend\" x=\"348\" y=\"66\">under 0.1% merged</text>"
          "<text class=\"legend\" x=\"500\" y=\"66\">click a frame to zoom, Esc to reset</text>"
          "</g>\n",
          f);
  else
    fputs("<g class=\"legend\">"
          "<rect x=\"10\" y=\"56\" width=\"14\" height=\"12\" fill=\"#6fa0e0\" stroke=\"#1d3f78\" "
          "stroke-width=\"0.6\"/><text class=\"legend\" x=\"28\" y=\"66\">span</text>"
          "<rect x=\"72\" y=\"56\" width=\"14\" height=\"12\" fill=\"#e8a048\"/>"
          "<text class=\"legend\" x=\"90\" y=\"66\">code frame</text>"
          "<rect x=\"174\" y=\"56\" width=\"14\" height=\"12\" fill=\"#c4c4c4\"/>"
          "<text class=\"legend\" x=\"192\" y=\"66\">frames under 0.1% merged</text>"
          "<text class=\"legend\" x=\"390\" y=\"66\">click a frame to zoom, Esc to reset</text>"
          "</g>\n",
          f);
  fprintf(
      f,
      "<text id=\"matched\" class=\"legend\" x=\"%.0f\" y=\"66\" text-anchor=\"end\"></text>\n"
      "<text id=\"search\" class=\"ctl\" x=\"%.0f\" y=\"66\" text-anchor=\"end\">Search</text>\n"
      "<text id=\"reset\" class=\"ctl\" x=\"%.0f\" y=\"66\" text-anchor=\"end\" "
      "display=\"none\">Reset zoom</text>\n",
      SVG_WIDTH - 250, SVG_WIDTH - 10, SVG_WIDTH - 120);
}

int culpert__flame_svg_write(FILE *out, const struct culpert__flame *fg,
                             const struct culpert__flame_svg_info *info)
{
  struct kids k = {0};
  struct layout l = {0};
  int rc = 0;

  if (fg->nnodes == 0 || fg->nodes[0].total <= 0) {
    double height = TOP + FRAME_H + BOTTOM;
    write_header(out, height, fg, info);
    fprintf(out, "<text id=\"details\" x=\"%.0f\" y=\"%.0f\">No samples to show.</text>\n", SVG_PAD,
            TOP + FRAME_H);
    write_script(out);
    fputs("</svg>\n", out);
    return ferror(out) ? -EIO : 0;
  }

  rc = kids_build(fg, &k);
  if (rc != 0)
    goto out;
  double min = (double)fg->nodes[0].total * MIN_SHARE;
  while ((rc = layout_build(fg, &k, min, CULPERT_FLAME_SVG_MAX_RECTS, &l)) == -E2BIG)
    min *= 2;
  if (rc != 0)
    goto out;

  double height = TOP + (double)(l.maxdepth + 1) * FRAME_H + BOTTOM;
  write_header(out, height, fg, info);
  /* A differential graph's deepest colour goes to its largest change. */
  double maxdelta = 0;
  for (size_t i = 0; fg->diff && i < l.nrects; i++) {
    const struct culpert__flame_node *n = &fg->nodes[l.rects[i].node];
    double d = (double)n->total - (double)n->base_total;
    if (!l.rects[i].merged && l.rects[i].node != 0 && (d < 0 ? -d : d) > maxdelta)
      maxdelta = d < 0 ? -d : d;
  }
  fputs("<g id=\"frames\">\n", out);
  for (size_t i = 0; i < l.nrects; i++) {
    double y = TOP + (double)(l.maxdepth - l.rects[i].depth) * FRAME_H;
    write_frame(out, fg, &l.rects[i], y, maxdelta);
  }
  fputs("</g>\n", out);
  fprintf(out, "<text id=\"details\" x=\"%.0f\" y=\"%.0f\"> </text>\n", SVG_PAD, height - 12);
  write_script(out);
  fputs("</svg>\n", out);
  if (ferror(out))
    rc = -EIO;
out:
  free(k.first);
  free(k.list);
  free(l.rects);
  return rc;
}
