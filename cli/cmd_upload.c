/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cmd_upload.c: `culpert upload FILE` stores a profile in the archive under
 * its commit SHA and branch (cli/README.md, "upload").
 *
 * Every input is validated before anything touches the network or the
 * archive directory. Several files, or a directory of them (the processes
 * of one run), are merged first, as `culpert merge` merges them. stdout
 * gets the archive's JSON answer only, so a CI step can capture it; the
 * human line goes to stderr.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "archive.h"
#include "cli.h"
#include "merge.h"

enum { OPT_SHA = 1, OPT_BRANCH, OPT_HELP };

static void usage(FILE *f)
{
  fprintf(f,
          "usage: culpert upload [OPTIONS] FILE...\n\n"
          "Stores the profile FILE (a .pb.gz) in the archive under a commit SHA and\n"
          "branch; uploading a SHA again replaces it. Several FILEs, or a directory\n"
          "of them (the processes of one run), are merged into one profile first,\n"
          "as 'culpert merge' does. Prints the archive's JSON answer\n"
          "{project, sha, branch, size, uploaded_at} on stdout.\n\n"
          "  --commit-sha SHA   7 to 64 hex digits [GITHUB_SHA]\n"
          "  --branch NAME      1-255 bytes of UTF-8 without control characters\n"
          "                     [GITHUB_REF_NAME]\n"
          "%s"
          "  -h, --help         show this help\n\n"
          "Exit status: 0 uploaded, 2 any error.\n",
          culpert__archive_options_help);
}

int culpert__cmd_upload(int argc, char **argv)
{
  static const struct option longopts[] = {
      CULPERT_ARCHIVE_LONG_OPTIONS,
      {"commit-sha", required_argument, NULL, OPT_SHA},
      {"branch", required_argument, NULL, OPT_BRANCH},
      {"help", no_argument, NULL, OPT_HELP},
      {NULL, 0, NULL, 0},
  };
  struct culpert__archive a;
  const char *sha = NULL, *branch = NULL, *why = NULL;
  char *answer = NULL, *merged_name = NULL;
  struct culpert__merged merged = {0};
  int rc = CULPERT_EXIT_ERROR, opt;

  culpert__archive_init(&a);
  opterr = 0;
  optind = 1;
  while ((opt = culpert__getopt(argc, argv, ":h", longopts)) != -1) {
    int used = culpert__archive_option(&a, opt, optarg);
    if (used < 0)
      goto out;
    if (used)
      continue;
    switch (opt) {
    case OPT_SHA:
      sha = optarg;
      break;
    case OPT_BRANCH:
      branch = optarg;
      break;
    case OPT_HELP:
    case 'h':
      usage(stdout);
      rc = CULPERT_EXIT_OK;
      goto out;
    case ':':
      culpert__error("upload: %s needs a value", argv[optind - 1]);
      goto out;
    default:
      culpert__error("upload: unknown option '%s' (try 'culpert upload --help')", argv[optind - 1]);
      goto out;
    }
  }
  if (argc - optind < 1) {
    culpert__error("upload: no FILE given (try 'culpert upload --help')");
    goto out;
  }
  for (int i = optind; i < argc; i++) {
    if (strcmp(argv[i], "-") == 0) {
      culpert__error("upload: standard input ('-') cannot be uploaded: save the profile to a "
                     "file and give its name");
      goto out;
    }
  }
  const char *file = argv[optind];
  struct stat st;
  bool merge = argc - optind > 1 || (stat(file, &st) == 0 && S_ISDIR(st.st_mode));

  if (!sha && getenv("GITHUB_SHA") && *getenv("GITHUB_SHA"))
    sha = getenv("GITHUB_SHA");
  if (!branch && getenv("GITHUB_REF_NAME") && *getenv("GITHUB_REF_NAME"))
    branch = getenv("GITHUB_REF_NAME");
  if (!sha) {
    culpert__error("upload: no commit SHA: give --commit-sha or set GITHUB_SHA");
    goto out;
  }
  if (culpert__archive_check_sha(sha, &why) < 0) {
    culpert__error("bad --commit-sha / GITHUB_SHA '%s': %s", sha, why);
    goto out;
  }
  if (!branch) {
    culpert__error("upload: no branch: give --branch or set GITHUB_REF_NAME");
    goto out;
  }
  if (culpert__archive_check_branch(branch, &why) < 0) {
    culpert__error("bad --branch / GITHUB_REF_NAME: %s", why);
    goto out;
  }
  if (culpert__archive_resolve(&a) < 0)
    goto out;
  if (merge) {
    char err[1024];
    if (culpert__merge_files((const char *const *)argv + optind, (size_t)(argc - optind), &merged,
                             err, sizeof err) != 0) {
      culpert__error("%s", err);
      goto out;
    }
    const char *more = argc - optind > 1 ? " ..." : "";
    if ((merged.nfiles == 1 ? asprintf(&merged_name, "%s%s (1 profile)", file, more)
                            : asprintf(&merged_name, "%s%s (%zu profiles merged)", file, more,
                                       merged.nfiles)) < 0) {
      merged_name = NULL;
      culpert__error("out of memory");
      goto out;
    }
    file = merged_name;
  }
  /* The profile is read and checked to be whole gzip before any request. */
  rc = merge ? culpert__archive_upload_data(&a, file, merged.gz, merged.gzlen, sha, branch, &answer)
             : culpert__archive_upload(&a, file, sha, branch, &answer);
  if (rc < 0) {
    rc = CULPERT_EXIT_ERROR;
    goto out;
  }

  size_t n = strlen(answer);
  fputs(answer, stdout);
  if (n == 0 || answer[n - 1] != '\n')
    fputc('\n', stdout);
  char lower[65];
  size_t i = 0;
  for (; sha[i] && i < 64; i++)
    lower[i] = (char)(sha[i] >= 'A' && sha[i] <= 'F' ? sha[i] - 'A' + 'a' : sha[i]);
  lower[i] = '\0';
  fprintf(stderr, "uploaded %s as commit %s on branch %s\n", file, lower, branch);
  rc = CULPERT_EXIT_OK;
out:
  free(answer);
  free(merged_name);
  culpert__merged_free(&merged);
  return rc;
}
