/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_archive.c: the archive client's input rules (the same as the
 * worker's), secret redaction, option values and atomic file replacement.
 * The HTTP and directory behaviour is tested through the CLI by the .mjs
 * suites next to this file.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "archive.h"
#include "cli.h"

/* culpert__error lives in main.c, which the core library leaves out. */
void culpert__error(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fputs("culpert: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}
const char *culpert__argv0 = "test_archive";

static void test_archive_sha_rules(void **state)
{
  static const struct {
    const char *sha;
    int ok;
  } cases[] = {
      {"abcdef1", 1},
      {"ABCDEF1", 1},
      {"0123456789abcdef0123456789abcdef01234567", 1},
      {"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 1},  /* 64 */
      {"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0", 0}, /* 65 */
      {"abcdef", 0},
      {"", 0},
      {"abcdefg", 0},
      {"abc def1", 0},
      {"../../x1", 0},
  };
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *why = NULL;
    int rc = culpert__archive_check_sha(cases[i].sha, &why);
    if (cases[i].ok != (rc == 0))
      fail_msg("SHA '%s': expected %s", cases[i].sha, cases[i].ok ? "valid" : "invalid");
    assert_true(cases[i].ok ? why == NULL : why != NULL);
  }
}

static void test_archive_branch_rules(void **state)
{
  char longest[256], too_long[257];
  memset(longest, 'b', 255);
  longest[255] = '\0';
  memset(too_long, 'b', 256);
  too_long[256] = '\0';
  const struct {
    const char *branch;
    int ok;
  } cases[] = {
      {"main", 1},
      {"feature/x", 1},
      {"release/1.0 candidate", 1},
      {"caf\xc3\xa9/\xe6\x97\xa5\xf0\x9f\x98\x80", 1}, /* é, 日, an emoji */
      {longest, 1},
      {too_long, 0},
      {"", 0},
      {"tab\there", 0},
      {"new\nline", 0},
      {"del\x7f", 0},
      {"c1\xc2\x85", 0},       /* U+0085, a C1 control */
      {"bad\xff", 0},          /* not UTF-8 */
      {"overlong\xc0\xaf", 0}, /* overlong '/' */
      {"surrogate\xed\xa0\x80", 0},
      {"cut\xe6\x97", 0}, /* truncated sequence */
  };
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = culpert__archive_check_branch(cases[i].branch, NULL);
    if (cases[i].ok != (rc == 0))
      fail_msg("branch case %zu: expected %s", i, cases[i].ok ? "valid" : "invalid");
  }
}

static void test_archive_project_rules(void **state)
{
  static const struct {
    const char *project;
    int ok;
  } cases[] = {
      {"default", 1},
      {"team.a_b-c", 1},
      {"9lives", 1},
      {"a234567890123456789012345678901234567890123456789012345678901234", 1},  /* 64 */
      {"a2345678901234567890123456789012345678901234567890123456789012345", 0}, /* 65 */
      {"", 0},
      {".", 0},
      {"..", 0},
      {"-x", 0},
      {"a/b", 0},
      {"a b", 0},
  };
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = culpert__archive_check_project(cases[i].project, NULL);
    if (cases[i].ok != (rc == 0))
      fail_msg("project '%s': expected %s", cases[i].project, cases[i].ok ? "valid" : "invalid");
  }
}

static void test_archive_redact_hides_secrets(void **state)
{
  const char *secrets[] = {"s3cr3t42", "otherkey", NULL};
  const char *no_secrets[] = {"", NULL};
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"Bearer s3cr3t42", "Bearer [redacted]"},
      {"s3cr3t42s3cr3t42 and otherkey", "[redacted][redacted] and [redacted]"},
      {"s3cr3t4", "s3cr3t4"},
      {"esc\x1b[31mred\r", "esc?[31mred?"},
      {"keep\nnew\tlines", "keep\nnew\tlines"},
      {"", ""},
  };
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *got = culpert__archive_redact(cases[i].in, secrets);
    assert_non_null(got);
    assert_string_equal(got, cases[i].out);
    free(got);
  }
  /* An empty secret never matches (it would redact everything). */
  char *got = culpert__archive_redact("plain", no_secrets);
  assert_string_equal(got, "plain");
  free(got);
  /* A short secret goes where it stands alone, not inside words. */
  const char *short_secrets[] = {"t", "dev", NULL};
  static const struct {
    const char *in, *out;
  } short_cases[] = {
      {"cannot reach the archive at http://127.0.0.1:9",
       "cannot reach the archive at http://127.0.0.1:9"},
      {"Bearer t", "Bearer [redacted]"},
      {"token=t&x", "token=[redacted]&x"},
      {"at 127.0.0.1:9", "at 127.0.0.1:9"},
      {"Couldn't connect", "Couldn't connect"},
      {"invalid token 't'", "invalid token '[redacted]'"},
      {"{'token': 'dev'}", "{'token': '[redacted]'}"},
      {"Bearer dev-", "Bearer [redacted]-"},
      {"t-shirt dev-ops it's", "t-shirt dev-ops it's"},
      {"t", "[redacted]"},
      {"Authorization: Bearer dev\n", "Authorization: Bearer [redacted]\n"},
      {"\"dev\" devices dev", "\"[redacted]\" devices [redacted]"},
  };
  for (size_t i = 0; i < sizeof short_cases / sizeof short_cases[0]; i++) {
    got = culpert__archive_redact(short_cases[i].in, short_secrets);
    assert_non_null(got);
    assert_string_equal(got, short_cases[i].out);
    free(got);
  }
}

static void test_archive_endpoint_kinds(void **state)
{
  (void)state;
  assert_false(culpert__archive_is_local("https://archive.example.com"));
  assert_false(culpert__archive_is_local("HTTP://127.0.0.1:8787/"));
  assert_true(culpert__archive_is_local("file:///srv/archive"));
  assert_true(culpert__archive_is_local("/srv/archive"));
  assert_true(culpert__archive_is_local("relative/dir"));
  assert_true(culpert__archive_is_local("httpdir"));
}

static void test_archive_option_values(void **state)
{
  struct culpert__archive a;
  static const struct {
    int opt;
    const char *arg;
    int ok;
  } cases[] = {
      {CULPERT_ARCHIVE_OPT_TIMEOUT, "2.5", 1},      {CULPERT_ARCHIVE_OPT_TIMEOUT, "0", 0},
      {CULPERT_ARCHIVE_OPT_TIMEOUT, "-1", 0},       {CULPERT_ARCHIVE_OPT_TIMEOUT, "nan", 0},
      {CULPERT_ARCHIVE_OPT_TIMEOUT, "10s", 0},      {CULPERT_ARCHIVE_OPT_CONNECT_TIMEOUT, "1", 1},
      {CULPERT_ARCHIVE_OPT_CONNECT_TIMEOUT, "", 0}, {CULPERT_ARCHIVE_OPT_RETRIES, "0", 1},
      {CULPERT_ARCHIVE_OPT_RETRIES, "10", 1},       {CULPERT_ARCHIVE_OPT_RETRIES, "11", 0},
      {CULPERT_ARCHIVE_OPT_RETRIES, "-1", 0},       {CULPERT_ARCHIVE_OPT_RETRIES, "x", 0},
  };
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    culpert__archive_init(&a);
    int rc = culpert__archive_option(&a, cases[i].opt, cases[i].arg);
    if (cases[i].ok ? rc != 1 : rc != -EINVAL)
      fail_msg("option %d '%s': got %d", cases[i].opt, cases[i].arg, rc);
  }
  culpert__archive_init(&a);
  assert_int_equal(culpert__archive_option(&a, 'o', "x"), 0); /* not a connection option */
  assert_int_equal(culpert__archive_option(&a, CULPERT_ARCHIVE_OPT_TIMEOUT, "2.5"), 1);
  assert_true(a.timeout_s == 2.5);
}

static void clear_env(void)
{
  static const char *vars[] = {"CULPERT_ARCHIVE", "CULPERT_TOKEN",       "CULPERT_PROJECT",
                               "CULPERT_CACERT",  "CF_ACCESS_CLIENT_ID", "CF_ACCESS_CLIENT_SECRET"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    unsetenv(vars[i]);
}

static void test_archive_resolve_rules(void **state)
{
  struct culpert__archive a;
  (void)state;
  clear_env();

  culpert__archive_init(&a);
  assert_int_equal(culpert__archive_resolve(&a), -EINVAL); /* no endpoint */

  setenv("CULPERT_ARCHIVE", "https://archive.example.com", 1);
  culpert__archive_init(&a);
  assert_int_equal(culpert__archive_resolve(&a), -EINVAL); /* HTTP needs a token */
  setenv("CULPERT_TOKEN", "", 1);
  culpert__archive_init(&a);
  assert_int_equal(culpert__archive_resolve(&a), -EINVAL); /* empty counts as unset */
  setenv("CULPERT_TOKEN", "t0ken", 1);
  culpert__archive_init(&a);
  assert_int_equal(culpert__archive_resolve(&a), 0);
  assert_string_equal(a.token, "t0ken");

  culpert__archive_init(&a);
  a.token = "with space";
  assert_int_equal(culpert__archive_resolve(&a), -EINVAL);

  culpert__archive_init(&a);
  a.endpoint = "https://archive.example.com/?x=1";
  assert_int_equal(culpert__archive_resolve(&a), -EINVAL);

  culpert__archive_init(&a);
  a.cf_access_id = "id.access";
  assert_int_equal(culpert__archive_resolve(&a), -EINVAL); /* id without secret */
  setenv("CF_ACCESS_CLIENT_SECRET", "sec", 1);
  culpert__archive_init(&a);
  a.cf_access_id = "id.access";
  assert_int_equal(culpert__archive_resolve(&a), 0);

  clear_env();
  culpert__archive_init(&a);
  a.endpoint = "/tmp/some/dir"; /* local: no token needed */
  assert_int_equal(culpert__archive_resolve(&a), 0);
  a.project = "../up";
  assert_int_equal(culpert__archive_resolve(&a), -EINVAL);
}

static int count_entries(const char *dir)
{
  int n = 0;
  DIR *d = opendir(dir);
  struct dirent *de;
  assert_non_null(d);
  while ((de = readdir(d)) != NULL)
    n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
  closedir(d);
  return n;
}

static void test_archive_write_atomic_replaces(void **state)
{
  char dir[] = "/tmp/culpert-test-archive-XXXXXX";
  char path[512], missing[512];
  char got[16] = {0};
  (void)state;
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/out.pb.gz", dir);
  snprintf(missing, sizeof missing, "%s/no/such/dir/out.pb.gz", dir);

  assert_int_equal(culpert__archive_write_atomic(path, "first", 5), 0);
  assert_int_equal(culpert__archive_write_atomic(path, "second", 6), 0);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fread(got, 1, sizeof got - 1, f), 6);
  fclose(f);
  assert_string_equal(got, "second");
  assert_int_equal(count_entries(dir), 1); /* no temporary left */

  assert_true(culpert__archive_write_atomic(missing, "x", 1) < 0);
  assert_true(culpert__archive_write_atomic(dir, "x", 1) < 0); /* a directory is not replaced */
  assert_int_equal(count_entries(dir), 1);

  unlink(path);
  rmdir(dir);
}

/* The bytes of the file at `path`, as a string of at most 15 bytes. */
static void read_small(const char *path, char got[16])
{
  memset(got, 0, 16);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_true(fread(got, 1, 15, f) > 0);
  fclose(f);
}

/* A symbolic link whose file does not exist yet (a dangling link) is
 * written through, as a shell's redirection would: the file it names is
 * created and the link stays. Relative targets are read from the link's
 * directory; chains of links are followed. */
static void test_archive_write_atomic_dangling_link(void **state)
{
  char dir[] = "/tmp/culpert-test-archive-XXXXXX";
  char link[512], target[512], chain[512], abs_link[512], sub[512], deep[512];
  char got[16];
  struct stat st;
  (void)state;
  assert_non_null(mkdtemp(dir));
  snprintf(link, sizeof link, "%s/link.pb.gz", dir);
  snprintf(target, sizeof target, "%s/target.pb.gz", dir);
  snprintf(chain, sizeof chain, "%s/chain.pb.gz", dir);
  snprintf(abs_link, sizeof abs_link, "%s/abs.pb.gz", dir);
  snprintf(sub, sizeof sub, "%s/sub", dir);
  snprintf(deep, sizeof deep, "%s/sub/deep.pb.gz", dir);
  assert_int_equal(mkdir(sub, 0777), 0);

  /* link -> target.pb.gz (relative, dangling) */
  assert_int_equal(symlink("target.pb.gz", link), 0);
  assert_int_equal(culpert__archive_write_atomic(link, "first", 5), 0);
  assert_int_equal(lstat(link, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  read_small(target, got);
  assert_string_equal(got, "first");

  /* chain -> abs (absolute) -> sub/deep.pb.gz (relative to abs's directory) */
  assert_int_equal(symlink(abs_link, chain), 0);
  assert_int_equal(symlink("sub/deep.pb.gz", abs_link), 0);
  assert_int_equal(culpert__archive_write_atomic(chain, "second", 6), 0);
  assert_int_equal(lstat(chain, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  assert_int_equal(lstat(abs_link, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  read_small(deep, got);
  assert_string_equal(got, "second");
  assert_int_equal(count_entries(dir), 5); /* no temporary left */
  assert_int_equal(count_entries(sub), 1);

  unlink(deep);
  rmdir(sub);
  unlink(abs_link);
  unlink(chain);
  unlink(target);
  unlink(link);
  rmdir(dir);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_archive_sha_rules),
      cmocka_unit_test(test_archive_branch_rules),
      cmocka_unit_test(test_archive_project_rules),
      cmocka_unit_test(test_archive_redact_hides_secrets),
      cmocka_unit_test(test_archive_endpoint_kinds),
      cmocka_unit_test(test_archive_option_values),
      cmocka_unit_test(test_archive_resolve_rules),
      cmocka_unit_test(test_archive_write_atomic_replaces),
      cmocka_unit_test(test_archive_write_atomic_dangling_link),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
