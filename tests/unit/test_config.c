/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_config.c: the environment variables a user sets are read as
 * documented; bad values fall back to defaults with one warning; output
 * names expand %p, %e and %%.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"

/* A fake environment: NULL-terminated name/value pairs. */
static const char *const *fake_env;

static const char *fake_getenv(const char *name)
{
  for (const char *const *e = fake_env; *e != NULL; e += 2)
    if (strcmp(e[0], name) == 0)
      return e[1];
  return NULL;
}

/* Load `env` into c, returning what was warned in `warn`. */
static void load(struct culpert__config *c, const char *const *env, char *warn, size_t n)
{
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fake_env = env;
  culpert__config_load(c, fake_getenv, fds[1]);
  close(fds[1]);
  ssize_t got = read(fds[0], warn, n - 1);
  warn[got > 0 ? got : 0] = '\0';
  close(fds[0]);
}

static void test_config_defaults(void **state)
{
  (void)state;
  static const char *const env[] = {NULL};
  struct culpert__config c;
  char warn[1024];
  load(&c, env, warn, sizeof warn);
  assert_string_equal(warn, "");
  assert_int_equal(c.rate, 524288);
  assert_int_equal(c.stack_mode, CULPERT__STACK_LIBUNWIND);
  assert_int_equal(c.stack_depth, 64);
  assert_false(c.has_seed);
  assert_false(c.names_only);
  assert_false(c.quiet);
  assert_false(c.no_children);
  assert_null(c.output);
  assert_int_equal(c.interval, 0);
  assert_false(c.write_on_signal);
  assert_int_equal(c.nmeta, 0);
}

static void test_config_values(void **state)
{
  (void)state;
  static const char *const env[] = {"CULPERT_SAMPLE_RATE",
                                    "4k",
                                    "CULPERT_SEED",
                                    "77",
                                    "CULPERT_STACK",
                                    "fp",
                                    "CULPERT_STACK_DEPTH",
                                    "1000",
                                    "CULPERT_QUIET",
                                    "1",
                                    "CULPERT_OUTPUT",
                                    "/tmp/x.%p.pb.gz",
                                    "CULPERT_NO_CHILDREN",
                                    "1",
                                    "CULPERT_SYMBOLS",
                                    "names",
                                    "CULPERT_INTERVAL",
                                    "5m",
                                    "CULPERT_WRITE_ON_SIGNAL",
                                    "1",
                                    NULL};
  struct culpert__config c;
  char warn[1024];
  load(&c, env, warn, sizeof warn);
  assert_string_equal(warn, "");
  assert_int_equal(c.rate, 4096);
  assert_true(c.has_seed);
  assert_int_equal(c.seed, 77);
  assert_int_equal(c.stack_mode, CULPERT__STACK_FP);
  assert_int_equal(c.stack_depth, CULPERT__MAX_DEPTH); /* capped */
  assert_true(c.quiet);
  assert_true(c.no_children);
  assert_string_equal(c.output, "/tmp/x.%p.pb.gz");
  assert_true(c.names_only);
  assert_int_equal(c.interval, 300);
  assert_true(c.write_on_signal);
}

static void test_config_rate_above_int64_is_clamped(void **state)
{
  (void)state;
  static const char *const env[] = {"CULPERT_SAMPLE_RATE", "18446744073709551615", NULL};
  struct culpert__config c;
  char warn[512];
  load(&c, env, warn, sizeof warn);
  /* the profile's period, an int64, states this same rate */
  assert_true(c.rate == (uint64_t)INT64_MAX);
  assert_non_null(strstr(warn, "CULPERT_SAMPLE_RATE=18446744073709551615 is above the largest "
                               "rate, 9223372036854775807 bytes"));
}

/* Past 2^64 bytes too: as far above the cap, not a malformed count that
 * would fall back to the default rate and sample after all. */
static void test_config_rate_above_uint64_is_clamped(void **state)
{
  (void)state;
  static const char *const cases[] = {"99999999999999999999", "16777216T"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *const env[] = {"CULPERT_SAMPLE_RATE", cases[i], NULL};
    struct culpert__config c;
    char warn[512], want[128];
    load(&c, env, warn, sizeof warn);
    assert_true(c.rate == (uint64_t)INT64_MAX);
    snprintf(want, sizeof want, "CULPERT_SAMPLE_RATE=%s is above the largest rate", cases[i]);
    assert_non_null(strstr(warn, want));
  }
}

static void test_config_bad_values_warn_and_default(void **state)
{
  (void)state;
  static const char *const env[] = {"CULPERT_SAMPLE_RATE",
                                    "lots",
                                    "CULPERT_STACK",
                                    "magic",
                                    "CULPERT_STACK_DEPTH",
                                    "0",
                                    "CULPERT_SEED",
                                    "x1",
                                    "CULPERT_SYMBOLS",
                                    "lines",
                                    "CULPERT_INTERVAL",
                                    "10 minutes",
                                    NULL};
  struct culpert__config c;
  char warn[2048];
  load(&c, env, warn, sizeof warn);
  assert_int_equal(c.rate, 524288);
  assert_int_equal(c.stack_mode, CULPERT__STACK_LIBUNWIND);
  assert_int_equal(c.stack_depth, 64);
  assert_false(c.has_seed);
  assert_non_null(strstr(warn, "culpert: CULPERT_SAMPLE_RATE=lots"));
  assert_non_null(strstr(warn, "CULPERT_STACK=magic"));
  assert_non_null(strstr(warn, "CULPERT_STACK_DEPTH=0"));
  assert_non_null(strstr(warn, "CULPERT_SEED=x1"));
  assert_non_null(strstr(warn, "CULPERT_SYMBOLS=lines"));
  assert_non_null(strstr(warn, "CULPERT_INTERVAL=10 minutes"));
  assert_false(c.names_only);
  assert_int_equal(c.interval, 0);
  /* one line per bad variable */
  int lines = 0;
  for (const char *p = warn; *p; p++)
    lines += *p == '\n';
  assert_int_equal(lines, 6);
}

/* On/off variables: 1/yes/true/on and 0/no/false/off in any case; any
 * other value is off, with one warning naming it. */
static void test_config_switches(void **state)
{
  (void)state;
  static const char *const env[] = {
      "CULPERT_QUIET", "Yes", "CULPERT_NO_CHILDREN", "off", "CULPERT_WRITE_ON_SIGNAL", "2", NULL};
  struct culpert__config c;
  char warn[1024];
  load(&c, env, warn, sizeof warn);
  assert_true(c.quiet);
  assert_false(c.no_children);
  assert_false(c.write_on_signal);
  assert_string_equal(warn, "culpert: CULPERT_WRITE_ON_SIGNAL=2 is neither 1 nor 0 (yes/no, "
                            "true/false, on/off); using 0\n");
  static const char *const env2[] = {"CULPERT_QUIET",
                                     "no",
                                     "CULPERT_WRITE_ON_SIGNAL",
                                     "TRUE",
                                     "CULPERT_PEAK",
                                     "On",
                                     "CULPERT_NO_CHILDREN",
                                     "true",
                                     NULL};
  load(&c, env2, warn, sizeof warn);
  assert_false(c.quiet);
  assert_true(c.write_on_signal);
  assert_true(c.peak);
  assert_true(c.no_children);
  assert_string_equal(warn, "");
  static const char *const env3[] = {"CULPERT_QUIET", "ON", "CULPERT_PEAK", "FALSE", NULL};
  load(&c, env3, warn, sizeof warn);
  assert_true(c.quiet);
  assert_false(c.peak);
  assert_string_equal(warn, "");
}

/* Load a configuration with one variable set; 1 when a warning names it. */
static int load_one(const char *name, const char *value, struct culpert__config *c)
{
  const char *env[] = {name, value, NULL};
  char warn[512];
  load(c, env, warn, sizeof warn);
  return strstr(warn, name) != NULL;
}

static void test_config_interval(void **state)
{
  (void)state;
  static const struct {
    const char *text;
    uint32_t seconds; /* 0: rejected */
  } cases[] = {{"60", 60},
               {"30s", 30},
               {"5m", 300},
               {"1h", 3600},
               {"0", 0},
               {"168h", 604800},
               {"169h", 0},
               {"1d", 0},
               {"m", 0},
               {"-5", 0},
               {"5ms", 0},
               {"1.5h", 0},
               {"99999999999999999999", 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct culpert__config c;
    int warned = load_one("CULPERT_INTERVAL", cases[i].text, &c);
    assert_int_equal(c.interval, cases[i].seconds);
    assert_int_equal(warned, cases[i].seconds == 0 && strcmp(cases[i].text, "0") != 0);
  }
}

/* CULPERT_SNAPSHOT_SIGNAL takes USR1, USR2 and the real-time signals, by
 * name (with or without SIG) or number; anything else is refused with one
 * warning. */
static void test_config_snapshot_signal(void **state)
{
  (void)state;
  struct {
    const char *text;
    int sig; /* 0: rejected */
  } cases[] = {{"USR1", SIGUSR1},
               {"SIGUSR2", SIGUSR2},
               {"12", SIGUSR2},
               {"RTMIN", SIGRTMIN},
               {"SIGRTMIN+2", SIGRTMIN + 2},
               {"TERM", 0},
               {"SIGKILL", 0},
               {"9", 0},
               {"USR3", 0},
               {"RTMIN+", 0},
               {"RTMIN+x", 0},
               {"RTMIN-1", 0},
               {"RTMIN+200", 0},
               {"", 0}};
  struct culpert__config c;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int warned = load_one("CULPERT_SNAPSHOT_SIGNAL", cases[i].text, &c);
    assert_int_equal(c.snapshot_signal, cases[i].sig);
    assert_int_equal(warned, cases[i].sig == 0 && cases[i].text[0] != '\0');
  }
  char max[16];
  snprintf(max, sizeof max, "%d", SIGRTMAX);
  assert_false(load_one("CULPERT_SNAPSHOT_SIGNAL", max, &c));
  assert_int_equal(c.snapshot_signal, SIGRTMAX);
}

/* CULPERT_SEED: decimal or 0x hex, the whole 64 bits. */
static void test_config_seed(void **state)
{
  (void)state;
  static const struct {
    const char *text;
    int ok;
    uint64_t seed;
  } cases[] = {{"77", 1, 77},
               {"0x4d", 1, 77},
               {"0XFFFFFFFFFFFFFFFF", 1, UINT64_MAX},
               {"18446744073709551615", 1, UINT64_MAX},
               {"18446744073709551616", 0, 0},
               {"0x", 0, 0},
               {"77k", 0, 0},
               {"-1", 0, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct culpert__config c;
    int warned = load_one("CULPERT_SEED", cases[i].text, &c);
    assert_int_equal(c.has_seed, cases[i].ok);
    assert_int_equal(warned, !cases[i].ok);
    if (cases[i].ok)
      assert_true(c.seed == cases[i].seed);
  }
}

static void test_config_rate_zero_is_exact(void **state)
{
  (void)state;
  static const char *const env[] = {"CULPERT_SAMPLE_RATE", "0", NULL};
  struct culpert__config c;
  char warn[256];
  load(&c, env, warn, sizeof warn);
  assert_string_equal(warn, "");
  assert_int_equal(c.rate, 0);
}

static void test_config_metadata(void **state)
{
  (void)state;
  static const char *const env[] = {
      "CULPERT_METADATA",
      "service=api,commit=abc123,bad,=novalue,nokey=,culpert.rate=9,ok.key-2=some value,ctl=a\x1f",
      NULL};
  struct culpert__config c;
  char warn[1024];
  load(&c, env, warn, sizeof warn);
  assert_int_equal(c.nmeta, 3);
  assert_string_equal(c.meta[0], "service=api");
  assert_string_equal(c.meta[1], "commit=abc123");
  assert_string_equal(c.meta[2], "ok.key-2=some value");
  /* one line for each reason, naming the first entry and how many more */
  assert_non_null(strstr(warn, "CULPERT_METADATA: ignoring \"bad\" and 3 more: not key=value"));
  assert_non_null(strstr(warn, "CULPERT_METADATA: ignoring \"culpert.rate=9\": keys that start "
                               "with \"culpert.\" are culpert's own"));
  int lines = 0;
  for (const char *p = warn; *p; p++)
    lines += *p == '\n';
  assert_int_equal(lines, 2);
}

/* An entry too long for what culpert keeps is said to be that, not
 * malformed, and shown cut short. */
static void test_config_metadata_too_long(void **state)
{
  (void)state;
  static char value[4096];
  memset(value, 'k', 3000);
  memcpy(value + 3000, "=v,a=b", 7);
  const char *env[] = {"CULPERT_METADATA", value, NULL};
  struct culpert__config c;
  char warn[1024];
  load(&c, env, warn, sizeof warn);
  assert_int_equal(c.nmeta, 1);
  assert_string_equal(c.meta[0], "a=b");
  assert_non_null(strstr(warn,
                         "CULPERT_METADATA: ignoring \"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
                         "...\": past what culpert keeps (32 entries, 2048 bytes in all)"));
}

/* More CULPERT_METADATA entries than culpert keeps: the first
 * CULPERT__MAX_META are kept, the rest skipped with the one warning. */
static void test_config_metadata_too_many(void **state)
{
  (void)state;
  char value[1024];
  size_t at = 0;
  for (unsigned i = 0; i < CULPERT__MAX_META + 8; i++)
    at += (size_t)snprintf(value + at, sizeof value - at, "%sk%u=v%u", i ? "," : "", i, i);
  const char *env[] = {"CULPERT_METADATA", value, NULL};
  struct culpert__config c;
  char warn[1024];
  load(&c, env, warn, sizeof warn);
  assert_int_equal(c.nmeta, CULPERT__MAX_META);
  assert_string_equal(c.meta[0], "k0=v0");
  char last[32];
  snprintf(last, sizeof last, "k%u=v%u", CULPERT__MAX_META - 1, CULPERT__MAX_META - 1);
  assert_string_equal(c.meta[CULPERT__MAX_META - 1], last);
  assert_non_null(strstr(warn, "CULPERT_METADATA: ignoring \"k32=v32\" and 7 more: past what "
                               "culpert keeps (32 entries"));
  int lines = 0;
  for (const char *p = warn; *p; p++)
    lines += *p == '\n';
  assert_int_equal(lines, 1);
}

/* CULPERT_RUN_ID, culpert run's: 1 to 32 lower-case hex digits, kept;
 * anything else dropped without a word (no user sets it). */
static void test_config_run_id(void **state)
{
  (void)state;
  static const struct {
    const char *value, *kept;
  } cases[] = {
      {"0123456789abcdef", "0123456789abcdef"},
      {"0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"},
      {"0123456789abcdef0123456789abcdef0", ""}, /* 33 digits */
      {"ABCDEF", ""},
      {"12 34", ""},
      {"", ""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *env[] = {"CULPERT_RUN_ID", cases[i].value, NULL};
    struct culpert__config c;
    char warn[256];
    load(&c, env, warn, sizeof warn);
    assert_string_equal(c.run_id, cases[i].kept);
    assert_string_equal(warn, "");
  }
}

/* CULPERT_OUTPUT is copied: a program that sets its process title writes
 * over the memory its environment strings were in (nginx, PostgreSQL), and
 * the profile must still go where the variable said. Too long: the default
 * name, with a warning. */
static void test_config_output_copied(void **state)
{
  (void)state;
  char value[] = "/tmp/svc.%p.pb.gz";
  const char *env[] = {"CULPERT_OUTPUT", value, NULL};
  struct culpert__config c;
  char warn[1024];
  load(&c, env, warn, sizeof warn);
  memset(value, 'x', sizeof value - 1);
  assert_string_equal(c.output, "/tmp/svc.%p.pb.gz");
  assert_string_equal(warn, "");

  /* the longest value kept: 4095 bytes, one short of the buffer */
  static char longest[CULPERT__PATH_MAX];
  memset(longest, 'b', sizeof longest - 1);
  const char *env1[] = {"CULPERT_OUTPUT", longest, NULL};
  load(&c, env1, warn, sizeof warn);
  assert_non_null(c.output);
  assert_int_equal(strlen(c.output), CULPERT__PATH_MAX - 1);
  assert_string_equal(warn, "");

  static char longer[CULPERT__PATH_MAX + 8];
  memset(longer, 'a', sizeof longer - 1);
  const char *env2[] = {"CULPERT_OUTPUT", longer, NULL};
  load(&c, env2, warn, sizeof warn);
  assert_null(c.output);
  assert_non_null(strstr(warn, "CULPERT_OUTPUT is longer than"));
}

static void test_config_output_path(void **state)
{
  (void)state;
  char buf[64];
  assert_int_equal(culpert__config_output_path(NULL, 42, "srv", 0, buf, sizeof buf), 0);
  assert_string_equal(buf, "culpert.srv.42.pb.gz");
  assert_int_equal(culpert__config_output_path("/o/%e-%p-%%.pb.gz", 7, "a", 0, buf, sizeof buf), 0);
  assert_string_equal(buf, "/o/a-7-%.pb.gz");
  /* a child never writes its parent's fixed name */
  assert_int_equal(culpert__config_output_path("/o/fixed.pb.gz", 9, "a", 1, buf, sizeof buf), 0);
  assert_string_equal(buf, "/o/fixed.pb.gz.9");
  assert_int_equal(culpert__config_output_path("/o/f.%p.pb.gz", 9, "a", 1, buf, sizeof buf), 0);
  assert_string_equal(buf, "/o/f.9.pb.gz");
  assert_int_equal(culpert__config_output_path("/o/%x", 9, "a", 0, buf, sizeof buf), 0);
  assert_string_equal(buf, "/o/%x");
  assert_int_equal(
      culpert__config_output_path("0123456789%e", 1,
                                  "0123456789012345678901234567890123456789012345678901234567890",
                                  0, buf, sizeof buf),
      -ENAMETOOLONG);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_defaults),
      cmocka_unit_test(test_config_values),
      cmocka_unit_test(test_config_rate_above_int64_is_clamped),
      cmocka_unit_test(test_config_rate_above_uint64_is_clamped),
      cmocka_unit_test(test_config_bad_values_warn_and_default),
      cmocka_unit_test(test_config_switches),
      cmocka_unit_test(test_config_interval),
      cmocka_unit_test(test_config_snapshot_signal),
      cmocka_unit_test(test_config_seed),
      cmocka_unit_test(test_config_rate_zero_is_exact),
      cmocka_unit_test(test_config_metadata),
      cmocka_unit_test(test_config_metadata_too_many),
      cmocka_unit_test(test_config_metadata_too_long),
      cmocka_unit_test(test_config_run_id),
      cmocka_unit_test(test_config_output_path),
      cmocka_unit_test(test_config_output_copied),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
