/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * snapshots: a long-running service writes a profile on demand instead of
 * waiting for exit. Each snapshot is cumulative: it contains everything the
 * previous one did, plus what came since. Run it preloaded (at 64 KiB
 * the first round's 1 MB gets about 15 samples; at the default 512 KiB, 2):
 *
 *   LD_PRELOAD=/usr/local/lib/libculpert.so CULPERT_SAMPLE_RATE=64K ./snapshots /tmp/snap
 *   culpert diff /tmp/snap.1.pb.gz /tmp/snap.3.pb.gz
 *
 * Without libculpert the calls return -ENOSYS and the program still runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <culpert.h>

static void *keep[3000];

static void tick(int round)
{
  CULPERT_SPAN("tick");
  for (int i = 0; i < 1000; i++) {
    size_t n = 1000 * (size_t)(round + 1);
    keep[round * 1000 + i] = malloc(n); /* kept: in-use grows per round */
    if (keep[round * 1000 + i])
      memset(keep[round * 1000 + i], 1, n);
  }
}

int main(int argc, char **argv)
{
  const char *prefix = argc > 1 ? argv[1] : "snapshot";
  for (int round = 0; round < 3; round++) {
    tick(round);
    char path[4096];
    snprintf(path, sizeof path, "%s.%d.pb.gz", prefix, round + 1);
    int rc = culpert_snapshot_write(path);
    if (rc != 0)
      printf("round %d: no snapshot (libculpert not loaded or stopped: %d)\n", round + 1, rc);
    else
      printf("round %d: wrote %s\n", round + 1, path);
  }
  for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
    free(keep[i]);
  return 0;
}
