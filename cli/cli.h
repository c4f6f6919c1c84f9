/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cli.h: the subcommands of the culpert command and what they share.
 *
 * Each subcommand lives in cmd_<name>.c and returns the process exit status:
 * 0 success, 1 only from diff (a regression passed the gates), 2 any error.
 * Errors are printed by the command as "culpert: error: <message>", naming
 * the file or flag at fault. Only main.c calls exit().
 */
#ifndef CULPERT_CLI_H
#define CULPERT_CLI_H

#include <stdio.h>

#define CULPERT_EXIT_OK         0
#define CULPERT_EXIT_REGRESSION 1
#define CULPERT_EXIT_ERROR      2

int culpert__cmd_report(int argc, char **argv);
int culpert__cmd_info(int argc, char **argv);
int culpert__cmd_diff(int argc, char **argv);
int culpert__cmd_flamegraph(int argc, char **argv);
int culpert__cmd_merge(int argc, char **argv);
int culpert__cmd_run(int argc, char **argv);
int culpert__cmd_upload(int argc, char **argv);
int culpert__cmd_pull(int argc, char **argv);

/* Print "culpert: error: <fmt...>\n" to stderr. */
void culpert__error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* getopt_long, except that a long option must be spelled out whole:
 * "--out" for "--output" returns '?' (an unknown option), with
 * argv[optind - 1] the word as given, as for any unknown option. A prefix
 * that is unique today may not be once another option comes, and every
 * command takes options the same way. */
struct option;
int culpert__getopt(int argc, char **argv, const char *optstring, const struct option *longopts);

/* 0 when `path`, the value of option `flag`, may be a file name; else
 * says why not and returns -1: empty, or a word starting with '-' (other
 * than "-" itself), which is an option taken as the value ("-o --" or
 * "-o --rate" with the name forgotten). A file whose name starts with '-'
 * is still reachable as ./-name. */
int culpert__path_value_ok(const char *flag, const char *path);

/* argv[0] of the process, for locating libculpert next to the binary. */
extern const char *culpert__argv0;

#endif /* CULPERT_CLI_H */
