/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cmd_info.c: `culpert info FILE`, what a profile file holds.
 *
 * The five lines of cli.md first (file, rate, samples, bytes, unique spans),
 * then whatever else the file knows, one "Label:" line each and only when
 * the file has it: in-use bytes, producer, stack mode, dropped samples, span
 * overflow, duration, capture time, pid and executable. culpert.* comments
 * are properties; every other key=value comment is listed under Metadata.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "format.h"
#include "profile.h"

#define LABEL_COLS 17 /* "Dropped samples: " */

static void help(FILE *f)
{
  fprintf(f,
          "usage: culpert info [options] FILE...\n"
          "\n"
          "What a profile file holds: sample rate, totals, spans, how it was\n"
          "captured (producer, stack mode, dropped samples, duration, process) and\n"
          "its metadata (key=value comments other than culpert.*). FILE is a pprof\n"
          "profile, gzipped or plain, from culpert, the Rust culpert or Go; '-'\n"
          "reads stdin. Files that decompress to more than %u MiB are refused\n"
          "(a built-in limit). Several FILEs: one block each, separated\n"
          "by a blank line; a FILE that is a directory stands for the profiles in\n"
          "it, one block each.\n"
          "\n"
          "Options:\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 success, 2 error (unreadable or invalid profile, bad option;\n"
          "with several FILEs, the others are still shown).\n",
          CULPERT_PROFILE_MAX_BYTES >> 20);
}

static void line(const char *label, const char *value)
{
  char l[64];
  snprintf(l, sizeof l, "%s:", label);
  printf("%-*s", LABEL_COLS, l);
  culpert__put_printable(stdout, value);
  putchar('\n');
}

static int str_cmp(const void *x, const void *y)
{
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Number of distinct span names; -1 on ENOMEM. */
static long unique_spans(const struct culpert__profile *p)
{
  const char **names = malloc((p->nsamples ? p->nsamples : 1) * sizeof *names);
  size_t n = 0;
  long unique = 0;
  if (!names)
    return -1;
  for (size_t i = 0; i < p->nsamples; i++)
    if (p->samples[i].span_name)
      names[n++] = p->samples[i].span_name;
  qsort(names, n, sizeof *names, str_cmp);
  for (size_t i = 0; i < n; i++)
    if (i == 0 || strcmp(names[i - 1], names[i]) != 0)
      unique++;
  free(names);
  return unique;
}

static bool known_prop(const char *key)
{
  static const char *const known[] = {
      "culpert.version",       "culpert.rate", "culpert.stack", "culpert.dropped_samples",
      "culpert.span_overflow", "culpert.pid",  "culpert.exe",   "culpert.peak_inuse_bytes",
      "culpert.inuse_at_peak"};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(key, known[i]) == 0)
      return true;
  return false;
}

/* A key/value section ("Metadata:"), keys padded to the widest key. */
static void kv_section(const char *title, const struct culpert__kv *kv, size_t n,
                       bool (*skip)(const char *))
{
  size_t width = 0, shown = 0;
  for (size_t i = 0; i < n; i++) {
    if (skip && skip(kv[i].key))
      continue;
    size_t w = culpert__display_width(kv[i].key);
    if (w > width)
      width = w;
    shown++;
  }
  if (shown == 0 && skip)
    return;
  printf("\n%s:\n", title);
  if (shown == 0) {
    printf("  (none)\n");
    return;
  }
  for (size_t i = 0; i < n; i++) {
    if (skip && skip(kv[i].key))
      continue;
    printf("  ");
    culpert__put_printable(stdout, kv[i].key);
    printf("%*s", (int)(width + 2 - culpert__display_width(kv[i].key)), "");
    culpert__put_printable(stdout, kv[i].value);
    putchar('\n');
  }
}

static void show(const struct culpert__profile *p, long spans)
{
  char b[CULPERT_FMT_MAX], v[256];
  const char *s;

  line("File", p->path);
  line("Sample rate", culpert__fmt_rate(b, p->rate));
  if (p->has_samples) {
    snprintf(v, sizeof v, "%" PRId64, p->total_samples);
    line("Total samples", v);
  } else {
    line("Total samples", "not recorded by this producer");
  }
  line("Total bytes", culpert__fmt_bytes(b, p->total_bytes));
  snprintf(v, sizeof v, "%ld", spans);
  line("Unique spans", v);
  if (p->has_objects) {
    snprintf(v, sizeof v, "%" PRId64, p->total_objects);
    line("Total objects", v);
  }
  if (p->has_inuse) {
    line("In-use bytes", culpert__fmt_bytes(b, p->total_inuse_bytes));
    snprintf(v, sizeof v, "%" PRId64, p->total_inuse_objects);
    line("In-use objects", v);
    if (culpert__profile_prop(p, "culpert.inuse_at_peak") != NULL) {
      char when[CULPERT_INUSE_WHEN_MAX];
      line("In-use values", culpert__profile_inuse_when(p, when));
    }
  }
  /* The live samples' weighted bytes at their highest (libculpert). */
  int64_t peak;
  int has_peak = culpert__profile_peak_inuse(p, &peak);
  if (has_peak > 0) {
    line("Peak in-use", culpert__fmt_bytes(b, peak));
  } else if (has_peak < 0) {
    snprintf(v, sizeof v, "culpert.peak_inuse_bytes is not a byte count: %.200s",
             culpert__profile_prop(p, "culpert.peak_inuse_bytes"));
    line("Peak in-use", v);
  }
  switch (p->producer) {
  case CULPERT_PRODUCER_CULPERT:
    s = culpert__profile_prop(p, "culpert.version");
    snprintf(v, sizeof v, "culpert%s%.200s", s ? " " : "", s ? s : "");
    line("Producer", v);
    break;
  case CULPERT_PRODUCER_RUST:
    line("Producer", "Rust culpert (allocations/space)");
    break;
  case CULPERT_PRODUCER_GO:
    line("Producer", "Go heap profile (alloc/inuse space and objects)");
    break;
  }
  if ((s = culpert__profile_prop(p, "culpert.stack")))
    line("Stack mode", s);
  if ((s = culpert__profile_prop(p, "culpert.dropped_samples")))
    line("Dropped samples", s);
  if ((s = culpert__profile_prop(p, "culpert.span_overflow")))
    line("Span overflow", s);
  if (p->duration_nanos > 0) {
    snprintf(v, sizeof v, "%.2f s", (double)p->duration_nanos / 1e9);
    line("Duration", v);
  }
  if (p->time_nanos > 0) {
    time_t t = (time_t)(p->time_nanos / 1000000000);
    struct tm tm;
    if (gmtime_r(&t, &tm) && strftime(v, sizeof v, "%Y-%m-%d %H:%M:%S UTC", &tm))
      line("Captured", v);
  }
  /* A merged file (culpert merge) lists several, joined by ','. */
  if ((s = culpert__profile_prop(p, "culpert.pid")))
    line(strchr(s, ',') ? "Process ids" : "Process id", s);
  if ((s = culpert__profile_prop(p, "culpert.exe")))
    line(strchr(s, ',') ? "Executables" : "Executable", s);
  snprintf(v, sizeof v, "%zu records, %zu frames", p->nsamples, p->nframes);
  line("Stacks", v);

  kv_section("Properties", p->props, p->nprops, known_prop);
  kv_section("Metadata", p->metadata, p->nmetadata, NULL);
  if (p->nnotes) {
    printf("\nComments:\n");
    for (size_t i = 0; i < p->nnotes; i++) {
      printf("  ");
      culpert__put_printable(stdout, p->notes[i]);
      putchar('\n');
    }
  }
}

int culpert__cmd_info(int argc, char **argv)
{
  static const struct option longopts[] = {
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  struct culpert__profile *p = NULL;
  char err[512];
  int status = CULPERT_EXIT_ERROR;
  int c;

  optind = 0;
  opterr = 0;
  while ((c = culpert__getopt(argc, argv, "h", longopts)) != -1) {
    if (c == 'h') {
      help(stdout);
      return CULPERT_EXIT_OK;
    }
    culpert__error("unknown option '%s' (see 'culpert info --help')", argv[optind - 1]);
    return CULPERT_EXIT_ERROR;
  }
  if (optind >= argc) {
    culpert__error("info needs a profile FILE (see 'culpert info --help')");
    return CULPERT_EXIT_ERROR;
  }
  /* Several FILEs: one block each, a blank line between them; a file that
   * cannot be read is reported and the others are still shown. A
   * directory stands for the profiles in it, as for the other commands. */
  static const struct culpert__load_opts lo = {.stacks = CULPERT_STACKS_NONE}; /* no stacks shown */
  int nstdin = 0;
  for (int i = optind; i < argc; i++)
    nstdin += strcmp(argv[i], "-") == 0;
  if (nstdin > 1) {
    culpert__error("standard input ('-') can be read only once");
    return CULPERT_EXIT_ERROR;
  }
  status = CULPERT_EXIT_OK;
  bool first = true;
  for (int i = optind; i < argc; i++) {
    char **files;
    size_t nfiles;
    if (culpert__profile_expand_paths((const char *const *)&argv[i], 1, &files, &nfiles, err,
                                      sizeof err)) {
      fflush(stdout);
      culpert__error("%s", err);
      status = CULPERT_EXIT_ERROR;
      continue;
    }
    for (size_t k = 0; k < nfiles; k++) {
      if (culpert__profile_load_with(files[k], &lo, &p, err, sizeof err)) {
        fflush(stdout);
        culpert__error("%s", err);
        status = CULPERT_EXIT_ERROR;
        continue;
      }
      long spans = unique_spans(p);
      if (spans < 0) {
        fflush(stdout);
        culpert__error("%s: out of memory", files[k]);
        status = CULPERT_EXIT_ERROR;
      } else {
        if (!first)
          putchar('\n');
        first = false;
        show(p, spans);
      }
      culpert__profile_free(p);
      p = NULL;
    }
    culpert__profile_paths_free(files, nfiles);
  }
  return status;
}
