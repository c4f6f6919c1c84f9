/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_mlock: a program that locks its memory, as real-time and
 * cryptographic programs do: mlockall(MCL_CURRENT | MCL_FUTURE), then 2000
 * allocations of 3000 bytes (half of them freed). Prints "VmLck N", its
 * locked memory in kB at the end (from /proc/self/status), and exits 0;
 * where mlockall is refused (no CAP_IPC_LOCK and a small RLIMIT_MEMLOCK),
 * prints "mlockall refused" and exits 77.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int main(void)
{
  static void *keep[2000];
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    printf("mlockall refused\n");
    return 77;
  }
  for (int i = 0; i < 2000; i++) {
    keep[i] = malloc(3000);
    if (keep[i] == NULL)
      return 1;
    memset(keep[i], 1, 3000);
    if (i % 2) {
      free(keep[i]);
      keep[i] = NULL;
    }
  }
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmLck: %ld kB", &kb) == 1)
      break;
  if (f != NULL)
    fclose(f);
  printf("VmLck %ld\n", kb);
  return kb < 0;
}
