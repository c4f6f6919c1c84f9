/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_teardown_lib: a library linked into wl_teardown that keeps a block
 * from its setup call to its destructor, as libraries with global caches
 * do. The exit profile must show it freed.
 */
#include <stdlib.h>

#include "culpert.h"

void teardown_lib_setup(void);

static void *cache;

void teardown_lib_setup(void)
{
  CULPERT_SPAN("lib_cache");
  cache = malloc(50000);
}

__attribute__((destructor)) static void teardown_lib_fini(void)
{
  free(cache);
  cache = NULL;
}
