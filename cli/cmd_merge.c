/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cmd_merge.c: `culpert merge` writes several profiles as one pprof file
 * (cli/README.md, "merge"): the processes of one run, say, so that one file
 * can be uploaded, kept or read by any pprof tool. The work is in merge.c.
 *
 * Nothing is written until every input was read and merged: to stdout in
 * one go, or to -o FILE through a temporary file renamed into place.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive.h"
#include "cli.h"
#include "merge.h"
#include "profile.h"

enum { OPT_HELP = 1 };

static void usage(FILE *f)
{
  fprintf(f, "usage: culpert merge [-o FILE] PROFILE...\n\n"
             "Writes the profiles PROFILE... as one gzipped pprof profile: the processes\n"
             "of one run (a directory stands for the profiles in it; '-' reads standard\n"
             "input), so one file can be uploaded or read by any pprof tool. Everything\n"
             "is kept: samples, stacks with their mappings and build ids, labels and\n"
             "metadata. Span ids are renumbered so the same span path in two files\n"
             "shares one id and different paths never do ('go tool pprof -proto' keeps\n"
             "each file's ids, which then collide). Comments: values all files agree on\n"
             "are kept, counters (culpert.dropped_samples, ...) summed, other differing\n"
             "values (culpert.pid, ...) joined with ','; culpert.peak_inuse_bytes is\n"
             "left out and culpert.merged_files added. The profiles must have the same\n"
             "sample types and sample rate.\n\n"
             "  -o, --output FILE  write to FILE (replaced atomically); default: standard\n"
             "                     output (refused when it is a terminal); not in a\n"
             "                     directory it merges\n"
             "  -h, --help         show this help\n\n"
             "Exit status: 0 written, 2 any error (nothing is written then).\n");
}

int culpert__cmd_merge(int argc, char **argv)
{
  static const struct option longopts[] = {
      {"output", required_argument, NULL, 'o'},
      {"help", no_argument, NULL, OPT_HELP},
      {NULL, 0, NULL, 0},
  };
  const char *output = NULL;
  int opt;

  opterr = 0;
  optind = 1;
  while ((opt = culpert__getopt(argc, argv, ":o:h", longopts)) != -1) {
    switch (opt) {
    case 'o':
      output = optarg;
      break;
    case 'h':
    case OPT_HELP:
      usage(stdout);
      return CULPERT_EXIT_OK;
    case ':':
      culpert__error("merge: %s needs a value", argv[optind - 1]);
      return CULPERT_EXIT_ERROR;
    default:
      culpert__error("merge: unknown option '%s' (try 'culpert merge --help')", argv[optind - 1]);
      return CULPERT_EXIT_ERROR;
    }
  }
  if (optind >= argc) {
    culpert__error("merge: no profile given (try 'culpert merge --help')");
    return CULPERT_EXIT_ERROR;
  }
  if (output && culpert__path_value_ok("-o", output) != 0)
    return CULPERT_EXIT_ERROR;
  if (output && strcmp(output, "-") == 0)
    output = NULL;
  struct stat st;
  if (output && stat(output, &st) == 0 && S_ISDIR(st.st_mode)) {
    culpert__error("-o '%s' is a directory; give a file path", output);
    return CULPERT_EXIT_ERROR;
  }
  const char *dir = output ? culpert__profile_input_dir(output, (const char *const *)argv + optind,
                                                        (size_t)(argc - optind))
                           : NULL;
  if (dir) {
    culpert__error("-o '%s' is in the directory '%s' this merge reads: the merged file would "
                   "be one of its profiles, counted again by the next merge and by every "
                   "command given '%s'; write it elsewhere",
                   output, dir, dir);
    return CULPERT_EXIT_ERROR;
  }
  if (!output && isatty(STDOUT_FILENO)) {
    culpert__error("merge: refusing to write a binary profile to a terminal; give -o FILE");
    return CULPERT_EXIT_ERROR;
  }
  struct culpert__merged m;
  char err[1024];
  if (culpert__merge_files((const char *const *)argv + optind, (size_t)(argc - optind), &m, err,
                           sizeof err) != 0) {
    culpert__error("%s", err);
    return CULPERT_EXIT_ERROR;
  }
  int rc = CULPERT_EXIT_OK;
  if (output) {
    if (culpert__archive_write_atomic(output, m.gz, m.gzlen) < 0)
      rc = CULPERT_EXIT_ERROR;
  } else if (fwrite(m.gz, 1, m.gzlen, stdout) != m.gzlen || fflush(stdout) != 0) {
    culpert__error("cannot write the profile to standard output: %s", strerror(errno));
    rc = CULPERT_EXIT_ERROR;
  }
  if (rc == CULPERT_EXIT_OK)
    fprintf(stderr, "culpert: merged %zu profile%s into %s\n", m.nfiles, m.nfiles == 1 ? "" : "s",
            output ? output : "standard output");
  culpert__merged_free(&m);
  return rc;
}
