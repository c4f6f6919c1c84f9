/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_dlopen: three times, load a plugin that allocates 20 x 512 bytes in
 * span "plugin" and unload it (it may come back at the same address, which
 * stack caches must survive); then exit: the profile must still be written,
 * with the plugin's 60 samples, even though their code is gone.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "culpert.h"

int main(int argc, char **argv)
{
  if (argc != 2)
    return 2;
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
