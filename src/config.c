/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * config.c: the collector's environment variables, parsed once at start-up
 * into fixed storage, and the output file name.
 *
 * Runs before main, possibly before the real allocator is known: never
 * allocates and never uses stdio (warnings go out with write(2)).
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "bytesize.h"
#include "internal.h"

struct culpert__config culpert__cfg;

static int parse_u64(const char *s, uint64_t *out)
{
  char *end;
  if (s == NULL || *s < '0' || *s > '9')
    return -1;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno != 0 || *end != '\0')
    return -1;
  *out = (uint64_t)v;
  return 0;
}

/* A signal culpert may take for on-demand snapshots: SIGUSR1, SIGUSR2, or
 * a real-time one, by name ("USR2", "SIGUSR2", "RTMIN+3", "SIGRTMIN")
 * or number. Every other signal means something to the program or to the
 * system already. */
static int parse_snapshot_signal(const char *s, int *out)
{
  if (strncmp(s, "SIG", 3) == 0)
    s += 3;
  long n;
  char *end;
  if (strcmp(s, "USR1") == 0) {
    n = SIGUSR1;
  } else if (strcmp(s, "USR2") == 0) {
    n = SIGUSR2;
  } else if (strncmp(s, "RTMIN", 5) == 0) {
    long k = 0;
    if (s[5] == '+') {
      errno = 0;
      k = strtol(s + 6, &end, 10);
      if (errno != 0 || end == s + 6 || *end != '\0' || k < 0)
        return -EINVAL;
    } else if (s[5] != '\0') {
      return -EINVAL;
    }
    n = SIGRTMIN + k;
  } else {
    errno = 0;
    n = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
      return -EINVAL;
  }
  if (n != SIGUSR1 && n != SIGUSR2 && (n < SIGRTMIN || n > SIGRTMAX))
    return -EINVAL;
  *out = (int)n;
  return 0;
}

/* A duration: a number of seconds, or of minutes or hours with an "m" or
 * "h" after it ("s" is allowed too). At most a week. */
static int parse_seconds(const char *s, uint32_t *out)
{
  char *end;
  if (*s < '0' || *s > '9')
    return -1;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned long long unit = 1;
  if (*end == 'm')
    unit = 60;
  else if (*end == 'h')
    unit = 3600;
  else if (*end != 's' && *end != '\0')
    return -1;
  if (errno != 0 || (*end != '\0' && end[1] != '\0') || v > 7ull * 24 * 3600 / unit)
    return -1;
  *out = (uint32_t)(v * unit);
  return 0;
}

static int key_char(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

/* Why load_metadata left an entry out. */
enum meta_fault { META_MALFORMED, META_RESERVED, META_NO_ROOM, META_FAULTS };

/* Copy the valid "key=value" entries of CULPERT_METADATA into c->meta_buf.
 * A key is [A-Za-z0-9_.-]+ and may not start with "culpert."; a value is
 * non-empty printable ASCII. Counts the entries left out by why in
 * count[], and the first of each in first[] (its start, length in len[]). */
static void load_metadata(struct culpert__config *c, const char *s, unsigned count[META_FAULTS],
                          const char *first[META_FAULTS], size_t len[META_FAULTS])
{
  size_t used = 0;
  while (s != NULL && *s != '\0') {
    const char *end = strchr(s, ',');
    size_t n = end ? (size_t)(end - s) : strlen(s);
    const char *eq = memchr(s, '=', n);
    int ok = eq != NULL && eq > s && (size_t)(eq - s) + 1 < n;
    for (const char *k = s; ok && k < eq; k++)
      ok = key_char(*k);
    for (const char *v = eq ? eq + 1 : s; ok && v < s + n; v++)
      ok = *v > ' ' - 1 && *v < 0x7f;
    int fault = !ok                                                       ? META_MALFORMED
                : (size_t)(eq - s) >= 8 && strncmp(s, "culpert.", 8) == 0 ? META_RESERVED
                : c->nmeta >= CULPERT__MAX_META || used + n + 1 > sizeof c->meta_buf ? META_NO_ROOM
                                                                                     : -1;
    if (fault < 0) {
      memcpy(c->meta_buf + used, s, n);
      c->meta_buf[used + n] = '\0';
      c->meta[c->nmeta++] = c->meta_buf + used;
      used += n + 1;
    } else if (n > 0 && count[fault]++ == 0) {
      first[fault] = s;
      len[fault] = n;
    }
    s = end ? end + 1 : NULL;
  }
}

/* The warnings for what load_metadata left out: one line for each reason,
 * naming the first entry (its first 40 bytes, printable) and how many more. */
static void say_metadata_faults(int fd, const unsigned count[META_FAULTS],
                                const char *const first[META_FAULTS], const size_t len[META_FAULTS])
{
  static const char *const why[META_FAULTS] = {
      "not key=value (a key of letters, digits, '_', '.' and '-'; a value of printable ASCII)",
      "keys that start with \"culpert.\" are culpert's own",
      "past what culpert keeps",
  };
  for (int f = 0; f < META_FAULTS; f++) {
    if (count[f] == 0)
      continue;
    char shown[48];
    size_t n = len[f] < 40 ? len[f] : 40;
    for (size_t i = 0; i < n; i++)
      shown[i] = first[f][i] >= ' ' && first[f][i] < 0x7f ? first[f][i] : '?';
    shown[n] = '\0';
    char more[48] = "";
    if (count[f] > 1)
      snprintf(more, sizeof more, " and %u more", count[f] - 1);
    char reason[128];
    if (f == META_NO_ROOM)
      snprintf(reason, sizeof reason, "%s (%u entries, %zu bytes in all)", why[f],
               CULPERT__MAX_META, sizeof((struct culpert__config *)0)->meta_buf);
    else
      snprintf(reason, sizeof reason, "%s", why[f]);
    culpert__say_fd(fd, "CULPERT_METADATA: ignoring \"%s%s\"%s: %s", shown, len[f] > n ? "..." : "",
                    more, reason);
  }
}

/* An on/off variable: 1, yes, true or on; 0, no, false or off (any case);
 * unset or empty is off. Anything else is off, with a warning: a typo
 * such as CULPERT_QUIET=no-thanks must not silently mean on. */
static int read_switch(culpert__getenv_fn get, const char *name, int warn_fd)
{
  static const char *const on[] = {"1", "yes", "true", "on"};
  static const char *const off[] = {"0", "no", "false", "off"};
  const char *v = get(name);
  if (v == NULL || *v == '\0')
    return 0;
  for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
    if (strcasecmp(v, on[i]) == 0)
      return 1;
    if (strcasecmp(v, off[i]) == 0)
      return 0;
  }
  culpert__say_fd(warn_fd, "%s=%s is neither 1 nor 0 (yes/no, true/false, on/off); using 0", name,
                  v);
  return 0;
}

void culpert__config_load(struct culpert__config *c, culpert__getenv_fn get, int warn_fd)
{
  const char *v;
  memset(c, 0, sizeof *c);
  c->rate = CULPERT__DEFAULT_RATE;
  c->stack_mode = CULPERT__STACK_LIBUNWIND;
  c->stack_depth = CULPERT__DEFAULT_DEPTH;

  v = get("CULPERT_SAMPLE_RATE");
  int rc = v != NULL && *v != '\0' ? culpert__bytesize_parse(v, &c->rate) : 0;
  if (rc == -ERANGE)
    c->rate = UINT64_MAX; /* a count past 2^64 is as far above the cap */
  if (rc != 0 && rc != -ERANGE) {
    culpert__say_fd(warn_fd, "CULPERT_SAMPLE_RATE=%s is not a byte count; using %u", v,
                    CULPERT__DEFAULT_RATE);
    c->rate = CULPERT__DEFAULT_RATE;
  } else if (c->rate > (uint64_t)INT64_MAX) {
    /* A profile's period is an int64: the rate it states is this one. */
    culpert__say_fd(warn_fd,
                    "CULPERT_SAMPLE_RATE=%s is above the largest rate, %lld bytes; using "
                    "that",
                    v, (long long)INT64_MAX);
    c->rate = (uint64_t)INT64_MAX;
  }
  v = get("CULPERT_SEED");
  if (v != NULL && *v != '\0') {
    if (parse_u64(v, &c->seed) == 0)
      c->has_seed = 1;
    else
      culpert__say_fd(warn_fd, "CULPERT_SEED=%s is not a number; using a random seed", v);
  }
  v = get("CULPERT_STACK");
  if (v != NULL && *v != '\0') {
    if (strcmp(v, "fp") == 0)
      c->stack_mode = CULPERT__STACK_FP;
    else if (strcmp(v, "libunwind") != 0)
      culpert__say_fd(warn_fd, "CULPERT_STACK=%s is neither libunwind nor fp; using libunwind", v);
  }
  v = get("CULPERT_SYMBOLS");
  if (v != NULL && *v != '\0') {
    if (strcmp(v, "names") == 0)
      c->names_only = 1;
    else if (strcmp(v, "full") != 0)
      culpert__say_fd(warn_fd, "CULPERT_SYMBOLS=%s is neither full nor names; using full", v);
  }
  v = get("CULPERT_STACK_DEPTH");
  if (v != NULL && *v != '\0') {
    uint64_t d;
    if (parse_u64(v, &d) != 0 || d == 0)
      culpert__say_fd(warn_fd, "CULPERT_STACK_DEPTH=%s is not a positive number; using %u", v,
                      CULPERT__DEFAULT_DEPTH);
    else
      c->stack_depth = d > CULPERT__MAX_DEPTH ? CULPERT__MAX_DEPTH : (uint32_t)d;
  }
  c->quiet = read_switch(get, "CULPERT_QUIET", warn_fd);
  c->no_children = read_switch(get, "CULPERT_NO_CHILDREN", warn_fd);
  c->write_on_signal = read_switch(get, "CULPERT_WRITE_ON_SIGNAL", warn_fd);
  c->peak = read_switch(get, "CULPERT_PEAK", warn_fd);
  v = get("CULPERT_OUTPUT");
  if (v != NULL && *v != '\0') {
    size_t n = strlen(v);
    if (n < sizeof c->output_buf) {
      memcpy(c->output_buf, v, n + 1);
      c->output = c->output_buf;
    } else {
      culpert__say_fd(warn_fd, "CULPERT_OUTPUT is longer than %u bytes; using the default name",
                      (unsigned)sizeof c->output_buf - 1);
    }
  }
  /* Not the user's: `culpert run`'s, which never sets a bad one, so a bad
   * one is dropped without a word. */
  v = get("CULPERT_RUN_ID");
  if (v != NULL && strlen(v) < sizeof c->run_id && strspn(v, "0123456789abcdef") == strlen(v))
    strcpy(c->run_id, v);
  v = get("CULPERT_INTERVAL");
  if (v != NULL && *v != '\0' && parse_seconds(v, &c->interval) != 0) {
    culpert__say_fd(warn_fd,
                    "CULPERT_INTERVAL=%s is not a duration (like 60, 30s, 5m or 1h, at most a "
                    "week); the profile is written at exit only",
                    v);
    c->interval = 0;
  }
  v = get("CULPERT_SNAPSHOT_SIGNAL");
  if (v != NULL && *v != '\0' && parse_snapshot_signal(v, &c->snapshot_signal) != 0) {
    culpert__say_fd(warn_fd,
                    "CULPERT_SNAPSHOT_SIGNAL=%s is not USR1, USR2 or a real-time signal (like "
                    "RTMIN+2); no snapshots on a signal",
                    v);
    c->snapshot_signal = 0;
  }
  v = get("CULPERT_METADATA");
  if (v != NULL) {
    unsigned count[META_FAULTS] = {0};
    const char *first[META_FAULTS] = {NULL};
    size_t len[META_FAULTS] = {0};
    load_metadata(c, v, count, first, len);
    say_metadata_faults(warn_fd, count, first, len);
  }
}

static int put(char *buf, size_t n, size_t *at, const char *s, size_t len)
{
  if (*at + len >= n)
    return -ENAMETOOLONG;
  memcpy(buf + *at, s, len);
  *at += len;
  buf[*at] = '\0';
  return 0;
}

int culpert__config_output_path(const char *tmpl, long pid, const char *exe, int is_child,
                                char *buf, size_t n)
{
  char num[32];
  int numlen = snprintf(num, sizeof num, "%ld", pid);
  size_t at = 0;
  int has_pid = 0;
  int rc = 0;
  if (n == 0)
    return -ENAMETOOLONG;
  buf[0] = '\0';
  if (tmpl == NULL)
    tmpl = "culpert.%e.%p.pb.gz";
  for (const char *c = tmpl; *c != '\0' && rc == 0; c++) {
    if (c[0] == '%' && c[1] == 'p') {
      rc = put(buf, n, &at, num, (size_t)numlen);
      has_pid = 1;
      c++;
    } else if (c[0] == '%' && c[1] == 'e') {
      rc = put(buf, n, &at, exe, strlen(exe));
      c++;
    } else if (c[0] == '%' && c[1] == '%') {
      rc = put(buf, n, &at, "%", 1);
      c++;
    } else {
      rc = put(buf, n, &at, c, 1);
    }
  }
  if (rc == 0 && is_child && !has_pid) {
    rc = put(buf, n, &at, ".", 1);
    if (rc == 0)
      rc = put(buf, n, &at, num, (size_t)numlen);
  }
  return rc;
}
