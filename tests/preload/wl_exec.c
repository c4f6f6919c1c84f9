/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_exec BOGUS: one process that execs itself twice, each image
 * allocating under a span of its own (with CULPERT_SAMPLE_RATE=0):
 *   image 1: first_image 4 x 1000 bytes, while a second thread keeps
 *            allocating (span "busy"); an execv of a file that does not
 *            exist, an execvp of a name found nowhere in PATH and one of
 *            BOGUS (executable, but no program: ENOEXEC) fail; then after_failed 2 x 500 bytes, and
 * execl of itself; image 2: second_image 3 x 2000 bytes, then execle of itself with its environment
 * plus WL_EXEC_MARK=yes; image 3: third_image 5 x 300 bytes; a fork child that allocates
 *            child_before_exec 2 x 100 bytes and execlp's "wl_exec fourth"
 *            (found in PATH, which the caller sets), which allocates
 *            fourth_image 1 x 700 bytes; a vfork child that execvp's "true"
 *            at once; then it returns 0.
 * wl_exec noenv [other]: before_noenv 2 x 1000 bytes, then an execle of
 * /bin/true with an environment that leaves out LD_PRELOAD (with "other",
 * whose LD_PRELOAD names another library only).
 * Prints "failed ERRNO-NAME" for each exec that failed, "mark=VALUE" in
 * image 3, "fork PID status N" and "vfork PID status N".
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "culpert.h"

static void *kept[16];
static atomic_int busy_started;

static void allocate(const char *span, int n, size_t size)
{
  culpert_span_enter(span);
  for (int i = 0; i < n; i++)
    kept[i] = malloc(size);
  culpert_span_exit();
}

static void *busy(void *arg)
{
  (void)arg;
  for (;;) {
    CULPERT_SPAN("busy");
    void *p = malloc(64);
    atomic_store(&busy_started, 1);
    free(p);
  }
  return NULL;
}

static const char *errno_name(int e)
{
  return e == ENOENT ? "ENOENT" : e == ENOEXEC ? "ENOEXEC" : e == EACCES ? "EACCES" : "other";
}

static int wait_for(pid_t pid)
{
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid)
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int first(const char *self, const char *bogus)
{
  pthread_t t;
  allocate("first_image", 4, 1000);
  if (pthread_create(&t, NULL, busy, NULL) != 0)
    return 1;
  while (!atomic_load(&busy_started))
    sched_yield();
  char *none[] = {"none", NULL};
  execv("/nonexistent/wl_exec-no-such-program", none);
  printf("failed %s\n", errno_name(errno));
  execvp("wl_exec-no-such-program", none);
  printf("failed %s\n", errno_name(errno));
  char *bad[] = {(char *)bogus, NULL};
  execv(bogus, bad);
  printf("failed %s\n", errno_name(errno));
  fflush(stdout);
  allocate("after_failed", 2, 500);
  execl("/proc/self/exe", self, "second", (char *)NULL);
  return 2;
}

static int second(const char *self)
{
  extern char **environ;
  static char *env[256];
  size_t n = 0;
  allocate("second_image", 3, 2000);
  for (char **e = environ; *e != NULL && n < 254; e++)
    env[n++] = *e;
  env[n++] = "WL_EXEC_MARK=yes";
  env[n] = NULL;
  execle("/proc/self/exe", self, "third", (char *)NULL, env);
  return 3;
}

static int third(void)
{
  const char *mark = getenv("WL_EXEC_MARK");
  printf("mark=%s\n", mark ? mark : "(unset)");
  allocate("third_image", 5, 300);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    allocate("child_before_exec", 2, 100);
    execlp("wl_exec", "wl_exec", "fourth", (char *)NULL);
    _exit(127);
  }
  printf("fork %d status %d\n", (int)pid, wait_for(pid));
  fflush(stdout);
  pid = vfork();
  if (pid == 0) {
    char *argv[] = {"true", NULL};
    execvp("true", argv);
    _exit(127);
  }
  printf("vfork %d status %d\n", (int)pid, wait_for(pid));
  return 0;
}

/* wl_exec noenv [other]: allocate, then exec true with an environment of
 * its own that does not preload libculpert (with "other", it preloads
 * another library instead). */
static int noenv(int other)
{
  char *env[] = {"PATH=/usr/bin:/bin", other ? "LD_PRELOAD=/nonexistent/libother.so" : NULL, NULL};
  allocate("before_noenv", 2, 1000);
  execle("/bin/true", "true", (char *)NULL, env);
  perror("execle /bin/true");
  return 127;
}

int main(int argc, char **argv)
{
  if (argc >= 2 && strcmp(argv[1], "noenv") == 0)
    return noenv(argc == 3 && strcmp(argv[2], "other") == 0);
  if (argc == 2 && strcmp(argv[1], "second") == 0)
    return second(argv[0]);
  if (argc == 2 && strcmp(argv[1], "third") == 0)
    return third();
  if (argc == 2 && strcmp(argv[1], "fourth") == 0) {
    allocate("fourth_image", 1, 700);
    return 0;
  }
  if (argc == 2)
    return first(argv[0], argv[1]);
  fprintf(stderr, "usage: wl_exec BOGUS\n");
  return 2;
}
