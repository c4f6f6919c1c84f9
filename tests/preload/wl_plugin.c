/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* wl_plugin: a small shared object that allocates; wl_dlopen loads it,
 * calls it and unloads it before exit. wl_marks loads it with
 * RTLD_DEEPBIND and frees its own blocks through plugin_free, whose free
 * then binds to libc's, not the preload's. */
#include <stdlib.h>

void *plugin_blocks[64];
int plugin_work(int n);
void plugin_free(void *p);

void plugin_free(void *p)
{
  free(p);
}

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
