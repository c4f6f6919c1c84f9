/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * exec.c: the exec family. An exec replaces the program's image and its
 * exit handlers never run, so each wrapper has the image's profile written
 * first (output.c: culpert__output_before_exec), when the exec looks
 * likely to succeed: the program file is there and may be run. Should it
 * fail all the same, that file is removed again and the program goes on.
 *
 * execve, execvpe, fexecve and execveat call the next definition (libc's);
 * execv, execvp, execl, execle and execlp are built on execve and execvpe
 * exactly as glibc builds them, since glibc's own calls between them never
 * come back through a wrapper. glibc's posix_spawn, system and popen start
 * their programs in a child that shares nothing with culpert's state and
 * pass straight through.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

typedef int execve_fn(const char *, char *const[], char *const[]);
typedef int fexecve_fn(int, char *const[], char *const[]);
typedef int execveat_fn(int, const char *, char *const[], char *const[], int);

static execve_fn *next_execve, *next_execvpe;
static fexecve_fn *next_fexecve;
static execveat_fn *next_execveat;

/* Resolve `var` to the next definition of `name` unless done already. */
#define RESOLVE(var, name)                                                                         \
  do {                                                                                             \
    if ((var) == NULL)                                                                             \
      CULPERT__SET_FN(var, dlsym(RTLD_NEXT, name));                                                \
  } while (0)

/* From the constructor (malloc.c); each wrapper also resolves what it
 * needs should it be called earlier. */
void culpert__exec_resolve(void)
{
  RESOLVE(next_execve, "execve");
  RESOLVE(next_execvpe, "execvpe");
  RESOLVE(next_fexecve, "fexecve");
  RESOLVE(next_execveat, "execveat"); /* glibc 2.34 and later */
}

/* Whether this process may execute `path` (relative to dirfd). */
static int runnable_at(int dirfd, const char *path, int flags)
{
  return path != NULL && faccessat(dirfd, path, X_OK, AT_EACCESS | flags) == 0;
}

/* The same for `file` as execvp looks it up: a name with a slash as it is,
 * any other in each directory of PATH (an empty entry being the current
 * one), "/bin:/usr/bin" when PATH is unset. */
static int runnable_in_path(const char *file)
{
  if (file == NULL || *file == '\0')
    return 0;
  if (strchr(file, '/') != NULL)
    return runnable_at(AT_FDCWD, file, 0);
  const char *dirs = getenv("PATH");
  if (dirs == NULL)
    dirs = "/bin:/usr/bin";
  char name[CULPERT__PATH_MAX];
  size_t flen = strlen(file);
  for (const char *d = dirs;; d++) {
    const char *end = strchrnul(d, ':');
    size_t dlen = (size_t)(end - d);
    if (dlen + flen + 2 <= sizeof name) {
      memcpy(name, d, dlen);
      if (dlen > 0)
        name[dlen++] = '/';
      memcpy(name + dlen, file, flen + 1);
      if (runnable_at(AT_FDCWD, name, 0))
        return 1;
    }
    if (*end == '\0')
      return 0;
    d = end;
  }
}

/* The note of the image's profile (its path takes 8 KiB) lives in a
 * mapping of its own, not on the stack: a thread started with a small
 * stack (16 KiB) that execs had no room for it and crashed with SIGSEGV.
 * Gone with the image, or unmapped by after() should the exec fail. Made
 * only where the image's profile is written (never in a vfork child,
 * whose mapping would stay behind in its parent's address space); NULL
 * otherwise, or when no mapping can be made (the exec goes ahead). */
static struct culpert__exec_note *before(int likely, const char *file, char *const envp[])
{
  if (!likely || !culpert__output_exec_writes())
    return NULL;
  int saved = errno;
  struct culpert__exec_note *note =
      mmap(NULL, sizeof *note, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  errno = saved;
  if (note == MAP_FAILED)
    return NULL;
  culpert__output_before_exec(note, file, envp);
  return note;
}

static void after(struct culpert__exec_note *note)
{
  if (note == NULL)
    return;
  culpert__output_exec_failed(note);
  int saved = errno;
  munmap(note, sizeof *note);
  errno = saved;
}

CULPERT__EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
  RESOLVE(next_execve, "execve");
  if (next_execve == NULL) {
    errno = ENOSYS;
    return -1;
  }
  struct culpert__exec_note *note = before(runnable_at(AT_FDCWD, path, 0), path, envp);
  int rc = next_execve(path, argv, envp);
  after(note);
  return rc;
}

CULPERT__EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
  RESOLVE(next_execvpe, "execvpe");
  if (next_execvpe == NULL) {
    errno = ENOSYS;
    return -1;
  }
  struct culpert__exec_note *note = before(runnable_in_path(file), file, envp);
  int rc = next_execvpe(file, argv, envp);
  after(note);
  return rc;
}

CULPERT__EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
  RESOLVE(next_fexecve, "fexecve");
  if (next_fexecve == NULL) {
    errno = ENOSYS;
    return -1;
  }
  struct culpert__exec_note *note = before(fd >= 0, NULL, envp);
  int rc = next_fexecve(fd, argv, envp);
  after(note);
  return rc;
}

CULPERT__EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                             int flags)
{
  RESOLVE(next_execveat, "execveat");
  int empty = *path == '\0' && (flags & AT_EMPTY_PATH);
  struct culpert__exec_note *note = before(
      empty || runnable_at(dirfd, path, flags & AT_SYMLINK_NOFOLLOW), empty ? NULL : path, envp);
  int rc = next_execveat != NULL ? next_execveat(dirfd, path, argv, envp, flags)
                                 : (int)syscall(SYS_execveat, dirfd, path, argv, envp, flags);
  after(note);
  return rc;
}

CULPERT__EXPORT int execv(const char *path, char *const argv[])
{
  return execve(path, argv, environ);
}

CULPERT__EXPORT int execvp(const char *file, char *const argv[])
{
  return execvpe(file, argv, environ);
}

/* execl, execle and execlp: the arguments from `arg` up to the null
 * pointer that ends them, gathered into an argument vector: on the stack,
 * or for very many in a mapping of its own (the exec replaces the image;
 * gone again should it fail). */
#define ARGS_ON_STACK 256

struct args {
  const char **v;
  size_t mapped; /* bytes, 0 when v is `stack` */
  const char *stack[ARGS_ON_STACK];
};

/* Fill a->v from arg and *ap, which is left after the null pointer; -1
 * with errno set when there is no room. */
static int gather(struct args *a, const char *arg, va_list *ap)
{
  va_list count;
  size_t n = 1;
  va_copy(count, *ap);
  while (va_arg(count, const char *) != NULL)
    n++;
  va_end(count);
  a->v = a->stack;
  a->mapped = 0;
  if (n >= ARGS_ON_STACK) {
    a->mapped = (n + 1) * sizeof *a->v;
    void *m = mmap(NULL, a->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      errno = E2BIG;
      return -1;
    }
    a->v = m;
  }
  a->v[0] = arg;
  for (size_t i = 1; i <= n; i++)
    a->v[i] = va_arg(*ap, const char *);
  return 0;
}

enum list_kind { LIST_PATH, LIST_SEARCH, LIST_ENV };

/* execl (LIST_PATH), execlp (LIST_SEARCH) and execle (LIST_ENV, whose
 * environment follows the null pointer). */
static int exec_list(enum list_kind kind, const char *name, const char *arg, va_list *ap)
{
  struct args a;
  if (gather(&a, arg, ap) != 0)
    return -1;
  char *const *envp = kind == LIST_ENV ? va_arg(*ap, char *const *) : environ;
  char *const *argv = (char *const *)a.v;
  int rc = kind == LIST_SEARCH ? execvpe(name, argv, envp) : execve(name, argv, envp);
  int saved = errno;
  if (a.mapped != 0)
    munmap(a.v, a.mapped);
  errno = saved;
  return rc;
}

CULPERT__EXPORT int execl(const char *path, const char *arg, ...)
{
  va_list ap;
  va_start(ap, arg);
  int rc = exec_list(LIST_PATH, path, arg, &ap);
  va_end(ap);
  return rc;
}

CULPERT__EXPORT int execlp(const char *file, const char *arg, ...)
{
  va_list ap;
  va_start(ap, arg);
  int rc = exec_list(LIST_SEARCH, file, arg, &ap);
  va_end(ap);
  return rc;
}

CULPERT__EXPORT int execle(const char *path, const char *arg, ...)
{
  va_list ap;
  va_start(ap, arg);
  int rc = exec_list(LIST_ENV, path, arg, &ap);
  va_end(ap);
  return rc;
}
