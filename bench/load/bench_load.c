/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * bench_load: how fast the CLI reads a big profile, side by side with
 * `go tool pprof -top` on the same file.
 *
 *   bench_load CULPERT [SAMPLES [STACKS [KEEP]]]   (defaults 1000000 200000)
 *
 * Writes a culpert-format profile of SAMPLES samples over STACKS distinct
 * stacks (each stack appears under several spans) to a temporary file, then
 * prints the wall time, CPU time and peak RSS (wait4 rusage of the child) of
 * `culpert report` in four views and of `go tool pprof -top` when Go is
 * installed (run with HOME, GOCACHE and GOFLAGS pointing at a scratch
 * directory, offline), and last the in-process time to load the profile
 * (all stacks or none, one decoding thread or the automatic count) and to
 * build the span tree. Figures, not a test.
 * With KEEP, the generated profile is also copied there (for profiling).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "profile.h"
#include "profile.pb-c.h"
#include "spantree.h"

typedef Perftools__Profiles__Profile pb_profile;

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *xcalloc(size_t n, size_t size)
{
  void *p = calloc(n ? n : 1, size);
  if (!p) {
    fprintf(stderr, "bench_load: out of memory\n");
    exit(2);
  }
  return p;
}

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next(void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

#define NFUNCS        5000
#define LOCS_PER_FUNC 4
#define NSPANS        64

/* Build the profile and write it gzipped to `path`. */
static int write_profile(const char *path, size_t nsamples, size_t nstacks)
{
  pb_profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
  char buf[64];
  size_t nstr = 0;
  /* Strings: "", 5 type/unit names, the span label keys, function and
   * span names. */
  size_t cap = 32 + NFUNCS + NSPANS;
  char **strs = xcalloc(cap, sizeof *strs);
#define STR(s) (strs[nstr] = strdup(s), (int64_t)nstr++)
  STR("");
  int64_t s_count = STR("count"), s_bytes = STR("bytes");
  const char *types[5] = {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space",
                          "samples"};
  Perftools__Profiles__ValueType *vt = xcalloc(6, sizeof *vt);
  Perftools__Profiles__ValueType **vtp = xcalloc(5, sizeof *vtp);
  for (int i = 0; i < 5; i++) {
    perftools__profiles__value_type__init(&vt[i]);
    vt[i].type = STR(types[i]);
    vt[i].unit = (i == 1 || i == 3) ? s_bytes : s_count;
    vtp[i] = &vt[i];
  }
  prof.sample_type = vtp;
  prof.n_sample_type = 5;
  perftools__profiles__value_type__init(&vt[5]);
  vt[5].type = STR("space");
  vt[5].unit = s_bytes;
  prof.period_type = &vt[5];
  prof.period = 524288;
  int64_t k_name = STR("span_name"), k_id = STR("span_id"), k_parent = STR("span_parent_id");
  int64_t file = STR("src/service.c");

  Perftools__Profiles__Function *fn = xcalloc(NFUNCS, sizeof *fn);
  Perftools__Profiles__Function **fnp = xcalloc(NFUNCS, sizeof *fnp);
  for (size_t i = 0; i < NFUNCS; i++) {
    perftools__profiles__function__init(&fn[i]);
    fn[i].id = i + 1;
    snprintf(buf, sizeof buf, "service::module%zu::function_%zu", i % 97, i);
    fn[i].name = fn[i].system_name = STR(buf);
    fn[i].filename = file;
    fnp[i] = &fn[i];
  }
  prof.function = fnp;
  prof.n_function = NFUNCS;

  size_t nlocs = NFUNCS * LOCS_PER_FUNC;
  Perftools__Profiles__Location *loc = xcalloc(nlocs, sizeof *loc);
  Perftools__Profiles__Location **locp = xcalloc(nlocs, sizeof *locp);
  Perftools__Profiles__Line *line = xcalloc(nlocs, sizeof *line);
  Perftools__Profiles__Line **linep = xcalloc(nlocs, sizeof *linep);
  for (size_t i = 0; i < nlocs; i++) {
    perftools__profiles__location__init(&loc[i]);
    perftools__profiles__line__init(&line[i]);
    loc[i].id = i + 1;
    loc[i].address = 0x400000 + 16 * i;
    line[i].function_id = i / LOCS_PER_FUNC + 1;
    line[i].line = (int64_t)(10 + i % LOCS_PER_FUNC);
    linep[i] = &line[i];
    loc[i].line = &linep[i];
    loc[i].n_line = 1;
    locp[i] = &loc[i];
  }
  prof.location = locp;
  prof.n_location = nlocs;

  /* Spans: a tree of NSPANS names, ids 1..NSPANS, parent (i-1)/4. */
  int64_t span_name[NSPANS + 1];
  for (int i = 1; i <= NSPANS; i++) {
    snprintf(buf, sizeof buf, "span_%d", i);
    span_name[i] = STR(buf);
  }
  prof.string_table = strs;
  prof.n_string_table = nstr;

  /* Stacks: depth 8..23, leaf first. */
  uint64_t **stacks = xcalloc(nstacks, sizeof *stacks);
  size_t *depth = xcalloc(nstacks, sizeof *depth);
  for (size_t i = 0; i < nstacks; i++) {
    depth[i] = 8 + next() % 16;
    stacks[i] = xcalloc(depth[i], sizeof **stacks);
    for (size_t d = 0; d < depth[i]; d++)
      stacks[i][d] = next() % nlocs + 1;
  }

  Perftools__Profiles__Sample *smp = xcalloc(nsamples, sizeof *smp);
  Perftools__Profiles__Sample **smpp = xcalloc(nsamples, sizeof *smpp);
  Perftools__Profiles__Label *lab = xcalloc(nsamples * 3, sizeof *lab);
  Perftools__Profiles__Label **labp = xcalloc(nsamples * 3, sizeof *labp);
  int64_t *vals = xcalloc(nsamples * 5, sizeof *vals);
  for (size_t i = 0; i < nsamples; i++) {
    Perftools__Profiles__Sample *s = &smp[i];
    perftools__profiles__sample__init(s);
    size_t st = i % nstacks;
    s->location_id = stacks[st];
    s->n_location_id = depth[st];
    int64_t *v = &vals[i * 5];
    uint64_t n = 1 + next() % 8;
    v[0] = (int64_t)n * 3;
    v[1] = (int64_t)(n * 524288 + next() % 4096);
    v[2] = (int64_t)(n & 1);
    v[3] = (int64_t)((n & 1) * 524288);
    v[4] = (int64_t)n;
    s->value = v;
    s->n_value = 5;
    int sp = 1 + (int)(next() % NSPANS);
    Perftools__Profiles__Label *l = &lab[i * 3];
    for (int j = 0; j < 3; j++) {
      perftools__profiles__label__init(&l[j]);
      labp[i * 3 + (size_t)j] = &l[j];
    }
    l[0].key = k_name;
    l[0].str = span_name[sp];
    l[1].key = k_id;
    l[1].num = sp;
    l[2].key = k_parent;
    l[2].num = (sp - 1) / 4;
    s->label = &labp[i * 3];
    s->n_label = sp > 1 ? 3 : 2;
    smpp[i] = s;
  }
  prof.sample = smpp;
  prof.n_sample = nsamples;

  size_t len = perftools__profiles__profile__get_packed_size(&prof);
  uint8_t *raw = xcalloc(len, 1);
  perftools__profiles__profile__pack(&prof, raw);
  gzFile gz = gzopen(path, "wb6");
  int rc = gz && gzwrite(gz, raw, (unsigned)len) == (int)len ? 0 : -EIO;
  if (gz && gzclose(gz) != Z_OK)
    rc = -EIO;
  printf("profile: %zu samples, %zu distinct stacks, %zu locations, %d spans; "
         "%.1f MB protobuf\n",
         nsamples, nstacks, nlocs, NSPANS, (double)len / 1e6);
  free(raw);
  return rc;
}

/* CPU seconds (user + system) this process has used. */
static double self_cpu(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Run argv with stdout to /dev/null; wall seconds, CPU seconds (user +
 * system, which a busy machine inflates less than wall time) and peak RSS
 * (MiB) of the child. */
static double cpu_secs;
static int run(char *const argv[], const char *const env[], double *secs, double *rss_mb)
{
  fflush(stdout); /* the child must not flush our buffer again */
  double t0 = now();
  pid_t pid = fork();
  if (pid < 0)
    return -errno;
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
      _exit(127);
    for (size_t i = 0; env && env[i]; i += 2)
      setenv(env[i], env[i + 1], 1);
    execvp(argv[0], argv);
    _exit(127);
  }
  int ws;
  struct rusage ru;
  if (wait4(pid, &ws, 0, &ru) < 0)
    return -errno;
  *secs = now() - t0;
  *rss_mb = (double)ru.ru_maxrss / 1024.0;
  cpu_secs = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
             (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

/* Best of `n` runs (by wall time); *cpu is that run's CPU time. */
static int best_of(int n, char *const argv[], const char *const env[], double *secs, double *cpu,
                   double *rss)
{
  *secs = 1e9;
  for (int i = 0; i < n; i++) {
    double s, r;
    int rc = run(argv, env, &s, &r);
    if (rc)
      return rc;
    if (s < *secs) {
      *secs = s;
      *cpu = cpu_secs;
      *rss = r;
    }
  }
  return 0;
}

int main(int argc, char **argv)
{
  /* CULPERT must be the culpert binary: checked before the profile is
   * generated (half a minute at the default size), so that `--help` or a
   * wrong path is told at once rather than after it. */
  if (argc < 2 || argv[1][0] == '-' || access(argv[1], X_OK) != 0) {
    if (argc >= 2 && argv[1][0] != '-')
      fprintf(stderr, "bench_load: %s: not an executable culpert binary\n", argv[1]);
    fprintf(stderr, "usage: bench_load CULPERT [SAMPLES [STACKS [KEEP]]]\n"
                    "  CULPERT  the culpert binary to time (build/cli/culpert)\n"
                    "  SAMPLES  samples in the generated profile (default 1000000)\n"
                    "  STACKS   distinct stacks among them (default 200000)\n"
                    "  KEEP     also copy the generated profile to this path\n");
    return argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) ? 0 : 2;
  }
  char *culpert = argv[1];
  size_t nsamples = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000000;
  size_t nstacks = argc > 3 ? strtoul(argv[3], NULL, 10) : 200000;
  if (nstacks == 0 || nstacks > nsamples) {
    fprintf(stderr, "bench_load: need 0 < STACKS <= SAMPLES\n");
    return 2;
  }
  char dir[] = "/tmp/culpert-bench-load.XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 2;
  }
  char path[128];
  snprintf(path, sizeof path, "%s/big.pb.gz", dir);
  /* Written by a child: a child's peak RSS (wait4) starts from the RSS of
   * its parent at fork, so this process stays small until every command has
   * been measured; the in-process load comes last. */
  fflush(stdout);
  pid_t gen = fork();
  if (gen == 0) {
    int wrc = write_profile(path, nsamples, nstacks);
    fflush(stdout);
    _exit(wrc ? 1 : 0);
  }
  int gen_status;
  if (gen < 0 || waitpid(gen, &gen_status, 0) < 0 || !WIFEXITED(gen_status) ||
      WEXITSTATUS(gen_status) != 0) {
    fprintf(stderr, "bench_load: cannot write %s\n", path);
    return 2;
  }
  if (argc > 4) {
    char *cp[] = {"cp", path, argv[4], NULL};
    double s, r;
    if (run(cp, NULL, &s, &r) != 0)
      fprintf(stderr, "bench_load: could not copy the profile to %s\n", argv[4]);
  }

  printf("\n%-34s %10s %10s %12s\n", "command", "wall s", "cpu s", "peak RSS MB");
  double secs, cpu = 0, rss = 0, tree_secs = 0, tree_cpu = 0, tree_rss = 0;
  char *views[][6] = {
      {culpert, "report", path, NULL},
      {culpert, "report", "--flat", path, NULL},
      {culpert, "report", "--no-span", path, NULL},
      {culpert, "report", "--span", "span_7", path, NULL},
  };
  const char *names[] = {"culpert report", "culpert report --flat", "culpert report --no-span",
                         "culpert report --span span_7"};
  for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
    int rc = best_of(3, views[i], NULL, &secs, &cpu, &rss);
    if (rc) {
      fprintf(stderr, "bench_load: %s exited %d\n", names[i], rc);
      return 2;
    }
    if (i == 0) {
      tree_secs = secs;
      tree_cpu = cpu;
      tree_rss = rss;
    }
    printf("%-34s %10.3f %10.3f %12.1f\n", names[i], secs, cpu, rss);
  }

  char gohome[160], gocache[160];
  snprintf(gohome, sizeof gohome, "%s/home", dir);
  snprintf(gocache, sizeof gocache, "%s/gocache", dir);
  const char *env[] = {"HOME", gohome,        "GOCACHE", gocache, "GOFLAGS",
                       "",     "GOTOOLCHAIN", "local",   NULL};
  char *go[] = {"go", "tool", "pprof", "-top", path, NULL};
  int rc = getenv("CULPERT_BENCH_NO_GO") ? -1 : run(go, env, &secs, &rss);
  if (rc) {
    printf("%-34s %10s %12s   (go not available: exit %d)\n", "go tool pprof -top", "-", "-", rc);
  } else {
    printf("%-34s %10.3f %10.3f %12.1f\n", "go tool pprof -top", secs, cpu_secs, rss);
    printf("\nculpert report vs go tool pprof -top: %.1fx less wall time, %.1fx less CPU, "
           "%.1fx less memory\n",
           secs / tree_secs, cpu_secs / tree_cpu, rss / tree_rss);
  }
  /* In process: the loader alone, each load option, one thread and the
   * automatic count; then the span tree. */
  char err[512];
  struct culpert__profile *p;
  struct culpert__span_node *root;
  static const struct {
    const char *name;
    struct culpert__load_opts o;
  } loads[] = {
      {"all stacks, 1 thread", {.stacks = CULPERT_STACKS_ALL, .threads = 1}},
      {"all stacks, automatic", {.stacks = CULPERT_STACKS_ALL}},
      {"no stacks, 1 thread", {.stacks = CULPERT_STACKS_NONE, .threads = 1}},
      {"no stacks, automatic", {.stacks = CULPERT_STACKS_NONE}},
  };
  printf("\nin process, best of 3:\n%-34s %10s %10s\n", "load", "wall s", "cpu s");
  for (size_t i = 0; i < sizeof loads / sizeof loads[0]; i++) {
    double best = 1e9, best_cpu = 0;
    for (int r = 0; r < 3; r++) {
      double c0 = self_cpu(), t0 = now();
      if (culpert__profile_load_with(path, &loads[i].o, &p, err, sizeof err)) {
        fprintf(stderr, "bench_load: %s\n", err);
        return 2;
      }
      double t1 = now(), c1 = self_cpu();
      if (t1 - t0 < best) {
        best = t1 - t0;
        best_cpu = c1 - c0;
      }
      culpert__profile_free(p);
    }
    printf("%-34s %10.3f %10.3f\n", loads[i].name, best, best_cpu);
  }
  if (culpert__profile_load(path, &p, err, sizeof err)) {
    fprintf(stderr, "bench_load: %s\n", err);
    return 2;
  }
  double t1 = now();
  if (culpert__spantree_build(p, false, &root)) {
    fprintf(stderr, "bench_load: span tree: out of memory\n");
    return 2;
  }
  double t2 = now();
  printf("span tree %.3f s (%zu samples, %zu frames)\n", t2 - t1, p->nsamples, p->nframes);
  culpert__spantree_free(root);
  culpert__profile_free(p);

  unlink(path);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "bench_load: could not remove %s\n", dir);
  return 0;
}
