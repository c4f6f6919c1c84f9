/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_fork: fork while two threads keep allocating (so culpert's locks may be
 * held at fork time), plus fork+exec of itself. Prints the pid of every
 * child it starts, one per line ("child PID" / "exec PID").
 * With CULPERT_SAMPLE_RATE=0:
 *   parent profile:  parent_work 10 x 1000 bytes, no child_work
 *   each fork child: child_work 5 x 3000 bytes, no parent_work
 *   exec'd child:    exec_child 7 x 700 bytes
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "culpert.h"

static atomic_int stop;
static void *kept[32];

static void *busy(void *arg)
{
  (void)arg;
  while (!atomic_load(&stop)) {
    CULPERT_SPAN("busy");
    void *p[16];
    for (int i = 0; i < 16; i++)
      p[i] = malloc((size_t)(i + 1) * 64);
    for (int i = 0; i < 16; i++)
      free(p[i]);
  }
  return NULL;
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "--exec-child") == 0) {
    CULPERT_SPAN("exec_child");
    for (int i = 0; i < 7; i++)
      kept[i] = malloc(700);
    return 0;
  }
  culpert_span_enter("parent_work");
  for (int i = 0; i < 10; i++)
    kept[i] = malloc(1000);
  culpert_span_exit();

  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, busy, NULL);
  int nforks = argc > 1 ? atoi(argv[1]) : 20;
  for (int i = 0; i < nforks; i++) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      CULPERT_SPAN("child_work");
      for (int k = 0; k < 5; k++)
        kept[10 + k] = malloc(3000);
      exit(0);
    }
    printf("child %d\n", (int)pid);
    waitpid(pid, NULL, 0);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);

  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", argv[0], "--exec-child", (char *)NULL);
    _exit(127);
  }
  printf("exec %d\n", (int)pid);
  int status;
  waitpid(pid, &status, 0);
  printf("exec status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
