/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * main.c: the culpert command. Dispatches to cmd_<name>.c; the only place
 * that calls exit().
 */
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char *culpert__argv0 = "culpert";

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} commands[] = {
    {"report", culpert__cmd_report, "where the bytes go, by span (tree, flat, callsites)"},
    {"info", culpert__cmd_info, "what a profile file holds"},
    {"diff", culpert__cmd_diff, "compare two profiles; exit 1 on a regression (CI gate)"},
    {"flamegraph", culpert__cmd_flamegraph, "folded stacks or an interactive SVG"},
    {"merge", culpert__cmd_merge, "write several profiles as one"},
    {"run", culpert__cmd_run, "run a program under libculpert and report on it"},
    {"upload", culpert__cmd_upload, "store a profile in the archive by commit SHA"},
    {"pull", culpert__cmd_pull, "fetch a profile from the archive"},
};

void culpert__error(const char *fmt, ...)
{
  va_list ap;
  fputs("culpert: error: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

int culpert__getopt(int argc, char **argv, const char *optstring, const struct option *longopts)
{
  int idx = -1;
  int c = getopt_long(argc, argv, optstring, longopts, &idx);
  if (c == -1 || c == '?' || c == ':' || idx < 0)
    return c;
  /* The word that named it: the last one taken, or the one before when the
   * value came as a word of its own ("--top 3", not "--top=3"). */
  int at = optind - 1;
  if (optarg != NULL && at > 0 && optarg == argv[at])
    at--;
  const char *word = argv[at], *name = longopts[idx].name;
  size_t len = strcspn(word + 2, "=");
  if (strncmp(word, "--", 2) == 0 && (len != strlen(name) || strncmp(word + 2, name, len) != 0)) {
    optind = at + 1;
    return '?';
  }
  return c;
}

int culpert__path_value_ok(const char *flag, const char *path)
{
  if (path[0] == '\0') {
    culpert__error("%s needs a path", flag);
    return -1;
  }
  if (path[0] == '-' && path[1] != '\0') {
    culpert__error("%s %s: that is an option, not a file name; give the file after %s (./%s for a "
                   "file of that name)",
                   flag, path, flag, path);
    return -1;
  }
  return 0;
}

static void usage(FILE *f)
{
  fprintf(f, "usage: culpert <command> [options] [args]\n\n"
             "culpert is a per-span heap allocation profiler. Commands:\n\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\nRun 'culpert <command> --help' for a command's options.\n"
             "Exit status: 0 success, 1 diff found a regression, 2 error.\n"
             "  --help       show this help\n"
             "  --version    show the version\n");
}

/* Output that did not reach standard output (a full disk) is an error,
 * whatever the command found: a diff's regression (1) included, so that a
 * gate never passes on a report nobody got. */
static int stdout_checked(int rc)
{
  int err = fflush(stdout) != 0 ? errno : ferror(stdout) ? EIO : 0;
  if (err != 0 && rc != CULPERT_EXIT_ERROR) {
    culpert__error("cannot write to standard output: %s", strerror(err));
    rc = CULPERT_EXIT_ERROR;
  }
  return rc;
}

int main(int argc, char **argv)
{
  if (argc > 0 && argv[0])
    culpert__argv0 = argv[0];
  if (argc < 2) {
    usage(stderr);
    return CULPERT_EXIT_ERROR;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return stdout_checked(CULPERT_EXIT_OK);
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    printf("culpert %s\n", CULPERT_VERSION_STRING);
    return stdout_checked(CULPERT_EXIT_OK);
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp(cmd, commands[i].name) == 0) {
      exit(stdout_checked(commands[i].run(argc - 1, argv + 1)));
    }
  }
  culpert__error("unknown command '%s' (try 'culpert --help')", cmd);
  return CULPERT_EXIT_ERROR;
}
