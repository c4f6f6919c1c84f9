/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * archive.c: the archive client (archive.h) for `culpert upload` and
 * `culpert pull`: the HTTP archive over libcurl, and a local directory with
 * the same semantics.
 *
 * Must never: print the token or the Access secret (every text that reaches
 * the terminal goes through culpert__archive_redact, and curl's own verbose
 * log is never switched on); leave a partial file under a final name; retry
 * a request the server refused for a reason a retry cannot fix (4xx other
 * than 429); parse a profile (only the gzip framing is checked).
 *
 * Local layout, one directory per project:
 *   <root>/<project>/profiles/<sha>.pb.gz   the bytes, as uploaded
 *   <root>/<project>/index/<sha>.json       {project, sha, branch, size,
 *                                            uploaded_at, uploaded_at_ns}
 *   <root>/<project>/.lock                  flock: exclusive while an upload
 *                                           renames its files into place,
 *                                           shared while a pull reads
 * Files appear by rename(2) of an fsync'ed temporary (names starting with a
 * dot), so readers see whole files only; each upload touches only its own
 * SHA's files, so concurrent uploads never rewrite a shared index.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "archive.h"
#include "profile.h"
#include "cli.h"

#define DEFAULT_PROJECT    "default"
#define MAX_BRANCH_BYTES   255
#define MAX_ANSWER_BYTES   (1024u * 1024u)             /* JSON answers and error bodies */
#define MAX_INFLATED       (8ull * 1024 * 1024 * 1024) /* gzip check gives up past this */
#define MAX_RECORD_BYTES   4096
#define BACKOFF_BASE_S     0.5
#define BACKOFF_CAP_S      30.0
#define MAX_SERVER_MESSAGE 300
#define MAX_JSON_DEPTH     64 /* nesting accepted in an upload answer */

const char culpert__archive_options_help[] =
    "Connection (flags override the environment):\n"
    "  --endpoint URL     the archive: https://... (the archive worker), or a local\n"
    "                     directory as file:///path or a plain path [CULPERT_ARCHIVE]\n"
    "  --token T          bearer token, HTTP only; prefer the variable, since flags\n"
    "                     show in process lists [CULPERT_TOKEN]\n"
    "  --project ID       1-64 of A-Z a-z 0-9 . _ -; default \"default\" [CULPERT_PROJECT]\n"
    "  --cf-access-client-id ID, --cf-access-client-secret S\n"
    "                     Cloudflare Access service token, both or neither\n"
    "                     [CF_ACCESS_CLIENT_ID, CF_ACCESS_CLIENT_SECRET]\n"
    "  --cacert FILE      CA bundle for TLS verification [CULPERT_CACERT]\n"
    "  --timeout S        limit for the whole operation, retries included (300)\n"
    "  --connect-timeout S  limit for each connection attempt (10)\n"
    "  --retries N        retries after transport errors, 429 and 5xx, with\n"
    "                     exponential backoff and jitter, honouring Retry-After (3)\n"
    "  --verbose          log requests and retries on stderr (secrets redacted)\n";

/* ---- options and environment ------------------------------------------ */

void culpert__archive_init(struct culpert__archive *a)
{
  memset(a, 0, sizeof *a);
  a->timeout_s = CULPERT_ARCHIVE_TIMEOUT_S;
  a->connect_timeout_s = CULPERT_ARCHIVE_CONNECT_TIMEOUT_S;
  a->retries = CULPERT_ARCHIVE_RETRIES;
}

static int parse_seconds(const char *flag, const char *arg, double *out)
{
  char *end = NULL;
  errno = 0;
  double v = strtod(arg, &end);
  if (errno != 0 || end == arg || *end != '\0' || !(v > 0) || v > 86400.0) {
    culpert__error("%s expects seconds, a number above 0 and at most 86400, got '%s'", flag, arg);
    return -EINVAL;
  }
  *out = v;
  return 0;
}

int culpert__archive_option(struct culpert__archive *a, int opt, const char *arg)
{
  switch (opt) {
  case CULPERT_ARCHIVE_OPT_ENDPOINT:
    a->endpoint = arg;
    return 1;
  case CULPERT_ARCHIVE_OPT_TOKEN:
    a->token = arg;
    return 1;
  case CULPERT_ARCHIVE_OPT_PROJECT:
    a->project = arg;
    return 1;
  case CULPERT_ARCHIVE_OPT_CF_ID:
    a->cf_access_id = arg;
    return 1;
  case CULPERT_ARCHIVE_OPT_CF_SECRET:
    a->cf_access_secret = arg;
    return 1;
  case CULPERT_ARCHIVE_OPT_CACERT:
    a->cacert = arg;
    return 1;
  case CULPERT_ARCHIVE_OPT_TIMEOUT:
    return parse_seconds("--timeout", arg, &a->timeout_s) < 0 ? -EINVAL : 1;
  case CULPERT_ARCHIVE_OPT_CONNECT_TIMEOUT:
    return parse_seconds("--connect-timeout", arg, &a->connect_timeout_s) < 0 ? -EINVAL : 1;
  case CULPERT_ARCHIVE_OPT_RETRIES: {
    char *end = NULL;
    errno = 0;
    long n = strtol(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || n < 0 || n > CULPERT_ARCHIVE_MAX_RETRIES) {
      culpert__error("--retries expects a whole number from 0 to %d, got '%s'",
                     CULPERT_ARCHIVE_MAX_RETRIES, arg);
      return -EINVAL;
    }
    a->retries = (int)n;
    return 1;
  }
  case CULPERT_ARCHIVE_OPT_VERBOSE:
    a->verbose = 1;
    return 1;
  default:
    return 0;
  }
}

/* The flag's value, else the variable's when set and not empty. */
static const char *flag_or_env(const char *flag_value, const char *var)
{
  if (flag_value)
    return flag_value;
  const char *v = getenv(var);
  return v && *v ? v : NULL;
}

/* 1 when `s` holds a byte that may not go into an HTTP header value. */
static int has_control_or_space(const char *s)
{
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c <= 0x20 || c == 0x7f)
      return 1;
  }
  return 0;
}

static int has_prefix_nocase(const char *s, const char *prefix)
{
  return strncasecmp(s, prefix, strlen(prefix)) == 0;
}

int culpert__archive_is_local(const char *endpoint)
{
  return !(has_prefix_nocase(endpoint, "http://") || has_prefix_nocase(endpoint, "https://"));
}

/* A local endpoint that looks like a URL gone wrong: another scheme
 * ("htp://", "ftp://") or an http one missing a character ("https//h",
 * "http:/h"). Taken as a directory, it would "upload" into ./htp:/h. */
static int mistyped_url(const char *endpoint)
{
  if (has_prefix_nocase(endpoint, "file://"))
    return 0;
  const char *p = endpoint;
  if (isalpha((unsigned char)*p)) {
    while (isalnum((unsigned char)*p) || *p == '+' || *p == '-' || *p == '.')
      p++;
    if (strncmp(p, "://", 3) == 0)
      return 1;
  }
  return has_prefix_nocase(endpoint, "http:") || has_prefix_nocase(endpoint, "https:") ||
         has_prefix_nocase(endpoint, "http//") || has_prefix_nocase(endpoint, "https//");
}

int culpert__archive_resolve(struct culpert__archive *a)
{
  const char *why = NULL;
  a->endpoint = flag_or_env(a->endpoint, "CULPERT_ARCHIVE");
  a->token = flag_or_env(a->token, "CULPERT_TOKEN");
  a->project = flag_or_env(a->project, "CULPERT_PROJECT");
  a->cf_access_id = flag_or_env(a->cf_access_id, "CF_ACCESS_CLIENT_ID");
  a->cf_access_secret = flag_or_env(a->cf_access_secret, "CF_ACCESS_CLIENT_SECRET");
  a->cacert = flag_or_env(a->cacert, "CULPERT_CACERT");

  /* Only a flag can be empty here: empty variables count as unset. */
  static const char *const flags[] = {"--endpoint", "--token", "--cf-access-client-id",
                                      "--cf-access-client-secret", "--cacert"};
  const char *const values[] = {a->endpoint, a->token, a->cf_access_id, a->cf_access_secret,
                                a->cacert};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    if (values[i] && values[i][0] == '\0') {
      culpert__error("%s is empty", flags[i]);
      return -EINVAL;
    }
  }
  if (!a->endpoint) {
    culpert__error("no archive endpoint: give --endpoint URL or set CULPERT_ARCHIVE");
    return -EINVAL;
  }
  if (a->project && culpert__archive_check_project(a->project, &why) < 0) {
    culpert__error("bad --project / CULPERT_PROJECT '%s': %s", a->project, why);
    return -EINVAL;
  }
  if ((a->cf_access_id == NULL) != (a->cf_access_secret == NULL)) {
    culpert__error("--cf-access-client-id and --cf-access-client-secret (CF_ACCESS_CLIENT_ID, "
                   "CF_ACCESS_CLIENT_SECRET) go together: only the %s was given",
                   a->cf_access_id ? "id" : "secret");
    return -EINVAL;
  }
  if (culpert__archive_is_local(a->endpoint)) {
    if (mistyped_url(a->endpoint)) {
      culpert__error("bad --endpoint / CULPERT_ARCHIVE '%s': not an http://, https:// or "
                     "file:// URL (write ./%s for a directory of that name)",
                     a->endpoint, a->endpoint);
      return -EINVAL;
    }
    return 0; /* token, Access headers and TLS options mean nothing locally */
  }

  const char *host = strstr(a->endpoint, "://") + 3;
  if (*host == '\0' || *host == '/' || strpbrk(a->endpoint, "?#") || has_control_or_space(host)) {
    culpert__error("bad --endpoint / CULPERT_ARCHIVE: expected http(s)://HOST[:PORT][/PATH] "
                   "without query, fragment or spaces");
    return -EINVAL;
  }
  if (!a->token) {
    culpert__error("no token for the archive at an HTTP endpoint: give --token or set "
                   "CULPERT_TOKEN");
    return -EINVAL;
  }
  if (has_control_or_space(a->token)) {
    culpert__error("bad --token / CULPERT_TOKEN: it contains a space or control character");
    return -EINVAL;
  }
  if (a->cf_access_id &&
      (has_control_or_space(a->cf_access_id) || has_control_or_space(a->cf_access_secret))) {
    culpert__error("bad --cf-access-client-id / --cf-access-client-secret: a space or control "
                   "character");
    return -EINVAL;
  }
  if (a->cacert && access(a->cacert, R_OK) != 0) {
    culpert__error("cannot read --cacert / CULPERT_CACERT '%s': %s", a->cacert, strerror(errno));
    return -EINVAL;
  }
  /* A directory (a CA path, not a bundle) would fail only in the TLS
   * handshake, after the connection. (A pipe, as from <(...), is read.) */
  struct stat st;
  if (a->cacert && stat(a->cacert, &st) == 0 && S_ISDIR(st.st_mode)) {
    culpert__error("--cacert / CULPERT_CACERT '%s' is a directory: give a CA bundle file (PEM)",
                   a->cacert);
    return -EINVAL;
  }
  return 0;
}

/* ---- input rules -------------------------------------------------------- */

int culpert__archive_check_sha(const char *sha, const char **why)
{
  size_t n = strlen(sha);
  const char *reason = NULL;
  if (n < 7 || n > 64)
    reason = "expected 7 to 64 hex digits";
  for (size_t i = 0; !reason && i < n; i++)
    if (!strchr("0123456789abcdefABCDEF", sha[i]))
      reason = "expected hex digits only (0-9, a-f)";
  if (why)
    *why = reason;
  return reason ? -EINVAL : 0;
}

/* Length of the well-formed UTF-8 sequence at s (1-4), 0 when malformed:
 * overlong forms, surrogates and code points past U+10FFFF are malformed.
 * *cp receives the code point. */
static size_t utf8_seq(const unsigned char *s, uint32_t *cp)
{
  if (s[0] < 0x80) {
    *cp = s[0];
    return 1;
  }
  size_t len;
  uint32_t c, min;
  if ((s[0] & 0xe0) == 0xc0) {
    len = 2, c = s[0] & 0x1f, min = 0x80;
  } else if ((s[0] & 0xf0) == 0xe0) {
    len = 3, c = s[0] & 0x0f, min = 0x800;
  } else if ((s[0] & 0xf8) == 0xf0) {
    len = 4, c = s[0] & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0; /* also stops at the terminating NUL */
    c = (c << 6) | (s[i] & 0x3f);
  }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
    return 0;
  *cp = c;
  return len;
}

int culpert__archive_check_branch(const char *branch, const char **why)
{
  const char *reason = NULL;
  size_t n = strlen(branch);
  if (n == 0)
    reason = "empty";
  else if (n > MAX_BRANCH_BYTES)
    reason = "longer than 255 bytes";
  for (const unsigned char *p = (const unsigned char *)branch; !reason && *p;) {
    uint32_t cp = 0;
    size_t len = utf8_seq(p, &cp);
    if (len == 0)
      reason = "not valid UTF-8";
    else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
      reason = "contains a control character";
    p += len;
  }
  if (why)
    *why = reason;
  return reason ? -EINVAL : 0;
}

int culpert__archive_check_project(const char *project, const char **why)
{
  static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  const char *reason = NULL;
  size_t n = strlen(project);
  if (n == 0 || n > 64)
    reason = "expected 1 to 64 characters";
  else if (!strchr(alnum, project[0]))
    reason = "must start with a letter or digit";
  for (size_t i = 1; !reason && i < n; i++)
    if (!strchr(alnum, project[i]) && !strchr("._-", project[i]))
      reason = "expected only A-Z a-z 0-9 . _ -";
  if (why)
    *why = reason;
  return reason ? -EINVAL : 0;
}

/* ---- growable buffers and redaction -------------------------------------- */

struct buf {
  unsigned char *p;
  size_t len, cap;
  size_t max;   /* the most it may hold */
  int overflow; /* an append went past max */
};

/* Makes room for `n` more bytes and a terminating NUL: -EFBIG (and the
 * overflow flag) past max, -ENOMEM when out of memory. */
static int buf_reserve(struct buf *b, size_t n)
{
  if (n > b->max - b->len) {
    b->overflow = 1;
    return -EFBIG;
  }
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1)
      cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p)
      return -ENOMEM;
    b->p = p;
    b->cap = cap;
  }
  return 0;
}

static int buf_append(struct buf *b, const void *data, size_t n)
{
  int rc = buf_reserve(b, n);
  if (rc < 0)
    return rc;
  memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = '\0'; /* text answers can be used as strings */
  return 0;
}

/* Appends formatted text of any length up to the buffer's max. */
static int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int buf_printf(struct buf *b, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return -EINVAL;
  int rc = buf_reserve(b, (size_t)n);
  if (rc < 0)
    return rc;
  va_start(ap, fmt);
  vsnprintf((char *)b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 0;
}

/* Whether the character at `at` joins the text on the other side of it
 * (`dir`: -1 to the left, 1 to the right; `at` is inside the string) to a
 * secret: a letter, digit or '_', or a '\'' or '-' inside a word
 * ("couldn't", "x-y"), not one that quotes or ends it. */
static int joins(const char *text, const char *at, int dir)
{
  unsigned char c = (unsigned char)*at;
  if (isalnum(c) || c == '_')
    return 1;
  if (c != '\'' && c != '-')
    return 0;
  if (dir < 0 ? at == text : at[1] == '\0')
    return 0;
  return isalnum((unsigned char)at[dir]);
}

/* Secrets shorter than this are redacted only where they stand alone. */
#define REDACT_ANYWHERE 8

char *culpert__archive_redact(const char *text, const char *const *secrets)
{
  struct buf out = {.max = SIZE_MAX / 2};
  static const char mark[] = "[redacted]";
  const char *p = text;
  if (buf_append(&out, "", 0) < 0)
    return NULL;
  while (*p) {
    size_t hit = 0;
    for (const char *const *s = secrets; s && *s && !hit; s++) {
      size_t n = strlen(*s);
      if (n == 0 || strncmp(p, *s, n) != 0)
        continue;
      /* A short secret ("t", "dev") inside a word is no leak, and
       * replacing it there left every message unreadable. */
      if (n < REDACT_ANYWHERE && ((p > text && joins(text, p - 1, -1)) || joins(text, p + n, 1)))
        continue;
      hit = n;
    }
    int rc;
    if (hit) {
      rc = buf_append(&out, mark, sizeof mark - 1);
      p += hit;
    } else {
      unsigned char c = (unsigned char)*p++;
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
        c = '?';
      rc = buf_append(&out, &c, 1);
    }
    if (rc < 0) {
      free(out.p);
      return NULL;
    }
  }
  return (char *)out.p;
}

/* The secrets of `a`, for culpert__archive_redact. */
static void secrets_of(const struct culpert__archive *a, const char *out[3])
{
  out[0] = a->token;
  out[1] = a->cf_access_secret;
  out[2] = NULL;
  if (!out[0]) {
    out[0] = out[1];
    out[1] = NULL;
  }
}

/* The endpoint as messages show it: without any user:password@ part. */
static void endpoint_label(const char *endpoint, char *out, size_t outlen)
{
  const char *scheme_end = strstr(endpoint, "://");
  const char *at = scheme_end ? strchr(scheme_end + 3, '@') : NULL;
  const char *slash = scheme_end ? strchr(scheme_end + 3, '/') : NULL;
  if (at && (!slash || at < slash))
    snprintf(out, outlen, "%.*s***%s", (int)(scheme_end + 3 - endpoint), endpoint, at);
  else
    snprintf(out, outlen, "%s", endpoint);
}

/* A URL that starts with the endpoint, as output shows it: user:password@
 * masked as endpoint_label masks it. NULL when out of memory. */
static char *url_label(const char *url)
{
  size_t n = strlen(url) + 4; /* "***" may stand for an empty "@" part */
  char *out = malloc(n);
  if (out)
    endpoint_label(url, out, n);
  return out;
}

/* ---- files ---------------------------------------------------------------- */

/* Reads a regular file of at most `max` bytes. Errors are printed naming
 * `path` (`what` says what the file is, e.g. "profile"), except a missing
 * file when `missing_ok`: then -ENOENT comes back silently. */
static int read_file(const char *path, const char *what, size_t max, int missing_ok,
                     unsigned char **data, size_t *len)
{
  int rc = 0;
  struct buf b = {.max = max};
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    rc = -errno;
    if (!(missing_ok && rc == -ENOENT))
      culpert__error("cannot open %s '%s': %s", what, path, strerror(errno));
    goto out;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    rc = -EINVAL;
    culpert__error("%s '%s' is not a regular file", what, path);
    goto out;
  }
  if (buf_append(&b, "", 0) < 0) {
    rc = -ENOMEM;
    culpert__error("out of memory reading %s '%s'", what, path);
    goto out;
  }
  for (;;) {
    unsigned char chunk[65536];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      rc = -errno;
      culpert__error("cannot read %s '%s': %s", what, path, strerror(errno));
      goto out;
    }
    if (n == 0)
      break;
    rc = buf_append(&b, chunk, (size_t)n);
    if (rc < 0) {
      culpert__error(rc == -EFBIG ? "%s '%s' is larger than %zu bytes"
                                  : "out of memory reading %s '%s' (%zu bytes)",
                     what, path, max);
      goto out;
    }
  }
  *data = b.p;
  *len = b.len;
  b.p = NULL;
out:
  if (fd >= 0)
    close(fd);
  free(b.p);
  return rc;
}

static mode_t file_mode(void)
{
  mode_t mask = umask(0);
  umask(mask);
  return 0666 & ~mask;
}

static int fsync_dir(const char *dir)
{
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int rc = fsync(fd) == 0 || errno == EINVAL ? 0 : -errno;
  close(fd);
  return rc;
}

static int write_all(int fd, const void *data, size_t len)
{
  const unsigned char *p = data;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return -errno;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

/* Writes `len` bytes to a new temporary file `<dir>/.<stem>.XXXXXX`, fsync'ed
 * and given the usual file mode; its name goes to tmp. On failure nothing is
 * left behind and an error naming `label` is printed. */
static int write_temp(const char *dir, const char *stem, const void *data, size_t len,
                      const char *label, char tmp[PATH_MAX])
{
  int rc = 0;
  int n = snprintf(tmp, PATH_MAX, "%s/.%s.XXXXXX", dir, stem);
  if (n < 0 || n >= PATH_MAX) {
    culpert__error("path too long for '%s'", label);
    return -ENAMETOOLONG;
  }
  int fd = mkstemp(tmp);
  if (fd < 0) {
    rc = -errno;
    culpert__error("cannot create a temporary file in '%s' for '%s': %s", dir, label,
                   strerror(errno));
    return rc;
  }
  rc = write_all(fd, data, len);
  if (rc == 0 && (fchmod(fd, file_mode()) != 0 || fsync(fd) != 0))
    rc = -errno;
  if (close(fd) != 0 && rc == 0)
    rc = -errno;
  if (rc < 0) {
    culpert__error("cannot write '%s': %s", label, strerror(-rc));
    unlink(tmp);
  }
  return rc;
}

/* The file a dangling symbolic link at `path` names: its target, read
 * relative to the link's directory, followed through further links until
 * a name that is not a link. A shell's redirection creates that file. */
static int dangling_link_target(const char *path, char target[PATH_MAX])
{
  char cur[PATH_MAX], next[PATH_MAX];
  struct stat st;
  snprintf(cur, sizeof cur, "%s", path);
  for (int hops = 0; hops < 40; hops++) {
    if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) {
      snprintf(target, PATH_MAX, "%s", cur);
      return 0;
    }
    ssize_t n = readlink(cur, next, sizeof next);
    if (n < 0 || (size_t)n >= sizeof next) {
      int rc = n < 0 ? -errno : -ENAMETOOLONG;
      culpert__error("cannot resolve the link '%s': %s", path, strerror(-rc));
      return rc;
    }
    next[n] = '\0';
    const char *slash = strrchr(cur, '/');
    int len = next[0] == '/' || !slash
                  ? snprintf(target, PATH_MAX, "%s", next)
                  : snprintf(target, PATH_MAX, "%.*s/%s", (int)(slash - cur), cur, next);
    if (len >= PATH_MAX) {
      culpert__error("cannot resolve the link '%s': %s", path, strerror(ENAMETOOLONG));
      return -ENAMETOOLONG;
    }
    memcpy(cur, target, (size_t)len + 1);
  }
  culpert__error("cannot resolve the link '%s': %s", path, strerror(ELOOP));
  return -ELOOP;
}

int culpert__output_target(const char *path, char target[PATH_MAX])
{
  struct stat st, link;
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  int exists = stat(path, &st) == 0;
  if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0 ||
      (exists && S_ISDIR(st.st_mode))) {
    culpert__error("-o '%s' is a directory; give a file path", path);
    return -EISDIR;
  }
  if (exists && !S_ISREG(st.st_mode)) {
    snprintf(target, PATH_MAX, "%s", path);
    return 1;
  }
  if (exists && lstat(path, &link) == 0 && S_ISLNK(link.st_mode)) {
    if (realpath(path, target) == NULL) {
      int rc = -errno;
      culpert__error("cannot resolve the link '%s': %s", path, strerror(errno));
      return rc;
    }
    return 0;
  }
  if (!exists && lstat(path, &link) == 0 && S_ISLNK(link.st_mode))
    return dangling_link_target(path, target);
  if (strlen(path) >= PATH_MAX) {
    culpert__error("path too long: '%s'", path);
    return -ENAMETOOLONG;
  }
  snprintf(target, PATH_MAX, "%s", path);
  return 0;
}

/* A device or FIFO given as the output: written through, as a shell's
 * redirection would. */
static int write_in_place(const char *path, const void *data, size_t len)
{
  int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
  int rc = fd < 0 ? -errno : write_all(fd, data, len);
  if (fd >= 0 && close(fd) != 0 && rc == 0)
    rc = -errno;
  if (rc < 0)
    culpert__error("cannot write '%s': %s", path, strerror(-rc));
  return rc;
}

int culpert__archive_write_atomic(const char *out, const void *data, size_t len)
{
  char dir[PATH_MAX], tmp[PATH_MAX], path[PATH_MAX];
  int kind = culpert__output_target(out, path);
  if (kind < 0)
    return kind;
  if (kind == 1)
    return write_in_place(path, data, len);
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
  int rc = write_temp(dir, base, data, len, path, tmp);
  if (rc < 0)
    return rc;
  if (rename(tmp, path) != 0) {
    rc = -errno;
    culpert__error("cannot write '%s': %s", path, strerror(errno));
    unlink(tmp);
    return rc;
  }
  fsync_dir(dir); /* the data is safe already; the name is best effort */
  return 0;
}

/* 0 when data is one or more complete gzip members and nothing else. */
static int gzip_complete(const unsigned char *data, size_t len)
{
  int rc = -EINVAL;
  unsigned long long inflated = 0;
  unsigned char scratch[65536];
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (len < 18 || data[0] != 0x1f || data[1] != 0x8b || len > UINT_MAX)
    return -EINVAL;
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    return -ENOMEM;
  zs.next_in = (Bytef *)data;
  zs.avail_in = (uInt)len;
  for (;;) {
    zs.next_out = scratch;
    zs.avail_out = sizeof scratch;
    int z = inflate(&zs, Z_NO_FLUSH);
    inflated += sizeof scratch - zs.avail_out;
    if (inflated > MAX_INFLATED)
      break;
    if (z == Z_STREAM_END) {
      if (zs.avail_in == 0) {
        rc = 0;
        break;
      }
      if (inflateReset(&zs) != Z_OK)
        break;
    } else if (z != Z_OK) {
      break; /* Z_BUF_ERROR here means the input ended inside a member */
    }
  }
  inflateEnd(&zs);
  return rc;
}

/* ---- time ------------------------------------------------------------------ */

static int64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double mono_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "2026-11-30T07:54:55.123456789Z" */
static void iso_time_ns(int64_t ns, char out[40])
{
  time_t sec = (time_t)(ns / 1000000000);
  struct tm tm;
  gmtime_r(&sec, &tm);
  size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + n, 40 - n, ".%09ldZ", (long)(ns % 1000000000));
}

static void sleep_s(double s)
{
  struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* ---- JSON: the upload description ------------------------------------------ */

static int json_string(struct buf *b, const char *s)
{
  int rc = buf_append(b, "\"", 1);
  for (; rc == 0 && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      rc = buf_printf(b, "\\%c", c);
    else if (c < 0x20 || c == 0x7f)
      rc = buf_printf(b, "\\u%04x", c);
    else
      rc = buf_append(b, &c, 1);
  }
  return rc ? rc : buf_append(b, "\"", 1);
}

/* {"project":..,"sha":..,"branch":..,"size":..,"uploaded_at":".."} in the
 * worker's key order, plus "uploaded_at_ns" when `with_ns` (the index). */
static int describe_upload(struct buf *b, const char *project, const char *sha, const char *branch,
                           size_t size, int64_t ns, int with_ns)
{
  char when[40];
  iso_time_ns(ns, when);
  int rc = buf_append(b, "{\"project\":", 11);
  rc = rc ? rc : json_string(b, project);
  rc = rc ? rc : buf_printf(b, ",\"sha\":\"%s\",\"branch\":", sha);
  rc = rc ? rc : json_string(b, branch);
  rc = rc ? rc : buf_printf(b, ",\"size\":%zu,\"uploaded_at\":\"%s\"", size, when);
  if (with_ns)
    rc = rc ? rc : buf_printf(b, ",\"uploaded_at_ns\":%lld", (long long)ns);
  return rc ? rc : buf_append(b, "}", 1);
}

/* One index record, as read back. */
struct record {
  char sha[65];
  char branch[MAX_BRANCH_BYTES + 1];
  long long size;
  long long ns;
  int have; /* bit mask of the fields seen: 1 sha, 2 branch, 4 size, 8 ns */
};

static const char *skip_ws(const char *p)
{
  while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
    p++;
  return p;
}

/* Parses a JSON string at p (at the opening quote) into out (outlen bytes,
 * NUL-terminated). Returns the position after the closing quote, or NULL
 * when malformed or too long. \u escapes are decoded to UTF-8. */
static const char *json_read_string(const char *p, char *out, size_t outlen)
{
  size_t n = 0;
  if (*p++ != '"')
    return NULL;
  while (*p != '"') {
    unsigned char c = (unsigned char)*p++;
    char enc[4];
    size_t enc_len = 1;
    if (c == '\0')
      return NULL;
    enc[0] = (char)c;
    if (c == '\\') {
      c = (unsigned char)*p++;
      switch (c) {
      case '"':
      case '\\':
      case '/':
        enc[0] = (char)c;
        break;
      case 'b':
        enc[0] = '\b';
        break;
      case 'f':
        enc[0] = '\f';
        break;
      case 'n':
        enc[0] = '\n';
        break;
      case 'r':
        enc[0] = '\r';
        break;
      case 't':
        enc[0] = '\t';
        break;
      case 'u': {
        static const char hex[] = "0123456789abcdef";
        unsigned cp = 0;
        for (int i = 0; i < 4; i++) {
          char h = *p++;
          const char *d = h ? strchr(hex, h | 0x20) : NULL;
          if (!d)
            return NULL;
          cp = cp * 16 + (unsigned)(d - hex);
        }
        if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff))
          return NULL; /* no NULs; surrogate pairs never occur in our records */
        if (cp < 0x80) {
          enc[0] = (char)cp;
        } else if (cp < 0x800) {
          enc[0] = (char)(0xc0 | (cp >> 6));
          enc[1] = (char)(0x80 | (cp & 0x3f));
          enc_len = 2;
        } else {
          enc[0] = (char)(0xe0 | (cp >> 12));
          enc[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
          enc[2] = (char)(0x80 | (cp & 0x3f));
          enc_len = 3;
        }
        break;
      }
      default:
        return NULL;
      }
    }
    if (n + enc_len >= outlen)
      return NULL;
    memcpy(out + n, enc, enc_len);
    n += enc_len;
  }
  out[n] = '\0';
  return p + 1;
}

/* Parses an index record (a flat JSON object written by describe_upload).
 * Unknown keys with string or integer values are skipped. */
static int parse_record(const char *text, struct record *r)
{
  char key[32], scratch[MAX_BRANCH_BYTES + 1];
  const char *p = skip_ws(text);
  memset(r, 0, sizeof *r);
  if (*p++ != '{')
    return -EINVAL;
  for (p = skip_ws(p); *p != '}';) {
    p = json_read_string(p, key, sizeof key);
    if (!p || *(p = skip_ws(p)) != ':')
      return -EINVAL;
    p = skip_ws(p + 1);
    if (*p == '"') {
      int is_sha = strcmp(key, "sha") == 0, is_branch = strcmp(key, "branch") == 0;
      char *dst = is_sha ? r->sha : is_branch ? r->branch : scratch;
      size_t cap = is_sha ? sizeof r->sha : is_branch ? sizeof r->branch : sizeof scratch;
      p = json_read_string(p, dst, cap);
      if (!p)
        return -EINVAL;
      r->have |= is_sha ? 1 : is_branch ? 2 : 0;
    } else {
      char *end = NULL;
      errno = 0;
      long long v = strtoll(p, &end, 10);
      if (end == p || errno != 0 || v < 0)
        return -EINVAL;
      p = end;
      if (strcmp(key, "size") == 0)
        r->size = v, r->have |= 4;
      else if (strcmp(key, "uploaded_at_ns") == 0)
        r->ns = v, r->have |= 8;
    }
    p = skip_ws(p);
    if (*p == ',')
      p = skip_ws(p + 1);
    else if (*p != '}')
      return -EINVAL;
  }
  if (*skip_ws(p + 1) != '\0' || r->have != 15)
    return -EINVAL;
  return 0;
}

/* ---- the local directory archive -------------------------------------------- */

/* Paths of one project in a local archive. */
struct local {
  char root[PATH_MAX];
  char project[PATH_MAX];
  char profiles[PATH_MAX];
  char index[PATH_MAX];
  char lock[PATH_MAX];
};

static int local_paths(const struct culpert__archive *a, struct local *l)
{
  const char *ep = a->endpoint;
  const char *project = a->project ? a->project : DEFAULT_PROJECT;
  if (has_prefix_nocase(ep, "file://")) {
    /* file:///abs/path or file://localhost/abs/path, percent-decoded */
    const char *p = ep + 7;
    if (has_prefix_nocase(p, "localhost/"))
      p += 9;
    if (*p != '/') {
      culpert__error("--endpoint '%s': a file URL must be file:///absolute/path", ep);
      return -EINVAL;
    }
    size_t n = 0;
    for (; *p && n + 1 < sizeof l->root; p++) {
      unsigned hi, lo;
      const char *hex = "0123456789abcdef";
      if (*p == '%' && p[1] && p[2] && strchr(hex, p[1] | 0x20) && strchr(hex, p[2] | 0x20)) {
        hi = (unsigned)(strchr(hex, p[1] | 0x20) - hex);
        lo = (unsigned)(strchr(hex, p[2] | 0x20) - hex);
        if (hi == 0 && lo == 0) {
          culpert__error("--endpoint '%s': %%00 in a file URL", ep);
          return -EINVAL;
        }
        l->root[n++] = (char)(hi * 16 + lo);
        p += 2;
      } else {
        l->root[n++] = *p;
      }
    }
    if (*p) {
      culpert__error("--endpoint '%s': path too long", ep);
      return -ENAMETOOLONG;
    }
    l->root[n] = '\0';
  } else if (*ep == '\0' || snprintf(l->root, sizeof l->root, "%s", ep) >= (int)sizeof l->root) {
    culpert__error("--endpoint '%s': not a usable directory path", ep);
    return -EINVAL;
  }
  int t = snprintf(l->project, PATH_MAX, "%s/%s", l->root, project);
  int u = snprintf(l->profiles, PATH_MAX, "%s/profiles", l->project);
  int v = snprintf(l->index, PATH_MAX, "%s/index", l->project);
  int w = snprintf(l->lock, PATH_MAX, "%s/.lock", l->project);
  if (t >= PATH_MAX || u >= PATH_MAX || v >= PATH_MAX || w >= PATH_MAX) {
    culpert__error("--endpoint '%s': path too long", ep);
    return -ENAMETOOLONG;
  }
  return 0;
}

/* mkdir -p: creates `path` and its missing parents. */
static int make_dirs(const char *path)
{
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1;; p++) {
    if (*p != '/' && *p != '\0')
      continue;
    char saved = *p;
    *p = '\0';
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST) {
      int rc = -errno;
      culpert__error("cannot create directory '%s': %s", tmp, strerror(errno));
      return rc;
    }
    if (saved == '\0')
      return 0;
    *p = saved;
  }
}

static int local_upload(const struct culpert__archive *a, const char *sha, const char *branch,
                        const unsigned char *data, size_t len, char **answer)
{
  int rc, lock_fd = -1;
  struct local l;
  char blob_tmp[PATH_MAX] = "", rec_tmp[PATH_MAX] = "", blob[PATH_MAX], rec[PATH_MAX];
  struct buf record = {.max = MAX_RECORD_BYTES}, ans = {.max = MAX_RECORD_BYTES};
  const char *project = a->project ? a->project : DEFAULT_PROJECT;

  rc = local_paths(a, &l);
  if (rc < 0)
    goto out;
  if (snprintf(blob, sizeof blob, "%s/%s.pb.gz", l.profiles, sha) >= (int)sizeof blob ||
      snprintf(rec, sizeof rec, "%s/%s.json", l.index, sha) >= (int)sizeof rec) {
    culpert__error("--endpoint '%s': path too long", a->endpoint);
    rc = -ENAMETOOLONG;
    goto out;
  }
  if ((rc = make_dirs(l.profiles)) < 0 || (rc = make_dirs(l.index)) < 0)
    goto out;
  rc = write_temp(l.profiles, sha, data, len, blob, blob_tmp);
  if (rc < 0) {
    blob_tmp[0] = '\0';
    goto out;
  }

  lock_fd = open(l.lock, O_RDWR | O_CREAT | O_CLOEXEC, file_mode());
  if (lock_fd < 0 || flock(lock_fd, LOCK_EX) != 0) {
    rc = -errno;
    culpert__error("cannot lock '%s': %s", l.lock, strerror(errno));
    goto out;
  }
  /* Under the lock, so upload times follow the order uploads become visible. */
  int64_t ns = now_ns();
  if ((rc = describe_upload(&record, project, sha, branch, len, ns, 1)) < 0 ||
      (rc = describe_upload(&ans, project, sha, branch, len, ns, 0)) < 0) {
    culpert__error("out of memory describing the upload");
    goto out;
  }
  if ((rc = buf_append(&record, "\n", 1)) < 0)
    goto out;
  rc = write_temp(l.index, sha, record.p, record.len, rec, rec_tmp);
  if (rc < 0) {
    rec_tmp[0] = '\0';
    goto out;
  }
  /* The bytes first: an index record only ever names a complete blob. */
  if (rename(blob_tmp, blob) != 0 || (blob_tmp[0] = '\0', rename(rec_tmp, rec) != 0)) {
    rc = -errno;
    culpert__error("cannot store the upload in '%s': %s", l.project, strerror(errno));
    goto out;
  }
  rec_tmp[0] = '\0';
  fsync_dir(l.profiles);
  fsync_dir(l.index);
  *answer = (char *)ans.p;
  ans.p = NULL;
out:
  if (blob_tmp[0])
    unlink(blob_tmp);
  if (rec_tmp[0])
    unlink(rec_tmp);
  if (lock_fd >= 0)
    close(lock_fd); /* releases the lock */
  free(record.p);
  free(ans.p);
  return rc;
}

/* Reads and checks the index record `<index>/<name>`. */
static int read_record(const char *index, const char *name, struct record *r)
{
  char path[PATH_MAX];
  unsigned char *text = NULL;
  size_t len = 0;
  if (snprintf(path, sizeof path, "%s/%s", index, name) >= (int)sizeof path)
    return -ENAMETOOLONG;
  int rc = read_file(path, "index record", MAX_RECORD_BYTES, 1, &text, &len);
  if (rc < 0)
    return rc == -ENOENT ? -ENOENT : -EIO;
  if (strlen((char *)text) != len || parse_record((char *)text, r) < 0 ||
      culpert__archive_check_sha(r->sha, NULL) < 0) {
    culpert__error("corrupt index record '%s'", path);
    rc = -EIO;
  }
  free(text);
  return rc;
}

/* 1 when `name` is "<7-64 hex>.json". */
static int is_record_name(const char *name)
{
  size_t n = strlen(name);
  char sha[65];
  if (n < 12 || n > 69 || strcmp(name + n - 5, ".json") != 0)
    return 0;
  snprintf(sha, sizeof sha, "%.*s", (int)(n - 5), name);
  return culpert__archive_check_sha(sha, NULL) == 0;
}

static int local_pull(const struct culpert__archive *a, const char *sha, const char *latest_of,
                      unsigned char **data, size_t *len, char found_sha[65])
{
  int rc, lock_fd = -1;
  struct local l;
  struct record best;
  DIR *dir = NULL;
  char blob[PATH_MAX];
  struct stat st;

  memset(&best, 0, sizeof best);
  rc = local_paths(a, &l);
  if (rc < 0)
    goto out;
  if (stat(l.root, &st) != 0 || !S_ISDIR(st.st_mode)) {
    culpert__error("--endpoint '%s': no archive directory at '%s'", a->endpoint, l.root);
    rc = -EINVAL;
    goto out;
  }
  lock_fd = open(l.lock, O_RDONLY | O_CLOEXEC);
  if (lock_fd < 0) {
    rc = errno == ENOENT ? -ENOENT : -errno; /* ENOENT: nothing uploaded to this project */
    if (rc != -ENOENT)
      culpert__error("cannot open '%s': %s", l.lock, strerror(errno));
    goto out;
  }
  if (flock(lock_fd, LOCK_SH) != 0) {
    rc = -errno;
    culpert__error("cannot lock '%s': %s", l.lock, strerror(errno));
    goto out;
  }

  if (sha) {
    char name[80];
    snprintf(name, sizeof name, "%s.json", sha);
    rc = read_record(l.index, name, &best);
    if (rc < 0)
      goto out;
  } else {
    dir = opendir(l.index);
    if (!dir) {
      rc = errno == ENOENT ? -ENOENT : -errno;
      if (rc != -ENOENT)
        culpert__error("cannot read '%s': %s", l.index, strerror(errno));
      goto out;
    }
    struct dirent *de;
    int found = 0;
    while ((de = readdir(dir)) != NULL) {
      struct record r;
      if (!is_record_name(de->d_name))
        continue;
      rc = read_record(l.index, de->d_name, &r);
      if (rc == -ENOENT)
        continue;
      if (rc < 0)
        goto out;
      if (strcmp(r.branch, latest_of) != 0)
        continue;
      /* newest by upload time; equal times go to the greater SHA */
      if (!found || r.ns > best.ns || (r.ns == best.ns && strcmp(r.sha, best.sha) > 0))
        best = r, found = 1;
    }
    rc = found ? 0 : -ENOENT;
    if (rc < 0)
      goto out;
  }
  if (snprintf(blob, sizeof blob, "%s/%s.pb.gz", l.profiles, best.sha) >= (int)sizeof blob) {
    rc = -ENAMETOOLONG;
    goto out;
  }
  rc = read_file(blob, "archived profile", CULPERT_ARCHIVE_MAX_PROFILE, 0, data, len);
  if (rc < 0)
    goto out;
  snprintf(found_sha, 65, "%s", best.sha);
  if (a->verbose)
    fprintf(stderr, "culpert: read %s (%zu bytes, branch '%s')\n", blob, *len, best.branch);
out:
  if (dir)
    closedir(dir);
  if (lock_fd >= 0)
    close(lock_fd);
  return rc;
}

/* ---- HTTP --------------------------------------------------------------------- */

/* A final HTTP answer. */
struct http_answer {
  long status;
  struct buf body;
  char *location; /* of a redirect, redacted */
  char sha[65];   /* X-Culpert-Sha when it holds a valid SHA, else "" */
  int attempts;
};

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
  struct buf *b = ctx;
  return buf_append(b, data, size * n) == 0 ? size * n : 0; /* 0 aborts the transfer */
}

/* Transport errors that a retry cannot fix. */
static int curl_permanent(CURLcode c)
{
  switch (c) {
  case CURLE_UNSUPPORTED_PROTOCOL:
  case CURLE_URL_MALFORMAT:
  case CURLE_NOT_BUILT_IN:
  case CURLE_OUT_OF_MEMORY:
  case CURLE_WRITE_ERROR:
  case CURLE_READ_ERROR:
  case CURLE_BAD_FUNCTION_ARGUMENT:
  case CURLE_ABORTED_BY_CALLBACK:
  case CURLE_TOO_MANY_REDIRECTS:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_ENGINE_NOTFOUND:
  case CURLE_SSL_ENGINE_SETFAILED:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
  case CURLE_SSL_INVALIDCERTSTATUS:
  case CURLE_FILESIZE_EXCEEDED:
    return 1;
  default:
    return 0;
  }
}

/* Backoff before retry number `attempt` (0 based): 0.5 s doubling up to
 * 30 s, with "equal jitter" (half fixed, half random) so that CI jobs
 * failing together do not retry together. */
static double backoff_s(int attempt)
{
  double d = BACKOFF_BASE_S;
  for (int i = 0; i < attempt && d < BACKOFF_CAP_S; i++)
    d *= 2;
  if (d > BACKOFF_CAP_S)
    d = BACKOFF_CAP_S;
  uint32_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
    r = (uint32_t)now_ns() ^ (uint32_t)getpid();
  return d / 2 + d / 2 * ((double)r / 4294967296.0);
}

/* The formatted text with the secrets redacted; NULL when out of memory. */
static char *vformat_redacted(const struct culpert__archive *a, const char *fmt, va_list ap)
{
  char *line = NULL;
  const char *secrets[3];
  if (vasprintf(&line, fmt, ap) < 0)
    return NULL;
  secrets_of(a, secrets);
  char *safe = culpert__archive_redact(line, secrets);
  free(line);
  return safe;
}

static void print_redacted(const struct culpert__archive *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A verbose log line on stderr, "culpert: ...", with the secrets redacted. */
static void print_redacted(const struct culpert__archive *a, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  char *safe = vformat_redacted(a, fmt, ap);
  va_end(ap);
  fprintf(stderr, "culpert: %s\n", safe ? safe : "(out of memory)");
  free(safe);
}

static void error_redacted(const struct culpert__archive *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* culpert__error with the secrets redacted. */
static void error_redacted(const struct culpert__archive *a, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  char *safe = vformat_redacted(a, fmt, ap);
  va_end(ap);
  culpert__error("%s", safe ? safe : "(out of memory)");
  free(safe);
}

/* Prints the error of a transport failure that ends the operation. */
static void report_transport(const struct culpert__archive *a, CURLcode c, const char *errbuf,
                             int attempts, int body_overflow, size_t max_body)
{
  char ep[1024];
  const char *detail = errbuf[0] ? errbuf : curl_easy_strerror(c);
  endpoint_label(a->endpoint, ep, sizeof ep);
  switch (c) {
  case CURLE_OPERATION_TIMEDOUT:
    error_redacted(a,
                   "the archive at %s timed out: %s (%d attempt(s); limits --timeout %g s, "
                   "--connect-timeout %g s)",
                   ep, detail, attempts, a->timeout_s, a->connect_timeout_s);
    break;
  case CURLE_COULDNT_CONNECT:
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
    error_redacted(a, "cannot reach the archive at %s: %s (%d attempt(s))", ep, detail, attempts);
    break;
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CONNECT_ERROR:
    error_redacted(a,
                   "TLS with the archive at %s failed: %s (CA bundle: --cacert / "
                   "CULPERT_CACERT)",
                   ep, detail);
    break;
  case CURLE_PARTIAL_FILE:
  case CURLE_RECV_ERROR:
  case CURLE_GOT_NOTHING:
    error_redacted(a, "the answer from the archive at %s was cut short: %s (%d attempt(s))", ep,
                   detail, attempts);
    break;
  case CURLE_WRITE_ERROR:
    if (body_overflow) {
      error_redacted(a, "the answer from the archive at %s is larger than %zu bytes", ep, max_body);
      break;
    }
    /* fall through */
  default:
    error_redacted(a, "request to the archive at %s failed: %s (%d attempt(s))", ep, detail,
                   attempts);
    break;
  }
}

/* Sends one request, retrying transport errors, 429 and 5xx with backoff
 * within the --timeout budget. Returns 0 with the final answer (any status:
 * the caller judges it), or a negative errno after printing why no answer
 * came. `body` is the POST body, NULL for a GET. */
static int http_request(const struct culpert__archive *a, const char *url,
                        const unsigned char *body, size_t body_len, size_t max_answer,
                        struct http_answer *ans)
{
  int rc = 0;
  CURL *h = NULL;
  struct curl_slist *headers = NULL, *grown;
  struct buf auth = {.max = 65536}, cf = {.max = 65536};
  char errbuf[CURL_ERROR_SIZE];
  double deadline = mono_s() + a->timeout_s;
  const char *method = body ? "POST" : "GET";
  char *shown_url = NULL; /* for --verbose: the URL with its credentials masked */

  memset(ans, 0, sizeof *ans);
  ans->body.max = max_answer;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(h = curl_easy_init())) {
    culpert__error("cannot initialise libcurl");
    rc = -ENOMEM;
    goto out;
  }
  if (a->verbose && !(shown_url = url_label(url))) {
    culpert__error("out of memory building the request");
    rc = -ENOMEM;
    goto out;
  }
  /* Header lines with secrets live in buffers wiped before they are freed. */
  if (buf_printf(&auth, "Authorization: Bearer %s", a->token) < 0 ||
      !(headers = curl_slist_append(NULL, (char *)auth.p)) ||
      !(grown = curl_slist_append(headers, "Expect:")) || !(headers = grown)) {
    culpert__error("out of memory building the request");
    rc = -ENOMEM;
    goto out;
  }
  if (body && (!(grown = curl_slist_append(headers, "Content-Type: application/octet-stream")) ||
               !(headers = grown))) {
    culpert__error("out of memory building the request");
    rc = -ENOMEM;
    goto out;
  }
  if (a->cf_access_id &&
      (buf_printf(&cf, "CF-Access-Client-Secret: %s", a->cf_access_secret) < 0 ||
       !(grown = curl_slist_append(headers, (char *)cf.p)) || !(headers = grown))) {
    culpert__error("out of memory building the request");
    rc = -ENOMEM;
    goto out;
  }
  if (a->cf_access_id) {
    char line[4096];
    snprintf(line, sizeof line, "CF-Access-Client-Id: %s", a->cf_access_id);
    if (!(grown = curl_slist_append(headers, line)) || !(headers = grown)) {
      culpert__error("out of memory building the request");
      rc = -ENOMEM;
      goto out;
    }
  }

  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "culpert/" CULPERT_VERSION_STRING);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L); /* a login redirect is an error */
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
  if (a->cacert)
    curl_easy_setopt(h, CURLOPT_CAINFO, a->cacert);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &ans->body);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  if (body) {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
  } else {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  }

  CURLcode c = CURLE_OK;
  for (int attempt = 0;; attempt++) {
    double left = deadline - mono_s();
    long left_ms = left > 0.001 ? (long)(left * 1000) : 1;
    double connect = a->connect_timeout_s < left ? a->connect_timeout_s : left;
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, left_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect > 0.001 ? (long)(connect * 1000) : 1L);
    ans->body.len = 0;
    ans->body.overflow = 0;
    ans->status = 0;
    errbuf[0] = '\0';
    if (a->verbose) {
      print_redacted(a, "> %s %s (attempt %d of %d)", method, shown_url, attempt + 1,
                     a->retries + 1);
      print_redacted(a, "> Authorization: Bearer [redacted]");
      if (a->cf_access_id)
        print_redacted(a, "> CF-Access-Client-Id: %s, CF-Access-Client-Secret: [redacted]",
                       a->cf_access_id);
      if (body)
        print_redacted(a, "> Content-Type: application/octet-stream, %zu bytes", body_len);
    }
    double started = mono_s();
    c = curl_easy_perform(h);
    ans->attempts = attempt + 1;
    curl_off_t retry_after = 0;
    if (c == CURLE_OK) {
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &ans->status);
      curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &retry_after);
      if (a->verbose)
        print_redacted(a, "< HTTP %ld, %zu bytes in %.2f s", ans->status, ans->body.len,
                       mono_s() - started);
    } else if (a->verbose) {
      print_redacted(a, "< no answer: %s", errbuf[0] ? errbuf : curl_easy_strerror(c));
    }

    int retryable = c == CURLE_OK ? ans->status == 429 || (ans->status >= 500 && ans->status <= 599)
                                  : !curl_permanent(c);
    if (!retryable || attempt >= a->retries)
      break;
    double delay = backoff_s(attempt);
    if (c == CURLE_OK && retry_after > 0)
      delay = retry_after < CULPERT_ARCHIVE_RETRY_AFTER_CAP_S
                  ? (double)retry_after
                  : (double)CULPERT_ARCHIVE_RETRY_AFTER_CAP_S;
    if (mono_s() + delay >= deadline) {
      if (a->verbose)
        print_redacted(a, "no retry: waiting %.1f s would pass --timeout %g s", delay,
                       a->timeout_s);
      break;
    }
    if (a->verbose && c == CURLE_OK)
      print_redacted(a, "retrying in %.2f s after HTTP %ld%s", delay, ans->status,
                     retry_after > 0 ? " (Retry-After)" : "");
    else if (a->verbose)
      print_redacted(a, "retrying in %.2f s after a transport error", delay);
    sleep_s(delay);
  }

  if (c != CURLE_OK) {
    report_transport(a, c, errbuf, ans->attempts, ans->body.overflow, max_answer);
    rc = c == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
    goto out;
  }
  struct curl_header *sha_header = NULL;
  if (curl_easy_header(h, "X-Culpert-Sha", 0, CURLH_HEADER, -1, &sha_header) == CURLHE_OK &&
      strlen(sha_header->value) < sizeof ans->sha &&
      culpert__archive_check_sha(sha_header->value, NULL) == 0)
    snprintf(ans->sha, sizeof ans->sha, "%s", sha_header->value);
  if (ans->status >= 300 && ans->status < 400) {
    char *loc = NULL;
    const char *secrets[3];
    secrets_of(a, secrets);
    curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &loc);
    ans->location = culpert__archive_redact(loc ? loc : "(no Location)", secrets);
  }
out:
  if (auth.p)
    explicit_bzero(auth.p, auth.cap);
  if (cf.p)
    explicit_bzero(cf.p, cf.cap);
  free(auth.p);
  free(cf.p);
  free(shown_url);
  curl_slist_free_all(headers); /* libcurl's copies; wiped above is what we own */
  if (h)
    curl_easy_cleanup(h);
  if (rc < 0) {
    free(ans->body.p);
    ans->body.p = NULL;
  }
  return rc;
}

/* The "error" text of a JSON error answer, else the start of the body;
 * redacted, cut to MAX_SERVER_MESSAGE bytes. NULL when the body is empty. */
static char *server_message(const struct culpert__archive *a, const struct buf *body)
{
  char text[MAX_SERVER_MESSAGE + 1];
  const char *secrets[3];
  if (!body->p || body->len == 0)
    return NULL;
  const char *s = (const char *)body->p;
  const char *key = strstr(s, "\"error\"");
  text[0] = '\0';
  if (*skip_ws(s) == '{' && key) {
    const char *p = skip_ws(key + 7);
    if (*p == ':' && json_read_string(skip_ws(p + 1), text, sizeof text) == NULL)
      snprintf(text, sizeof text, "%.*s", MAX_SERVER_MESSAGE, skip_ws(p + 1));
  }
  if (!text[0])
    snprintf(text, sizeof text, "%.*s",
             (int)(body->len < MAX_SERVER_MESSAGE ? body->len : MAX_SERVER_MESSAGE), s);
  for (char *c = text; *c; c++)
    if (*c == '\n' || *c == '\r' || *c == '\t')
      *c = ' ';
  secrets_of(a, secrets);
  return culpert__archive_redact(text, secrets);
}

/* The end of the JSON value (RFC 8259) that starts at p, or NULL when none
 * does or it nests deeper than `depth`. Only the syntax is checked. */
static const char *json_skip_value(const char *p, int depth)
{
  if (depth <= 0)
    return NULL;
  if (*p == '"') {
    for (p++; *p != '"'; p++) {
      if ((unsigned char)*p < 0x20)
        return NULL; /* a control character, or the end of the text */
      if (*p == '\\') {
        p++;
        if (*p == 'u') {
          for (int i = 0; i < 4; i++)
            if (!isxdigit((unsigned char)*++p))
              return NULL;
        } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
          return NULL;
        }
      }
    }
    return p + 1;
  }
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = skip_ws(p + 1);
    if (*p == close)
      return p + 1;
    for (;;) {
      if (close == '}') {
        if (*p != '"' || !(p = json_skip_value(p, depth - 1)) || *(p = skip_ws(p)) != ':')
          return NULL;
        p = skip_ws(p + 1);
      }
      if (!(p = json_skip_value(p, depth - 1)))
        return NULL;
      p = skip_ws(p);
      if (*p == close)
        return p + 1;
      if (*p != ',')
        return NULL;
      p = skip_ws(p + 1);
    }
  }
  static const char *const literals[] = {"true", "false", "null"};
  for (size_t i = 0; i < sizeof literals / sizeof literals[0]; i++)
    if (strncmp(p, literals[i], strlen(literals[i])) == 0)
      return p + strlen(literals[i]);
  /* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
  const char *start = p;
  if (*p == '-')
    p++;
  if (*p == '0')
    p++;
  else if (*p >= '1' && *p <= '9')
    while (isdigit((unsigned char)*p))
      p++;
  else
    return NULL;
  if (*p == '.') {
    if (!isdigit((unsigned char)*++p))
      return NULL;
    while (isdigit((unsigned char)*p))
      p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-')
      p++;
    if (!isdigit((unsigned char)*p))
      return NULL;
    while (isdigit((unsigned char)*p))
      p++;
  }
  return p > start ? p : NULL;
}

/* 1 when the body is one JSON object and nothing else but white space. */
static int json_object(const struct buf *body)
{
  const char *s = body->p ? (const char *)body->p : "";
  if (strlen(s) != body->len)
    return 0; /* a NUL inside */
  s = skip_ws(s);
  const char *end = *s == '{' ? json_skip_value(s, MAX_JSON_DEPTH) : NULL;
  return end && *skip_ws(end) == '\0';
}

/* Prints why a final HTTP answer is an error. `doing` is e.g. "upload". */
static void report_status(const struct culpert__archive *a, const struct http_answer *ans,
                          const char *doing, const char *file)
{
  char ep[1024], detail[MAX_SERVER_MESSAGE + 16] = "";
  char *msg = server_message(a, &ans->body);
  long st = ans->status;
  endpoint_label(a->endpoint, ep, sizeof ep);
  if (msg)
    snprintf(detail, sizeof detail, ": %s", msg);
  if (st == 401)
    error_redacted(a,
                   "token rejected by the archive at %s (HTTP 401%s); check --token / "
                   "CULPERT_TOKEN",
                   ep, detail);
  else if (st == 403)
    error_redacted(a,
                   "%s refused by the archive at %s (HTTP 403%s); a read-only token, or "
                   "Cloudflare Access (--cf-access-client-id/--cf-access-client-secret)?",
                   doing, ep, detail);
  else if (st == 413)
    error_redacted(a, "'%s' is larger than the archive at %s accepts (HTTP 413%s)", file, ep,
                   detail);
  else if (st == 404)
    error_redacted(a,
                   "no archive API at %s (HTTP 404%s); --endpoint must be the archive's base "
                   "URL",
                   ep, detail);
  else if (st >= 300 && st < 400)
    error_redacted(a,
                   "the archive at %s redirected to %s (HTTP %ld); behind Cloudflare Access? "
                   "give --cf-access-client-id and --cf-access-client-secret",
                   ep, ans->location ? ans->location : "?", st);
  else if (st == 429 || st >= 500)
    error_redacted(a, "%s failed: the archive at %s answered HTTP %ld%s after %d attempt(s)", doing,
                   ep, st, detail, ans->attempts);
  else
    error_redacted(a, "%s failed: the archive at %s answered HTTP %ld%s", doing, ep, st, detail);
  free(msg);
}

/* <endpoint>/v1/profiles/<tail>?<query>, the endpoint's trailing slashes
 * dropped; query values are percent-encoded by the caller. The URL is as
 * long as its parts make it: a 255-byte branch alone encodes to 765. */
static char *profiles_url(const char *endpoint, const char *tail, const char *query)
{
  static const char route[] = "/v1/profiles/";
  size_t n = strlen(endpoint);
  while (n > 0 && endpoint[n - 1] == '/')
    n--;
  struct buf b = {.max = n + sizeof route + strlen(tail) + 1 + strlen(query)};
  if (buf_append(&b, endpoint, n) < 0 || buf_append(&b, route, sizeof route - 1) < 0 ||
      buf_append(&b, tail, strlen(tail)) < 0 ||
      (query[0] && (buf_append(&b, "?", 1) < 0 || buf_append(&b, query, strlen(query)) < 0))) {
    free(b.p);
    return NULL;
  }
  return (char *)b.p;
}

/* Whether body is a JSON object whose "error" string begins with prefix. */
static int json_error_starts(const char *body, const char *prefix)
{
  const char *p = strstr(body, "\"error\"");
  if (p == NULL)
    return 0;
  p += strlen("\"error\"");
  p += strspn(p, " \t\r\n");
  if (*p++ != ':')
    return 0;
  p += strspn(p, " \t\r\n");
  return *p == '"' && strncmp(p + 1, prefix, strlen(prefix)) == 0;
}

/* Appends "&name=<value percent-encoded>" (no '&' when q is empty). */
static int query_add(struct buf *q, const char *name, const char *value)
{
  char *enc = curl_easy_escape(NULL, value, 0);
  if (!enc)
    return -ENOMEM;
  int rc = buf_printf(q, "%s%s=", q->len ? "&" : "", name);
  rc = rc ? rc : buf_append(q, enc, strlen(enc));
  curl_free(enc);
  return rc;
}

static int http_upload(const struct culpert__archive *a, const char *file, const char *sha,
                       const char *branch, const unsigned char *data, size_t len, char **answer)
{
  int rc;
  struct buf q = {.max = 65536};
  struct http_answer ans = {0};
  char *url = NULL;
  const char *secrets[3];

  if ((rc = buf_append(&q, "", 0)) < 0 || (rc = query_add(&q, "branch", branch)) < 0 ||
      (a->project && (rc = query_add(&q, "project", a->project)) < 0) ||
      !(url = profiles_url(a->endpoint, sha, (char *)q.p))) {
    culpert__error("out of memory building the request URL");
    rc = -ENOMEM;
    goto out;
  }
  rc = http_request(a, url, data, len, MAX_ANSWER_BYTES, &ans);
  if (rc < 0)
    goto out;
  if (ans.status < 200 || ans.status > 299) {
    report_status(a, &ans, "upload", file);
    rc = -EIO;
    goto out;
  }
  /* The archive answers an upload 201 with a JSON description; any other
   * success (a proxy, a static site, a catch-all handler) stored nothing
   * culpert can pull back, so it is not reported as an upload. */
  if (ans.status != 201 || !json_object(&ans.body)) {
    char ep[1024];
    char *msg = server_message(a, &ans.body);
    endpoint_label(a->endpoint, ep, sizeof ep);
    error_redacted(a,
                   "upload of '%s' not confirmed: %s answered HTTP %ld%s; the endpoint may not "
                   "be a culpert archive (check --endpoint / CULPERT_ARCHIVE)%s%s",
                   file, ep, ans.status,
                   ans.status == 201 ? " with a body that is not a JSON object"
                                     : " instead of the archive's 201",
                   msg ? ": " : "", msg ? msg : "");
    free(msg);
    rc = -EIO;
    goto out;
  }
  secrets_of(a, secrets);
  *answer = culpert__archive_redact(ans.body.p ? (char *)ans.body.p : "", secrets);
  if (!*answer) {
    culpert__error("out of memory reading the archive's answer");
    rc = -ENOMEM;
  }
out:
  free(q.p);
  free(url);
  free(ans.body.p);
  free(ans.location);
  return rc;
}

static int http_pull(const struct culpert__archive *a, const char *sha, const char *latest_of,
                     unsigned char **data, size_t *len, char found_sha[65])
{
  int rc;
  struct buf q = {.max = 65536};
  struct http_answer ans = {0};
  char *url = NULL;

  if ((rc = buf_append(&q, "", 0)) < 0 ||
      (latest_of && (rc = query_add(&q, "branch", latest_of)) < 0) ||
      (a->project && (rc = query_add(&q, "project", a->project)) < 0) ||
      !(url = profiles_url(a->endpoint, sha ? sha : "latest", (char *)q.p))) {
    culpert__error("out of memory building the request URL");
    rc = -ENOMEM;
    goto out;
  }
  rc = http_request(a, url, NULL, 0, CULPERT_ARCHIVE_MAX_PROFILE, &ans);
  if (rc < 0)
    goto out;
  if (ans.status == 404) {
    /* Only the archive's own "no profile ..." counts as missing: a 404
     * from anything else (a wrong base URL, the worker's "no such route")
     * is an error. The message's start is what counts: it goes on to name
     * the branch, which may hold any words. */
    const char *body = ans.body.p ? (const char *)ans.body.p : "";
    if (!json_error_starts(body, "no profile")) {
      report_status(a, &ans, "pull", NULL);
      rc = -EIO;
    } else {
      rc = -ENOENT;
    }
    goto out;
  }
  if (ans.status != 200) {
    report_status(a, &ans, "pull", NULL);
    rc = -EIO;
    goto out;
  }
  if (gzip_complete(ans.body.p, ans.body.len) < 0) {
    char ep[1024];
    endpoint_label(a->endpoint, ep, sizeof ep);
    error_redacted(a,
                   "the profile from the archive at %s is not a complete gzip stream (%zu "
                   "bytes): the download was cut short, or something other than the archive "
                   "answered",
                   ep, ans.body.len);
    rc = -EIO;
    goto out;
  }
  snprintf(found_sha, 65, "%s", ans.sha[0] ? ans.sha : sha ? sha : "");
  *data = ans.body.p;
  *len = ans.body.len;
  ans.body.p = NULL;
out:
  free(q.p);
  free(url);
  free(ans.body.p);
  free(ans.location);
  return rc;
}

/* ---- public entry points ------------------------------------------------------ */

static void lowercase_sha(const char *sha, char out[65])
{
  size_t i = 0;
  for (; sha[i] && i < 64; i++)
    out[i] = (char)(sha[i] >= 'A' && sha[i] <= 'F' ? sha[i] - 'A' + 'a' : sha[i]);
  out[i] = '\0';
}

/* What every upload checks of its bytes before any request: the size, and
 * a whole gzip stream (pull refuses an incomplete one, so none goes in). */
static int check_upload(const char *name, const unsigned char *data, size_t len)
{
  if (len > CULPERT_ARCHIVE_MAX_PROFILE) {
    culpert__error("%s is %zu bytes; culpert uploads at most %u MiB", name, len,
                   (unsigned)(CULPERT_ARCHIVE_MAX_PROFILE >> 20));
    return -EFBIG;
  }
  if (len < 2 || data[0] != 0x1f || data[1] != 0x8b) {
    culpert__error("'%s' is not a gzip file (a .pb.gz profile starts with 1f 8b)", name);
    return -EINVAL;
  }
  if (gzip_complete(data, len) < 0) {
    culpert__error("'%s' is not a complete gzip stream (cut short or corrupt)", name);
    return -EINVAL;
  }
  return 0;
}

/* Sends checked bytes to the archive. */
static int send_upload(const struct culpert__archive *a, const char *name,
                       const unsigned char *data, size_t len, const char *sha, const char *branch,
                       char **answer)
{
  char lower[65];
  if (culpert__archive_check_sha(sha, NULL) < 0 || culpert__archive_check_branch(branch, NULL) < 0)
    return -EINVAL; /* the command validated both; this guards the paths we build */
  lowercase_sha(sha, lower);
  if (culpert__archive_is_local(a->endpoint))
    return local_upload(a, lower, branch, data, len, answer);
  return http_upload(a, name, lower, branch, data, len, answer);
}

int culpert__archive_upload(const struct culpert__archive *a, const char *path, const char *sha,
                            const char *branch, char **answer)
{
  static const struct culpert__load_opts no_stacks = {.stacks = CULPERT_STACKS_NONE};
  unsigned char *data = NULL;
  size_t len = 0;
  struct culpert__profile *p = NULL;
  char err[1024];
  int rc = read_file(path, "profile", CULPERT_ARCHIVE_MAX_PROFILE, 0, &data, &len);
  if (rc == 0)
    rc = check_upload(path, data, len);
  /* A file every later diff of the branch reads must be a profile: the
   * loader's checks, as any command makes them, before any request. */
  if (rc == 0 &&
      (rc = culpert__profile_load_buffer_with(data, len, path, &no_stacks, &p, err, sizeof err)))
    culpert__error("%s; not uploaded", err);
  culpert__profile_free(p);
  if (rc == 0)
    rc = send_upload(a, path, data, len, sha, branch, answer);
  free(data);
  return rc;
}

int culpert__archive_upload_data(const struct culpert__archive *a, const char *name,
                                 const unsigned char *data, size_t len, const char *sha,
                                 const char *branch, char **answer)
{
  int rc = check_upload(name, data, len);
  return rc ? rc : send_upload(a, name, data, len, sha, branch, answer);
}

int culpert__archive_pull(const struct culpert__archive *a, const char *sha, const char *latest_of,
                          unsigned char **data, size_t *len, char found_sha[65])
{
  char lower[65];
  int rc;
  found_sha[0] = '\0';
  if ((sha == NULL) == (latest_of == NULL) || (sha && culpert__archive_check_sha(sha, NULL) < 0) ||
      (latest_of && culpert__archive_check_branch(latest_of, NULL) < 0))
    return -EINVAL;
  if (sha) {
    lowercase_sha(sha, lower);
    sha = lower;
  }
  if (!culpert__archive_is_local(a->endpoint))
    return http_pull(a, sha, latest_of, data, len, found_sha);
  rc = local_pull(a, sha, latest_of, data, len, found_sha);
  if (rc == 0 && gzip_complete(*data, *len) < 0) {
    culpert__error("the archived profile of %s in '%s' is not a complete gzip stream",
                   sha ? sha : latest_of, a->endpoint);
    free(*data);
    *data = NULL;
    rc = -EIO;
  }
  return rc;
}
