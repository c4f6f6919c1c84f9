/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * demangle.c: C++ names through the process's own __cxa_demangle, Rust
 * legacy and v0 names through a decoder of our own.
 *
 * Runs in the profile writer (never inside malloc). Input is whatever the
 * symbol tables of loaded objects contain, so the decoders treat it as
 * hostile: every read is bounds-checked, recursion is capped, total work
 * and output size are capped, and anything unexpected gives up (NULL) so
 * the caller keeps the raw name. Keeps no global state.
 */
#include "demangle.h"
#include "loader.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest demangled name we produce; real Rust names reach a few KiB. */
#define OUT_MAX (64u * 1024u)
/* Deepest nesting of paths and types, and most parse steps, per symbol. */
#define DEPTH_MAX 200
#define STEPS_MAX 100000

struct out {
  char *p;
  size_t len;
  size_t cap;
  int err;
};

static void out_put(struct out *o, const char *s, size_t n)
{
  if (o->err)
    return;
  if (n > OUT_MAX - o->len) {
    o->err = 1;
    return;
  }
  if (o->len + n + 1 > o->cap) {
    size_t cap = o->cap ? o->cap : 64;
    while (cap < o->len + n + 1)
      cap *= 2;
    char *p = realloc(o->p, cap);
    if (!p) {
      o->err = 1;
      return;
    }
    o->p = p;
    o->cap = cap;
  }
  memcpy(o->p + o->len, s, n);
  o->len += n;
  o->p[o->len] = '\0';
}

static void out_str(struct out *o, const char *s)
{
  out_put(o, s, strlen(s));
}

/* Returns the finished string, or NULL (and frees it) on any error. */
static char *out_finish(struct out *o)
{
  if (o->err || !o->p) {
    free(o->p);
    return NULL;
  }
  return o->p;
}

static int is_digit(char c)
{
  return c >= '0' && c <= '9';
}
static int is_lower(char c)
{
  return c >= 'a' && c <= 'z';
}
static int is_upper(char c)
{
  return c >= 'A' && c <= 'Z';
}

static int hex_value(char c)
{
  if (is_digit(c))
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

/* Appends code point `cp` as UTF-8; returns -1 for an invalid one. */
static int put_utf8(struct out *o, uint32_t cp)
{
  char b[4];
  size_t n;
  if (cp >= 0xd800 && cp <= 0xdfff)
    return -1;
  if (cp < 0x80) {
    b[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    b[0] = (char)(0xc0 | (cp >> 6));
    b[1] = (char)(0x80 | (cp & 0x3f));
    n = 2;
  } else if (cp < 0x10000) {
    b[0] = (char)(0xe0 | (cp >> 12));
    b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    b[2] = (char)(0x80 | (cp & 0x3f));
    n = 3;
  } else if (cp < 0x110000) {
    b[0] = (char)(0xf0 | (cp >> 18));
    b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    b[3] = (char)(0x80 | (cp & 0x3f));
    n = 4;
  } else {
    return -1;
  }
  out_put(o, b, n);
  return 0;
}

/* ---------------------------------------------------------------------- */
/* Rust legacy: _ZN <len><ident>... 17h<16 hex> E [.suffix]                */

/* Decodes one path element of a legacy symbol into `o`. */
static int legacy_element(struct out *o, const char *s, size_t n)
{
  static const struct {
    const char *esc;
    const char *text;
  } escapes[] = {{"SP", "@"}, {"BP", "*"}, {"RF", "&"}, {"LT", "<"},
                 {"GT", ">"}, {"LP", "("}, {"RP", ")"}, {"C", ","}};
  size_t i = 0;
  if (n >= 2 && s[0] == '_' && s[1] == '$')
    i = 1;
  while (i < n) {
    if (s[i] == '$') {
      const char *end = memchr(s + i + 1, '$', n - i - 1);
      if (!end)
        return -1;
      size_t elen = (size_t)(end - (s + i + 1));
      const char *e = s + i + 1;
      int done = 0;
      for (size_t k = 0; k < sizeof escapes / sizeof escapes[0]; k++) {
        if (strlen(escapes[k].esc) == elen && memcmp(escapes[k].esc, e, elen) == 0) {
          out_str(o, escapes[k].text);
          done = 1;
          break;
        }
      }
      if (!done) {
        if (elen < 2 || elen > 7 || e[0] != 'u')
          return -1;
        uint32_t cp = 0;
        for (size_t k = 1; k < elen; k++) {
          int h = hex_value(e[k]);
          if (h < 0)
            return -1;
          cp = cp * 16 + (uint32_t)h;
        }
        if (put_utf8(o, cp))
          return -1;
      }
      i += elen + 2;
    } else if (s[i] == '.' && i + 1 < n && s[i + 1] == '.') {
      out_str(o, "::");
      i += 2;
    } else {
      out_put(o, s + i, 1);
      i++;
    }
  }
  return 0;
}

static int is_legacy_hash(const char *s, size_t n)
{
  if (n != 17 || s[0] != 'h')
    return 0;
  for (size_t i = 1; i < n; i++)
    if (hex_value(s[i]) < 0)
      return 0;
  return 1;
}

/* NULL when `sym` is not a legacy Rust symbol (it may still be C++). */
static char *demangle_rust_legacy(const char *sym)
{
  enum { MAX_ELEMS = 256 };
  const char *elem[MAX_ELEMS];
  size_t elen[MAX_ELEMS];
  size_t nelem = 0;
  int has_dollar = 0;
  const char *p = sym + 3; /* after "_ZN" */
  size_t rest = strlen(p);

  while (rest > 0 && *p != 'E') {
    if (!is_digit(*p) || *p == '0' || nelem == MAX_ELEMS)
      return NULL;
    size_t len = 0;
    while (rest > 0 && is_digit(*p)) {
      if (len > OUT_MAX)
        return NULL;
      len = len * 10 + (size_t)(*p - '0');
      p++;
      rest--;
    }
    if (len > rest)
      return NULL;
    elem[nelem] = p;
    elen[nelem] = len;
    if (memchr(p, '$', len))
      has_dollar = 1;
    nelem++;
    p += len;
    rest -= len;
  }
  if (rest == 0 || nelem == 0)
    return NULL;
  p++; /* 'E' */
  if (*p != '\0' && *p != '.')
    return NULL;
  int hashed = is_legacy_hash(elem[nelem - 1], elen[nelem - 1]);
  if (!hashed && !has_dollar)
    return NULL;
  if (hashed)
    nelem--;
  if (nelem == 0)
    return NULL;

  struct out o = {0};
  for (size_t i = 0; i < nelem; i++) {
    if (i > 0)
      out_str(&o, "::");
    if (legacy_element(&o, elem[i], elen[i])) {
      free(o.p);
      return NULL;
    }
  }
  return out_finish(&o);
}

/* ---------------------------------------------------------------------- */
/* Rust v0: _R <path> [<instantiating-crate>] [.suffix]                    */

struct v0 {
  const char *s; /* the symbol after "_R" */
  size_t n;      /* up to the vendor suffix */
  size_t pos;
  struct out *o;
  int quiet; /* > 0: parse only (the impl-path of an impl) */
  int err;
  int depth;
  long steps;
  uint64_t bound_lifetimes;
};

static void v0_emit(struct v0 *p, const char *s)
{
  if (!p->quiet && !p->err)
    out_str(p->o, s);
}

static void v0_emitn(struct v0 *p, const char *s, size_t n)
{
  if (!p->quiet && !p->err)
    out_put(p->o, s, n);
}

static char v0_peek(const struct v0 *p)
{
  return p->pos < p->n ? p->s[p->pos] : '\0';
}

static int v0_eat(struct v0 *p, char c)
{
  if (!p->err && v0_peek(p) == c) {
    p->pos++;
    return 1;
  }
  return 0;
}

static char v0_next(struct v0 *p)
{
  if (p->err || p->pos >= p->n) {
    p->err = 1;
    return '\0';
  }
  return p->s[p->pos++];
}

/* Guards recursion depth and total work; returns 0 when parsing may go on. */
static int v0_enter(struct v0 *p)
{
  if (p->err)
    return -1;
  if (++p->depth > DEPTH_MAX || ++p->steps > STEPS_MAX || p->o->err) {
    p->err = 1;
    return -1;
  }
  return 0;
}

/* <base-62-number> = {0-9a-zA-Z} "_": "_" is 0, "0_" is 1, ... */
static uint64_t v0_base62(struct v0 *p)
{
  if (v0_eat(p, '_'))
    return 0;
  uint64_t v = 0;
  for (;;) {
    char c = v0_next(p);
    unsigned d;
    if (p->err)
      return 0;
    if (c == '_')
      break;
    if (is_digit(c))
      d = (unsigned)(c - '0');
    else if (is_lower(c))
      d = 10u + (unsigned)(c - 'a');
    else if (is_upper(c))
      d = 36u + (unsigned)(c - 'A');
    else {
      p->err = 1;
      return 0;
    }
    if (v > (UINT64_MAX - d) / 62) {
      p->err = 1;
      return 0;
    }
    v = v * 62 + d;
  }
  if (v == UINT64_MAX) {
    p->err = 1;
    return 0;
  }
  return v + 1;
}

/* An optional `tag` <base-62-number>: 0 when absent, else the number + 1. */
static uint64_t v0_opt_base62(struct v0 *p, char tag)
{
  if (!v0_eat(p, tag))
    return 0;
  uint64_t v = v0_base62(p);
  if (v == UINT64_MAX)
    p->err = 1;
  return v + 1;
}

static uint64_t v0_decimal(struct v0 *p)
{
  char c = v0_next(p);
  if (p->err || !is_digit(c)) {
    p->err = 1;
    return 0;
  }
  if (c == '0')
    return 0;
  uint64_t v = (uint64_t)(c - '0');
  while (is_digit(v0_peek(p))) {
    if (v > (UINT64_MAX - 9) / 10) {
      p->err = 1;
      return 0;
    }
    v = v * 10 + (uint64_t)(v0_next(p) - '0');
  }
  return v;
}

struct ident {
  const char *name;
  size_t len;
  int punycode;
  uint64_t dis; /* disambiguator */
};

/* <identifier> = [<disambiguator>] ["u"] <decimal-number> ["_"] <bytes> */
static struct ident v0_ident(struct v0 *p)
{
  struct ident id = {"", 0, 0, 0};
  id.dis = v0_opt_base62(p, 's');
  id.punycode = v0_eat(p, 'u');
  uint64_t len = v0_decimal(p);
  v0_eat(p, '_');
  if (p->err || len > p->n - p->pos) {
    p->err = 1;
    return id;
  }
  id.name = p->s + p->pos;
  id.len = (size_t)len;
  p->pos += (size_t)len;
  return id;
}

static void v0_print_ident(struct v0 *p, const struct ident *id)
{
  /* Punycode (non-ASCII identifiers) is shown encoded, as rustc-demangle
   * does when it cannot decode. */
  if (id->punycode) {
    v0_emit(p, "punycode{");
    v0_emitn(p, id->name, id->len);
    v0_emit(p, "}");
  } else {
    v0_emitn(p, id->name, id->len);
  }
}

/* <backref> = "B" <base-62-number>, a position in p->s before the "B". */
static int v0_backref(struct v0 *p, size_t *target)
{
  size_t at = p->pos - 1;
  uint64_t i = v0_base62(p);
  if (p->err || i >= at) {
    p->err = 1;
    return -1;
  }
  *target = (size_t)i;
  return 0;
}

static void v0_path(struct v0 *p, int in_value);
static void v0_type(struct v0 *p);
static void v0_const(struct v0 *p);

/* Runs `fn` at the position of a backref, then resumes after it. In quiet
 * mode the target is not visited: nothing would be printed. */
static void v0_follow(struct v0 *p, void (*fn)(struct v0 *, int), int arg)
{
  size_t target;
  if (v0_backref(p, &target))
    return;
  if (p->quiet)
    return;
  size_t saved = p->pos;
  p->pos = target;
  fn(p, arg);
  p->pos = saved;
}

static void v0_type_arg(struct v0 *p, int unused)
{
  (void)unused;
  v0_type(p);
}

static void v0_const_arg(struct v0 *p, int unused)
{
  (void)unused;
  v0_const(p);
}

static void v0_lifetime(struct v0 *p, uint64_t lt)
{
  if (lt == 0) {
    v0_emit(p, "'_");
    return;
  }
  if (lt > p->bound_lifetimes) {
    p->err = 1;
    return;
  }
  uint64_t depth = p->bound_lifetimes - lt;
  char buf[32];
  if (depth < 26)
    snprintf(buf, sizeof buf, "'%c", (char)('a' + depth));
  else
    snprintf(buf, sizeof buf, "'_%llu", (unsigned long long)depth);
  v0_emit(p, buf);
}

/* [<binder>] = "G" <base-62-number>: prints "for<'a, 'b> " and binds. */
static uint64_t v0_binder(struct v0 *p)
{
  uint64_t count = v0_opt_base62(p, 'G');
  if (count == 0 || p->err)
    return 0;
  if (count > 1000) {
    p->err = 1;
    return 0;
  }
  v0_emit(p, "for<");
  for (uint64_t i = 0; i < count; i++) {
    if (i > 0)
      v0_emit(p, ", ");
    p->bound_lifetimes++;
    v0_lifetime(p, 1);
  }
  v0_emit(p, "> ");
  return count;
}

static void v0_generic_args(struct v0 *p)
{
  for (size_t i = 0; !p->err && !v0_eat(p, 'E'); i++) {
    if (i > 0)
      v0_emit(p, ", ");
    if (v0_eat(p, 'L'))
      v0_lifetime(p, v0_base62(p));
    else if (v0_eat(p, 'K'))
      v0_const(p);
    else
      v0_type(p);
  }
}

static void v0_path(struct v0 *p, int in_value)
{
  if (v0_enter(p))
    return;
  char tag = v0_next(p);
  switch (tag) {
  case 'C': {
    struct ident id = v0_ident(p);
    v0_print_ident(p, &id);
    break;
  }
  case 'M':
  case 'X':
  case 'Y':
    if (tag != 'Y') {
      v0_opt_base62(p, 's');
      p->quiet++;
      v0_path(p, 0);
      p->quiet--;
    }
    v0_emit(p, "<");
    v0_type(p);
    if (tag != 'M') {
      v0_emit(p, " as ");
      v0_path(p, 0);
    }
    v0_emit(p, ">");
    break;
  case 'N': {
    char ns = v0_next(p);
    if (!is_lower(ns) && !is_upper(ns)) {
      p->err = 1;
      break;
    }
    v0_path(p, in_value);
    struct ident id = v0_ident(p);
    if (is_upper(ns)) {
      char buf[32];
      v0_emit(p, "::{");
      if (ns == 'C')
        v0_emit(p, "closure");
      else if (ns == 'S')
        v0_emit(p, "shim");
      else
        v0_emitn(p, &ns, 1);
      if (id.len) {
        v0_emit(p, ":");
        v0_print_ident(p, &id);
      }
      snprintf(buf, sizeof buf, "#%llu}", (unsigned long long)id.dis);
      v0_emit(p, buf);
    } else if (id.len) {
      v0_emit(p, "::");
      v0_print_ident(p, &id);
    }
    break;
  }
  case 'I':
    v0_path(p, in_value);
    if (in_value)
      v0_emit(p, "::");
    v0_emit(p, "<");
    v0_generic_args(p);
    v0_emit(p, ">");
    break;
  case 'B':
    v0_follow(p, v0_path, in_value);
    break;
  default:
    p->err = 1;
  }
  p->depth--;
}

/* <basic-type>: one lowercase letter; NULL for letters that are not one. */
static const char *v0_basic_type(char c)
{
  static const char *const basic[26] = {
      ['a' - 'a'] = "i8",    ['b' - 'a'] = "bool", ['c' - 'a'] = "char", ['d' - 'a'] = "f64",
      ['e' - 'a'] = "str",   ['f' - 'a'] = "f32",  ['h' - 'a'] = "u8",   ['i' - 'a'] = "isize",
      ['j' - 'a'] = "usize", ['l' - 'a'] = "i32",  ['m' - 'a'] = "u32",  ['n' - 'a'] = "i128",
      ['o' - 'a'] = "u128",  ['p' - 'a'] = "_",    ['s' - 'a'] = "i16",  ['t' - 'a'] = "u16",
      ['u' - 'a'] = "()",    ['v' - 'a'] = "...",  ['x' - 'a'] = "i64",  ['y' - 'a'] = "u64",
      ['z' - 'a'] = "!",
  };
  return is_lower(c) ? basic[c - 'a'] : NULL;
}

/* A dyn trait's path, leaving its generic argument list open ("Fn<(A,)")
 * so associated-type bindings can follow. Returns 1 when left open. */
static int v0_path_open_generics(struct v0 *p)
{
  if (v0_peek(p) == 'B') {
    p->pos++;
    size_t target;
    int open = 0;
    if (v0_backref(p, &target))
      return 0;
    if (p->quiet)
      return 0;
    size_t saved = p->pos;
    p->pos = target;
    if (v0_enter(p) == 0) {
      open = v0_path_open_generics(p);
      p->depth--;
    }
    p->pos = saved;
    return open;
  }
  if (v0_eat(p, 'I')) {
    v0_path(p, 0);
    v0_emit(p, "<");
    v0_generic_args(p);
    return 1;
  }
  v0_path(p, 0);
  return 0;
}

static void v0_dyn_trait(struct v0 *p)
{
  int open = v0_path_open_generics(p);
  while (!p->err && v0_eat(p, 'p')) {
    v0_emit(p, open ? ", " : "<");
    open = 1;
    struct ident id = v0_ident(p);
    v0_print_ident(p, &id);
    v0_emit(p, " = ");
    v0_type(p);
  }
  if (open)
    v0_emit(p, ">");
}

static void v0_fn_sig(struct v0 *p)
{
  uint64_t saved = p->bound_lifetimes;
  v0_binder(p);
  if (v0_eat(p, 'U'))
    v0_emit(p, "unsafe ");
  if (v0_eat(p, 'K')) {
    v0_emit(p, "extern \"");
    if (v0_eat(p, 'C')) {
      v0_emit(p, "C");
    } else {
      struct ident id = v0_ident(p);
      for (size_t i = 0; i < id.len && !p->err; i++)
        v0_emitn(p, id.name[i] == '_' ? "-" : id.name + i, 1);
    }
    v0_emit(p, "\" ");
  }
  v0_emit(p, "fn(");
  for (size_t i = 0; !p->err && !v0_eat(p, 'E'); i++) {
    if (i > 0)
      v0_emit(p, ", ");
    v0_type(p);
  }
  v0_emit(p, ")");
  if (!v0_eat(p, 'u')) {
    v0_emit(p, " -> ");
    v0_type(p);
  }
  p->bound_lifetimes = saved;
}

static void v0_type(struct v0 *p)
{
  if (v0_enter(p))
    return;
  char tag = v0_next(p);
  const char *basic = v0_basic_type(tag);
  if (basic) {
    v0_emit(p, basic);
    p->depth--;
    return;
  }
  switch (tag) {
  case 'R':
  case 'Q':
    v0_emit(p, "&");
    if (v0_eat(p, 'L')) {
      uint64_t lt = v0_base62(p);
      if (lt != 0) {
        v0_lifetime(p, lt);
        v0_emit(p, " ");
      }
    }
    if (tag == 'Q')
      v0_emit(p, "mut ");
    v0_type(p);
    break;
  case 'P':
    v0_emit(p, "*const ");
    v0_type(p);
    break;
  case 'O':
    v0_emit(p, "*mut ");
    v0_type(p);
    break;
  case 'A':
  case 'S':
    v0_emit(p, "[");
    v0_type(p);
    if (tag == 'A') {
      v0_emit(p, "; ");
      v0_const(p);
    }
    v0_emit(p, "]");
    break;
  case 'T': {
    size_t i = 0;
    v0_emit(p, "(");
    for (; !p->err && !v0_eat(p, 'E'); i++) {
      if (i > 0)
        v0_emit(p, ", ");
      v0_type(p);
    }
    if (i == 1)
      v0_emit(p, ",");
    v0_emit(p, ")");
    break;
  }
  case 'F':
    v0_fn_sig(p);
    break;
  case 'D': {
    uint64_t saved = p->bound_lifetimes;
    v0_emit(p, "dyn ");
    v0_binder(p);
    for (size_t i = 0; !p->err && !v0_eat(p, 'E'); i++) {
      if (i > 0)
        v0_emit(p, " + ");
      v0_dyn_trait(p);
    }
    p->bound_lifetimes = saved;
    if (!v0_eat(p, 'L')) {
      p->err = 1;
      break;
    }
    uint64_t lt = v0_base62(p);
    if (lt != 0) {
      v0_emit(p, " + ");
      v0_lifetime(p, lt);
    }
    break;
  }
  case 'B':
    v0_follow(p, v0_type_arg, 0);
    break;
  default:
    p->pos--;
    v0_path(p, 0);
  }
  p->depth--;
}

/* <const> = <type> <const-data> | "p" | <backref>; integers, bool and char
 * are decoded, anything else (structural constants) gives up. */
static void v0_const(struct v0 *p)
{
  if (v0_enter(p))
    return;
  char tag = v0_next(p);
  if (tag == 'B') {
    v0_follow(p, v0_const_arg, 0);
  } else if (tag == 'p') {
    v0_emit(p, "_");
  } else if (strchr("hmtyojasxlni", tag) && tag != '\0') {
    int neg = v0_eat(p, 'n');
    size_t start = p->pos;
    while (hex_value(v0_peek(p)) >= 0)
      p->pos++;
    size_t ndig = p->pos - start;
    if (!v0_eat(p, '_')) {
      p->err = 1;
    } else if (ndig <= 16) {
      uint64_t v = 0;
      char buf[32];
      for (size_t i = 0; i < ndig; i++)
        v = v * 16 + (uint64_t)hex_value(p->s[start + i]);
      snprintf(buf, sizeof buf, "%s%llu", neg ? "-" : "", (unsigned long long)v);
      v0_emit(p, buf);
    } else {
      v0_emit(p, neg ? "-0x" : "0x");
      v0_emitn(p, p->s + start, ndig);
    }
  } else if (tag == 'b' || tag == 'c') {
    uint64_t v = 0;
    size_t ndig = 0;
    while (hex_value(v0_peek(p)) >= 0 && ndig++ < 8)
      v = v * 16 + (uint64_t)hex_value(v0_next(p));
    if (!v0_eat(p, '_')) {
      p->err = 1;
    } else if (tag == 'b') {
      if (v > 1)
        p->err = 1;
      v0_emit(p, v ? "true" : "false");
    } else {
      v0_emit(p, "'");
      if (!p->quiet && put_utf8(p->o, (uint32_t)v))
        p->err = 1;
      v0_emit(p, "'");
    }
  } else {
    p->err = 1;
  }
  p->depth--;
}

static char *demangle_rust_v0(const char *sym)
{
  const char *s = sym[1] == 'R' ? sym + 2 : sym + 3; /* "_R" or "__R" */
  if (is_digit(*s))
    return NULL; /* a future encoding version */
  struct out o = {0};
  struct v0 p = {0};
  p.s = s;
  p.n = strcspn(s, ".");
  p.o = &o;
  v0_path(&p, 1);
  if (!p.err && p.pos < p.n) {
    /* <instantiating-crate>: parsed, not shown */
    p.quiet++;
    v0_path(&p, 0);
    p.quiet--;
  }
  if (p.err || p.pos != p.n) {
    free(o.p);
    return NULL;
  }
  return out_finish(&o);
}

/* ---------------------------------------------------------------------- */

typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);

/* __cxa_demangle as found at start-up, in an object loaded with the
 * program (never unloaded): what a writer that must not take the loader's
 * lock uses. */
static _Atomic(cxa_demangle_fn) at_start;

static cxa_demangle_fn find_cxa_demangle(void)
{
  void *addr = dlsym(RTLD_DEFAULT, "__cxa_demangle");
  cxa_demangle_fn fn = NULL;
  /* POSIX guarantees data and function pointers convert; ISO C does not,
   * so copy the bits rather than cast. */
  if (addr)
    memcpy(&fn, &addr, sizeof fn);
  return fn;
}

void culpert__demangle_prepare(void)
{
  atomic_store(&at_start, find_cxa_demangle());
}

static char *demangle_cxx(const char *sym)
{
  /* Looked up each time otherwise: a library loaded later may bring it,
   * and one unloaded may take it away. */
  cxa_demangle_fn fn = culpert__loader_usable() ? find_cxa_demangle() : atomic_load(&at_start);
  int status = -1;
  if (!fn)
    return NULL;
  char *r = fn(sym, NULL, NULL, &status);
  if (status != 0) {
    free(r);
    return NULL;
  }
  return r;
}

char *culpert__demangle(const char *sym)
{
  if (!sym)
    return NULL;
  if (strncmp(sym, "_R", 2) == 0 || strncmp(sym, "__R", 3) == 0)
    return demangle_rust_v0(sym);
  if (strncmp(sym, "_ZN", 3) == 0) {
    char *r = demangle_rust_legacy(sym);
    if (r)
      return r;
  }
  if (strncmp(sym, "_Z", 2) == 0)
    return demangle_cxx(sym);
  return NULL;
}
