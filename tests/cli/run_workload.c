/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * run_workload: the program `culpert run` runs end to end in the CLI tests.
 * It allocates inside two nested spans and one sibling span, in fixed
 * amounts (at --rate 0 the report is exact: handle_batch 900 KiB with
 * decode_frame 800 KiB inside, flush_output 400 KiB), then:
 *
 *   run_workload [STATUS]   exits with STATUS (default 0)
 *   run_workload env        prints the variables culpert run sets
 *   run_workload wait FILE  creates FILE, then waits for a signal
 *   run_workload children FILE
 *                           allocates only flush_output's 400 KiB itself, and
 *                           starts a fork child that runs the spans twice
 *                           and an exec'd copy of itself that runs them
 *                           once; writes their pids to FILE
 *   run_workload abort      ends with abort() after the spans
 *   run_workload reexec     runs handle_batch alone, then execs a copy of
 *                           itself that runs all three spans
 *   run_workload reexec-true
 *                           runs handle_batch alone, then execs true
 *   run_workload plain      100 x 1 KiB outside every span, nothing else
 *   run_workload leak       keeps 10 x 10 KiB (span "cache_fill") to the
 *                           end, then allocates and frees 1 KiB 100 times
 *   run_workload peak       holds 50 x 10 KiB at once (span "build_index"),
 *                           frees them, then keeps 10 KiB (span
 *                           "cache_fill") to the end
 *   run_workload launcher   allocates 10 x 100 bytes itself (span
 *                           "launch"), then a fork child runs the spans,
 *                           and the program exits normally: its own
 *                           profile holds under 1% of the run's bytes
 *   run_workload orphan [raw]
 *                           a fork child runs the spans; the program itself
 *                           allocates nothing and ends with _exit (its
 *                           profile holds no samples), or with raw, by the
 *                           exit system call itself, which nothing of
 *                           culpert's sees (it writes no profile)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <culpert.h>

/* Allocate and free `n` blocks of `size` bytes, touching each. */
static void churn(size_t n, size_t size)
{
  for (size_t i = 0; i < n; i++) {
    char *p = malloc(size);
    if (!p)
      abort();
    memset(p, (int)i, size);
    free(p);
  }
}

static void decode_frame(void)
{
  CULPERT_SPAN("decode_frame");
  churn(200, 4096);
}

static void handle_batch(void)
{
  CULPERT_SPAN("handle_batch");
  churn(100, 1024);
  decode_frame();
}

static void flush_output(void)
{
  CULPERT_SPAN("flush_output");
  churn(50, 8192);
}

/* A fork child runs the spans and exits; 0 once it has, else 3. */
static int spans_in_child(void)
{
  pid_t pid = fork();
  if (pid == 0) {
    handle_batch();
    flush_output();
    exit(0);
  }
  int st;
  return pid < 0 || waitpid(pid, &st, 0) < 0 || st != 0 ? 3 : 0;
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "env") == 0) {
    static const char *const vars[] = {"LD_PRELOAD",          "CULPERT_OUTPUT",
                                       "CULPERT_SAMPLE_RATE", "CULPERT_STACK",
                                       "CULPERT_ROOT_PID",    "CULPERT_WRITE_ON_SIGNAL"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
      const char *v = getenv(vars[i]);
      printf("%s=%s\n", vars[i], v ? v : "(unset)");
    }
    return 0;
  }
  if (argc > 2 && strcmp(argv[1], "children") == 0) {
    pid_t forked = fork();
    if (forked == 0) {
      for (int i = 0; i < 2; i++) {
        handle_batch();
        flush_output();
      }
      exit(0);
    }
    pid_t execd = fork();
    if (execd == 0) {
      execl("/proc/self/exe", argv[0], (char *)NULL);
      _exit(127);
    }
    FILE *f = fopen(argv[2], "w");
    if (forked < 0 || execd < 0 || f == NULL)
      return 3;
    fprintf(f, "%ld %ld\n", (long)forked, (long)execd);
    fclose(f);
    int st1, st2;
    if (waitpid(forked, &st1, 0) < 0 || waitpid(execd, &st2, 0) < 0 || st1 != 0 || st2 != 0)
      return 3;
    flush_output();
    return 0;
  }
  if (argc > 1 && (strcmp(argv[1], "reexec") == 0 || strcmp(argv[1], "reexec-true") == 0)) {
    handle_batch();
    if (strcmp(argv[1], "reexec") == 0)
      execl("/proc/self/exe", argv[0], (char *)NULL);
    else
      execlp("true", "true", (char *)NULL);
    return 3;
  }
  if (argc > 1 && strcmp(argv[1], "plain") == 0) {
    churn(100, 1024);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "leak") == 0) {
    static char *kept[10];
    culpert_span_enter("cache_fill");
    for (int i = 0; i < 10; i++)
      if ((kept[i] = malloc(10240)) == NULL)
        abort();
    culpert_span_exit();
    churn(100, 1024);
    return kept[9][0] = 0;
  }
  if (argc > 1 && strcmp(argv[1], "peak") == 0) {
    static char *held[50], *kept;
    culpert_span_enter("build_index");
    for (int i = 0; i < 50; i++)
      if ((held[i] = malloc(10240)) == NULL)
        abort();
    culpert_span_exit();
    for (int i = 0; i < 50; i++)
      free(held[i]);
    culpert_span_enter("cache_fill");
    if ((kept = malloc(10240)) == NULL)
      abort();
    culpert_span_exit();
    return kept[0] = 0;
  }
  if (argc > 1 && strcmp(argv[1], "launcher") == 0) {
    culpert_span_enter("launch");
    churn(10, 100);
    culpert_span_exit();
    return spans_in_child();
  }
  if (argc > 1 && strcmp(argv[1], "orphan") == 0) {
    if (spans_in_child() != 0)
      return 3;
    if (argc > 2 && strcmp(argv[2], "raw") == 0)
      syscall(SYS_exit_group, 0);
    _exit(0);
  }
  handle_batch();
  flush_output();
  if (argc > 1 && strcmp(argv[1], "abort") == 0)
    abort();
  if (argc > 2 && strcmp(argv[1], "wait") == 0) {
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
      return 3;
    close(fd);
    for (;;)
      pause();
  }
  return argc > 1 ? atoi(argv[1]) : 0;
}
