/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_exit_race: the main thread exits while four threads keep allocating,
 * freeing, opening spans and starting short-lived threads. The process
 * must exit cleanly with status 0 and leave a readable profile.
 *
 * wl_exit_race --snapshots DIR: besides, a fifth thread calls
 * culpert_snapshot_write(DIR/snap.N.pb.gz) in a loop, N counting up, and
 * 256 KiB wait in stdout's buffer at exit, which exit() flushes after
 * culpert's handler: with stdout a pipe read late, the process lives on
 * for a while after its exit profile is written.
 *
 * wl_exit_race --signal-first: SIGTERM is blocked in every thread but one
 * idle thread; the program takes a snapshot (so its own exit profile has
 * its symbols at hand and is written fast), sends itself SIGTERM and
 * exits 10 ms later.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "culpert.h"

static void *tiny(void *arg)
{
  free(malloc(32));
  return arg;
}

static void *spin(void *arg)
{
  unsigned n = 0;
  (void)arg;
  for (;;) {
    CULPERT_SPAN("spin");
    void *p = malloc(++n % 4096 + 1);
    p = realloc(p, n % 8192 + 1);
    free(p);
    if (n % 1024 == 0) {
      pthread_t t;
      if (pthread_create(&t, NULL, tiny, NULL) == 0)
        pthread_detach(t);
    }
  }
  return NULL;
}

static void *snapshots(void *arg)
{
  const char *dir = arg;
  for (unsigned n = 0;; n = (n + 1) % 1000) {
    char path[4096];
    snprintf(path, sizeof path, "%s/snap.%u.pb.gz", dir, n);
    culpert_snapshot_write(path);
  }
  return NULL;
}

static void *idle(void *arg)
{
  for (;;)
    pause();
  return arg;
}

/* SIGTERM for an idle thread, then exit() while its handler runs. */
static int signal_first(void)
{
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_t t;
  if (pthread_create(&t, NULL, idle, NULL) != 0)
    return 1;
  pthread_sigmask(SIG_BLOCK, &term, NULL);
  unsigned char *buf;
  size_t len;
  if (culpert_snapshot(&buf, &len) == 0)
    free(buf);
  printf("exiting\n");
  fflush(stdout);
  kill(getpid(), SIGTERM);
  struct timespec pause_ = {0, 10 * 1000 * 1000};
  nanosleep(&pause_, NULL);
  exit(0);
}

int main(int argc, char **argv)
{
  pthread_t t[5];
  if (argc > 1 && strcmp(argv[1], "--signal-first") == 0) {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL); /* the spinning threads inherit it */
  }
  for (int i = 0; i < 4; i++)
    if (pthread_create(&t[i], NULL, spin, NULL) != 0)
      return 1;
  if (argc > 1 && strcmp(argv[1], "--signal-first") == 0) {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &term, NULL); /* for the idle thread */
    return signal_first();
  }
  if (argc > 2 && strcmp(argv[1], "--snapshots") == 0) {
    static char buf[1 << 20], line[257];
    memset(line, 'x', sizeof line - 1);
    line[sizeof line - 2] = '\n';
    setvbuf(stdout, buf, _IOFBF, sizeof buf);
    for (int i = 0; i < 1024; i++)
      fputs(line, stdout);
    if (pthread_create(&t[4], NULL, snapshots, argv[2]) != 0)
      return 1;
  }
  /* some work of our own, then exit with the threads still running */
  for (int i = 0; i < 20000; i++)
    free(malloc((size_t)(i % 100 + 1) * 16));
  printf("exiting\n");
  if (argc < 2)
    fflush(stdout);
  exit(0);
}
