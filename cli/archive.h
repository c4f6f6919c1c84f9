/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * archive.h: the archive client behind `culpert upload` and `culpert pull`.
 *
 * The archive keeps profiles by commit SHA (shared/spec/archive-api.md). It
 * is either the HTTP archive worker (http:// or https:// endpoint, spoken to
 * with libcurl) or a local directory (file:// URL or any other string) that
 * this module manages itself with the same semantics. The archive never
 * parses a profile: it only checks that what goes in and what comes out is
 * one complete gzip stream.
 *
 * Promises: the token and the Cloudflare Access secret never appear in any
 * output (errors, --verbose, the echoed server answer); nothing touches the
 * network before every input was validated; no half-written file is ever
 * left behind under a final name.
 */
#ifndef CULPERT_CLI_ARCHIVE_H
#define CULPERT_CLI_ARCHIVE_H

#include <getopt.h>
#include <limits.h>
#include <stddef.h>

/* Defaults of the connection options (cli/README.md, "upload"). */
#define CULPERT_ARCHIVE_TIMEOUT_S         300.0 /* whole operation, retries included */
#define CULPERT_ARCHIVE_CONNECT_TIMEOUT_S 10.0  /* per attempt */
#define CULPERT_ARCHIVE_RETRIES           3     /* extra attempts after the first */
#define CULPERT_ARCHIVE_MAX_RETRIES       10
#define CULPERT_ARCHIVE_RETRY_AFTER_CAP_S 60 /* a longer Retry-After is cut to this */
/* Largest profile uploaded or pulled. The worker's default limit is 32 MiB. */
#define CULPERT_ARCHIVE_MAX_PROFILE (1024u * 1024u * 1024u)

/* How to reach an archive. Strings are borrowed from argv or the
 * environment and must outlive every call that uses the struct. */
struct culpert__archive {
  const char *endpoint;         /* http(s)://, file:// or a directory */
  const char *token;            /* bearer token: HTTP only, ignored locally */
  const char *project;          /* NULL: the archive's default, "default" */
  const char *cf_access_id;     /* Cloudflare Access service token, both */
  const char *cf_access_secret; /*   or neither */
  const char *cacert;           /* CA bundle file, NULL: the system's */
  double timeout_s;             /* whole operation, retries included */
  double connect_timeout_s;     /* each connection attempt */
  int retries;                  /* extra attempts after the first */
  int verbose;                  /* redacted request log on stderr */
};

/* getopt_long codes of the connection options both commands share. */
enum {
  CULPERT_ARCHIVE_OPT_ENDPOINT = 0x1000,
  CULPERT_ARCHIVE_OPT_TOKEN,
  CULPERT_ARCHIVE_OPT_PROJECT,
  CULPERT_ARCHIVE_OPT_CF_ID,
  CULPERT_ARCHIVE_OPT_CF_SECRET,
  CULPERT_ARCHIVE_OPT_CACERT,
  CULPERT_ARCHIVE_OPT_TIMEOUT,
  CULPERT_ARCHIVE_OPT_CONNECT_TIMEOUT,
  CULPERT_ARCHIVE_OPT_RETRIES,
  CULPERT_ARCHIVE_OPT_VERBOSE,
};

/* The struct option entries for those codes, for a command's long-option
 * table (followed by the command's own entries and the zero terminator). */
/* clang-format off */
#define CULPERT_ARCHIVE_LONG_OPTIONS                                                  \
  {"endpoint", required_argument, NULL, CULPERT_ARCHIVE_OPT_ENDPOINT},                \
  {"token", required_argument, NULL, CULPERT_ARCHIVE_OPT_TOKEN},                      \
  {"project", required_argument, NULL, CULPERT_ARCHIVE_OPT_PROJECT},                  \
  {"cf-access-client-id", required_argument, NULL, CULPERT_ARCHIVE_OPT_CF_ID},        \
  {"cf-access-client-secret", required_argument, NULL, CULPERT_ARCHIVE_OPT_CF_SECRET}, \
  {"cacert", required_argument, NULL, CULPERT_ARCHIVE_OPT_CACERT},                    \
  {"timeout", required_argument, NULL, CULPERT_ARCHIVE_OPT_TIMEOUT},                  \
  {"connect-timeout", required_argument, NULL, CULPERT_ARCHIVE_OPT_CONNECT_TIMEOUT},  \
  {"retries", required_argument, NULL, CULPERT_ARCHIVE_OPT_RETRIES},                  \
  {"verbose", no_argument, NULL, CULPERT_ARCHIVE_OPT_VERBOSE}
/* clang-format on */

/* The help text of those options, for a command's --help. */
extern const char culpert__archive_options_help[];

/* Sets the defaults (timeouts, retries); every string NULL. */
void culpert__archive_init(struct culpert__archive *a);

/* Applies one connection option. Returns 1 when `opt` is one of the codes
 * above (0 when it is not), or -EINVAL after printing an error naming the
 * flag when its value is bad. */
int culpert__archive_option(struct culpert__archive *a, int opt, const char *arg);

/* Fills what the flags left unset from the environment (CULPERT_ARCHIVE,
 * CULPERT_TOKEN, CULPERT_PROJECT, CF_ACCESS_CLIENT_ID/SECRET, CULPERT_CACERT;
 * empty variables count as unset) and validates the result: endpoint
 * present and well formed, token present for HTTP, project and header
 * values well formed, Access id and secret both or neither. Prints an
 * error naming the flag and variable and returns -EINVAL on failure. */
int culpert__archive_resolve(struct culpert__archive *a);

/* 1 when the endpoint names a local directory (not http:// or https://). */
int culpert__archive_is_local(const char *endpoint);

/* Input rules shared with the worker. Each returns 0 or -EINVAL; on
 * -EINVAL *why (when not NULL) points at a static reason.
 *   SHA:     7 to 64 hex digits, either case
 *   branch:  1 to 255 bytes of well-formed UTF-8 without C0/DEL/C1 controls
 *   project: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit */
int culpert__archive_check_sha(const char *sha, const char **why);
int culpert__archive_check_branch(const char *branch, const char **why);
int culpert__archive_check_project(const char *project, const char **why);

/* Copies `text` into a new string with every occurrence of each non-empty
 * string of the NULL-terminated `secrets` replaced by "[redacted]" and
 * control characters other than newline and tab replaced by '?'. A secret
 * of fewer than 8 characters is replaced only where it stands as a word of
 * its own: no letter, digit or '_' beside it, nor a '\'' or '-' that joins
 * it to one ("couldn't"; a quote like 'dev' does not). Returns NULL when
 * out of memory. */
char *culpert__archive_redact(const char *text, const char *const *secrets);

/* Stores the profile at `path` under (project, sha) with `branch`,
 * replacing an earlier upload of that SHA. The file must be a complete
 * gzip stream that the profile loader accepts. `sha` must be valid (any case;
 * it is stored in lowercase). On success *answer is the archive's JSON
 * description of the upload ({project, sha, branch, size, uploaded_at}),
 * redacted, owned by the caller. An HTTP answer counts as success only when
 * it is 201 with a JSON object, as the archive answers; any other 2xx is an
 * error. Errors are printed; returns 0 or a negative errno. */
int culpert__archive_upload(const struct culpert__archive *a, const char *path, const char *sha,
                            const char *branch, char **answer);
/* The same for a profile in memory that the caller made and validated (a
 * merge); `name` stands for it in messages. */
int culpert__archive_upload_data(const struct culpert__archive *a, const char *name,
                                 const unsigned char *data, size_t len, const char *sha,
                                 const char *branch, char **answer);

/* Fetches the profile of `sha`, or when `sha` is NULL the newest upload on
 * branch `latest_of` (by upload time, ties to the greater SHA). On success
 * *data (owned by the caller) holds *len bytes, checked to be a complete
 * gzip stream, and found_sha the commit they belong to ("" when a server
 * did not say). Returns -ENOENT without printing anything when the archive
 * has no such profile; other errors are printed and return a negative
 * errno. */
int culpert__archive_pull(const struct culpert__archive *a, const char *sha, const char *latest_of,
                          unsigned char **data, size_t *len, char found_sha[65]);

/* What writing `path` replaces: 0 with `target` the regular file to
 * replace (path itself, or the file a symbolic link at path names, so the
 * link stays; a dangling link's file is created), 1 when path is an
 * existing device, FIFO or socket, which is written through in place
 * (renaming over /dev/null would replace it with a file), or <0 with an
 * error printed (a directory). */
int culpert__output_target(const char *path, char target[PATH_MAX]);

/* Replaces the file culpert__output_target names with `len` bytes
 * at once: a temporary file in the same directory, written, fsync'ed and
 * renamed over it; the temporary is removed on any failure. A device or
 * FIFO is written through instead. Errors are printed naming the path. */
int culpert__archive_write_atomic(const char *path, const void *data, size_t len);

#endif /* CULPERT_CLI_ARCHIVE_H */
