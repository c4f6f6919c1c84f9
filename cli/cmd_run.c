/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cmd_run.c: `culpert run [OPTIONS] -- PROGRAM [ARGS...]`.
 *
 * Finds libculpert.so next to this binary (installed layout or build tree,
 * or $CULPERT_LIB), runs PROGRAM with it prepended to LD_PRELOAD and the
 * collector's settings in its environment, forwards SIGINT/SIGTERM, waits,
 * and prints the tree report of the profile PROGRAM wrote. PROGRAM gets
 * CULPERT_WRITE_ON_SIGNAL=1 (unless the variable is already set), so a
 * server stopped with Ctrl-C or SIGTERM still writes its profile. culpert's exit
 * status is PROGRAM's (128+N when signal N killed it); 2 when culpert itself
 * fails or PROGRAM wrote no profile although it succeeded.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bytesize.h"
#include "cli.h"

#define LIB_NAME "libculpert.so"

static void help(FILE *f)
{
  fprintf(f, "usage: culpert run [options] [--] PROGRAM [ARGS...]\n"
             "\n"
             "Run PROGRAM with libculpert preloaded, then print the span tree of the\n"
             "profile it wrote. PROGRAM must be dynamically linked.\n"
             "\n"
             "Options:\n"
             "  -o, --output FILE  write the profile to FILE (default\n"
             "                     culpert.<program>.<pid>.pb.gz in the current directory,\n"
             "                     <pid> being PROGRAM's process id)\n"
             "  --rate BYTES       mean bytes between samples (CULPERT_SAMPLE_RATE);\n"
             "                     suffixes K, M, G, T with optional i and B (4K, 512KiB,\n"
             "                     1MB: all powers of 1024); 0 records every allocation\n"
             "  --stack MODE       how stacks are captured: libunwind (default) or fp\n"
             "                     (frame pointers; faster, needs -fno-omit-frame-pointer)\n"
             "  --no-report        do not print the report, only write the profile\n"
             "  -h, --help         show this help\n"
             "\n"
             "A PROGRAM ended by SIGINT (Ctrl-C), SIGTERM or SIGHUP that does not handle\n"
             "the signal itself writes its profile first (CULPERT_WRITE_ON_SIGNAL=1, set\n"
             "unless it is already in the environment; set it to 0 to turn it off).\n"
             "\n"
             "libculpert.so is looked for in $CULPERT_LIB, then next to this binary:\n"
             "<bindir>/../lib (an install) or <build>/src (the build tree).\n"
             "\n"
             "Exit status: PROGRAM's (128+N if signal N ended it); 2 if culpert fails,\n"
             "PROGRAM cannot be started, or it succeeded but wrote no profile.\n");
}

static bool readable(const char *path)
{
  return access(path, R_OK) == 0;
}

/*
 * Find libculpert.so: $CULPERT_LIB if set (it must exist), else relative to
 * the real path of this executable: ../lib and ../lib64 (an install; also
 * the multiarch lib/x86_64-linux-gnu) and ../src (culpert is <build>/cli).
 */
static int find_lib(char *out, size_t len)
{
  const char *env = getenv("CULPERT_LIB");
  if (env && *env) {
    if (!readable(env)) {
      culpert__error("CULPERT_LIB=%s: %s", env, strerror(errno));
      return -ENOENT;
    }
    snprintf(out, len, "%s", env);
    return 0;
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    if (!realpath(culpert__argv0, self)) {
      culpert__error("cannot find the culpert executable to locate " LIB_NAME " (set CULPERT_LIB)");
      return -ENOENT;
    }
  } else {
    self[n] = '\0';
  }
  char *slash = strrchr(self, '/');
  if (!slash) {
    culpert__error("cannot locate " LIB_NAME " (set CULPERT_LIB)");
    return -ENOENT;
  }
  *slash = '\0';
  static const char *const rel[] = {
    "../lib/" LIB_NAME,
    "../lib64/" LIB_NAME,
#if defined(__x86_64__)
    "../lib/x86_64-linux-gnu/" LIB_NAME,
#elif defined(__aarch64__)
    "../lib/aarch64-linux-gnu/" LIB_NAME,
#endif
    "../src/" LIB_NAME,
  };
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    int m = snprintf(out, len, "%s/%s", self, rel[i]);
    if (m > 0 && (size_t)m < len && readable(out)) {
      char real[PATH_MAX];
      if (realpath(out, real))
        snprintf(out, len, "%s", real);
      return 0;
    }
  }
  culpert__error("cannot find " LIB_NAME " next to %s (looked in ../lib, ../lib64 and ../src); "
                 "set CULPERT_LIB to its path",
                 self);
  return -ENOENT;
}

static volatile sig_atomic_t child_pid;

/* Forward SIGINT/SIGTERM to PROGRAM, except signals the terminal sent to
 * the whole foreground process group: PROGRAM already has those. */
static void forward(int sig, siginfo_t *info, void *ctx)
{
  (void)ctx;
  if (info && info->si_code == SI_KERNEL)
    return;
  if (child_pid > 0)
    kill((pid_t)child_pid, sig);
}

static const char *base_name(const char *path)
{
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* The profile path: -o FILE or culpert.<program>.<pid>.pb.gz, made absolute
 * so a PROGRAM that changes directory still writes where we look. */
static int output_path(const char *opt_o, const char *program, pid_t pid, char *out, size_t len)
{
  char name[PATH_MAX];
  int n;
  if (opt_o)
    n = snprintf(name, sizeof name, "%s", opt_o);
  else
    n = snprintf(name, sizeof name, "culpert.%s.%ld.pb.gz", base_name(program), (long)pid);
  if (n < 0 || (size_t)n >= sizeof name)
    return -ENAMETOOLONG;
  if (name[0] == '/') {
    n = snprintf(out, len, "%s", name);
  } else {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
      return -errno;
    n = snprintf(out, len, "%s/%s", cwd, name);
  }
  return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

struct run_opts {
  const char *output;
  const char *rate; /* canonical decimal, or NULL */
  const char *stack;
  bool no_report;
  char **argv; /* PROGRAM ARGS..., NULL-terminated */
};

/* In the child: set the environment and exec PROGRAM. On failure report
 * errno through `fd` and exit. Never returns. */
static void child(const struct run_opts *o, const char *lib, int fd)
{
  char out[PATH_MAX], preload[PATH_MAX * 2];
  int err = 0;
  const char *old = getenv("LD_PRELOAD");
  if (old && *old)
    snprintf(preload, sizeof preload, "%s %s", lib, old);
  else
    snprintf(preload, sizeof preload, "%s", lib);
  if (output_path(o->output, o->argv[0], getpid(), out, sizeof out) != 0 ||
      setenv("LD_PRELOAD", preload, 1) || setenv("CULPERT_OUTPUT", out, 1) ||
      (o->rate && setenv("CULPERT_SAMPLE_RATE", o->rate, 1)) ||
      (o->stack && setenv("CULPERT_STACK", o->stack, 1)) || unsetenv("CULPERT_ROOT_PID") ||
      setenv("CULPERT_WRITE_ON_SIGNAL", "1", 0)) {
    err = errno ? errno : ENAMETOOLONG;
  } else {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execvp(o->argv[0], o->argv);
    err = errno;
  }
  ssize_t w = write(fd, &err, sizeof err);
  (void)w;
  _exit(127);
}

static int parse(int argc, char **argv, struct run_opts *o, char *rate_buf, size_t rate_len)
{
  static const struct option longopts[] = {
      {"rate", required_argument, NULL, 'r'}, {"stack", required_argument, NULL, 's'},
      {"no-report", no_argument, NULL, 'n'},  {"output", required_argument, NULL, 'o'},
      {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0},
  };
  int c;
  optind = 0;
  opterr = 0;
  /* '+': stop at PROGRAM, so its own options are left alone. */
  while ((c = getopt_long(argc, argv, "+:o:h", longopts, NULL)) != -1) {
    switch (c) {
    case 'o':
      o->output = optarg;
      break;
    case 'r': {
      uint64_t v;
      if (culpert__bytesize_parse(optarg, &v)) {
        culpert__error("--rate: '%s' is not a byte count (examples: 65536, 4K, 512KiB, 1MB)",
                       optarg);
        return -EINVAL;
      }
      snprintf(rate_buf, rate_len, "%" PRIu64, v);
      o->rate = rate_buf;
      break;
    }
    case 's':
      if (strcmp(optarg, "libunwind") != 0 && strcmp(optarg, "fp") != 0) {
        culpert__error("--stack: '%s' is not libunwind or fp", optarg);
        return -EINVAL;
      }
      o->stack = optarg;
      break;
    case 'n':
      o->no_report = true;
      break;
    case 'h':
      help(stdout);
      return 1;
    case ':':
      culpert__error("%s needs a value (see 'culpert run --help')", argv[optind - 1]);
      return -EINVAL;
    default:
      culpert__error("unknown option '%s' (see 'culpert run --help')", argv[optind - 1]);
      return -EINVAL;
    }
  }
  if (optind >= argc) {
    culpert__error("run needs a PROGRAM to run: culpert run [options] -- PROGRAM [ARGS...]");
    return -EINVAL;
  }
  o->argv = argv + optind;
  return 0;
}

int culpert__cmd_run(int argc, char **argv)
{
  struct run_opts o = {0};
  char rate_buf[32], lib[PATH_MAX], out[PATH_MAX];
  int pipefd[2] = {-1, -1};
  struct sigaction sa, old_int, old_term;
  bool handlers = false;
  struct stat before;
  int status = CULPERT_EXIT_ERROR;

  int rc = parse(argc, argv, &o, rate_buf, sizeof rate_buf);
  if (rc == 1)
    return CULPERT_EXIT_OK;
  if (rc)
    return CULPERT_EXIT_ERROR;
  if (find_lib(lib, sizeof lib))
    return CULPERT_EXIT_ERROR;
  if (o.output && output_path(o.output, o.argv[0], 0, out, sizeof out)) {
    culpert__error("-o %s: path too long", o.output);
    return CULPERT_EXIT_ERROR;
  }
  bool existed = o.output && stat(out, &before) == 0;

  if (pipe2(pipefd, O_CLOEXEC)) {
    culpert__error("cannot create a pipe: %s", strerror(errno));
    goto out;
  }
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = forward;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  fflush(stdout);
  fflush(stderr);
  if (sigaction(SIGINT, &sa, &old_int) || sigaction(SIGTERM, &sa, &old_term)) {
    culpert__error("cannot install signal handlers: %s", strerror(errno));
    goto out;
  }
  handlers = true;

  pid_t pid = fork();
  if (pid < 0) {
    culpert__error("cannot fork to run %s: %s", o.argv[0], strerror(errno));
    goto out;
  }
  if (pid == 0) {
    close(pipefd[0]);
    child(&o, lib, pipefd[1]);
  }
  child_pid = pid;
  close(pipefd[1]);
  pipefd[1] = -1;

  int exec_err = 0;
  ssize_t got;
  do
    got = read(pipefd[0], &exec_err, sizeof exec_err);
  while (got < 0 && errno == EINTR);

  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0) {
    if (errno != EINTR) {
      culpert__error("waiting for %s: %s", o.argv[0], strerror(errno));
      goto out;
    }
  }
  child_pid = 0;
  if (got == (ssize_t)sizeof exec_err) {
    culpert__error("cannot run %s: %s", o.argv[0], strerror(exec_err));
    goto out;
  }
  int prog_status = WIFEXITED(ws)     ? WEXITSTATUS(ws)
                    : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws)
                                      : CULPERT_EXIT_ERROR;

  if (output_path(o.output, o.argv[0], pid, out, sizeof out)) {
    culpert__error("profile path too long");
    goto out;
  }
  struct stat after;
  bool written = stat(out, &after) == 0 && (!existed || after.st_ino != before.st_ino ||
                                            after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
                                            after.st_mtim.tv_nsec != before.st_mtim.tv_nsec);
  if (!written) {
    if (prog_status != 0) {
      fprintf(stderr, "culpert: note: %s exited with status %d and wrote no profile (%s)\n",
              o.argv[0], prog_status, out);
      status = prog_status;
    } else {
      culpert__error("%s wrote no profile at %s: is it statically linked, or did it exit "
                     "without running exit handlers? libculpert only sees dynamically linked "
                     "programs",
                     o.argv[0], out);
    }
    goto out;
  }
  /* libculpert itself says where it wrote the profile (unless
   * CULPERT_QUIET), so nothing more on stderr here. */
  if (!o.no_report) {
    char *rargv[] = {"report", out, NULL};
    int r = culpert__cmd_report(2, rargv);
    if (r != CULPERT_EXIT_OK && prog_status == 0) {
      status = r;
      goto out;
    }
  }
  status = prog_status;
out:
  if (handlers) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
  }
  if (pipefd[0] >= 0)
    close(pipefd[0]);
  if (pipefd[1] >= 0)
    close(pipefd[1]);
  return status;
}
