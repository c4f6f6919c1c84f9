/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* wl_plugin: a small shared object that allocates; wl_dlopen loads it,
 * calls it and unloads it before exit. Its destructor allocates 4321
 * bytes and frees them. */
#include <stdlib.h>

void *plugin_blocks[64];
int plugin_work(int n);

__attribute__((noinline)) static void *plugin_alloc(size_t n)
{
  return malloc(n);
}

int plugin_work(int n)
{
  for (int i = 0; i < n && i < 64; i++)
    plugin_blocks[i] = plugin_alloc(512);
  return n;
}

/* Runs inside dlclose, which culpert wraps: the wrapper's frame lies
 * between this one and main. */
__attribute__((destructor)) static void plugin_fini(void)
{
  free(plugin_alloc(4321));
}
