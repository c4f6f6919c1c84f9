/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * fixture_selfso.c: the writer inside a shared object, as in libculpert.so,
 * so the writer tests can check that leading frames inside the writer's
 * own object are dropped (the executable links the writer statically,
 * where that rule does not apply).
 */
#include <stdint.h>

#include "writer.h"

int fixture_self_encode(const struct culpert__wprofile *p, unsigned char **out, size_t *len);
uintptr_t fixture_self_address(void);

int fixture_self_encode(const struct culpert__wprofile *p, unsigned char **out, size_t *len)
{
  return culpert__writer_encode(p, out, len);
}

/* An address inside this object's code. */
uintptr_t fixture_self_address(void)
{
  return (uintptr_t)&fixture_self_encode + 1;
}
