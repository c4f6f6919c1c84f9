/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cmd_pull.c: `culpert pull` fetches a profile from the archive by commit
 * SHA or as the newest upload of a branch (cli/README.md, "pull").
 *
 * The profile is held in memory until it arrived whole and was checked to
 * be a complete gzip stream; only then is it written: to stdout in one go,
 * or to -o PATH through a temporary file renamed into place. So a failed
 * pull never leaves a partial file and never writes half a profile.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive.h"
#include "cli.h"

enum { OPT_SHA = 1, OPT_LATEST_OF, OPT_ALLOW_MISSING, OPT_HELP };

static void usage(FILE *f)
{
  fprintf(f,
          "usage: culpert pull [OPTIONS] (--sha SHA | --latest-of BRANCH) [-o PATH]\n\n"
          "Fetches a profile from the archive: the upload of a commit SHA, or the newest\n"
          "upload on a branch (by upload time; equal times go to the greater SHA).\n\n"
          "  --sha SHA          the commit, 7 to 64 hex digits\n"
          "  --latest-of BRANCH the newest upload on BRANCH\n"
          "  -o, --output PATH  write the profile to PATH (replaced atomically);\n"
          "                     default: stdout (refused when it is a terminal)\n"
          "  --allow-missing    when the archive has no such profile, write nothing,\n"
          "                     say so on stderr and exit 0\n"
          "%s"
          "  -h, --help         show this help\n\n"
          "Exit status: 0 fetched (or missing with --allow-missing), 2 any error.\n",
          culpert__archive_options_help);
}

/* Writes the whole profile to stdout. */
static int write_stdout(const unsigned char *data, size_t len)
{
  if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0) {
    culpert__error("cannot write the profile to standard output: %s", strerror(errno));
    return -EIO;
  }
  return 0;
}

/* Checks, before any request, that -o PATH can be written: not a
 * directory; a device or FIFO we may write; or a file (a link's target)
 * in an existing directory we may create files in. */
static int check_output(const char *path)
{
  char target[PATH_MAX], dir[PATH_MAX];
  int kind = culpert__output_target(path, target);
  if (kind < 0)
    return kind;
  if (kind == 1) {
    if (access(target, W_OK) == 0)
      return 0;
    culpert__error("-o '%s': cannot write it: %s", path, strerror(errno));
    return -errno;
  }
  const char *slash = strrchr(target, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else
    snprintf(dir, sizeof dir, "%.*s", slash == target ? 1 : (int)(slash - target), target);
  if (access(dir, W_OK | X_OK) != 0) {
    culpert__error("-o '%s': cannot create files in '%s': %s", path, dir, strerror(errno));
    return -errno;
  }
  return 0;
}

int culpert__cmd_pull(int argc, char **argv)
{
  static const struct option longopts[] = {
      CULPERT_ARCHIVE_LONG_OPTIONS,
      {"sha", required_argument, NULL, OPT_SHA},
      {"latest-of", required_argument, NULL, OPT_LATEST_OF},
      {"output", required_argument, NULL, 'o'},
      {"allow-missing", no_argument, NULL, OPT_ALLOW_MISSING},
      {"help", no_argument, NULL, OPT_HELP},
      {NULL, 0, NULL, 0},
  };
  struct culpert__archive a;
  const char *sha = NULL, *latest_of = NULL, *output = NULL, *why = NULL;
  int allow_missing = 0, rc = CULPERT_EXIT_ERROR, opt;
  unsigned char *data = NULL;
  size_t len = 0;

  culpert__archive_init(&a);
  opterr = 0;
  optind = 1;
  while ((opt = culpert__getopt(argc, argv, ":ho:", longopts)) != -1) {
    int used = culpert__archive_option(&a, opt, optarg);
    if (used < 0)
      goto out;
    if (used)
      continue;
    switch (opt) {
    case OPT_SHA:
      sha = optarg;
      break;
    case OPT_LATEST_OF:
      latest_of = optarg;
      break;
    case 'o':
      output = optarg;
      break;
    case OPT_ALLOW_MISSING:
      allow_missing = 1;
      break;
    case OPT_HELP:
    case 'h':
      usage(stdout);
      rc = CULPERT_EXIT_OK;
      goto out;
    case ':':
      culpert__error("pull: %s needs a value", argv[optind - 1]);
      goto out;
    default:
      culpert__error("pull: unknown option '%s' (try 'culpert pull --help')", argv[optind - 1]);
      goto out;
    }
  }
  if (optind < argc) {
    culpert__error("pull: unexpected argument '%s' (try 'culpert pull --help')", argv[optind]);
    goto out;
  }
  if ((sha == NULL) == (latest_of == NULL)) {
    culpert__error("pull: give exactly one of --sha SHA and --latest-of BRANCH");
    goto out;
  }
  if (sha && culpert__archive_check_sha(sha, &why) < 0) {
    culpert__error("bad --sha '%s': %s", sha, why);
    goto out;
  }
  if (latest_of && culpert__archive_check_branch(latest_of, &why) < 0) {
    culpert__error("bad --latest-of: %s", why);
    goto out;
  }
  if (output && culpert__path_value_ok("-o", output) != 0)
    goto out;
  if (output && strcmp(output, "-") == 0)
    output = NULL;
  if (output && check_output(output) < 0)
    goto out;
  if (!output && isatty(STDOUT_FILENO)) {
    culpert__error("pull: refusing to write a binary profile to a terminal; give -o PATH");
    goto out;
  }
  if (culpert__archive_resolve(&a) < 0)
    goto out;

  char found[65];
  int got = culpert__archive_pull(&a, sha, latest_of, &data, &len, found);
  if (got == -ENOENT) {
    const char *project = a.project ? a.project : "default";
    if (allow_missing) {
      fprintf(stderr,
              "culpert: note: no profile for %s %s in project %s; nothing written "
              "(--allow-missing)\n",
              sha ? "commit" : "branch", sha ? sha : latest_of, project);
      rc = CULPERT_EXIT_OK;
    } else {
      culpert__error("no profile for %s %s in project %s (--allow-missing makes this a note)",
                     sha ? "commit" : "branch", sha ? sha : latest_of, project);
    }
    goto out;
  }
  if (got < 0)
    goto out;
  if (output ? culpert__archive_write_atomic(output, data, len) < 0 : write_stdout(data, len) < 0)
    goto out;
  if (latest_of)
    fprintf(stderr, "pulled the latest of branch %s (commit %s) to %s (%zu bytes)\n", latest_of,
            found[0] ? found : "not named by the archive", output ? output : "stdout", len);
  else
    fprintf(stderr, "pulled commit %s to %s (%zu bytes)\n", found, output ? output : "stdout", len);
  rc = CULPERT_EXIT_OK;
out:
  free(data);
  return rc;
}
