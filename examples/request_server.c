/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * request_server: a toy request handler instrumented with spans, the program
 * the README's quick start profiles. Each request parses its input, looks up
 * a session and builds a response; the three stages allocate in different,
 * deterministic amounts so the report has something to say:
 *
 *   culpert run -- ./request_server [REQUESTS]   (default 20000)
 *
 * Build: cc -O2 request_server.c -I<prefix>/include   (no -lculpert needed)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <culpert.h>

struct request {
  char *body;
  size_t len;
};

/* Split the body into a freshly allocated token per word (tokens freed). */
static size_t parse_input(const struct request *r)
{
  CULPERT_SPAN("parse_input");
  size_t ntok = 0;
  char **tokens = calloc(64, sizeof *tokens);
  if (!tokens)
    return 0;
  const char *p = r->body;
  while (*p && ntok < 64) {
    size_t n = strcspn(p, " ");
    tokens[ntok] = malloc(n + 1);
    if (!tokens[ntok])
      break;
    memcpy(tokens[ntok], p, n);
    tokens[ntok][n] = '\0';
    ntok++;
    p += n + (p[n] == ' ');
  }
  for (size_t i = 0; i < ntok; i++)
    free(tokens[i]);
  free(tokens);
  return ntok;
}

/* A session cache that keeps growing: its memory stays live (in-use). */
static char **sessions;
static size_t nsessions, capsessions;

static void lookup_session(unsigned id)
{
  CULPERT_SPAN("lookup_session");
  if (id % 4 != 0)
    return; /* cache hit */
  if (nsessions == capsessions) {
    size_t cap = capsessions ? capsessions * 2 : 16;
    char **grown = realloc(sessions, cap * sizeof *grown);
    if (!grown)
      return;
    sessions = grown;
    capsessions = cap;
  }
  sessions[nsessions] = malloc(256);
  if (sessions[nsessions])
    snprintf(sessions[nsessions++], 256, "session-%u", id);
}

/* Render a response into a buffer that grows by doubling. */
static size_t build_response(unsigned id, size_t ntok)
{
  CULPERT_SPAN("build_response");
  size_t cap = 128, len = 0;
  char *out = malloc(cap);
  if (!out)
    return 0;
  for (size_t i = 0; i < ntok * 16; i++) {
    char line[64];
    int n = snprintf(line, sizeof line, "<li>item %u.%zu</li>\n", id, i);
    while (len + (size_t)n + 1 > cap) {
      cap *= 2;
      char *grown = realloc(out, cap);
      if (!grown) {
        free(out);
        return 0;
      }
      out = grown;
    }
    memcpy(out + len, line, (size_t)n + 1);
    len += (size_t)n;
  }
  free(out);
  return len;
}

static size_t handle_request(unsigned id)
{
  CULPERT_SPAN("handle_request");
  struct request r;
  r.body = strdup("GET /items?page=3 HTTP/1.1 host example accept text/html user agent test");
  if (!r.body)
    return 0;
  r.len = strlen(r.body);
  size_t ntok = parse_input(&r);
  lookup_session(id);
  size_t n = build_response(id, ntok);
  free(r.body);
  return n;
}

int main(int argc, char **argv)
{
  unsigned requests = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 20000;
  size_t bytes = 0;
  /* Startup work outside any span shows up as "(no span)": a 1 MiB
   * configuration table that stays live for the whole run. */
  char *config = malloc(1 << 20);
  if (!config)
    return 1;
  for (size_t i = 0; i < (1 << 20); i++)
    config[i] = (char)(i * 31);
  for (unsigned i = 0; i < requests; i++)
    bytes += handle_request(i);
  printf("served %u requests, %zu response bytes, %zu sessions cached (config %d)\n", requests,
         bytes, nsessions, config[requests % (1 << 20)]);
  free(config);
  return 0;
}
