/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * svgcheck: is a flame graph SVG a well-formed, self-contained document?
 *
 *   svgcheck FILE.svg
 *
 * Checks what a browser needs to open the file and what hostile frame names
 * must never break: valid UTF-8 and only XML-allowed characters; balanced
 * elements with well-formed names; quoted attribute values without '<' and
 * without duplicates; every '&' a valid entity or character reference;
 * "]]>" only as the end of a CDATA section; one root element, <svg> with the
 * SVG namespace; exactly one <script> element (a name must not inject
 * another); nothing that fetches a resource (href, CSS url() or @import).
 * Exits 0 when the file passes, 1 with a message naming the byte offset
 * when it does not. A test tool: small and strict rather than complete (no
 * DTDs, no namespace checks beyond the root).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 256
#define MAX_NAME  64
#define MAX_ATTRS 64

static const char *doc;
static size_t len, pos;
static const char *path;

static int fail(const char *what)
{
  fprintf(stderr, "svgcheck: %s: offset %zu: %s\n", path, pos, what);
  return 1;
}

/* Decode one UTF-8 character at doc[pos]; 0 when invalid. */
static uint32_t utf8_at(size_t at, size_t *n)
{
  const unsigned char *s = (const unsigned char *)doc + at;
  size_t avail = len - at;
  uint32_t c;
  if (s[0] < 0x80) {
    *n = 1;
    return s[0];
  }
  if ((s[0] & 0xE0) == 0xC0) {
    *n = 2;
    c = s[0] & 0x1F;
  } else if ((s[0] & 0xF0) == 0xE0) {
    *n = 3;
    c = s[0] & 0x0F;
  } else if ((s[0] & 0xF8) == 0xF0) {
    *n = 4;
    c = s[0] & 0x07;
  } else {
    return 0;
  }
  if (*n > avail)
    return 0;
  for (size_t i = 1; i < *n; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    c = (c << 6) | (s[i] & 0x3F);
  }
  static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < min[*n] || c > 0x10FFFF)
    return 0;
  return c;
}

static bool xml_char(uint32_t c)
{
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

static int check_chars(void)
{
  for (pos = 0; pos < len;) {
    size_t n;
    uint32_t c = utf8_at(pos, &n);
    if (c == 0 || !xml_char(c))
      return fail("invalid UTF-8 or a character XML does not allow");
    pos += n;
  }
  return 0;
}

static bool name_start(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static bool name_char(char c)
{
  return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

static int read_name(char out[MAX_NAME])
{
  size_t n = 0;
  if (pos >= len || !name_start(doc[pos]))
    return fail("expected a name");
  while (pos < len && name_char(doc[pos])) {
    if (n + 1 >= MAX_NAME)
      return fail("name too long");
    out[n++] = doc[pos++];
  }
  out[n] = '\0';
  return 0;
}

static void skip_space(void)
{
  while (pos < len && (doc[pos] == ' ' || doc[pos] == '\t' || doc[pos] == '\n' || doc[pos] == '\r'))
    pos++;
}

/* An entity or character reference at doc[pos] == '&'. */
static int check_reference(void)
{
  static const char *named[] = {"amp;", "lt;", "gt;", "quot;", "apos;"};
  pos++;
  for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
    size_t n = strlen(named[i]);
    if (len - pos >= n && memcmp(doc + pos, named[i], n) == 0) {
      pos += n;
      return 0;
    }
  }
  if (pos < len && doc[pos] == '#') {
    pos++;
    bool hex = pos < len && doc[pos] == 'x';
    pos += hex;
    uint32_t v = 0;
    size_t digits = 0;
    for (; pos < len && doc[pos] != ';'; pos++, digits++) {
      char c = doc[pos];
      int d = c >= '0' && c <= '9'          ? c - '0'
              : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
              : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                            : -1;
      if (d < 0 || digits > 8)
        return fail("bad character reference");
      v = v * (hex ? 16 : 10) + (uint32_t)d;
    }
    if (pos >= len || digits == 0 || !xml_char(v))
      return fail("bad character reference");
    pos++;
    return 0;
  }
  return fail("'&' that does not start an entity");
}

static bool starts(const char *s)
{
  size_t n = strlen(s);
  return len - pos >= n && memcmp(doc + pos, s, n) == 0;
}

/* Skip to just past `end`; fails when it never comes. */
static int skip_past(const char *end, const char *what)
{
  const char *hit = memmem(doc + pos, len - pos, end, strlen(end));
  if (!hit)
    return fail(what);
  pos = (size_t)(hit - doc) + strlen(end);
  return 0;
}

/* A start tag after '<'; *empty when it ends in "/>". */
static int check_start_tag(char name[MAX_NAME], bool *empty, bool *has_svg_ns)
{
  char attrs[MAX_ATTRS][MAX_NAME];
  size_t nattrs = 0;
  if (read_name(name))
    return 1;
  for (;;) {
    size_t before = pos;
    skip_space();
    if (pos >= len)
      return fail("unterminated start tag");
    if (doc[pos] == '>') {
      pos++;
      *empty = false;
      return 0;
    }
    if (starts("/>")) {
      pos += 2;
      *empty = true;
      return 0;
    }
    if (pos == before)
      return fail("attributes must be separated by white space");
    if (nattrs == MAX_ATTRS)
      return fail("too many attributes");
    if (read_name(attrs[nattrs]))
      return 1;
    for (size_t i = 0; i < nattrs; i++)
      if (strcmp(attrs[i], attrs[nattrs]) == 0)
        return fail("duplicate attribute");
    const char *attr = attrs[nattrs++];
    skip_space();
    if (pos >= len || doc[pos] != '=')
      return fail("attribute without '='");
    pos++;
    skip_space();
    if (pos >= len || (doc[pos] != '"' && doc[pos] != '\''))
      return fail("unquoted attribute value");
    char q = doc[pos++];
    size_t vstart = pos;
    while (pos < len && doc[pos] != q) {
      if (doc[pos] == '<')
        return fail("'<' in an attribute value");
      if (doc[pos] == '&') {
        if (check_reference())
          return 1;
        continue;
      }
      pos++;
    }
    if (pos >= len)
      return fail("unterminated attribute value");
    if (strcmp(attr, "xmlns") == 0 && pos - vstart == 26 &&
        memcmp(doc + vstart, "http://www.w3.org/2000/svg", 26) == 0)
      *has_svg_ns = true;
    if (strstr(attr, "href"))
      return fail("an href attribute: the document must not fetch anything");
    pos++;
  }
}

static int check_markup(void)
{
  char stack[MAX_DEPTH][MAX_NAME];
  size_t depth = 0, roots = 0, scripts = 0;
  bool root_ok = false;

  pos = 0;
  if (starts("<?xml") && skip_past("?>", "unterminated XML declaration"))
    return 1;
  while (pos < len) {
    if (doc[pos] != '<') {
      if (depth == 0 &&
          !(doc[pos] == ' ' || doc[pos] == '\n' || doc[pos] == '\t' || doc[pos] == '\r'))
        return fail("text outside the root element");
      if (doc[pos] == '&') {
        if (check_reference())
          return 1;
        continue;
      }
      if (starts("]]>"))
        return fail("']]>' in character data");
      pos++;
      continue;
    }
    if (starts("<!--")) {
      if (skip_past("-->", "unterminated comment"))
        return 1;
    } else if (starts("<![CDATA[")) {
      if (depth == 0)
        return fail("CDATA outside the root element");
      if (skip_past("]]>", "unterminated CDATA section"))
        return 1;
    } else if (starts("<?")) {
      if (skip_past("?>", "unterminated processing instruction"))
        return 1;
    } else if (starts("</")) {
      char name[MAX_NAME];
      pos += 2;
      if (read_name(name))
        return 1;
      skip_space();
      if (pos >= len || doc[pos] != '>')
        return fail("bad end tag");
      pos++;
      if (depth == 0 || strcmp(stack[depth - 1], name) != 0)
        return fail("end tag does not match the open element");
      depth--;
    } else {
      char name[MAX_NAME];
      bool empty = false, svg_ns = false;
      pos++;
      if (check_start_tag(name, &empty, &svg_ns))
        return 1;
      if (depth == 0) {
        if (++roots > 1)
          return fail("more than one root element");
        root_ok = strcmp(name, "svg") == 0 && svg_ns;
        if (!root_ok)
          return fail("the root element is not <svg> in the SVG namespace");
      }
      if (strcmp(name, "script") == 0)
        scripts++;
      if (!empty) {
        if (depth == MAX_DEPTH)
          return fail("elements nested too deep");
        memcpy(stack[depth++], name, MAX_NAME);
      }
    }
  }
  if (depth != 0)
    return fail("unclosed elements at the end");
  if (roots != 1)
    return fail("no root element");
  if (scripts != 1)
    return fail("expected exactly one <script> element");
  return 0;
}

static int check_self_contained(void)
{
  static const char *fetches[] = {"url(", "@import"};
  for (size_t i = 0; i < sizeof fetches / sizeof fetches[0]; i++) {
    const char *hit = doc;
    if ((hit = memmem(hit, len, fetches[i], strlen(fetches[i])))) {
      pos = (size_t)(hit - doc);
      return fail("a reference to an external resource");
    }
  }
  return 0;
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: svgcheck FILE.svg\n");
    return 2;
  }
  path = argv[1];
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 2;
  }
  size_t cap = 1 << 16;
  char *buf = malloc(cap);
  while (buf) {
    len += fread(buf + len, 1, cap - len, f);
    if (len < cap)
      break;
    char *nb = realloc(buf, cap * 2);
    if (!nb) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "svgcheck: out of memory\n");
    return 2;
  }
  doc = buf;
  int rc = check_chars() || check_markup() || check_self_contained();
  free(buf);
  if (rc == 0)
    printf("svgcheck: %s: well-formed, self-contained SVG\n", path);
  return rc ? 1 : 0;
}
