/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wl_own_env: a program with getenv, setenv and unsetenv of its own, as
 * bash has: its variables live in a table that main fills from the
 * environment it was started with; until then getenv reads environ,
 * unless setenv has already made the table (then it finds only what was
 * set). Linked with --export-dynamic, so these definitions answer every
 * call, libculpert's too. main then allocates five blocks of 3000 bytes,
 * kept to the end, and prints the CULPERT_ROOT_PID its table holds (what
 * a shell would pass on to its commands).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NVARS 256

static struct var {
  char *name, *value;
} vars[NVARS];
static int nvars, have_table;

static struct var *find(const char *name)
{
  for (int i = 0; i < nvars; i++)
    if (strcmp(vars[i].name, name) == 0)
      return &vars[i];
  return NULL;
}

static void bind(const char *name, size_t n, const char *value, int overwrite)
{
  char key[256];
  if (n >= sizeof key)
    return;
  memcpy(key, name, n);
  key[n] = '\0';
  struct var *v = find(key);
  if (v == NULL && nvars < NVARS) {
    v = &vars[nvars++];
    v->name = strdup(key);
    v->value = NULL;
  } else if (v == NULL || !overwrite) {
    return;
  }
  free(v->value);
  v->value = strdup(value);
}

char *getenv(const char *name)
{
  if (have_table) {
    struct var *v = find(name);
    return v ? v->value : NULL;
  }
  size_t n = strlen(name);
  for (char **e = environ; e && *e; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
      return *e + n + 1;
  return NULL;
}

int setenv(const char *name, const char *value, int overwrite)
{
  have_table = 1;
  bind(name, strlen(name), value, overwrite);
  return 0;
}

int unsetenv(const char *name)
{
  have_table = 1;
  struct var *v = find(name);
  if (v != NULL) {
    free(v->name);
    free(v->value);
    *v = vars[--nvars];
  }
  return 0;
}

/* Runs after every library's constructor, libculpert's too, and before
 * main: what another library's constructor would read. */
static const char *probe;
__attribute__((constructor)) static void before_main(void)
{
  probe = getenv("WL_OWN_ENV_PROBE");
}

int main(int argc, char **argv, char **envp)
{
  (void)argc;
  (void)argv;
  have_table = 1;
  for (char **e = envp; *e; e++) {
    const char *eq = strchr(*e, '=');
    if (eq != NULL)
      bind(*e, (size_t)(eq - *e), eq + 1, 0); /* what was set before main stays */
  }
  static void *keep[5];
  for (int i = 0; i < 5; i++) {
    keep[i] = malloc(3000);
    if (keep[i] == NULL)
      return 1;
    memset(keep[i], i, 3000);
  }
  const char *root = getenv("CULPERT_ROOT_PID");
  printf("pid %ld root %s\n", (long)getpid(), root ? root : "(none)");
  printf("before_main %s\n", probe ? probe : "(none)");
  return 0;
}
