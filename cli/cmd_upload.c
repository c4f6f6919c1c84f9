/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Placeholder until this module lands. */
#include "cli.h"
int culpert__cmd_upload(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  culpert__error("'upload' is not built yet");
  return CULPERT_EXIT_ERROR;
}
