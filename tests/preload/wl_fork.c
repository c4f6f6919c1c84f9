/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_fork: fork while two threads keep allocating (so culpert's locks may be
 * held at fork time), plus fork+exec of itself. Prints the pid of every
 * child it starts, one per line ("child PID" / "exec PID").
 * With CULPERT_SAMPLE_RATE=0:
 *   parent profile:  parent_work 10 x 1000 bytes, no child_work
 *   each fork child: child_work 5 x 3000 bytes, no parent_work
 *   exec'd child:    exec_child 7 x 700 bytes; prints "preload_in_exec
 *                    VALUE", its LD_PRELOAD ("(unset)" when it has none)
 *   before forking, the parent opens one span more than
 *   CULPERT_SPAN_MAX_DEPTH and closes one more than it opened: its profile
 *   counts culpert.span_overflow=1 and culpert.span_underflow=1, a fork
 *   child's 0 and 0
 *   one more fork child allocates nothing and exits ("idle PID"): it
 *   sampled nothing, so it writes no profile
 *
 * wl_fork --immediate-exit: four fork children that each allocate
 * child_work 5 x 3000 bytes and end without exit handlers: with _exit(3),
 * with _Exit(4), with quick_exit whose at_quick_exit handler calls
 * _exit(7), and from a SIGUSR1 handler with
 * _exit(6) on a thread that was allocating; a fifth that allocates nothing
 * and ends with _exit(8); a vfork child that ends with _exit(5) at once;
 * then the program itself ends with _exit(0). Prints "exit PID status N"
 * for the fork children, "vfork PID status N" for the vfork child.
 *
 * wl_fork --snapshots N: two threads take culpert_snapshot() buffers
 * without a pause while the main thread forks N children one after
 * another. Each child allocates at a call site the parent never sampled
 * (so its first sample looks the code up through the loader's lists),
 * says so through a pipe and kills itself. A child that has not said so
 * in 10 s is stuck; it is killed and no more are forked. Prints "forks N
 * stuck S".
 *
 * wl_fork --threads N PATH: eight threads fork N children each at the
 * same time (each child allocates and _exits), then the main thread
 * writes a snapshot to PATH with culpert_snapshot_write(); prints "forks
 * F snapshot RC" when done (the time it takes is what a test checks).
 *
 * wl_fork --during-exit DIR: 4096 blocks from as many stacks, then a
 * thread forks children one after another once the main thread calls
 * exit(), so that forks come while the exit profile is written. Each
 * child prints "child PID start", writes a snapshot to DIR/c.PID.pb.gz and
 * prints "child PID snapshot RC"; one still writing after 5 s is ended by
 * SIGALRM.
 *
 * wl_fork --loader-busy: forks while another thread is inside
 * dl_iterate_phdr (its callback waits 1 s). The child does child_work,
 * code the parent never sampled, and exits; a child not done in 10 s is
 * stuck and killed. Prints "loader_busy PID status N" (-1: killed).
 *
 * wl_fork --in-loader: the same, forked from inside a dl_iterate_phdr
 * callback (the loader's lock held by the forking thread itself). Prints
 * "in_loader PID status N".
 *
 * wl_fork --stale PREFIX: a fork child first leaves "stale" in
 * PREFIX.<its pid>, dated an hour back (the file of an earlier process
 * that had its pid), then does child_work and execs itself as
 * --exec-child. Prints "stale PID status N".
 */
#include <sys/time.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
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

/* What every fork child allocates: child_work 5 x 3000 bytes. */
static void child_work(void)
{
  CULPERT_SPAN("child_work");
  for (int k = 0; k < 5; k++)
    kept[10 + k] = malloc(3000);
}

/* An at_quick_exit handler that ends the process itself, with _exit. */
static void end_quickly(void)
{
  _exit(7);
}

static void end_in_handler(int sig)
{
  (void)sig;
  _exit(6);
}

static void report(const char *what, pid_t pid)
{
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) {
    printf("%s failed\n", what);
    return;
  }
  printf("%s %d status %d\n", what, (int)pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static int immediate_exits(void)
{
  for (int kind = 0; kind < 5; kind++) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      if (kind == 4)
        _exit(8);
      child_work();
      if (kind == 0)
        _exit(3);
      if (kind == 1)
        _Exit(4);
      if (kind == 3) {
        at_quick_exit(end_quickly);
        quick_exit(1);
      }
      signal(SIGUSR1, end_in_handler);
      pthread_t t;
      pthread_create(&t, NULL, busy, NULL);
      struct timespec settle = {0, 20 * 1000 * 1000};
      nanosleep(&settle, NULL);
      pthread_kill(t, SIGUSR1);
      for (;;)
        pause();
    }
    report("exit", pid);
  }
  fflush(stdout);
  pid_t child = vfork();
  if (child == 0)
    _exit(5); /* shares the parent's memory: culpert must write nothing */
  report("vfork", child);
  fflush(stdout);
  _exit(0);
}

static void *take_snapshots(void *arg)
{
  (void)arg;
  while (!atomic_load(&stop)) {
    unsigned char *buf;
    size_t len;
    if (culpert_snapshot(&buf, &len) == 0)
      free(buf);
  }
  return NULL;
}

/* Called in the children of --snapshots only. */
static __attribute__((noinline)) void snapshot_child_work(void)
{
  kept[20] = malloc(3000);
}

static int fork_during_snapshots(int nforks)
{
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, take_snapshots, NULL);
  int forks = 0, stuck = 0;
  while (forks < nforks && !stuck) {
    int fd[2];
    if (pipe(fd) != 0)
      break;
    pid_t pid = fork();
    if (pid == 0) {
      snapshot_child_work();
      if (write(fd[1], "x", 1) == 1)
        kill(getpid(), SIGKILL);
      _exit(1);
    }
    close(fd[1]);
    if (pid < 0) {
      close(fd[0]);
      break;
    }
    forks++;
    struct pollfd answer = {.fd = fd[0], .events = POLLIN};
    if (poll(&answer, 1, 10 * 1000) != 1) {
      stuck = 1;
      kill(pid, SIGKILL);
    }
    close(fd[0]);
    waitpid(pid, NULL, 0);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  printf("forks %d stuck %d\n", forks, stuck);
  return 0;
}

#define FORKERS 8

static void *forker(void *arg)
{
  int n = *(const int *)arg;
  for (int i = 0; i < n; i++) {
    free(malloc(1000));
    pid_t pid = fork();
    if (pid == 0) {
      free(malloc(3000));
      _exit(0);
    }
    if (pid > 0)
      waitpid(pid, NULL, 0);
  }
  return NULL;
}

static int forks_at_once(int n, const char *path)
{
  pthread_t t[FORKERS];
  for (int i = 0; i < FORKERS; i++)
    pthread_create(&t[i], NULL, forker, &n);
  for (int i = 0; i < FORKERS; i++)
    pthread_join(t[i], NULL);
  printf("forks %d snapshot %d\n", FORKERS * n, culpert_snapshot_write(path));
  return 0;
}

static atomic_int in_loader;

static int hold_loader(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)info;
  (void)size;
  (void)data;
  atomic_store(&in_loader, 1);
  sleep(1);
  return 1;
}

static void *iterate_loader(void *arg)
{
  (void)arg;
  dl_iterate_phdr(hold_loader, NULL);
  return NULL;
}

/* Forks a child that does child_work and exits; reports how it ended
 * ("WHAT PID status N", -1: not done in 10 s, killed). */
static void fork_child_work(const char *what)
{
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    child_work();
    exit(0);
  }
  int status = 0, done = 0;
  for (int i = 0; i < 1000 && !done; i++) {
    done = waitpid(pid, &status, WNOHANG) == pid;
    if (!done)
      usleep(10000);
  }
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
  printf("%s %d status %d\n", what, (int)pid, done && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static int fork_while_loader_busy(void)
{
  pthread_t t;
  pthread_create(&t, NULL, iterate_loader, NULL);
  while (!atomic_load(&in_loader))
    usleep(1000);
  fork_child_work("loader_busy");
  pthread_join(t, NULL);
  return 0;
}

static int stale_name(const char *prefix)
{
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    char name[4096];
    snprintf(name, sizeof name, "%s.%d", prefix, (int)getpid());
    FILE *f = fopen(name, "w");
    if (f == NULL || fputs("stale\n", f) < 0 || fclose(f) != 0)
      _exit(2);
    struct timeval old[2];
    gettimeofday(&old[0], NULL);
    old[0].tv_sec -= 3600;
    old[1] = old[0];
    if (utimes(name, old) != 0)
      _exit(3);
    child_work();
    execl("/proc/self/exe", "wl_fork", "--exec-child", (char *)NULL);
    _exit(127);
  }
  report("stale", pid);
  return 0;
}

static const char *exit_dir;
static atomic_int exiting;

static void *fork_in_turn(void *arg)
{
  (void)arg;
  while (!atomic_load(&exiting))
    usleep(100);
  for (;;) {
    pid_t pid = fork();
    if (pid == 0) {
      char path[4096];
      snprintf(path, sizeof path, "%s/c.%d.pb.gz", exit_dir, (int)getpid());
      alarm(5);
      dprintf(1, "child %d start\n", (int)getpid());
      int rc = culpert_snapshot_write(path);
      dprintf(1, "child %d snapshot %d\n", (int)getpid(), rc);
      _exit(0);
    }
    if (pid > 0)
      waitpid(pid, NULL, 0);
  }
  return NULL;
}

static void exit_left(int depth, unsigned bits);
static void exit_right(int depth, unsigned bits);

/* a block from one of 4096 stacks: bit `depth` of `bits` picks the next
 * frame */
static void exit_step(int depth, unsigned bits)
{
  if (depth == 12)
    kept[bits % 8 + 10] = malloc(16 + bits % 512);
  else if (bits >> depth & 1)
    exit_right(depth + 1, bits);
  else
    exit_left(depth + 1, bits);
}

__attribute__((noinline)) static void exit_left(int depth, unsigned bits)
{
  exit_step(depth, bits);
  __asm__ volatile("");
}

__attribute__((noinline)) static void exit_right(int depth, unsigned bits)
{
  exit_step(depth, bits);
  __asm__ volatile("");
}

static int fork_during_exit(const char *dir)
{
  exit_dir = dir;
  for (unsigned i = 0; i < 4096; i++)
    exit_step(0, i);
  pthread_t t;
  pthread_create(&t, NULL, fork_in_turn, NULL);
  atomic_store(&exiting, 1);
  exit(0);
}

static int fork_here(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)info;
  (void)size;
  (void)data;
  fork_child_work("in_loader");
  return 1;
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "--exec-child") == 0) {
    culpert_span_enter("exec_child");
    for (int i = 0; i < 7; i++)
      kept[i] = malloc(700);
    culpert_span_exit();
    const char *preload = getenv("LD_PRELOAD");
    printf("preload_in_exec %s\n", preload != NULL ? preload : "(unset)");
    return 0;
  }
  culpert_span_enter("parent_work");
  for (int i = 0; i < 10; i++)
    kept[i] = malloc(1000);
  culpert_span_exit();
  for (int i = 0; i <= CULPERT_SPAN_MAX_DEPTH; i++)
    culpert_span_enter("deep");
  for (int i = 0; i <= CULPERT_SPAN_MAX_DEPTH + 1; i++)
    culpert_span_exit();
  if (argc > 1 && strcmp(argv[1], "--immediate-exit") == 0)
    return immediate_exits();
  if (argc > 3 && strcmp(argv[1], "--threads") == 0)
    return forks_at_once(atoi(argv[2]), argv[3]);
  if (argc > 2 && strcmp(argv[1], "--snapshots") == 0)
    return fork_during_snapshots(atoi(argv[2]));
  if (argc > 1 && strcmp(argv[1], "--loader-busy") == 0)
    return fork_while_loader_busy();
  if (argc > 2 && strcmp(argv[1], "--during-exit") == 0)
    return fork_during_exit(argv[2]);
  if (argc > 2 && strcmp(argv[1], "--stale") == 0)
    return stale_name(argv[2]);
  if (argc > 1 && strcmp(argv[1], "--in-loader") == 0)
    return dl_iterate_phdr(fork_here, NULL) == 1 ? 0 : 1;

  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, busy, NULL);
  int nforks = argc > 1 ? atoi(argv[1]) : 20;
  for (int i = 0; i < nforks; i++) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      child_work();
      exit(0);
    }
    printf("child %d\n", (int)pid);
    waitpid(pid, NULL, 0);
  }
  fflush(stdout);
  pid_t idle = fork();
  if (idle == 0)
    exit(0);
  printf("idle %d\n", (int)idle);
  waitpid(idle, NULL, 0);
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
