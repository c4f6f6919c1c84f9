/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_dlopen: three times, load a plugin that allocates 20 x 512 bytes in
 * span "plugin" and unload it (it may come back at the same address, which
 * stack caches must survive); then exit: the profile must still be written,
 * with the plugin's 60 samples, even though their code is gone. With
 * "--keep" as a second argument it loads the plugin once, calls it, prints
 * "ready" and waits for a signal with the plugin still loaded.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "culpert.h"

int main(int argc, char **argv)
{
  int keep = argc == 3 && strcmp(argv[2], "--keep") == 0;
  if (argc != 2 && !keep)
    return 2;
  if (keep) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    int (*work)(int) = NULL;
    if (h != NULL)
      *(void **)&work = dlsym(h, "plugin_work");
    if (work == NULL)
      return 1;
    work(20);
    printf("ready\n");
    fflush(stdout);
    for (;;)
      pause();
  }
  for (int round = 0; round < 3; round++) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
      fprintf(stderr, "wl_dlopen: %s\n", dlerror());
      return 1;
    }
    int (*work)(int);
    *(void **)&work = dlsym(h, "plugin_work");
    culpert_span_enter("plugin");
    int n = work != NULL ? work(20) : 0;
    culpert_span_exit();
    dlclose(h);
    printf("round %d: %d\n", round, n);
  }
  return 0;
}
