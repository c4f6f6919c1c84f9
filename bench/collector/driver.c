/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * driver.c: culpert_bench, the collector benchmark. Times the workloads of
 * culpert_bench_workload without any profiler, under libculpert.so (default
 * rate and 4 KiB, libunwind and frame pointers), under heaptrack, and under
 * jemalloc with and without its own profiler or culpert on top, all in one
 * run; then counts instructions with callgrind. The same configurations
 * also run three real programs when they are installed (python3, perl, and
 * the C compiler on one of culpert's sources). Prints markdown tables of
 * ratios; --markdown FILE saves the same text.
 *
 * Method: every configuration runs once per round, rounds repeat (--reps),
 * and the order of configurations rotates each round so none always runs
 * first or last. A ratio pairs a run with its baseline from the same round;
 * a cell shows the median ratio over the rounds and its min-max. CPU time
 * is user+sys of the child (and its waited-for children) from wait4().
 *
 * --focus CELL runs only one column (small1, small2, mixed1, mixed2, or a
 * program: python, perl, cc) for
 * glibc and culpert at the default rate with either stack, and loaded but
 * sampling nothing, for as many rounds as asked (--cpu N pins every run to
 * one CPU): the long A/B that tells a few percent apart on a noisy machine.
 * Its table gives the quartiles of the paired ratios.
 *
 * A benchmark, not a test: it never judges its figures. It exits non-zero
 * only when it cannot run at all or a workload run fails.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CULPERT_BENCH_WORKLOAD
#define CULPERT_BENCH_WORKLOAD "culpert_bench_workload"
#endif
#ifndef CULPERT_BENCH_LIBRARY
#define CULPERT_BENCH_LIBRARY "libculpert.so"
#endif
#ifndef CULPERT_BENCH_SOURCE_DIR
#define CULPERT_BENCH_SOURCE_DIR "."
#endif
#define DEFAULT_JEMALLOC "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

/*
 * glibc's malloc moves its mmap threshold up as the program frees mapped
 * blocks and gives the top of the heap back past a trim threshold, so how
 * often the mixed workload takes fresh zeroed pages depends on everything
 * that ever sat in its heap: one extra allocation at start-up moves its CPU
 * time by several percent either way. Every run gets these fixed values,
 * those of a heap in steady state, unless --glibc-defaults is given or the
 * caller set GLIBC_TUNABLES.
 */
#define PINNED_TUNABLES                                                                            \
  "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4194304:glibc.malloc.trim_threshold=268435456"

#define MAX_REPS 201
#define MAX_ENV  512

extern char **environ;

enum preload { PRELOAD_NONE, PRELOAD_CULPERT, PRELOAD_JEMALLOC, PRELOAD_BOTH };

/* One way of running a workload. `base` is the configuration its ratios
 * divide by; a baseline names itself. */
struct config {
  const char *name;
  int base;
  enum preload preload;
  const char *env[3];
  int heaptrack;
};

enum {
  CFG_GLIBC,
  CFG_CULPERT_512K_UNWIND,
  CFG_CULPERT_4K_UNWIND,
  CFG_CULPERT_512K_FP,
  CFG_CULPERT_4K_FP,
  CFG_CULPERT_OFF,
  CFG_HEAPTRACK,
  CFG_JEMALLOC,
  CFG_JEPROF_512K,
  CFG_JEPROF_4K,
  CFG_JE_CULPERT_512K,
  CFG_JE_CULPERT_4K,
  NCONFIG
};

/* The default rate is left unset on purpose: the figures are for what a
 * user gets without configuring anything. */
static const struct config configs[NCONFIG] = {
    [CFG_GLIBC] = {"glibc", CFG_GLIBC, PRELOAD_NONE, {NULL}, 0},
    [CFG_CULPERT_512K_UNWIND] = {"culpert 512K libunwind",
                                 CFG_GLIBC,
                                 PRELOAD_CULPERT,
                                 {"CULPERT_STACK=libunwind", NULL},
                                 0},
    [CFG_CULPERT_4K_UNWIND] = {"culpert 4K libunwind",
                               CFG_GLIBC,
                               PRELOAD_CULPERT,
                               {"CULPERT_STACK=libunwind", "CULPERT_SAMPLE_RATE=4K", NULL},
                               0},
    [CFG_CULPERT_512K_FP] =
        {"culpert 512K fp", CFG_GLIBC, PRELOAD_CULPERT, {"CULPERT_STACK=fp", NULL}, 0},
    [CFG_CULPERT_4K_FP] = {"culpert 4K fp",
                           CFG_GLIBC,
                           PRELOAD_CULPERT,
                           {"CULPERT_STACK=fp", "CULPERT_SAMPLE_RATE=4K", NULL},
                           0},
    /* Loaded but never sampling: what the wrappers and the fixed cost
     * take, so the rest of a culpert row is what its samples cost. */
    [CFG_CULPERT_OFF] = {"culpert, sampling off (1T)",
                         CFG_GLIBC,
                         PRELOAD_CULPERT,
                         {"CULPERT_SAMPLE_RATE=1T", NULL},
                         0},
    [CFG_HEAPTRACK] = {"heaptrack --raw", CFG_GLIBC, PRELOAD_NONE, {NULL}, 1},
    [CFG_JEMALLOC] = {"jemalloc", CFG_JEMALLOC, PRELOAD_JEMALLOC, {NULL}, 0},
    [CFG_JEPROF_512K] = {"jemalloc prof 512K",
                         CFG_JEMALLOC,
                         PRELOAD_JEMALLOC,
                         {"MALLOC_CONF=prof:true,lg_prof_sample:19", NULL},
                         0},
    [CFG_JEPROF_4K] = {"jemalloc prof 4K",
                       CFG_JEMALLOC,
                       PRELOAD_JEMALLOC,
                       {"MALLOC_CONF=prof:true,lg_prof_sample:12", NULL},
                       0},
    [CFG_JE_CULPERT_512K] = {"culpert 512K libunwind + jemalloc",
                             CFG_JEMALLOC,
                             PRELOAD_BOTH,
                             {"CULPERT_STACK=libunwind", NULL},
                             0},
    [CFG_JE_CULPERT_4K] = {"culpert 4K libunwind + jemalloc",
                           CFG_JEMALLOC,
                           PRELOAD_BOTH,
                           {"CULPERT_STACK=libunwind", "CULPERT_SAMPLE_RATE=4K", NULL},
                           0},
};

/* Real programs, timed the same way: what a user's own program is likely to
 * see, next to the allocator stress tests above them. */
enum program { PROG_NONE, PROG_PYTHON, PROG_PERL, PROG_CC };

/* A column of the tables: a workload of culpert_bench_workload and its
 * thread count, or a real program. Operation counts give a baseline of
 * roughly 0.3-1 s per thread on a current x86-64 core; a program's `ops` is
 * its size argument (rows, keys; for the compiler, --quick picks a smaller
 * file). */
struct cell {
  const char *mode; /* the workload, or the --focus name of a program */
  unsigned threads;
  uint64_t ops;
  uint64_t bytes; /* requested by all threads, as the workload reports */
  enum program program;
  const char *title; /* a program's column title */
};

#define NWORK 4 /* the workload cells come first */
#define NCELL 7
enum { SMALL1, SMALL2, MIXED1, MIXED2, PYTHON, PERL, CC }; /* the cells, in order */
static struct cell cells[NCELL] = {
    {"small", 1, 20000000, 0, PROG_NONE, NULL},
    {"small", 2, 20000000, 0, PROG_NONE, NULL},
    {"mixed", 1, 2500000, 0, PROG_NONE, NULL},
    {"mixed", 2, 2500000, 0, PROG_NONE, NULL},
    {"python", 1, 60000, 0, PROG_PYTHON, "python3: JSON round trip and sort"},
    {"perl", 1, 500000, 0, PROG_PERL, "perl: hash of arrays"},
    {"cc", 1, 1, 0, PROG_CC, "cc -O2 -g -c (gcc, cc1, as)"},
};

/* python3 -c: builds N records, dumps them to JSON, parses the text back
 * and sorts it. CPython takes small objects from its own arenas, so most
 * of its allocations never reach malloc. */
static const char python_script[] =
    "import json, sys\n"
    "n = int(sys.argv[1])\n"
    "rows = [{'id': i, 'name': 'item%d' % i, 'tags': ['t%d' % (i % 7), 'u%d' % (i % 13)],\n"
    "         'score': i * 0.5} for i in range(n)]\n"
    "back = json.loads(json.dumps(rows))\n"
    "back.sort(key=lambda r: (r['tags'][1], -r['id']))\n"
    "print(len(back), back[0]['id'])\n";

/* perl -e: N strings pushed onto the arrays of 5000 hash keys. Debian's
 * perl allocates every value with malloc. */
static const char perl_script[] =
    "my %h; my $n = shift; for my $i (1 .. $n) { push @{$h{$i % 5000}}, \"v$i\" x 3 }"
    " my $t = 0; $t += @{$h{$_}} for keys %h; print \"$t\\n\"";

struct sample {
  double cpu;
  double wall;
};

struct options {
  int quick;
  int focus; /* a cell, or -1: every cell */
  int cpu;   /* the CPU every run is pinned to, or -1 */
  int reps;
  int heaptrack_reps;
  int callgrind;
  int glibc_defaults;
  double scale;
  const char *markdown;
  const char *library;
  const char *workload;
  const char *jemalloc;
};

struct bench {
  struct options opt;
  char tmp[64];
  char output_env[128];
  char preload_culpert[1024];
  char preload_both[2048];
  char preload_jemalloc[1024];
  int have[NCONFIG];
  int have_cell[NCELL];
  int have_valgrind;
  int missing_profiles;
  int callgrind_done;
  double extra_ir[2], extra_dw[2]; /* unsampled pair: glibc, jemalloc */
  int model_done;
  double model_mixed[2]; /* mixed 1 thread under the cache model: libunwind, fp */
  struct sample m[NCELL][NCONFIG][MAX_REPS];
  FILE *out;
};

static int die_usage(const char *why)
{
  if (why != NULL)
    fprintf(stderr, "culpert_bench: %s\n", why);
  fprintf(stderr, "usage: culpert_bench [--quick] [--reps N] [--heaptrack-reps N] [--scale F]\n"
                  "                     [--no-callgrind] [--markdown FILE] [--library PATH]\n"
                  "                     [--workload PATH] [--jemalloc PATH] [--glibc-defaults]\n"
                  "                     [--focus small1|small2|mixed1|mixed2|python|perl|cc]\n"
                  "                     [--cpu N]\n");
  return 2;
}

static double seconds(struct timeval tv)
{
  return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether NAME is an executable somewhere on PATH. */
static int on_path(const char *name)
{
  const char *path = getenv("PATH");
  char buf[4096];
  while (path != NULL && *path != '\0') {
    const char *colon = strchr(path, ':');
    size_t n = colon ? (size_t)(colon - path) : strlen(path);
    if (n > 0 && n + strlen(name) + 2 < sizeof buf) {
      memcpy(buf, path, n);
      buf[n] = '/';
      strcpy(buf + n + 1, name);
      if (access(buf, X_OK) == 0)
        return 1;
    }
    path = colon ? colon + 1 : NULL;
  }
  return 0;
}

/* Deletes every file in the scratch directory; returns how many there were
 * besides the child's captured stdout and stderr. */
static int clean_tmp(const char *dir)
{
  char path[512];
  int n = 0;
  DIR *d = opendir(dir);
  if (d == NULL)
    return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
      continue;
    if (strcmp(e->d_name, "stderr.txt") != 0 && strcmp(e->d_name, "stdout.txt") != 0)
      n++;
    unlink(path);
  }
  closedir(d);
  return n;
}

/* The environment a child gets: ours without anything that would change
 * which allocator or profiler runs, plus EXTRA. */
static void child_env(struct bench *b, const struct config *c, const char *extra, char **envp)
{
  size_t n = 0;
  for (char **e = environ; *e != NULL && n < MAX_ENV - 8; e++) {
    if (strncmp(*e, "LD_PRELOAD=", 11) == 0 || strncmp(*e, "MALLOC_CONF=", 12) == 0 ||
        strncmp(*e, "CULPERT_", 8) == 0)
      continue;
    envp[n++] = *e;
  }
  switch (c->preload) {
  case PRELOAD_NONE:
    break;
  case PRELOAD_CULPERT:
    envp[n++] = b->preload_culpert;
    break;
  case PRELOAD_JEMALLOC:
    envp[n++] = b->preload_jemalloc;
    break;
  case PRELOAD_BOTH:
    envp[n++] = b->preload_both;
    break;
  }
  if (!b->opt.glibc_defaults && getenv("GLIBC_TUNABLES") == NULL)
    envp[n++] = PINNED_TUNABLES;
  if (c->preload == PRELOAD_CULPERT || c->preload == PRELOAD_BOTH) {
    envp[n++] = b->output_env;
    envp[n++] = "CULPERT_QUIET=1";
    envp[n++] = "CULPERT_SEED=1";
  }
  for (int i = 0; i < 3 && c->env[i] != NULL; i++)
    envp[n++] = (char *)c->env[i];
  if (extra != NULL)
    envp[n++] = (char *)extra;
  envp[n] = NULL;
}

/* Runs ARGV (argv[0] looked up on PATH) with the environment of config C
 * and times it. Returns 0, or -1 if it could not start or did not exit 0,
 * after showing the end of its stderr. */
static int run_child(struct bench *b, const struct config *c, const char *extra, char **argv,
                     struct sample *s)
{
  char *envp[MAX_ENV];
  char errpath[128], outpath[128];
  struct rusage ru;
  int status = 0;
  child_env(b, c, extra, envp);
  snprintf(errpath, sizeof errpath, "%s/stderr.txt", b->tmp);
  snprintf(outpath, sizeof outpath, "%s/stdout.txt", b->tmp);
  fflush(NULL);
  double t0 = now();
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "culpert_bench: fork: %s\n", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    if (b->opt.cpu >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(b->opt.cpu, &set);
      if (sched_setaffinity(0, sizeof set, &set) != 0) {
        fprintf(stderr, "culpert_bench: cannot run on CPU %d: %s\n", b->opt.cpu, strerror(errno));
        _exit(126);
      }
    }
    int out = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out >= 0)
      dup2(out, STDOUT_FILENO);
    if (err >= 0)
      dup2(err, STDERR_FILENO);
    execvpe(argv[0], argv, envp);
    _exit(127);
  }
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
    ;
  s->wall = now() - t0;
  s->cpu = seconds(ru.ru_utime) + seconds(ru.ru_stime);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return 0;
  fprintf(stderr, "culpert_bench: %s under \"%s\" failed (status %d); its stderr:\n", argv[0],
          c->name, status);
  FILE *f = fopen(errpath, "r");
  if (f != NULL) {
    char line[512];
    for (int i = 0; i < 20 && fgets(line, sizeof line, f) != NULL; i++)
      fprintf(stderr, "  %s", line);
    fclose(f);
  }
  return -1;
}

/* The byte count the last workload run printed, or 0. */
static uint64_t requested_bytes(const struct bench *b)
{
  char path[128];
  unsigned long long n = 0;
  snprintf(path, sizeof path, "%s/stdout.txt", b->tmp);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  if (fscanf(f, "requested %llu bytes", &n) != 1)
    n = 0;
  fclose(f);
  return n;
}

/* The program a cell runs first: the workload, or the real program. The
 * system's copy in /usr/bin comes before PATH: a version manager's shim
 * found first on PATH (pyenv's python3 is a shell script that runs bash
 * several times before the interpreter) would time the shim. */
static const char *cell_command(const struct bench *b, const struct cell *cl)
{
  static const char *names[] = {[PROG_PYTHON] = "python3", [PROG_PERL] = "perl", [PROG_CC] = "cc"};
  static char path[64];
  if (cl->program == PROG_NONE)
    return b->opt.workload;
  snprintf(path, sizeof path, "/usr/bin/%s", names[cl->program]);
  return access(path, X_OK) == 0 ? path : names[cl->program];
}

/* Appends the command line of program cell CL to argv from argv[n] on;
 * returns the new count. `size` is the cell's scaled size argument. */
static int program_argv(const struct bench *b, const struct cell *cl, char *size, char **argv,
                        int n)
{
  /* The compiler's input: one of culpert's own sources, a small one for
   * --quick (the size argument is 0 then). */
  static char src[1024], inc[1024];
  snprintf(src, sizeof src, "%s/src/%s", CULPERT_BENCH_SOURCE_DIR,
           strcmp(size, "0") == 0 ? "bytesize.c" : "demangle.c");
  snprintf(inc, sizeof inc, "-I%s/src", CULPERT_BENCH_SOURCE_DIR);
  switch (cl->program) {
  case PROG_PYTHON: /* the interpreter, its option for a script, the script, N */
  case PROG_PERL:
    argv[n++] = (char *)cell_command(b, cl);
    argv[n++] = cl->program == PROG_PYTHON ? "-c" : "-e";
    argv[n++] = (char *)(cl->program == PROG_PYTHON ? python_script : perl_script);
    argv[n++] = size;
    break;
  case PROG_CC:
    argv[n++] = (char *)cell_command(b, cl);
    argv[n++] = "-O2";
    argv[n++] = "-g";
    argv[n++] = inc;
    argv[n++] = "-c";
    argv[n++] = src;
    argv[n++] = "-o";
    argv[n++] = "/dev/null";
    break;
  case PROG_NONE:
    break;
  }
  return n;
}

/* One timed run of a cell under config K. */
static int run_cell(struct bench *b, int k, struct cell *cl, uint64_t ops, struct sample *s)
{
  char threads[16], nops[32], out[128];
  char *argv[16];
  int n = 0;
  snprintf(threads, sizeof threads, "%u", cl->threads);
  snprintf(nops, sizeof nops, "%llu", (unsigned long long)ops);
  if (configs[k].heaptrack) {
    snprintf(out, sizeof out, "%s/heaptrack", b->tmp);
    argv[n++] = "heaptrack";
    argv[n++] = "--raw";
    argv[n++] = "-o";
    argv[n++] = out;
  }
  if (cl->program != PROG_NONE) {
    n = program_argv(b, cl, nops, argv, n);
  } else {
    argv[n++] = (char *)b->opt.workload;
    argv[n++] = (char *)cl->mode;
    argv[n++] = threads;
    argv[n++] = nops;
  }
  argv[n] = NULL;
  int rc = run_child(b, &configs[k], NULL, argv, s);
  if (rc == 0 && k == CFG_GLIBC && cl->program == PROG_NONE)
    cl->bytes = requested_bytes(b);
  int files = clean_tmp(b->tmp);
  if (rc == 0 && configs[k].preload != PRELOAD_NONE && configs[k].preload != PRELOAD_JEMALLOC &&
      files == 0)
    b->missing_profiles++;
  return rc;
}

/* A cell's size argument after --scale: at least 1 for a workload; 0 picks
 * the compiler's small input. */
static uint64_t cell_ops(const struct bench *b, const struct cell *cl)
{
  uint64_t ops = (uint64_t)((double)cl->ops * b->opt.scale);
  if (cl->program == PROG_CC)
    return b->opt.quick ? 0 : 1;
  return ops == 0 ? 1 : ops;
}

/* A cell's column title, "mixed, 2 threads" or the program's. */
static const char *cell_title(const struct cell *cl, char *buf, size_t len)
{
  if (cl->program != PROG_NONE)
    return cl->title;
  snprintf(buf, len, "%s, %u thread%s", cl->mode, cl->threads, cl->threads > 1 ? "s" : "");
  return buf;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

struct stat3 {
  double median, min, max;
};

static struct stat3 summarize(const double *v, int n)
{
  double s[MAX_REPS];
  struct stat3 r = {NAN, NAN, NAN};
  if (n <= 0)
    return r;
  memcpy(s, v, (size_t)n * sizeof *v);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  r.median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  r.min = s[0];
  r.max = s[n - 1];
  return r;
}

/* Rounds in which config K ran in cell C: all of them, except heaptrack
 * which runs only in its first --heaptrack-reps rounds. */
static int rounds_for(const struct bench *b, int k)
{
  if (configs[k].heaptrack && b->opt.heaptrack_reps < b->opt.reps)
    return b->opt.heaptrack_reps;
  return b->opt.reps;
}

/* Median and spread of config K's ratio to its baseline in cell C. */
static struct stat3 ratio(const struct bench *b, int c, int k, int wall)
{
  double r[MAX_REPS];
  int n = rounds_for(b, k);
  for (int i = 0; i < n; i++) {
    const struct sample *x = &b->m[c][k][i], *y = &b->m[c][configs[k].base][i];
    r[i] = wall ? x->wall / y->wall : x->cpu / y->cpu;
  }
  return summarize(r, n);
}

/* The ratio table of cells [first, last). */
static void print_ratio_table(struct bench *b, int wall, int first, int last)
{
  FILE *o = b->out;
  char title[64];
  fprintf(o, "| configuration | against |");
  for (int c = first; c < last; c++)
    fprintf(o, " %s |", cell_title(&cells[c], title, sizeof title));
  fprintf(o, "\n|---|---|");
  for (int c = first; c < last; c++)
    fprintf(o, "---|");
  fprintf(o, "\n");
  for (int k = 0; k < NCONFIG; k++) {
    if (configs[k].base == k)
      continue;
    fprintf(o, "| %s | %s |", configs[k].name, configs[configs[k].base].name);
    for (int c = first; c < last; c++) {
      if (!b->have[k] || !b->have[configs[k].base] || !b->have_cell[c]) {
        fprintf(o, " n/a |");
        continue;
      }
      struct stat3 st = ratio(b, c, k, wall);
      fprintf(o, " %.3f (%.3f–%.3f) |", st.median, st.min, st.max);
    }
    fprintf(o, "\n");
  }
  fprintf(o, "\n");
}

/* Baseline times, and how hard each workload drives the allocator: the
 * sampling overhead of a collector grows with bytes allocated per second. */
/* Median CPU and wall seconds of cell c without a profiler: med[0] under
 * glibc, med[1] under jemalloc; NAN where that baseline did not run. */
static void base_medians(const struct bench *b, int c, double med[2][2])
{
  const int bases[2] = {CFG_GLIBC, CFG_JEMALLOC};
  for (int j = 0; j < 2; j++) {
    double cpu[MAX_REPS], wall[MAX_REPS];
    med[j][0] = med[j][1] = NAN;
    if (!b->have[bases[j]] || !b->have_cell[c])
      continue;
    for (int i = 0; i < b->opt.reps; i++) {
      cpu[i] = b->m[c][bases[j]][i].cpu;
      wall[i] = b->m[c][bases[j]][i].wall;
    }
    med[j][0] = summarize(cpu, b->opt.reps).median;
    med[j][1] = summarize(wall, b->opt.reps).median;
  }
}

static void print_baselines(struct bench *b)
{
  FILE *o = b->out;
  fprintf(o, "| workload | threads | ops per thread | GB requested | GB per glibc CPU s | "
             "samples expected at 512K | glibc CPU s | glibc wall s | jemalloc CPU s | "
             "jemalloc wall s |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (int c = 0; c < NWORK; c++) {
    double med[2][2];
    base_medians(b, c, med);
    double gb = (double)cells[c].bytes / 1e9;
    fprintf(o, "| %s | %u | %llu | %.2f | %.1f | %.0f |", cells[c].mode, cells[c].threads,
            (unsigned long long)(cells[c].ops * b->opt.scale), gb, gb / med[0][0],
            (double)cells[c].bytes / 524288.0);
    for (int j = 0; j < 2; j++) {
      if (isnan(med[j][0]))
        fprintf(o, " n/a | n/a |");
      else
        fprintf(o, " %.3f | %.3f |", med[j][0], med[j][1]);
    }
    fprintf(o, "\n");
  }
  fprintf(o, "\n");
}

/* The real programs' baseline times; "n/a" for one not installed. */
static void print_program_baselines(struct bench *b)
{
  FILE *o = b->out;
  fprintf(o, "| program | command | size argument | glibc CPU s | glibc wall s | "
             "jemalloc CPU s |\n|---|---|---|---|---|---|\n");
  for (int c = NWORK; c < NCELL; c++) {
    double med[2][2];
    base_medians(b, c, med);
    fprintf(o, "| %s | %s | %llu |", cells[c].title, cell_command(b, &cells[c]),
            (unsigned long long)cell_ops(b, &cells[c]));
    if (!b->have_cell[c]) {
      fprintf(o, " not installed | | |\n");
      continue;
    }
    fprintf(o, " %.3f | %.3f |", med[0][0], med[0][1]);
    if (isnan(med[1][0]))
      fprintf(o, " n/a |\n");
    else
      fprintf(o, " %.3f |\n", med[1][0]);
  }
  fprintf(o, "\n");
}

/* The timed part: every round runs every configuration on every cell. */
static int run_rounds(struct bench *b)
{
  for (int r = 0; r < b->opt.reps; r++) {
    fprintf(stderr, "culpert_bench: round %d of %d\n", r + 1, b->opt.reps);
    for (int c = 0; c < NCELL; c++) {
      uint64_t ops = cell_ops(b, &cells[c]);
      if (!b->have_cell[c])
        continue;
      for (int i = 0; i < NCONFIG; i++) {
        /* Rotate, and reverse every other round, so each configuration
         * meets every neighbour and position. */
        int k = (r % 2 ? NCONFIG - 1 - i : i) + r;
        k %= NCONFIG;
        if (!b->have[k] || r >= rounds_for(b, k))
          continue;
        if (run_cell(b, k, &cells[c], ops, &b->m[c][k][r]) != 0)
          return -1;
      }
    }
  }
  return 0;
}

/* The configurations --focus compares, glibc first. */
static const int focus_configs[] = {CFG_GLIBC, CFG_CULPERT_OFF, CFG_CULPERT_512K_FP,
                                    CFG_CULPERT_512K_UNWIND};
#define NFOCUS (int)(sizeof focus_configs / sizeof focus_configs[0])

/* --focus: only one cell, the same rotation as run_rounds. */
static int run_focus(struct bench *b)
{
  struct cell *cl = &cells[b->opt.focus];
  uint64_t ops = cell_ops(b, cl);
  if (!b->have_cell[b->opt.focus]) {
    fprintf(stderr, "culpert_bench: %s is not installed\n", cell_command(b, cl));
    return -1;
  }
  for (int r = 0; r < b->opt.reps; r++) {
    if (r % 10 == 0)
      fprintf(stderr, "culpert_bench: round %d of %d\n", r + 1, b->opt.reps);
    for (int i = 0; i < NFOCUS; i++) {
      int k = focus_configs[((r % 2 ? NFOCUS - 1 - i : i) + r) % NFOCUS];
      if (run_cell(b, k, cl, ops, &b->m[b->opt.focus][k][r]) != 0)
        return -1;
    }
  }
  return 0;
}

/* The value at fraction q of the sorted v[0..n) (nearest rank). */
static double quantile(const double *sorted, int n, double q)
{
  int i = (int)(q * (n - 1) + 0.5);
  return sorted[i];
}

static void print_focus(struct bench *b)
{
  FILE *o = b->out;
  int c = b->opt.focus, n = b->opt.reps;
  char title[64];
  fprintf(o,
          "### %s: CPU time against glibc, paired by round\n\n"
          "| configuration | median ratio | q1–q3 | min–max | median CPU s |\n"
          "|---|---|---|---|---|\n",
          cell_title(&cells[c], title, sizeof title));
  for (int i = 0; i < NFOCUS; i++) {
    int k = focus_configs[i];
    double r[MAX_REPS], t[MAX_REPS];
    for (int j = 0; j < n; j++) {
      r[j] = b->m[c][k][j].cpu / b->m[c][CFG_GLIBC][j].cpu;
      t[j] = b->m[c][k][j].cpu;
    }
    qsort(r, (size_t)n, sizeof *r, cmp_double);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    fprintf(o, "| %s | %.4f | %.4f–%.4f | %.4f–%.4f | %.3f |\n", configs[k].name,
            quantile(r, n, 0.5), quantile(r, n, 0.25), quantile(r, n, 0.75), r[0], r[n - 1],
            quantile(t, n, 0.5));
  }
  fprintf(o, "\n");
}

/* What callgrind counts for a whole run: instructions, data writes, and
 * cycles estimated from its cache model: Ir + 10 per first-level miss +
 * 100 per last-level miss (instruction and data, reads and writes). */
struct counts {
  double ir, dw, cyc;
};

/* Index of EVENT in callgrind's "events:" line, or -1. */
static int event_index(const char *events, const char *event)
{
  char buf[512];
  int i = 0;
  snprintf(buf, sizeof buf, "%s", events);
  for (char *save, *t = strtok_r(buf, " \t\n", &save); t != NULL;
       t = strtok_r(NULL, " \t\n", &save), i++)
    if (strcmp(t, event) == 0)
      return i;
  return -1;
}

/* Field I (0-based) of a whitespace-separated list of numbers. */
static double field(const char *s, int i)
{
  char *end;
  double v = -1;
  for (int k = 0; k <= i; k++) {
    v = strtod(s, &end);
    if (end == s)
      return -1;
    s = end;
  }
  return v;
}

/* Callgrind's totals for one run of workload MODE (one thread, OPS
 * operations) under config K (EXTRA: one more environment entry).
 * Negative values on failure. */
static struct counts callgrind_run(struct bench *b, int k, const char *extra, const char *mode,
                                   uint64_t ops)
{
  char outfile[160], outarg[192], nops[32], line[512], events[512] = "";
  char *argv[] = {"valgrind",
                  "--tool=callgrind",
                  "--cache-sim=yes",
                  outarg,
                  (char *)b->opt.workload,
                  (char *)mode,
                  "1",
                  nops,
                  NULL};
  static const char *const l1[] = {"I1mr", "D1mr", "D1mw"}, *const ll[] = {"ILmr", "DLmr", "DLmw"};
  struct sample s;
  struct counts c = {-1, -1, -1};
  snprintf(outfile, sizeof outfile, "%s/callgrind.out", b->tmp);
  snprintf(outarg, sizeof outarg, "--callgrind-out-file=%s", outfile);
  snprintf(nops, sizeof nops, "%llu", (unsigned long long)ops);
  if (run_child(b, &configs[k], extra, argv, &s) != 0)
    goto out;
  FILE *f = fopen(outfile, "r");
  if (f == NULL)
    goto out;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "events:", 7) == 0)
      snprintf(events, sizeof events, "%s", line + 7);
    if (strncmp(line, "summary:", 8) == 0 || strncmp(line, "totals:", 7) == 0) {
      const char *v = strchr(line, ':') + 1;
      int ir = event_index(events, "Ir"), dw = event_index(events, "Dw");
      c.ir = ir < 0 ? -1 : field(v, ir);
      c.dw = dw < 0 ? -1 : field(v, dw);
      c.cyc = c.ir;
      for (int i = 0; i < 3 && c.cyc >= 0; i++) {
        int a = event_index(events, l1[i]), z = event_index(events, ll[i]);
        c.cyc = a < 0 || z < 0 ? -1 : c.cyc + 10 * field(v, a) + 100 * field(v, z);
      }
      break;
    }
  }
  fclose(f);
out:
  clean_tmp(b->tmp);
  return c;
}

/* Counts per malloc(32)+free pair under config K: the slope between two
 * run lengths, so start-up and exit cancel out. */
static struct counts callgrind_per_pair(struct bench *b, int k, const char *extra, uint64_t n1,
                                        uint64_t n2)
{
  struct counts a = callgrind_run(b, k, extra, "pairs", n1);
  struct counts z = callgrind_run(b, k, extra, "pairs", n2);
  struct counts r = {NAN, NAN, NAN};
  if (a.ir >= 0 && z.ir >= 0)
    r.ir = (z.ir - a.ir) / (double)(n2 - n1);
  if (a.dw >= 0 && z.dw >= 0)
    r.dw = (z.dw - a.dw) / (double)(n2 - n1);
  return r;
}

/* Rounds a difference of slopes so "-0.0" never prints. */
static double tidy(double d)
{
  return fabs(d) < 0.05 ? 0.0 : d;
}

/*
 * The mixed workload at the default rate, 1 thread, under callgrind's
 * cache model: repeatable where CPU time on a shared machine is not.
 * Runs of OPS1 and OPS2 steps give a fixed part and a cost per step,
 * extrapolated to the length the timed rounds run.
 */
static void run_cache_model(struct bench *b)
{
  FILE *o = b->out;
  uint64_t n1 = 1000, n2 = b->opt.quick ? 20000 : 250000;
  uint64_t full = (uint64_t)((double)cells[MIXED1].ops * b->opt.scale);
  int ks[3] = {CFG_GLIBC, CFG_CULPERT_512K_UNWIND, CFG_CULPERT_512K_FP};
  struct counts fixed[3], step[3];
  if (full < n2)
    full = n2;
  for (int i = 0; i < 3; i++) {
    struct counts a = callgrind_run(b, ks[i], NULL, "mixed", n1);
    struct counts z = callgrind_run(b, ks[i], NULL, "mixed", n2);
    if (a.ir < 0 || z.ir < 0 || a.cyc < 0 || z.cyc < 0)
      return;
    step[i].ir = (z.ir - a.ir) / (double)(n2 - n1);
    step[i].cyc = (z.cyc - a.cyc) / (double)(n2 - n1);
    fixed[i].ir = a.ir - step[i].ir * (double)n1;
    fixed[i].cyc = a.cyc - step[i].cyc * (double)n1;
  }
  fprintf(o,
          "### Mixed workload, 1 thread, default rate, under callgrind's cache model\n\n"
          "Runs of %llu and %llu steps under `valgrind --tool=callgrind --cache-sim=yes` "
          "(the caches valgrind detects on this machine) give a fixed part and a cost per "
          "step; totals are extrapolated to the %llu steps of the timed rounds. Estimated "
          "cycles = instructions + 10 per first-level miss + 100 per last-level miss. "
          "Deterministic for a given seed (CULPERT_SEED=1), unlike CPU time here.\n\n",
          (unsigned long long)n1, (unsigned long long)n2, (unsigned long long)full);
  fprintf(o, "| configuration | fixed Minstr | instr per step | est. cycles per step | "
             "total instr vs glibc | total est. cycles vs glibc |\n|---|---|---|---|---|---|\n");
  for (int i = 0; i < 3; i++) {
    double ir = fixed[i].ir + step[i].ir * (double)full;
    double cyc = fixed[i].cyc + step[i].cyc * (double)full;
    double ir0 = fixed[0].ir + step[0].ir * (double)full;
    double cyc0 = fixed[0].cyc + step[0].cyc * (double)full;
    fprintf(o, "| %s | %.2f | %.1f | %.1f | %+.2f%% | %+.2f%% |\n", configs[ks[i]].name,
            fixed[i].ir / 1e6, step[i].ir, step[i].cyc, (ir / ir0 - 1) * 100,
            (cyc / cyc0 - 1) * 100);
    if (i > 0)
      b->model_mixed[i - 1] = cyc / cyc0;
  }
  b->model_done = 1;
  fprintf(o, "\n");
}

static void run_callgrind(struct bench *b)
{
  FILE *o = b->out;
  uint64_t n1 = b->opt.quick ? 2000 : 100000, n2 = b->opt.quick ? 12000 : 1100000;
  uint64_t s1 = b->opt.quick ? 200 : 2000, s2 = b->opt.quick ? 1200 : 12000;
  const char *unsampled = "CULPERT_SAMPLE_RATE=1T";
  fprintf(stderr, "culpert_bench: callgrind\n");

  fprintf(o,
          "### Unsampled path: per malloc(32)+free pair (callgrind)\n\n"
          "Slope between %llu and %llu pairs, so start-up and exit cancel out; culpert "
          "runs at CULPERT_SAMPLE_RATE=1T so nothing is sampled. Dw: data writes.\n\n",
          (unsigned long long)n1, (unsigned long long)n2);
  fprintf(o, "| allocator | instructions without | with culpert | extra | Dw without | "
             "Dw with | extra Dw |\n|---|---|---|---|---|---|---|\n");
  int pairs[2][2] = {{CFG_GLIBC, CFG_CULPERT_512K_UNWIND}, {CFG_JEMALLOC, CFG_JE_CULPERT_512K}};
  double glibc_pair = NAN;
  for (int i = 0; i < 2; i++) {
    if (!b->have[pairs[i][0]])
      continue;
    struct counts x = callgrind_per_pair(b, pairs[i][0], NULL, n1, n2);
    struct counts y = callgrind_per_pair(b, pairs[i][1], unsampled, n1, n2);
    if (i == 0)
      glibc_pair = x.ir;
    b->extra_ir[i] = y.ir - x.ir;
    b->extra_dw[i] = y.dw - x.dw;
    b->callgrind_done = 1;
    fprintf(o, "| %s | %.1f | %.1f | %+.1f | %.1f | %.1f | %+.1f |\n", configs[pairs[i][0]].name,
            x.ir, y.ir, tidy(y.ir - x.ir), x.dw, y.dw, tidy(y.dw - x.dw));
  }

  fprintf(o,
          "\n### One sampled allocation (CULPERT_SAMPLE_RATE=0: every allocation)\n\n"
          "Instructions: slope between %llu and %llu sampled pairs under callgrind, minus "
          "the glibc pair above. malloc() is called 15 frames below main().\n\n",
          (unsigned long long)s1, (unsigned long long)s2);
  fprintf(o, "| stack | instructions per sampled malloc+free |\n|---|---|\n");
  int stacks[2] = {CFG_CULPERT_512K_UNWIND, CFG_CULPERT_512K_FP};
  for (int i = 0; i < 2; i++) {
    struct counts y = callgrind_per_pair(b, stacks[i], "CULPERT_SAMPLE_RATE=0", s1, s2);
    fprintf(o, "| %s | %.0f |\n", i == 0 ? "libunwind" : "fp", y.ir - glibc_pair);
  }
  fprintf(o, "\n");
  run_cache_model(b);
}

/* CPU time of one sampled malloc+free pair, and the fixed cost of a
 * profiled process (start-up, and the profile written at exit), from runs
 * of "pairs" at rate 0 at two lengths against the same runs without
 * culpert, interleaved: per pair = difference of slopes, fixed = the short
 * run's difference. Medians over the rounds. */
static int run_sampled_time(struct bench *b)
{
  FILE *o = b->out;
  uint64_t ops = b->opt.quick ? 2000 : (uint64_t)(200000 * b->opt.scale);
  const uint64_t few = 10;
  char nops[32], nfew[32];
  char *argv_long[] = {(char *)b->opt.workload, "pairs", "1", nops, NULL};
  char *argv_short[] = {(char *)b->opt.workload, "pairs", "1", nfew, NULL};
  int ks[3] = {CFG_GLIBC, CFG_CULPERT_512K_UNWIND, CFG_CULPERT_512K_FP};
  double cost[2][MAX_REPS], fixed[2][MAX_REPS];
  if (ops <= few)
    ops = few + 1;
  snprintf(nops, sizeof nops, "%llu", (unsigned long long)ops);
  snprintf(nfew, sizeof nfew, "%llu", (unsigned long long)few);
  fprintf(stderr, "culpert_bench: sampled allocation time\n");
  for (int r = 0; r < b->opt.reps; r++) {
    struct sample s[3][2];
    for (int i = 0; i < 6; i++) {
      int j = (i + r) % 6, k = j / 2, shorter = j % 2;
      if (run_child(b, &configs[ks[k]], k ? "CULPERT_SAMPLE_RATE=0" : NULL,
                    shorter ? argv_short : argv_long, &s[k][shorter]) != 0)
        return -1;
      clean_tmp(b->tmp);
    }
    double base = s[0][0].cpu - s[0][1].cpu;
    for (int i = 0; i < 2; i++) {
      cost[i][r] = (s[i + 1][0].cpu - s[i + 1][1].cpu - base) / (double)(ops - few) * 1e6;
      fixed[i][r] = (s[i + 1][1].cpu - s[0][1].cpu) * 1e3;
    }
  }
  fprintf(o, "| stack | CPU µs per sampled malloc+free | fixed CPU ms per process |\n"
             "|---|---|---|\n");
  for (int i = 0; i < 2; i++) {
    struct stat3 c = summarize(cost[i], b->opt.reps), f = summarize(fixed[i], b->opt.reps);
    fprintf(o, "| %s | %.2f (%.2f–%.2f) | %.1f (%.1f–%.1f) |\n", i == 0 ? "libunwind" : "fp",
            c.median, c.min, c.max, f.median, f.min, f.max);
  }
  fprintf(o,
          "\nPer pair: slope between %llu and %llu pairs at CULPERT_SAMPLE_RATE=0 minus the "
          "same slope without culpert. Fixed: the %llu-pair run (%llu samples of one "
          "stack) minus the same run without culpert: loading the collector and writing "
          "the profile at exit. Median (min–max) over %d rounds.\n\n",
          (unsigned long long)few, (unsigned long long)ops, (unsigned long long)few,
          (unsigned long long)few, b->opt.reps);
  return 0;
}

static const char *verdict(int met)
{
  return met ? "met" : "not met";
}

/* The figures the project's performance goals are stated in, next to the
 * goals. Medians of CPU-time ratios; the tables above hold the spreads. */
static void print_goals(struct bench *b)
{
  FILE *o = b->out;
  fprintf(o, "### Against the goals\n\n");
  if (b->opt.quick)
    fprintf(o, "(--quick: the workloads are too short for these figures to mean anything; "
               "the fixed cost per process dominates them.)\n\n");
  fprintf(o, "| goal | measured (median CPU ratios) | verdict |\n"
             "|---|---|---|\n");
  if (b->callgrind_done)
    fprintf(o,
            "| unsampled path adds at most ~10 instructions to a malloc+free pair | "
            "+%.1f on glibc, +%.1f on jemalloc (%+.1f / %+.1f data writes) | %s |\n",
            b->extra_ir[0], b->extra_ir[1], b->extra_dw[0], b->extra_dw[1],
            verdict(b->extra_ir[0] <= 10.5 && !(b->extra_ir[1] > 10.5)));

  double u1 = ratio(b, MIXED1, CFG_CULPERT_512K_UNWIND, 0).median;
  double u2 = ratio(b, MIXED2, CFG_CULPERT_512K_UNWIND, 0).median;
  double f1 = ratio(b, MIXED1, CFG_CULPERT_512K_FP, 0).median;
  double f2 = ratio(b, MIXED2, CFG_CULPERT_512K_FP, 0).median;
  fprintf(o,
          "| mixed workload at the default rate within 3%% of no culpert | libunwind "
          "%+.1f%% (1 thread), %+.1f%% (2); fp %+.1f%%, %+.1f%% | %s (libunwind), %s (fp) |\n",
          (u1 - 1) * 100, (u2 - 1) * 100, (f1 - 1) * 100, (f2 - 1) * 100,
          verdict(u1 <= 1.03 && u2 <= 1.03), verdict(f1 <= 1.03 && f2 <= 1.03));
  double o1 = ratio(b, MIXED1, CFG_CULPERT_OFF, 0).median;
  double o2 = ratio(b, MIXED2, CFG_CULPERT_OFF, 0).median;
  fprintf(o,
          "| the same with sampling off (the wrappers and the fixed cost alone) | "
          "%+.1f%% (1 thread), %+.1f%% (2) | what the samples cost is the difference |\n",
          (o1 - 1) * 100, (o2 - 1) * 100);
  if (b->model_done)
    fprintf(o,
            "| the same, 1 thread, under callgrind's cache model (estimated cycles) | "
            "libunwind %+.2f%%, fp %+.2f%% | a lower bound, not a verdict: the model "
            "charges a cache miss 10 or 100 cycles, the sampled path's misses cost more |\n",
            (b->model_mixed[0] - 1) * 100, (b->model_mixed[1] - 1) * 100);

  if (b->have[CFG_JEPROF_4K]) {
    int under = 1;
    fprintf(o, "| at 4 KiB, well under jemalloc's profiler at 4 KiB |");
    for (int c = 0; c < NWORK; c++) {
      double cu = ratio(b, c, CFG_CULPERT_4K_UNWIND, 0).median;
      double cf = ratio(b, c, CFG_CULPERT_4K_FP, 0).median;
      double je = ratio(b, c, CFG_JEPROF_4K, 0).median;
      under &= cu < je;
      fprintf(o, "%s %s %u: culpert %.2fx (fp %.2fx) vs jemalloc %.2fx", c ? ";" : "",
              cells[c].mode, cells[c].threads, cu, cf, je);
    }
    fprintf(o, " | %s (criterion: libunwind below jemalloc in every column) |\n", verdict(under));
  }

  fprintf(o, "| 2 threads scale like 1 | ratio at 2 threads / ratio at 1 thread:");
  int ks[4] = {CFG_CULPERT_512K_UNWIND, CFG_CULPERT_4K_UNWIND, CFG_CULPERT_512K_FP,
               CFG_CULPERT_4K_FP};
  for (int i = 0; i < 4; i++)
    fprintf(o, "%s %s: small %.2f, mixed %.2f", i ? ";" : "", configs[ks[i]].name + 8,
            ratio(b, SMALL2, ks[i], 0).median / ratio(b, SMALL1, ks[i], 0).median,
            ratio(b, MIXED2, ks[i], 0).median / ratio(b, MIXED1, ks[i], 0).median);
  fprintf(o, " | (1.00 = same overhead) |\n\n");
}

static void print_header(struct bench *b, int argc, char **argv)
{
  FILE *o = b->out;
  char model[256] = "unknown", line[512];
  struct utsname u;
  time_t t = time(NULL);
  struct tm tm;
  char date[64];
  FILE *f = fopen("/proc/cpuinfo", "r");
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "model name", 10) == 0) {
      char *v = strchr(line, ':');
      if (v != NULL) {
        snprintf(model, sizeof model, "%s", v + 2);
        model[strcspn(model, "\n")] = '\0';
      }
      break;
    }
  }
  if (f != NULL)
    fclose(f);
  gmtime_r(&t, &tm);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
  uname(&u);
  fprintf(o, "## Collector overhead (culpert_bench)\n\n");
  fprintf(o, "- date: %s\n- machine: %ld CPUs online, %s, Linux %s\n- command:", date,
          sysconf(_SC_NPROCESSORS_ONLN), model, u.release);
  for (int i = 0; i < argc; i++)
    fprintf(o, " %s", i == 0 ? "culpert_bench" : argv[i]);
  if (b->opt.focus >= 0)
    fprintf(o, "\n- rounds: %d, configurations interleaved and rotated each round\n", b->opt.reps);
  else
    fprintf(o,
            "\n- rounds: %d (heaptrack: %d), configurations interleaved and rotated each "
            "round\n",
            b->opt.reps, rounds_for(b, CFG_HEAPTRACK));
  if (b->opt.cpu >= 0)
    fprintf(o, "- every run pinned to CPU %d\n", b->opt.cpu);
  if (b->opt.glibc_defaults)
    fprintf(o, "- glibc malloc: its adaptive mmap and trim thresholds (--glibc-defaults)\n\n");
  else if (getenv("GLIBC_TUNABLES") != NULL)
    fprintf(o, "- glibc malloc: GLIBC_TUNABLES=%s, from the caller\n\n", getenv("GLIBC_TUNABLES"));
  else
    fprintf(o, "- glibc malloc: mmap threshold 4 MiB, trim threshold 256 MiB in every run "
               "(a heap in steady state; its adaptive thresholds make the mixed workload's "
               "page faults, and several percent of its time, depend on start-up noise; "
               "--glibc-defaults keeps them)\n\n");
  if (b->opt.focus >= 0)
    fprintf(o, "Each row: the ratios (time with the configuration) / (time without a "
               "profiler in the same round), their median, quartiles and extremes.\n\n");
  else
    fprintf(o, "Each cell: median over the rounds of (time with the configuration) / (time of "
               "its baseline in the same round), min–max in brackets. Every thread does the "
               "same work, so equal ratios at 1 and 2 threads mean it scales.\n\n");
}

static int parse_args(struct options *o, int argc, char **argv)
{
  *o = (struct options){.focus = -1,
                        .cpu = -1,
                        .reps = 9,
                        .heaptrack_reps = 3,
                        .callgrind = 1,
                        .scale = 1.0,
                        .library = CULPERT_BENCH_LIBRARY,
                        .workload = CULPERT_BENCH_WORKLOAD,
                        .jemalloc = DEFAULT_JEMALLOC};
  int explicit_reps = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) {
      o->quick = 1;
      continue;
    }
    if (strcmp(a, "--no-callgrind") == 0) {
      o->callgrind = 0;
      continue;
    }
    if (strcmp(a, "--glibc-defaults") == 0) {
      o->glibc_defaults = 1;
      continue;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
      return die_usage(NULL);
    if (v == NULL)
      return die_usage("an option is missing its value");
    i++;
    if (strcmp(a, "--reps") == 0) {
      o->reps = atoi(v);
      explicit_reps = 1;
      if (o->reps < 1 || o->reps > MAX_REPS)
        return die_usage("--reps must be 1..201");
    } else if (strcmp(a, "--heaptrack-reps") == 0) {
      o->heaptrack_reps = atoi(v);
      if (o->heaptrack_reps < 0)
        return die_usage("--heaptrack-reps must be 0 or more");
    } else if (strcmp(a, "--scale") == 0) {
      o->scale = atof(v);
      if (!(o->scale > 0))
        return die_usage("--scale must be positive");
    } else if (strcmp(a, "--markdown") == 0) {
      o->markdown = v;
    } else if (strcmp(a, "--library") == 0) {
      o->library = v;
    } else if (strcmp(a, "--workload") == 0) {
      o->workload = v;
    } else if (strcmp(a, "--jemalloc") == 0) {
      o->jemalloc = v;
    } else if (strcmp(a, "--focus") == 0) {
      static const char *names[NCELL] = {"small1", "small2", "mixed1", "mixed2",
                                         "python", "perl",   "cc"};
      for (int c = 0; c < NCELL; c++)
        if (strcmp(v, names[c]) == 0)
          o->focus = c;
      if (o->focus < 0)
        return die_usage("--focus takes small1, small2, mixed1, mixed2, python, perl or cc");
    } else if (strcmp(a, "--cpu") == 0) {
      char *end;
      long cpu = strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || cpu < 0 || cpu >= CPU_SETSIZE)
        return die_usage("--cpu takes a CPU number");
      o->cpu = (int)cpu;
    } else {
      return die_usage("unknown option");
    }
  }
  if (o->quick) {
    o->scale /= 200;
    if (!explicit_reps)
      o->reps = 1;
  }
  if (o->heaptrack_reps > o->reps)
    o->heaptrack_reps = o->reps;
  return 0;
}

int main(int argc, char **argv)
{
  static struct bench bench;
  struct bench *b = &bench;
  char *text = NULL;
  size_t len = 0;
  int rc = 1;
  if (parse_args(&b->opt, argc, argv) != 0)
    return 2;
  if (access(b->opt.workload, X_OK) != 0 || access(b->opt.library, R_OK) != 0) {
    fprintf(stderr,
            "culpert_bench: cannot find %s or %s (build the targets "
            "culpert_bench_workload and libculpert)\n",
            b->opt.workload, b->opt.library);
    return 1;
  }
  snprintf(b->tmp, sizeof b->tmp, "/tmp/culpert-bench.XXXXXX");
  if (mkdtemp(b->tmp) == NULL) {
    fprintf(stderr, "culpert_bench: mkdtemp: %s\n", strerror(errno));
    return 1;
  }
  if (snprintf(b->output_env, sizeof b->output_env, "CULPERT_OUTPUT=%s/profile.pb.gz", b->tmp) >=
          (int)sizeof b->output_env ||
      snprintf(b->preload_culpert, sizeof b->preload_culpert, "LD_PRELOAD=%s", b->opt.library) >=
          (int)sizeof b->preload_culpert ||
      snprintf(b->preload_jemalloc, sizeof b->preload_jemalloc, "LD_PRELOAD=%s", b->opt.jemalloc) >=
          (int)sizeof b->preload_jemalloc ||
      snprintf(b->preload_both, sizeof b->preload_both, "LD_PRELOAD=%s %s", b->opt.library,
               b->opt.jemalloc) >= (int)sizeof b->preload_both) {
    fprintf(stderr, "culpert_bench: --library or --jemalloc path too long\n");
    goto out;
  }
  int have_je = access(b->opt.jemalloc, R_OK) == 0;
  for (int k = 0; k < NCONFIG; k++) {
    b->have[k] = 1;
    if (configs[k].preload == PRELOAD_JEMALLOC || configs[k].preload == PRELOAD_BOTH)
      b->have[k] = have_je;
    if (configs[k].heaptrack)
      b->have[k] = on_path("heaptrack") && b->opt.heaptrack_reps > 0;
  }
  for (int c = 0; c < NCELL; c++)
    b->have_cell[c] = cells[c].program == PROG_NONE ||
                      access(cell_command(b, &cells[c]), X_OK) == 0 ||
                      on_path(cell_command(b, &cells[c]));
  b->have_valgrind = on_path("valgrind");
  b->extra_ir[1] = b->extra_dw[1] = NAN;
  b->out = open_memstream(&text, &len);
  if (b->out == NULL)
    goto out;

  print_header(b, argc, argv);
  if (b->opt.focus >= 0) {
    if (run_focus(b) != 0)
      goto out;
    print_focus(b);
    goto write;
  }
  if (run_rounds(b) != 0)
    goto out;
  fprintf(b->out, "### CPU time ratio (user+sys)\n\n");
  print_ratio_table(b, 0, 0, NWORK);
  fprintf(b->out, "### Wall time ratio\n\n");
  print_ratio_table(b, 1, 0, NWORK);
  fprintf(b->out, "### Baselines (median seconds) and allocation rates\n\n");
  print_baselines(b);
  fprintf(b->out, "### Real programs: CPU time ratio (user+sys)\n\n"
                  "The same configurations on programs a user might profile, each with its "
                  "children (the compiler driver runs cc1 and as, each preloaded).\n\n");
  print_ratio_table(b, 0, NWORK, NCELL);
  print_program_baselines(b);
  if (b->opt.callgrind && b->have_valgrind)
    run_callgrind(b);
  else
    fprintf(b->out, "(callgrind figures skipped: %s)\n\n",
            b->opt.callgrind ? "valgrind not found" : "--no-callgrind");
  fprintf(b->out, "### One sampled allocation and the fixed cost, CPU time\n\n");
  if (run_sampled_time(b) != 0)
    goto out;
  print_goals(b);
  if (!b->have[CFG_HEAPTRACK])
    fprintf(b->out, "heaptrack: not run (not found, or --heaptrack-reps 0).\n\n");
  if (!have_je)
    fprintf(b->out, "jemalloc: not run (%s not found).\n\n", b->opt.jemalloc);
write:
  if (b->missing_profiles > 0)
    fprintf(b->out,
            "**Warning:** libculpert.so wrote no profile in %d of the culpert runs: "
            "those figures do not show a working collector.\n\n",
            b->missing_profiles);
  if (fclose(b->out) != 0) {
    b->out = NULL;
    goto out;
  }
  b->out = NULL;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  if (b->opt.markdown != NULL) {
    FILE *f = fopen(b->opt.markdown, "w");
    int bad = f == NULL;
    if (f != NULL) {
      bad = fwrite(text, 1, len, f) != len;
      bad |= fclose(f) != 0;
    }
    if (bad) {
      fprintf(stderr, "culpert_bench: cannot write %s\n", b->opt.markdown);
      goto out;
    }
  }
  rc = 0;
out:
  if (b->out != NULL)
    fclose(b->out);
  free(text);
  clean_tmp(b->tmp);
  rmdir(b->tmp);
  return rc;
}
