/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * consumer: linked with libculpert through find_package(culpert), so it is
 * profiled without LD_PRELOAD. It writes a snapshot to argv[1] and reports
 * whether libculpert was active.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <culpert.h>

/* Where each block goes before it is freed: an optimising compiler drops a
 * malloc whose memory nothing reads. */
static char *volatile last_block;

int main(int argc, char **argv)
{
  {
    CULPERT_SPAN("consumer_work");
    for (int i = 0; i < 100; i++) {
      char *p = malloc(4096);
      if (p)
        memset(p, i, 4096);
      last_block = p;
      free(p);
    }
  }
  int rc = argc > 1 ? culpert_snapshot_write(argv[1]) : 0;
  printf("active=%d snapshot=%d\n", culpert_is_active(), rc);
  return rc == 0 ? 0 : 1;
}
