/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * cmd_run.c: `culpert run [OPTIONS] -- PROGRAM [ARGS...]`.
 *
 * Finds libculpert.so next to this binary (installed layout or build tree,
 * or $CULPERT_LIB), runs PROGRAM with it prepended to LD_PRELOAD and the
 * collector's settings in its environment, forwards SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGUSR1 and SIGUSR2, waits,
 * and prints the tree report of the profile PROGRAM wrote. PROGRAM gets
 * CULPERT_WRITE_ON_SIGNAL=1 (unless the variable is already set), so a
 * server stopped with Ctrl-C or SIGTERM still writes its profile. Processes
 * PROGRAM starts write <profile>.<pid> files of their own, and an image
 * that execs another writes <profile>[.<pid>].exec<N> first; those written
 * during the run are listed after the report. culpert's exit status is
 * PROGRAM's (128+N when signal N killed it); 2 when culpert itself fails or
 * no process of the run wrote a profile although PROGRAM succeeded.
 */
#include <dirent.h>
#include <elf.h>
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
#include <sys/statvfs.h>
#include <sys/random.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bytesize.h"
#include "gzmark.h"
#include "cli.h"
#include "format.h"
#include "profile.h"

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
             "                     <pid> being PROGRAM's process id); %%p in FILE is\n"
             "                     that pid, %%e PROGRAM's name, %%%% a '%%'\n"
             "  --rate BYTES       mean bytes between samples (CULPERT_SAMPLE_RATE);\n"
             "                     suffixes K, M, G, T with optional i and B (4K, 512KiB,\n"
             "                     1MB: all powers of 1024); 0 records every allocation\n"
             "  --stack MODE       how stacks are captured: libunwind (default) or fp\n"
             "                     (frame pointers; faster, needs -fno-omit-frame-pointer)\n"
             "  --peak             also write NAME.peak.pb.gz beside each profile: its\n"
             "                     in-use values as they were at the in-use peak\n"
             "                     (CULPERT_PEAK=1), and say how to see where it was held\n"
             "  --no-report        do not print the report, only write the profile\n"
             "  -h, --help         show this help\n"
             "\n"
             "Processes PROGRAM starts (fork, exec) are profiled too, each into\n"
             "<profile>.<pid> unless it sampled nothing; the ones written during the\n"
             "run are listed after the report, largest first (CULPERT_NO_CHILDREN=1\n"
             "leaves exec'd programs out). They all run with CULPERT_QUIET=1 unless\n"
             "it is set: culpert itself names PROGRAM's file when it has exited.\n"
             "When PROGRAM's own profile holds no samples, or under 1%% of the bytes\n"
             "the run allocated (a shell, a compiler driver), the report covers all\n"
             "the processes, merged. A run whose profiles hold no span (a program\n"
             "run unmodified) is followed by its callsites, as 'culpert report\n"
             "--no-span' shows them.\n"
             "A process that execs another program writes what it sampled until then\n"
             "to <profile>[.<pid>].exec<N> first; the last program keeps the name.\n"
             "\n"
             "A PROGRAM ended by SIGINT (Ctrl-C), SIGTERM, SIGHUP, SIGQUIT or SIGABRT\n"
             "(abort()) that does not handle the signal itself writes its profile first\n"
             "(CULPERT_WRITE_ON_SIGNAL=1, set unless it is already in the environment;\n"
             "set it to 0 to turn it off). SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1\n"
             "and SIGUSR2 sent to culpert are passed on to PROGRAM: with\n"
             "CULPERT_SNAPSHOT_SIGNAL=USR2, 'kill -USR2' on culpert asks PROGRAM for a\n"
             "snapshot.\n"
             "\n"
             "libculpert.so is looked for in $CULPERT_LIB, then next to this binary:\n"
             "<bindir>/../lib (an install) or <build>/src (the build tree).\n"
             "\n"
             "Exit status: PROGRAM's (128+N if signal N ended it); 2 if culpert fails,\n"
             "PROGRAM cannot be started, or it succeeded but no process of the run\n"
             "wrote a profile.\n");
}

static bool readable(const char *path)
{
  return access(path, R_OK) == 0;
}

/* The loader splits LD_PRELOAD at spaces and colons, with no way to quote
 * them: a library whose path holds one cannot be preloaded. */
static bool preloadable(const char *path)
{
  return strpbrk(path, " :\t\n") == NULL;
}

static int not_preloadable(const char *path)
{
  culpert__error("%s cannot be preloaded: its path holds a space or ':', which LD_PRELOAD cannot "
                 "carry; set CULPERT_LIB to a path without them (a symbolic link to it, say)",
                 path);
  return -EINVAL;
}

/* What keeps the file `path` from being a library the loader can preload,
 * or NULL: the loader would skip it with a warning of its own and run
 * PROGRAM unprofiled. */
static const char *not_a_library(const char *path)
{
  struct stat st;
  unsigned char magic[4];
  if (stat(path, &st) != 0 || S_ISDIR(st.st_mode))
    return "it is a directory";
  if (!S_ISREG(st.st_mode))
    return "it is not a regular file";
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  bool elf = fd >= 0 && read(fd, magic, sizeof magic) == (ssize_t)sizeof magic &&
             memcmp(magic, ELFMAG, SELFMAG) == 0;
  if (fd >= 0)
    close(fd);
  return elf ? NULL : "it is not a shared library (no ELF header)";
}

/* The multiarch library directory of an install under /usr on Debian. */
#if defined(__x86_64__)
#define MULTIARCH_DIR "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH_DIR "aarch64-linux-gnu"
#endif

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
    const char *why = not_a_library(env);
    if (why) {
      culpert__error("CULPERT_LIB=%s is not " LIB_NAME ": %s", env, why);
      return -EINVAL;
    }
    if (!preloadable(env))
      return not_preloadable(env);
    /* Absolute, so that a process that changes directory still finds it
     * when it execs a program. */
    char cwd[PATH_MAX];
    int m = env[0] == '/'             ? snprintf(out, len, "%s", env)
            : getcwd(cwd, sizeof cwd) ? snprintf(out, len, "%s/%s", cwd, env)
                                      : -1;
    if (m < 0 || (size_t)m >= len || !preloadable(out)) {
      culpert__error("CULPERT_LIB=%s: cannot make it an absolute path without a space or ':' "
                     "(the loader would look for it in each process's directory); give an "
                     "absolute path",
                     env);
      return -EINVAL;
    }
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
#ifdef MULTIARCH_DIR
      "../lib/" MULTIARCH_DIR "/" LIB_NAME,
#endif
      "../src/" LIB_NAME,
  };
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    int m = snprintf(out, len, "%s/%s", self, rel[i]);
    if (m > 0 && (size_t)m < len && readable(out)) {
      char real[PATH_MAX];
      if (realpath(out, real) && preloadable(real))
        snprintf(out, len, "%s", real);
      return preloadable(out) ? 0 : not_preloadable(out);
    }
  }
  culpert__error("cannot find " LIB_NAME " next to %s (looked in ../lib, ../lib64, "
#ifdef MULTIARCH_DIR
                 "../lib/" MULTIARCH_DIR ", "
#endif
                 "and ../src); set CULPERT_LIB to its path",
                 self);
  return -ENOENT;
}

static volatile sig_atomic_t child_pid;

/* The signals culpert passes on to PROGRAM: the ones that stop a service
 * (Ctrl-\'s SIGQUIT among them), and the two a service is told things
 * with (CULPERT_SNAPSHOT_SIGNAL's usual choice among them). */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_FORWARDED (sizeof forwarded / sizeof forwarded[0])

/* Forward a signal to PROGRAM, except signals the terminal sent to the
 * whole foreground process group: PROGRAM already has those. */
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

/* -o FILE with CULPERT_OUTPUT's %p (PROGRAM's pid), %e (PROGRAM as given,
 * without its directories) and %% expanded into name[len]. */
static int expand_output(const char *tmpl, const char *program, pid_t pid, char *name, size_t len)
{
  size_t at = 0;
  for (const char *c = tmpl; *c; c++) {
    char num[32];
    const char *put = c;
    size_t n = 1;
    if (c[0] == '%' && (c[1] == 'p' || c[1] == 'e' || c[1] == '%')) {
      if (c[1] == 'p')
        n = (size_t)snprintf(num, sizeof num, "%ld", (long)pid), put = num;
      else if (c[1] == 'e')
        put = base_name(program), n = strlen(put);
      c++;
    }
    if (n >= len - at)
      return -ENAMETOOLONG;
    memcpy(name + at, put, n);
    at += n;
  }
  name[at] = '\0';
  return 0;
}

/* The profile path: -o FILE (expanded) or culpert.<program>.<pid>.pb.gz,
 * made absolute so a PROGRAM that changes directory still writes where we
 * look. */
static int output_path(const char *opt_o, const char *program, pid_t pid, char *out, size_t len)
{
  char name[PATH_MAX];
  int n;
  if (opt_o) {
    if (expand_output(opt_o, program, pid, name, sizeof name) != 0)
      return -ENAMETOOLONG;
  } else {
    n = snprintf(name, sizeof name, "culpert.%s.%ld.pb.gz", base_name(program), (long)pid);
    if (n < 0 || (size_t)n >= sizeof name)
      return -ENAMETOOLONG;
  }
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

/* The file execvp would run for `prog`: `prog` itself when it holds a
 * '/', else the first executable regular file of that name on PATH. */
static bool program_file(const char *prog, char out[PATH_MAX])
{
  if (strchr(prog, '/') != NULL)
    return snprintf(out, PATH_MAX, "%s", prog) < PATH_MAX;
  const char *path = getenv("PATH");
  for (const char *p = path ? path : "/usr/bin:/bin"; *p != '\0';) {
    size_t n = strcspn(p, ":");
    struct stat st;
    int m = snprintf(out, PATH_MAX, "%.*s%s%s", (int)n, p, n ? "/" : "", prog);
    if (m > 0 && m < PATH_MAX && stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
        access(out, X_OK) == 0)
      return true;
    p += n + (p[n] == ':');
  }
  return false;
}

/* Whether the dynamic section of `file` (at `off`, `size` bytes) marks a
 * position independent executable (DT_FLAGS_1 holding DF_1_PIE). */
static bool dynamic_says_pie(int fd, Elf64_Off off, Elf64_Xword size)
{
  for (Elf64_Xword i = 0; i < size / sizeof(Elf64_Dyn) && i < 4096; i++) {
    Elf64_Dyn d;
    if (pread(fd, &d, sizeof d, (off_t)(off + i * sizeof d)) != (ssize_t)sizeof d ||
        d.d_tag == DT_NULL)
      return false;
    if (d.d_tag == DT_FLAGS_1)
      return (d.d_un.d_val & DF_1_PIE) != 0;
  }
  return false;
}

/* Whether `fd` holds a 64-bit ELF file whose header, read into *eh, has
 * program headers of the size this reader expects. */
static bool elf64_header(int fd, Elf64_Ehdr *eh)
{
  return pread(fd, eh, sizeof *eh, 0) == (ssize_t)sizeof *eh &&
         memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
         eh->e_phentsize == sizeof(Elf64_Phdr);
}

/* Whether `file` is a statically linked ELF executable, which the dynamic
 * loader, the one reader of LD_PRELOAD, never runs for: an ET_EXEC
 * without a PT_INTERP, or a static PIE (an ET_DYN without a PT_INTERP
 * whose dynamic section says PIE, as `-static-pie` and Rust's musl
 * targets build). Anything else (a script, a dynamically linked program,
 * the loader itself, which has no PT_INTERP either) is let through. */
static bool statically_linked(const char *file)
{
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  Elf64_Ehdr eh;
  bool is_static = false;
  if (elf64_header(fd, &eh) && (eh.e_type == ET_EXEC || eh.e_type == ET_DYN)) {
    bool interp = false, readable = true;
    Elf64_Phdr dyn = {.p_type = PT_NULL};
    for (unsigned i = 0; i < eh.e_phnum && readable && !interp; i++) {
      Elf64_Phdr ph;
      if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph)
        readable = false; /* cannot tell: let it run */
      else if (ph.p_type == PT_INTERP)
        interp = true;
      else if (ph.p_type == PT_DYNAMIC)
        dyn = ph;
    }
    if (readable && !interp)
      is_static = eh.e_type == ET_EXEC ||
                  (dyn.p_type == PT_DYNAMIC && dynamic_says_pie(fd, dyn.p_offset, dyn.p_filesz));
  }
  close(fd);
  return is_static;
}

/* The file offset of virtual address `v` in the PT_LOAD segments
 * load[0..n-1], or -1. */
static off_t file_offset(const Elf64_Phdr *load, unsigned n, Elf64_Addr v)
{
  for (unsigned i = 0; i < n; i++)
    if (v >= load[i].p_vaddr && v - load[i].p_vaddr < load[i].p_filesz)
      return (off_t)(v - load[i].p_vaddr + load[i].p_offset);
  return -1;
}

/* The sanitizer whose runtime `file` needs (DT_NEEDED) and that takes
 * over malloc in a way libculpert cannot stand in front of, or NULL; its
 * library's name in lib[0..len), the -fsanitize= value in *flag.
 * AddressSanitizer aborts at start-up when LD_PRELOAD puts another library
 * first; a ThreadSanitizer program re-executes itself and its profile held
 * 5 of 2000 allocations. (LeakSanitizer alone works.) */
static const char *sanitizer_runtime(const char *file, char *lib, size_t len, const char **flag)
{
  static const char *const runtimes[][3] = {
      {"libasan.so", "AddressSanitizer", "address"},
      {"libhwasan.so", "HWAddressSanitizer", "hwaddress"},
      {"libtsan.so", "ThreadSanitizer", "thread"},
      {"libmsan.so", "MemorySanitizer", "memory"},
  };
  const char *found = NULL;
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  Elf64_Ehdr eh;
  Elf64_Phdr load[16], dyn = {.p_type = PT_NULL};
  unsigned nload = 0;
  if (!elf64_header(fd, &eh))
    goto out;
  for (unsigned i = 0; i < eh.e_phnum && i < 64; i++) {
    Elf64_Phdr ph;
    if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph)
      goto out;
    if (ph.p_type == PT_LOAD && nload < sizeof load / sizeof load[0])
      load[nload++] = ph;
    else if (ph.p_type == PT_DYNAMIC)
      dyn = ph;
  }
  if (dyn.p_type != PT_DYNAMIC)
    goto out;
  Elf64_Addr strtab = 0;
  Elf64_Xword needed[64];
  unsigned nneeded = 0;
  for (Elf64_Xword i = 0; i < dyn.p_filesz / sizeof(Elf64_Dyn) && i < 4096; i++) {
    Elf64_Dyn d;
    if (pread(fd, &d, sizeof d, (off_t)(dyn.p_offset + i * sizeof d)) != (ssize_t)sizeof d ||
        d.d_tag == DT_NULL)
      break;
    if (d.d_tag == DT_STRTAB)
      strtab = d.d_un.d_ptr;
    else if (d.d_tag == DT_NEEDED && nneeded < sizeof needed / sizeof needed[0])
      needed[nneeded++] = d.d_un.d_val;
  }
  off_t base = strtab != 0 ? file_offset(load, nload, strtab) : -1;
  for (unsigned i = 0; i < nneeded && base >= 0 && !found; i++) {
    char name[64];
    ssize_t n = pread(fd, name, sizeof name - 1, base + (off_t)needed[i]);
    if (n <= 0)
      continue;
    name[n] = '\0';
    for (size_t k = 0; k < sizeof runtimes / sizeof runtimes[0] && !found; k++)
      if (strncmp(name, runtimes[k][0], strlen(runtimes[k][0])) == 0) {
        snprintf(lib, len, "%s", name);
        found = runtimes[k][1];
        *flag = runtimes[k][2];
      }
  }
out:
  close(fd);
  return found;
}

/* Why the dynamic loader would run `file` in secure mode, where it skips
 * an LD_PRELOAD entry that holds a '/': it is set-user-ID or set-group-ID
 * to someone else, or carries file capabilities (for a user other than
 * root), on a file system that honours them. NULL when it would not. */
static const char *secure_exec(const char *file)
{
  struct stat st;
  struct statvfs vfs;
  if (stat(file, &st) != 0 || (statvfs(file, &vfs) == 0 && (vfs.f_flag & ST_NOSUID)))
    return NULL;
  if ((st.st_mode & S_ISUID) && st.st_uid != getuid())
    return "set-user-ID";
  if ((st.st_mode & S_ISGID) && st.st_gid != getgid())
    return "set-group-ID";
  /* Root holds every capability already: a file's give it none more. */
  if (getuid() != 0 && getxattr(file, "security.capability", NULL, 0) > 0)
    return "given file capabilities";
  return NULL;
}

/* 0 when the directory the profile goes to (`path`'s, absolute; copied to
 * dir) exists and may be written; else -errno, before PROGRAM runs for
 * nothing. */
static int output_dir_ok(const char *path, char dir[PATH_MAX])
{
  snprintf(dir, PATH_MAX, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == NULL)
    return 0;
  *(slash == dir ? slash + 1 : slash) = '\0';
  struct stat st;
  if (stat(dir, &st) != 0)
    return -errno;
  if (!S_ISDIR(st.st_mode))
    return -ENOTDIR;
  return access(dir, W_OK | X_OK) == 0 ? 0 : -errno;
}

/* ---------------------------------------------------------------- other processes */

/* A profile another process of the run wrote: <profile>.<pid>, or, for
 * an image that exec'd another, <profile>[.<pid>].exec<N>. */
struct other {
  char *path;
  char *exe; /* culpert.exe, or NULL */
  long pid;
  unsigned exec_seq; /* N of .exec<N>, 0 for none */
  int64_t bytes, samples;
  char *problem; /* why it could not be read, or NULL */
};

/* The number at the start of s (1 to `max_digits` digits, no leading 0),
 * or -1; *end gets what follows it. */
static long number_at(const char *s, size_t max_digits, const char **end)
{
  size_t len = strspn(s, "0123456789");
  if (len == 0 || len > max_digits || s[0] == '0')
    return -1;
  *end = s + len;
  return strtol(s, NULL, 10);
}

/* name is "<base>.<pid>", "<base>.exec<N>" (PROGRAM's own pid, `own`) or
 * "<base>.<pid>.exec<N>", or, from a process that found "<base>.<pid>"
 * taken by an earlier process with its pid, "<base>.<pid>.<K>" or
 * "<base>.<pid>.<K>.exec<N>": the pid (at most 10 digits) and N in *seq
 * (0 for none), else -1. */
static long pid_suffix(const char *name, const char *base, long own, unsigned *seq)
{
  size_t n = strlen(base);
  const char *rest;
  long pid = own;
  *seq = 0;
  if (strncmp(name, base, n) != 0 || name[n] != '.')
    return -1;
  rest = name + n + 1;
  if (strncmp(rest, "exec", 4) != 0) {
    if ((pid = number_at(rest, 10, &rest)) < 0)
      return -1;
    if (*rest == '.' && rest[1] >= '0' && rest[1] <= '9' && number_at(rest + 1, 3, &rest) < 0)
      return -1;
    if (*rest == '\0')
      return pid;
    if (*rest++ != '.' || strncmp(rest, "exec", 4) != 0)
      return -1;
  }
  long k = number_at(rest + 4, 4, &rest);
  if (k < 0 || *rest != '\0')
    return -1;
  *seq = (unsigned)k;
  return pid;
}

static bool not_before(const struct timespec *t, const struct timespec *since)
{
  return t->tv_sec > since->tv_sec || (t->tv_sec == since->tv_sec && t->tv_nsec >= since->tv_nsec);
}

static int by_bytes_desc(const void *a, const void *b)
{
  const struct other *x = a, *y = b;
  if (x->bytes != y->bytes)
    return x->bytes > y->bytes ? -1 : 1;
  if (x->pid != y->pid)
    return x->pid < y->pid ? -1 : 1;
  return x->exec_seq < y->exec_seq ? -1 : x->exec_seq > y->exec_seq;
}

static void others_free(struct other *v, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(v[i].path);
    free(v[i].exe);
    free(v[i].problem);
  }
  free(v);
}

/* The samples in PROGRAM's own profile `path`, or -1 when it cannot be
 * read (the report then says why); *bytes gets its allocated bytes. */
static int64_t own_samples(const char *path, int64_t *bytes, char *unprofiled, size_t len)
{
  struct culpert__load_opts lo = {.stacks = CULPERT_STACKS_NONE};
  struct culpert__profile *p;
  char err[512];
  *bytes = 0;
  unprofiled[0] = '\0';
  if (culpert__profile_load_with(path, &lo, &p, err, sizeof err) != 0)
    return -1;
  int64_t n = p->total_samples;
  *bytes = p->total_bytes;
  const char *u = culpert__profile_prop(p, "culpert.exec_unprofiled");
  if (u != NULL)
    snprintf(unprofiled, len, "%s", u);
  culpert__profile_free(p);
  return n;
}

/* Whether PROGRAM (pid `own`) exec'd another program: its image before
 * the exec wrote <profile>.exec<N>. */
static bool execd_away(const struct other *v, long n, long own)
{
  for (long i = 0; i < n; i++)
    if (v[i].pid == own && v[i].exec_seq > 0)
      return true;
  return false;
}

static bool any_samples(const struct other *v, long n)
{
  for (long i = 0; i < n; i++)
    if (v[i].problem == NULL && v[i].samples > 0)
      return true;
  return false;
}

/* `path` as one shell word, to paste: as it is when it holds nothing the
 * shell reads specially, else in double quotes, else (it holds $, `, \,
 * " or !) in single quotes with each ' written '\''. */
static void shell_word(const char *path, char *buf, size_t len)
{
  static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                             "_./,:@%+=-";
  if (path[0] && strspn(path, safe) == strlen(path)) {
    snprintf(buf, len, "%s", path);
    return;
  }
  if (!strpbrk(path, "$`\\\"!")) {
    snprintf(buf, len, "\"%s\"", path);
    return;
  }
  size_t o = 0;
  buf[o++] = '\'';
  for (const char *c = path; *c && o + 6 < len; c++) {
    if (*c == '\'') {
      memcpy(buf + o, "'\\''", 4);
      o += 4;
    } else {
      buf[o++] = *c;
    }
  }
  buf[o++] = '\'';
  buf[o] = '\0';
}

/* The directory that stands for exactly `files` (n > 1), when they all
 * lie in one and it holds no other profile: the shorter way to name them
 * in a hint. NULL otherwise. `dir` has PATH_MAX bytes. */
static const char *files_dir(char **files, int n, char *dir)
{
  const char *slash = strrchr(files[0], '/');
  size_t len = slash ? (size_t)(slash - files[0]) : 0;
  if (n < 2 || len >= PATH_MAX)
    return NULL;
  for (int i = 1; i < n; i++)
    if (strncmp(files[i], files[0], len) != 0 || (slash && files[i][len] != '/') ||
        strchr(files[i] + len + (slash != NULL), '/') != NULL)
      return NULL;
  snprintf(dir, PATH_MAX, "%.*s", (int)(slash ? (len ? len : 1) : 1), slash ? files[0] : ".");
  const char *d = dir;
  char **listed, err[256];
  size_t nlisted;
  if (culpert__profile_expand_paths(&d, 1, &listed, &nlisted, err, sizeof err) != 0)
    return NULL;
  bool same = nlisted == (size_t)n;
  for (size_t i = 0; i < nlisted && same; i++) {
    const char *base = strrchr(listed[i], '/') + 1;
    same = false;
    for (int j = 0; j < n && !same; j++)
      same = strcmp(files[j] + len + (slash != NULL), base) == 0;
  }
  culpert__profile_paths_free(listed, nlisted);
  return same ? dir : NULL;
}

/* After the report, what was still allocated when the profile was
 * written (at exit: never freed), and the peak of the in-use estimate for
 * one process (several processes' peaks were at different times), with
 * the command that shows where: their directory when it holds just these
 * files, else every file, quoted for the shell. Nothing when nothing was
 * in use.
 */
static void inuse_summary(char **files, int n)
{
  struct culpert__load_opts lo = {.stacks = CULPERT_STACKS_NONE};
  struct culpert__profile *p;
  char err[512], b[CULPERT_FMT_MAX], pb[CULPERT_FMT_MAX];
  if (culpert__profile_load_all((const char *const *)files, (size_t)n, &lo, NULL, NULL, &p, err,
                                sizeof err) != 0)
    return; /* the report has just read them: not expected */
  int64_t peak;
  if (p->has_inuse && p->total_inuse_bytes > 0) {
    printf("\nStill in use when the profile was written (%s): %s in %" PRId64 " blocks",
           culpert__profile_exact(p) ? "exact" : "estimated",
           culpert__fmt_bytes(b, p->total_inuse_bytes), p->total_inuse_objects);
    if (n == 1 && culpert__profile_peak_inuse(p, &peak) > 0)
      printf(", peak %s", culpert__fmt_bytes(pb, peak));
    char word[3 * PATH_MAX], dir[PATH_MAX];
    const char *d = files_dir(files, n, dir);
    printf(";\nto see where: culpert report --inuse");
    for (int i = 0; i < (d ? 1 : n); i++) {
      shell_word(d ? d : files[i], word, sizeof word);
      printf(" %s", word);
    }
    putchar('\n');
  }
  culpert__profile_free(p);
}

/* With --peak, the command that shows where the in-use peak was held:
 * the NAME.peak.pb.gz beside each of `files` that libculpert wrote. */
static void peak_summary(char **files, int n)
{
  char word[3 * PATH_MAX], path[PATH_MAX + 16];
  int shown = 0;
  for (int i = 0; i < n; i++) {
    size_t len = strlen(files[i]);
    size_t stem = len > 6 && strcmp(files[i] + len - 6, ".pb.gz") == 0 ? len - 6 : len;
    if (snprintf(path, sizeof path, "%.*s.peak.pb.gz", (int)stem, files[i]) >= (int)sizeof path ||
        !readable(path))
      continue;
    if (shown++ == 0)
      printf("where the in-use peak was held: culpert report --inuse");
    shell_word(path, word, sizeof word);
    printf(" %s", word);
  }
  if (shown > 0)
    putchar('\n');
  else
    printf("no in-use-at-peak profile was written (none beside %s)\n", files[0]);
}

/* The report of the run: the span tree of `files` (PROGRAM's profile, or
 * the processes' merged), which for a program that opens no span (one
 * run unmodified) goes on to the places that allocated, by callsite; then
 * what was still in use. Returns the report's status. */
static int report_run(char **files, int n, bool peak)
{
  char **argv = calloc((size_t)n + 1, sizeof *argv);
  if (argv == NULL) {
    culpert__error("out of memory");
    return CULPERT_EXIT_ERROR;
  }
  argv[0] = "report";
  for (int i = 0; i < n; i++)
    argv[i + 1] = files[i];
  int r = culpert__cmd_report(n + 1, argv);
  free(argv);
  if (r == CULPERT_EXIT_OK)
    inuse_summary(files, n);
  if (r == CULPERT_EXIT_OK && peak)
    peak_summary(files, n);
  return r;
}

/* The bytes the readable profiles of v allocated, together. */
static int64_t others_bytes(const struct other *v, long n)
{
  int64_t sum = 0;
  for (long i = 0; i < n; i++)
    if (v[i].problem == NULL)
      sum += v[i].bytes;
  return sum;
}

/* Where libculpert writes a process's profiles when the directory of its
 * name refuses them (a service that dropped its privileges): $TMPDIR when
 * an absolute path to a directory, else /tmp, as the library finds it. */
static void fallback_dir(char out[PATH_MAX])
{
  culpert__gzmark_fallback_dir(getenv("TMPDIR"), out, PATH_MAX);
}

/* The start of PROGRAM's mark, which libculpert puts in the gzip header
 * of each file it writes (output.c, find_owner_mark): "pid=P start=T
 * pidns=I ", PROGRAM's pid, its start in clock ticks since boot and the
 * pid namespace it shares with culpert run. Read before the child is
 * reaped (a zombie's stat is still there); empty when /proc cannot tell. */
static void program_mark(pid_t pid, char *out, size_t n)
{
  char path[64], line[1024];
  struct stat ns;
  out[0] = '\0';
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "re");
  if (f == NULL)
    return;
  size_t got = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[got] = '\0';
  unsigned long long start;
  if (culpert__gzmark_start(line, &start) != 0 || stat("/proc/self/ns/pid", &ns) != 0)
    return;
  culpert__gzmark_format(out, n, (long)pid, start, (unsigned long long)ns.st_ino, NULL);
}

/* Whether the gzip header of the file at `path` has subfield `id`
 * (gzmark.h: "Cu" the writer's mark, "Cr" the run's id) equal to `want`,
 * or with prefix, starting with it. */
static bool header_says(const char *path, const char *id, const char *want, bool prefix)
{
  unsigned char h[CULPERT__GZMARK_HEAD];
  size_t len = 0, wlen = strlen(want);
  FILE *f = wlen > 0 ? fopen(path, "re") : NULL;
  if (f == NULL)
    return false;
  size_t got = fread(h, 1, sizeof h, f);
  fclose(f);
  const unsigned char *data = culpert__gzmark_find(h, got, id, &len);
  return data != NULL && (prefix ? len >= wlen : len == wlen) && memcmp(data, want, wlen) == 0;
}

/* Whether the gzip header of the file at `path` carries a mark that
 * starts with `mark`. */
static bool has_mark(const char *path, const char *mark)
{
  return header_says(path, "Cu", mark, true);
}

/* This run's id (CULPERT_RUN_ID, which its processes put in their files):
 * 16 hex digits, random. */
static char run_id[17];

static void make_run_id(void)
{
  unsigned char r[8];
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 48);
    memcpy(r, &x, sizeof r);
  }
  for (size_t i = 0; i < sizeof r; i++)
    snprintf(run_id + 2 * i, 3, "%02x", r[i]);
}

/* When PROGRAM's directory refused its profile, the library wrote it into
 * the fallback directory under the same name, or, when that was taken by
 * another process's file, NAME.2, NAME.3 ...: the one written since the
 * run began that carries PROGRAM's `mark` (without one, NAME alone). Then
 * `out` (len bytes) becomes that file, unless the file at `out` is newer
 * (`written`: PROGRAM wrote it this run, as it did before it dropped its
 * privileges and lost the directory). */
static bool moved_to_fallback(char *out, size_t len, bool written, const struct timespec *since,
                              const char *mark)
{
  char dir[PATH_MAX], moved[PATH_MAX];
  const char *slash = strrchr(out, '/');
  struct stat st, there;
  fallback_dir(dir);
  if (slash == NULL || (written && (mark[0] == '\0' || stat(out, &there) != 0)))
    return false;
  for (unsigned k = 1; k < 1000 && (k == 1 || mark[0] != '\0'); k++) {
    int w = k == 1 ? snprintf(moved, sizeof moved, "%s/%s", dir, slash + 1)
                   : snprintf(moved, sizeof moved, "%s/%s.%u", dir, slash + 1, k);
    if (w < 0 || w >= (int)sizeof moved || strcmp(moved, out) == 0 || strlen(moved) >= len)
      return false;
    if (stat(moved, &st) != 0) {
      if (errno == ENOENT)
        break; /* the names are taken in turn */
      continue;
    }
    if (!S_ISREG(st.st_mode) || !not_before(&st.st_mtim, since) ||
        (mark[0] != '\0' && !has_mark(moved, mark)))
      continue;
    if (written && !not_before(&st.st_mtim, &there.st_mtim))
      return false;
    strcpy(out, moved);
    return true;
  }
  return false;
}

/* The profiles in directory `d` (named `dir`) that find_others lists,
 * added to *v after the first n; returns the new count. With `shared`
 * (the fallback directory, where other runs write too), only those that
 * carry this run's id. */
static size_t scan_dir(DIR *d, const char *dir, const char *base, long own, const char *mark,
                       bool shared, const struct timespec *since, struct other **v, size_t n,
                       size_t *capp)
{
  size_t cap = *capp;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    unsigned seq;
    long pid = pid_suffix(e->d_name, base, own, &seq);
    struct stat st;
    char path[PATH_MAX];
    if (pid < 0 || snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
        stat(path, &st) != 0 || !S_ISREG(st.st_mode) || !not_before(&st.st_mtim, since) ||
        (shared && !header_says(path, "Cr", run_id, false)))
      continue;
    /* NAME.2 is PROGRAM's own profile when it carries its mark (see
     * moved_to_fallback), not that of a process with pid 2 */
    if (seq == 0 && mark[0] != '\0' && has_mark(path, mark))
      continue;
    if (n == cap) {
      struct other *grown = realloc(*v, (cap = cap ? 2 * cap : 8) * sizeof **v);
      if (grown == NULL)
        break;
      *v = grown;
    }
    struct other *o = &(*v)[n];
    *o = (struct other){.path = strdup(path), .pid = pid, .exec_seq = seq};
    if (o->path == NULL)
      break;
    n++;
    struct culpert__load_opts lo = {.stacks = CULPERT_STACKS_NONE};
    struct culpert__profile *p;
    char err[512];
    if (culpert__profile_load_with(path, &lo, &p, err, sizeof err) != 0) {
      o->problem = strdup(err);
      o->bytes = -1;
      continue;
    }
    o->bytes = p->total_bytes;
    o->samples = p->total_samples;
    const char *exe = culpert__profile_prop(p, "culpert.exe");
    o->exe = exe ? strdup(exe) : NULL;
    culpert__profile_free(p);
  }
  *capp = cap;
  return n;
}

/*
 * find_others: the profiles that the other processes of this run (fork
 * children and the programs they exec) wrote next to `out`, as
 * <out>.<pid>, and those of images that exec'd another, PROGRAM's own
 * (`own` is its pid) or another's, as <out>[.<pid>].exec<N>, modified
 * since the run began (`since`, read from the coarse
 * clock that file times come from, before PROGRAM started): an older file
 * of the same name is not this run's. Also those in the directory a
 * process falls back to when the profile's refuses its file (fallback_dir).
 * Sorted by allocated bytes, largest first. Returns how many, or -1 (*v NULL) when none could be
 * listed.
 */
static long find_others(const char *out, long own, const char *mark, const struct timespec *since,
                        struct other **v)
{
  char dir[PATH_MAX], fallback[PATH_MAX];
  *v = NULL;
  snprintf(dir, sizeof dir, "%s", out);
  char *slash = strrchr(dir, '/');
  if (slash == NULL)
    return -1;
  const char *base = out + (slash - dir) + 1;
  *slash = '\0';
  fallback_dir(fallback);
  size_t n = 0, cap = 0;
  bool listed = false;
  /* the profile's directory, then the one processes fall back to */
  struct stat here, there;
  for (int pass = 0; pass < 2; pass++) {
    /* the same directory, however it is spelled (TMPDIR through a
     * symbolic link, with "//" or "/./"), is listed once */
    if (pass == 1 && (strcmp(fallback, dir[0] ? dir : "/") == 0 ||
                      (stat(dir[0] ? dir : "/", &here) == 0 && stat(fallback, &there) == 0 &&
                       here.st_dev == there.st_dev && here.st_ino == there.st_ino)))
      break;
    if (pass == 1)
      strcpy(dir, fallback);
    DIR *d = opendir(dir[0] ? dir : "/");
    if (d == NULL)
      continue;
    listed = true;
    n = scan_dir(d, dir, base, own, mark, pass == 1, since, v, n, &cap);
    closedir(d);
  }
  if (!listed)
    return -1;
  if (n > 0)
    qsort(*v, n, sizeof **v, by_bytes_desc);
  return (long)n;
}

#define OTHERS_SHOWN 10

/* List what find_others found: one row per process (program, pid, bytes,
 * samples, file), the largest OTHERS_SHOWN. */
static void print_others(FILE *f, const struct other *v, size_t n)
{
  size_t shown = n < OTHERS_SHOWN ? n : OTHERS_SHOWN;
  size_t w_name = 0, w_bytes = 0, w_samples = 0;
  char name[128], bytes[CULPERT_FMT_MAX], samples[32];
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < shown; i++) {
      const struct other *o = &v[i];
      char exe[64];
      culpert__truncate(o->exe ? o->exe : "?", 32, exe, sizeof exe);
      if (o->exec_seq == 0)
        snprintf(name, sizeof name, "%s (pid %ld)", exe, o->pid);
      else
        snprintf(name, sizeof name, "%s (pid %ld, before exec %u)", exe, o->pid, o->exec_seq);
      if (pass == 0) {
        size_t w = culpert__display_width(name);
        w_name = w > w_name ? w : w_name;
        if (o->problem == NULL) {
          w = strlen(culpert__fmt_bytes(bytes, o->bytes));
          w_bytes = w > w_bytes ? w : w_bytes;
          w = (size_t)snprintf(samples, sizeof samples, "%" PRId64 " sample%s", o->samples,
                               o->samples == 1 ? "" : "s");
          w_samples = w > w_samples ? w : w_samples;
        }
        continue;
      }
      fputs("  ", f);
      culpert__put_padded(f, name, w_name, 0);
      if (o->problem != NULL) {
        fprintf(f, "  unreadable: %s\n", o->problem);
        continue;
      }
      fputs("  ", f);
      culpert__put_padded(f, culpert__fmt_bytes(bytes, o->bytes), w_bytes, 1);
      snprintf(samples, sizeof samples, "%" PRId64 " sample%s", o->samples,
               o->samples == 1 ? "" : "s");
      fputs("  ", f);
      culpert__put_padded(f, samples, w_samples, 1);
      fprintf(f, "  %s\n", o->path);
    }
  }
  if (n > shown)
    fprintf(f, "  ... (%zu more)\n", n - shown);
}

struct run_opts {
  const char *output;
  const char *rate; /* canonical decimal, or NULL */
  const char *stack;
  bool no_report;
  bool peak;
  char **argv; /* PROGRAM ARGS..., NULL-terminated */
};

/* In the child: set the environment and exec PROGRAM. On failure report
 * errno through `fd` and exit. Never returns. */
static void child(const struct run_opts *o, const char *lib, int fd)
{
  char out[PATH_MAX], env_out[PATH_MAX * 2], preload[PATH_MAX * 2];
  int err = 0;
  const char *old = getenv("LD_PRELOAD");
  if (old && *old)
    snprintf(preload, sizeof preload, "%s %s", lib, old);
  else
    snprintf(preload, sizeof preload, "%s", lib);
  int bad_path = output_path(o->output, o->argv[0], getpid(), out, sizeof out);
  /* The path is final: '%' doubled, so libculpert expands nothing in it,
   * and the processes PROGRAM starts append .PID to this one name. */
  size_t at = 0;
  for (const char *c = out; !bad_path && *c; c++) {
    env_out[at++] = *c;
    if (*c == '%')
      env_out[at++] = '%';
  }
  env_out[at] = '\0';
  if (bad_path != 0 || setenv("LD_PRELOAD", preload, 1) || setenv("CULPERT_OUTPUT", env_out, 1) ||
      (o->rate && setenv("CULPERT_SAMPLE_RATE", o->rate, 1)) ||
      (o->stack && setenv("CULPERT_STACK", o->stack, 1)) ||
      (o->peak && setenv("CULPERT_PEAK", "1", 1)) || unsetenv("CULPERT_ROOT_PID") ||
      setenv("CULPERT_WRITE_ON_SIGNAL", "1", 0) || setenv("CULPERT_QUIET", "1", 0) ||
      setenv("CULPERT_RUN_ID", run_id, 1)) {
    err = errno ? errno : ENAMETOOLONG;
  } else {
    for (size_t i = 0; i < N_FORWARDED; i++) /* caught ones go back to the default */
      if (signal(forwarded[i], SIG_DFL) == SIG_IGN)
        signal(forwarded[i], SIG_IGN);
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
      {"rate", required_argument, NULL, 'r'},
      {"stack", required_argument, NULL, 's'},
      {"no-report", no_argument, NULL, 'n'},
      {"output", required_argument, NULL, 'o'},
      {"peak", no_argument, NULL, 'p'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c;
  optind = 0;
  opterr = 0;
  /* '+': stop at PROGRAM, so its own options are left alone. */
  while ((c = culpert__getopt(argc, argv, "+:o:h", longopts)) != -1) {
    switch (c) {
    case 'o':
      o->output = optarg;
      break;
    case 'r': {
      uint64_t v;
      int rc = culpert__bytesize_parse(optarg, &v);
      if (rc == -ERANGE)
        v = UINT64_MAX;
      else if (rc != 0) {
        culpert__error("--rate: '%s' is not a byte count (examples: 65536, 4K, 512KiB, 1MB)",
                       optarg);
        return -EINVAL;
      }
      if (v > (uint64_t)INT64_MAX) {
        culpert__error("--rate: '%s' is above the largest rate, %" PRId64 " bytes", optarg,
                       INT64_MAX);
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
    case 'p':
      o->peak = true;
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

/* Whether the directory of the profile path `path` exists. */
static bool profile_dir_exists(const char *path)
{
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  if (slash == NULL)
    return true;
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  if (n >= sizeof dir)
    return true;
  memcpy(dir, path, n);
  dir[n] = '\0';
  struct stat st;
  return stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

/* What would leave the run without a profile, said before PROGRAM runs
 * for nothing: a statically linked PROGRAM, one the loader runs in secure
 * mode, a profile directory that is missing or read-only, -o naming a
 * directory or looking like an option. -1 (the reason
 * printed) or 0. */
static int refuse_before_run(const struct run_opts *o)
{
  char prog_file[PATH_MAX];
  const char *secure = NULL;
  if (o->output != NULL && culpert__path_value_ok("-o", o->output) != 0)
    return -1;
  if (o->output != NULL && strcmp(o->output, "-") == 0) {
    culpert__error("-o -: culpert run writes the profile to a file and reads it back for the "
                   "report, never to standard output; give a file name (./- for a file of that "
                   "name)");
    return -1;
  }
  if (program_file(o->argv[0], prog_file)) {
    if (statically_linked(prog_file)) {
      culpert__error("%s is statically linked: libculpert, loaded by LD_PRELOAD, sees only "
                     "dynamically linked programs",
                     prog_file);
      return -1;
    }
    secure = secure_exec(prog_file);
    char lib[64];
    const char *flag = NULL;
    const char *sanitizer = sanitizer_runtime(prog_file, lib, sizeof lib, &flag);
    if (sanitizer != NULL) {
      culpert__error("%s is built with %s (it needs %s), whose runtime takes over malloc: "
                     "libculpert cannot profile it; build it without -fsanitize=%s to profile "
                     "it",
                     prog_file, sanitizer, lib, flag);
      return -1;
    }
  }
  if (secure != NULL) {
    culpert__error("%s is %s: the dynamic loader ignores LD_PRELOAD for it, so libculpert "
                   "would see nothing",
                   prog_file, secure);
    return -1;
  }
  /* The profile's directory, unless PROGRAM's pid is part of its name (a
   * directory PROGRAM may create itself). */
  char probe[PATH_MAX], dir[PATH_MAX] = "";
  const char *last_slash = o->output ? strrchr(o->output, '/') : NULL;
  bool pid_in_dir = last_slash && memmem(o->output, (size_t)(last_slash - o->output), "%p", 2);
  int bad = output_path(o->output, o->argv[0], 0, probe, sizeof probe);
  size_t olen = o->output ? strlen(o->output) : 0;
  struct stat st;
  if (olen > 0 && (o->output[olen - 1] == '/' || (bad == 0 && !strstr(o->output, "%p") &&
                                                  stat(probe, &st) == 0 && S_ISDIR(st.st_mode)))) {
    culpert__error("-o %s names a directory: give a file name, such as %s%sapp.pb.gz", o->output,
                   o->output, o->output[olen - 1] == '/' ? "" : "/");
    return -1;
  }
  if (bad == 0 && stat(probe, &st) == 0 && !S_ISREG(st.st_mode)) {
    culpert__error("-o %s is not a regular file (a device or FIFO): culpert run reads the "
                   "profile back from it; give a file name",
                   o->output);
    return -1;
  }
  if (bad == 0 && !pid_in_dir)
    bad = output_dir_ok(probe, dir);
  if (bad != 0) {
    culpert__error("cannot write a profile in %s: %s", dir[0] ? dir : probe, strerror(-bad));
    return -1;
  }
  return 0;
}

int culpert__cmd_run(int argc, char **argv)
{
  struct run_opts o = {0};
  char rate_buf[32], lib[PATH_MAX], out[PATH_MAX];
  int pipefd[2] = {-1, -1};
  make_run_id();
  struct sigaction sa, old_action[N_FORWARDED];
  bool caught[N_FORWARDED] = {false};
  struct stat before;
  struct other *other = NULL;
  long others = 0;
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
  if (refuse_before_run(&o) != 0)
    return CULPERT_EXIT_ERROR;
  /* PROGRAM and every process it starts run with CULPERT_QUIET=1: a shell
   * script's commands would each print a line into PROGRAM's output.
   * culpert says once, at the end, what was written. A CULPERT_QUIET the
   * caller set passes through, and culpert then says nothing itself (at
   * 0, libculpert names every file). */
  bool quiet = getenv("CULPERT_QUIET") != NULL;

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
  /* A signal culpert was started with ignored (nohup's SIGHUP, a
   * background job's SIGINT) is neither caught nor forwarded, and PROGRAM
   * inherits it ignored, as it would without culpert. */
  for (size_t i = 0; i < N_FORWARDED; i++) {
    if (sigaction(forwarded[i], NULL, &old_action[i]) != 0 || old_action[i].sa_handler == SIG_IGN)
      continue;
    if (sigaction(forwarded[i], &sa, NULL) != 0) {
      culpert__error("cannot install signal handlers: %s", strerror(errno));
      goto out;
    }
    caught[i] = true;
  }

  struct timespec since;
  clock_gettime(CLOCK_REALTIME_COARSE, &since);
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
  char mark[128];
  /* once it has ended (or exec'd): the start that /proc gives is the same */
  siginfo_t ended;
  while (waitid(P_PID, (id_t)pid, &ended, WEXITED | WNOWAIT) < 0 && errno == EINTR)
    ;
  program_mark(pid, mark, sizeof mark);
  while (waitpid(pid, &ws, 0) < 0) {
    if (errno != EINTR) {
      culpert__error("waiting for %s: %s", o.argv[0], strerror(errno));
      goto out;
    }
  }
  child_pid = 0;
  /* PROGRAM has ended: what is left to say must not end culpert by SIGPIPE
   * where its stderr or stdout is a pipe nobody reads any more (`culpert
   * run -- prog 2>&1 | head -1`). culpert ended with status 141 then,
   * PROGRAM's status lost; now a line on a gone stderr is lost, and a
   * report on a gone stdout is the error "cannot write to standard
   * output" (exit 2), as on a full disk. */
  signal(SIGPIPE, SIG_IGN);
  if (got == (ssize_t)sizeof exec_err) {
    /* exec says EACCES for a directory and for a file without execute
     * permission alike; a path names the file, so say which. */
    struct stat st;
    bool named = strchr(o.argv[0], '/') != NULL && exec_err == EACCES && stat(o.argv[0], &st) == 0;
    if (named && S_ISDIR(st.st_mode))
      culpert__error("cannot run %s: it is a directory", o.argv[0]);
    else
      culpert__error("cannot run %s: %s%s", o.argv[0], strerror(exec_err),
                     named && S_ISREG(st.st_mode) && access(o.argv[0], X_OK) != 0
                         ? " (the file is not executable)"
                         : "");
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
  others = find_others(out, (long)pid, mark, &since, &other);
  if (moved_to_fallback(out, sizeof out, written, &since, mark))
    written = true;
  /* A shell script or a compiler driver, say: PROGRAM hands the work on,
   * and its own profile holds nothing, or next to nothing (under 1% of
   * what the run's processes allocated, however many samples the rate
   * made of its few allocations). The report then covers the others. */
  int64_t own_bytes = 0;
  char unprofiled[PATH_MAX] = "";
  int64_t own_n = written ? own_samples(out, &own_bytes, unprofiled, sizeof unprofiled) : -1;
  /* PROGRAM exec'd a program with an LD_PRELOAD of its own (env
   * LD_PRELOAD=libjemalloc.so.2 ./server, say), which culpert cannot see. */
  if (unprofiled[0] != '\0')
    fprintf(stderr,
            "culpert: note: %s ran %s with an LD_PRELOAD that leaves libculpert out, so %s "
            "was not profiled; %s holds only what %s allocated before that.\n"
            "culpert: note: to profile a program over another preloaded library, set "
            "LD_PRELOAD before culpert run, which puts libculpert in front of it: "
            "LD_PRELOAD=LIB culpert run -- PROGRAM\n",
            o.argv[0], unprofiled, unprofiled, out, o.argv[0]);
  bool handed_on = written && others > 0 && any_samples(other, others);
  bool empty = handed_on && own_n == 0;
  int64_t run_bytes = own_bytes + (others > 0 ? others_bytes(other, others) : 0);
  bool minor = handed_on && own_n > 0 && own_bytes < run_bytes / 100;
  if ((!written || empty || minor) && others > 0) {
    /* Or a program killed by SIGKILL: the report covers what the
     * processes it started wrote (the readable ones), merged. */
    /* When PROGRAM exec'd another program, the file is that one's. */
    bool execd = execd_away(other, others, (long)pid);
    const char *plural = others == 1 ? "" : "es";
    const char *covers = o.no_report ? "" : ", and the report covers them all";
    char held[CULPERT_FMT_MAX], all[CULPERT_FMT_MAX];
    culpert__fmt_bytes(held, own_bytes);
    culpert__fmt_bytes(all, run_bytes);
    if (minor && execd)
      fprintf(stderr,
              "culpert: note: the program %s exec'd wrote %s, which holds %s, under 1%% of the "
              "%s this run allocated; %ld other process%s wrote the rest%s:\n",
              o.argv[0], out, held, all, others, plural, covers);
    else if (minor)
      fprintf(stderr,
              "culpert: note: %s's own profile (%s) holds %s, under 1%% of the %s this run "
              "allocated; %ld other process%s wrote the rest%s:\n",
              o.argv[0], out, held, all, others, plural, covers);
    else if (empty && execd)
      fprintf(stderr,
              "culpert: note: the program %s exec'd wrote %s, which holds no samples, but %ld "
              "other process%s of the run wrote %s:\n",
              o.argv[0], out, others, plural, others == 1 ? "one" : "profiles");
    else if (empty)
      fprintf(stderr,
              "culpert: note: %s's own profile (%s) holds no samples, but %ld other "
              "process%s of the run wrote %s:\n",
              o.argv[0], out, others, plural, others == 1 ? "one" : "profiles");
    else if (execd)
      fprintf(stderr,
              "culpert: note: the program %s exec'd wrote no profile (%s: it ended without "
              "running exit handlers), but %ld other process%s of the run did:\n",
              o.argv[0], out, others, plural);
    else
      fprintf(stderr,
              "culpert: note: %s wrote no profile of its own (%s: it ended without running "
              "exit handlers), but %ld other process%s of the run did:\n",
              o.argv[0], out, others, plural);
    print_others(stderr, other, (size_t)others);
    status = prog_status;
    if (!o.no_report) {
      fflush(stderr);
      char **rargv = calloc((size_t)others + 1, sizeof *rargv); /* own, others */
      if (!rargv) {
        culpert__error("out of memory");
        goto out;
      }
      int n = 0;
      if (minor)
        rargv[n++] = out;
      for (long i = 0; i < others; i++)
        if (other[i].problem == NULL)
          rargv[n++] = other[i].path;
      int r = n > 0 ? report_run(rargv, n, o.peak) : CULPERT_EXIT_OK;
      free(rargv);
      if (r != CULPERT_EXIT_OK && prog_status == 0)
        status = r;
    }
    goto out;
  }
  if (!written) {
    if (WIFSIGNALED(ws)) {
      const char *abbrev = sigabbrev_np(WTERMSIG(ws));
      char sig[24];
      if (abbrev)
        snprintf(sig, sizeof sig, "SIG%s", abbrev);
      else
        snprintf(sig, sizeof sig, "%d", WTERMSIG(ws));
      fprintf(stderr,
              "culpert: note: %s was killed by signal %s (status %d) and wrote no profile (%s)\n",
              o.argv[0], sig, prog_status, out);
      status = prog_status;
    } else if (prog_status != 0) {
      fprintf(stderr, "culpert: note: %s exited with status %d and wrote no profile (%s)\n",
              o.argv[0], prog_status, out);
      status = prog_status;
    } else if (!profile_dir_exists(out)) {
      /* Checked before the run only when its name has no %p. */
      culpert__error("%s wrote no profile at %s: its directory does not exist (a directory "
                     "whose name holds %%p must be made by the program itself)",
                     o.argv[0], out);
    } else {
      culpert__error("%s wrote no profile at %s: is it statically linked, or did it exit "
                     "without running exit handlers? libculpert only sees dynamically linked "
                     "programs",
                     o.argv[0], out);
    }
    goto out;
  }
  if (!quiet) {
    if (own_n >= 0)
      fprintf(stderr, "culpert: wrote profile to %s (%" PRId64 " sample%s)\n", out, own_n,
              own_n == 1 ? "" : "s");
    if (o.no_report && others > 0) {
      fprintf(stderr, "culpert: other processes of this run wrote profiles of their own (%ld):\n",
              others);
      print_others(stderr, other, (size_t)others);
    }
  }
  if (!o.no_report) {
    char *files[] = {out};
    int r = report_run(files, 1, o.peak);
    if (r != CULPERT_EXIT_OK && prog_status == 0) {
      status = r;
      goto out;
    }
    if (others > 0) {
      printf("\nOther processes of this run wrote profiles of their own (%ld), largest first;\n"
             "'culpert report FILE...' shows one, or several merged:\n",
             others);
      print_others(stdout, other, (size_t)others);
    }
  }
  status = prog_status;
out:
  for (size_t i = 0; i < N_FORWARDED; i++)
    if (caught[i])
      sigaction(forwarded[i], &old_action[i], NULL);
  if (pipefd[0] >= 0)
    close(pipefd[0]);
  if (pipefd[1] >= 0)
    close(pipefd[1]);
  if (others > 0)
    others_free(other, (size_t)others);
  else
    free(other);
  return status;
}
