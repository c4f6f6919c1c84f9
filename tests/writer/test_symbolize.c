/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_symbolize.c: mappings, build ids and ELF symbol lookup, checked
 * against what the kernel (/proc/self/maps) and binutils (readelf -n) say
 * about this very test binary; plus truncated and corrupt ELF files, which
 * must cost names, never a crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader.h"
#include "symbolize.h"

static volatile unsigned sink;

/* Static, so its name is only in .symtab, never in .dynsym. */
enum { FIXTURE_STATIC_LINE = __LINE__ + 1 };
__attribute__((noinline)) static void symbolize_fixture_static(void)
{
  for (int i = 0; i < 16; i++)
    sink = sink * 3 + (unsigned)i;
}

static void exe_path(char *buf, size_t len)
{
  ssize_t n = readlink("/proc/self/exe", buf, len - 1);
  assert_true(n > 0);
  buf[n] = '\0';
}

/* The build id as `readelf -n` prints it, or "" when readelf is missing. */
static void readelf_build_id(const char *path, char *out, size_t len)
{
  char cmd[PATH_MAX + 64];
  out[0] = '\0';
  snprintf(cmd, sizeof cmd, "readelf -n '%s' 2>/dev/null", path);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char *p = strstr(line, "Build ID: ");
    if (p) {
      snprintf(out, len, "%s", p + strlen("Build ID: "));
      out[strcspn(out, "\n ")] = '\0';
    }
  }
  pclose(f);
}

static void test_symbolize_main_mapping_matches_system(void **state)
{
  (void)state;
  struct culpert__symbolizer *s;
  assert_int_equal(culpert__symbolize_open(&s), 0);
  assert_true(culpert__symbolize_nmaps(s) >= 2);

  const struct culpert__smap *m = culpert__symbolize_map(s, 0);
  char exe[PATH_MAX];
  exe_path(exe, sizeof exe);
  assert_true(m->is_main);
  assert_false(m->is_self); /* culpert_core is linked statically here */
  assert_string_equal(m->path, exe);

  char want[256];
  readelf_build_id(exe, want, sizeof want);
  if (want[0])
    assert_string_equal(m->build_id, want);
  else
    print_message("readelf not found: build id not cross-checked\n");
  assert_true(strlen(m->build_id) >= 16);

  uint64_t fn = (uint64_t)(uintptr_t)symbolize_fixture_static;
  assert_int_equal(culpert__symbolize_find_map(s, fn), 0);

  /* The same start, end and offset as the kernel's r-x line. */
  FILE *maps = fopen("/proc/self/maps", "r");
  assert_non_null(maps);
  char line[PATH_MAX + 128];
  int seen = 0;
  while (fgets(line, sizeof line, maps)) {
    unsigned long long start, end, off;
    char perms[8];
    if (sscanf(line, "%llx-%llx %7s %llx", &start, &end, perms, &off) != 4)
      continue;
    if (fn < start || fn >= end)
      continue;
    assert_int_equal(m->start, start);
    assert_int_equal(m->limit, end);
    assert_int_equal(m->offset, off);
    assert_int_equal(perms[2], 'x');
    seen = 1;
  }
  fclose(maps);
  assert_true(seen);
  culpert__symbolize_close(s);
}

static void test_symbolize_static_function_from_symtab(void **state)
{
  (void)state;
  struct culpert__symbolizer *s;
  struct culpert__symbol sym;
  assert_int_equal(culpert__symbolize_open(&s), 0);
  uint64_t fn = (uint64_t)(uintptr_t)symbolize_fixture_static;
  for (uint64_t off = 0; off < 8; off++) {
    assert_int_equal(culpert__symbolize_addr(s, fn + off, &sym), 0);
    assert_string_equal(sym.name, "symbolize_fixture_static");
  }
  /* A libc function, in a shared library mapping. */
  uint64_t lib = (uint64_t)(uintptr_t)&strtoul;
  long mi = culpert__symbolize_find_map(s, lib);
  assert_true(mi > 0);
  assert_non_null(strstr(culpert__symbolize_map(s, (size_t)mi)->path, "libc.so"));
  assert_int_equal(culpert__symbolize_addr(s, lib, &sym), 0);
  assert_non_null(strstr(sym.name, "strtoul"));
  culpert__symbolize_close(s);
}

static void test_symbolize_unknown_address(void **state)
{
  (void)state;
  struct culpert__symbolizer *s;
  struct culpert__symbol sym;
  assert_int_equal(culpert__symbolize_open(&s), 0);
  assert_int_equal(culpert__symbolize_find_map(s, 0x10), -1);
  assert_int_equal(culpert__symbolize_addr(s, 0x10, &sym), -ENOENT);
  assert_null(sym.name);
  /* Data, not code: the heap is in no executable mapping. */
  char *heap = malloc(16);
  assert_int_equal(culpert__symbolize_find_map(s, (uint64_t)(uintptr_t)heap), -1);
  free(heap);
  culpert__symbolize_close(s);
}

static void test_symbolize_vdso(void **state)
{
  (void)state;
  if (!getauxval(AT_SYSINFO_EHDR)) {
    print_message("SKIPPED: no vdso in this process\n");
    skip();
  }
  struct culpert__symbolizer *s;
  assert_int_equal(culpert__symbolize_open(&s), 0);
  const struct culpert__smap *v = NULL;
  for (size_t i = 0; i < culpert__symbolize_nmaps(s); i++)
    if (culpert__symbolize_map(s, i)->is_vdso)
      v = culpert__symbolize_map(s, i);
  assert_non_null(v);
  assert_string_equal(v->path, "[vdso]");
  int named = 0;
  for (uint64_t a = v->start; a < v->limit && !named; a += 4) {
    struct culpert__symbol sym;
    if (culpert__symbolize_addr(s, a, &sym) == 0)
      named = strstr(sym.name, "vdso") || strstr(sym.name, "time");
  }
  assert_true(named);
  culpert__symbolize_close(s);
}

static int ends_with(const char *s, const char *suffix)
{
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* DWARF 5 (gcc's default) in the test executable itself. */
static void test_symbolize_lines_dwarf5(void **state)
{
  (void)state;
  struct culpert__symbolizer *s;
  assert_int_equal(culpert__symbolize_open(&s), 0);
  uint64_t addrs[3] = {(uint64_t)(uintptr_t)symbolize_fixture_static, 0x10,
                       (uint64_t)(uintptr_t)symbolize_fixture_static};
  struct culpert__srcpos pos[3];
  assert_int_equal(culpert__symbolize_lines(s, addrs, 3, pos), 0);
  assert_non_null(pos[0].file);
  if (!ends_with(pos[0].file, "tests/writer/test_symbolize.c"))
    fail_msg("file %s", pos[0].file);
  /* gcc puts a function's first row on its signature or its brace. */
  assert_in_range(pos[0].first_line, FIXTURE_STATIC_LINE, FIXTURE_STATIC_LINE + 1);
  assert_in_range(pos[0].line, FIXTURE_STATIC_LINE, FIXTURE_STATIC_LINE + 3);
  assert_int_equal(pos[0].ninl, 0);
  assert_null(pos[1].file); /* in no mapping */
  assert_int_equal(pos[1].line, 0);
  assert_string_equal(pos[2].file, pos[0].file);
  assert_int_equal(culpert__symbolize_lines(s, NULL, 0, NULL), 0);
  culpert__symbolize_close(s);
}

/* Load the DWARF 4 fixture object; *fn is its fixture_dwarf4_work. */
static void *load_dwarf4_fixture(void **fn)
{
  void *h = dlopen(CULPERT_FIXTURE_DWARF4, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    fail_msg("dlopen %s: %s", CULPERT_FIXTURE_DWARF4, dlerror());
  *fn = dlsym(h, "fixture_dwarf4_work");
  assert_non_null(*fn);
  return h;
}

/* s describes fixture_dwarf4_work at addr: its object's mapping, its name,
 * its file and its first line, `line`. */
static void expect_fixture_work(struct culpert__symbolizer *s, uint64_t addr, int line)
{
  long m = culpert__symbolize_find_map(s, addr + 1);
  assert_true(m > 0);
  assert_string_equal(culpert__symbolize_map(s, (size_t)m)->path, CULPERT_FIXTURE_DWARF4);
  struct culpert__symbol sym;
  assert_int_equal(culpert__symbolize_addr(s, addr + 1, &sym), 0);
  assert_string_equal(sym.name, "fixture_dwarf4_work");
  assert_int_equal(sym.start, addr);
  struct culpert__srcpos pos;
  assert_int_equal(culpert__symbolize_lines(s, &addr, 1, &pos), 0);
  assert_non_null(pos.file);
  if (!ends_with(pos.file, "tests/writer/fixture_dwarf4.c"))
    fail_msg("file %s", pos.file);
  assert_in_range(pos.first_line, line, line + 1);
  assert_in_range(pos.line, line, line + 3);
}

/* DWARF 4 in a dlopen'd object; once dlclose'd, its code is in no
 * mapping of a new snapshot. */
static void test_symbolize_dlopen_dwarf4_then_dlclose(void **state)
{
  (void)state;
  void *fn;
  void *h = load_dwarf4_fixture(&fn);
  const int *line = dlsym(h, "fixture_dwarf4_line");
  assert_non_null(fn);
  assert_non_null(line);
  uint64_t addr = (uint64_t)(uintptr_t)fn;

  struct culpert__symbolizer *s;
  struct culpert__symbol sym;
  struct culpert__srcpos pos;
  assert_int_equal(culpert__symbolize_open(&s), 0);
  expect_fixture_work(s, addr, *line);

  /* A return address inside code inlined from fixture_inline_helper. */
  void (*outer)(void);
  void *outer_addr = dlsym(h, "fixture_inline_outer");
  const uintptr_t *ret = dlsym(h, "fixture_return");
  const int *helper_line = dlsym(h, "fixture_helper_call_line");
  const int *outer_line = dlsym(h, "fixture_outer_call_line");
  assert_non_null(outer_addr);
  assert_non_null(ret);
  assert_non_null(helper_line);
  assert_non_null(outer_line);
  memcpy(&outer, &outer_addr, sizeof outer);
  outer();
  uint64_t in_helper = (uint64_t)*ret - 1;
  assert_int_equal(culpert__symbolize_addr(s, in_helper, &sym), 0);
  assert_string_equal(sym.name, "fixture_inline_outer");
  assert_int_equal(culpert__symbolize_lines(s, &in_helper, 1, &pos), 0);
  assert_int_equal(pos.line, *helper_line);
  assert_int_equal(pos.ninl, 1);
  assert_string_equal(pos.inl[0].name, "fixture_inline_helper");
  assert_int_equal(pos.inl[0].call_line, *outer_line);
  assert_non_null(pos.inl[0].call_file);
  assert_true(ends_with(pos.inl[0].call_file, "tests/writer/fixture_dwarf4.c"));
  culpert__symbolize_close(s);

  assert_int_equal(dlclose(h), 0);
  assert_int_equal(culpert__symbolize_open(&s), 0);
  if (culpert__symbolize_find_map(s, addr) >= 0) {
    culpert__symbolize_close(s);
    print_message("SKIPPED: dlclose kept the fixture loaded\n");
    skip();
  }
  assert_int_equal(culpert__symbolize_addr(s, addr, &sym), -ENOENT);
  assert_int_equal(culpert__symbolize_lines(s, &addr, 1, &pos), 0);
  assert_null(pos.file);
  culpert__symbolize_close(s);
}

/* The maps of a new symbolizer whose file is `path`. */
static int maps_of(const char *path)
{
  struct culpert__symbolizer *s;
  int n = 0;
  assert_int_equal(culpert__symbolize_open(&s), 0);
  for (size_t i = 0; i < culpert__symbolize_nmaps(s); i++)
    n += strcmp(culpert__symbolize_map(s, i)->path, path) == 0;
  culpert__symbolize_close(s);
  return n;
}

/* Noted as the dlclose wrapper does (begin, dlclose, end): an object that
 * dlclose left loaded (a second reference) stays described once, as
 * loaded; one that is gone is described again with its file and build id,
 * and its code keeps its name, file and line. Runs after
 * test_symbolize_dlopen_dwarf4_then_dlclose, which expects unloaded code
 * to be in no mapping when nothing noted it. */
static void test_symbolize_unloaded_object_keeps_names(void **state)
{
  (void)state;
  void *fn;
  void *h = load_dwarf4_fixture(&fn);
  const int *line = dlsym(h, "fixture_dwarf4_line");
  assert_non_null(line);
  int first_line = *line;
  uint64_t addr = (uint64_t)(uintptr_t)fn;
  int loaded_maps = maps_of(CULPERT_FIXTURE_DWARF4);
  assert_true(loaded_maps >= 1);

  void *again = dlopen(CULPERT_FIXTURE_DWARF4, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(again);
  struct culpert__unload_note *note = culpert__symbolize_unload_begin(again);
  assert_non_null(note);
  assert_int_equal(dlclose(again), 0);
  culpert__symbolize_unload_end(note);
  assert_int_equal(maps_of(CULPERT_FIXTURE_DWARF4), loaded_maps);

  struct culpert__symbolizer *s;
  assert_int_equal(culpert__symbolize_open(&s), 0);
  char build_id[129];
  long m = culpert__symbolize_find_map(s, addr);
  assert_true(m > 0);
  snprintf(build_id, sizeof build_id, "%s", culpert__symbolize_map(s, (size_t)m)->build_id);
  culpert__symbolize_close(s);

  note = culpert__symbolize_unload_begin(h);
  assert_non_null(note);
  assert_null(culpert__symbolize_unload_begin(NULL));
  assert_int_equal(dlclose(h), 0);
  culpert__symbolize_unload_end(note);

  assert_int_equal(culpert__symbolize_open(&s), 0);
  expect_fixture_work(s, addr, first_line);
  const struct culpert__smap *map =
      culpert__symbolize_map(s, (size_t)culpert__symbolize_find_map(s, addr));
  assert_string_equal(map->build_id, build_id);
  assert_false(map->is_main);
  assert_false(map->is_vdso);
  culpert__symbolize_close(s);
  assert_int_equal(maps_of(CULPERT_FIXTURE_DWARF4), loaded_maps);

  /* Loaded again: the note gives way where the object took its old place.
   * Noted again when unloaded: one note per build and address. */
  h = load_dwarf4_fixture(&fn);
  int places = (uint64_t)(uintptr_t)fn == addr ? 1 : 2;
  assert_int_equal(maps_of(CULPERT_FIXTURE_DWARF4), places * loaded_maps);
  note = culpert__symbolize_unload_begin(h);
  assert_int_equal(dlclose(h), 0);
  culpert__symbolize_unload_end(note);
  assert_int_equal(maps_of(CULPERT_FIXTURE_DWARF4), places * loaded_maps);
}

/* Without the loader's locks (a writer forked at a signal), the objects
 * come from the r_debug list: the same mappings, paths, build ids and kinds
 * as from dl_iterate_phdr, a dlopen'ed object included, and the same names. */
static void test_symbolize_without_loader_locks(void **state)
{
  (void)state;
  void *fn;
  void *h = load_dwarf4_fixture(&fn);
  struct culpert__symbolizer *a, *b;
  assert_true(culpert__loader_usable());
  assert_int_equal(culpert__symbolize_open(&a), 0);
  culpert__loader_set_usable(0);
  assert_false(culpert__loader_usable());
  assert_int_equal(culpert__symbolize_open(&b), 0);
  culpert__loader_set_usable(1);

  size_t n = culpert__symbolize_nmaps(a);
  assert_true(n >= 3);
  assert_int_equal(culpert__symbolize_nmaps(b), n);
  int vdso = 0;
  for (size_t i = 0; i < n; i++) {
    const struct culpert__smap *x = culpert__symbolize_map(a, i), *y = culpert__symbolize_map(b, i);
    assert_int_equal(x->start, y->start);
    assert_int_equal(x->limit, y->limit);
    assert_int_equal(x->offset, y->offset);
    assert_string_equal(x->path, y->path);
    assert_string_equal(x->build_id, y->build_id);
    assert_int_equal(x->is_main, y->is_main);
    assert_int_equal(x->is_self, y->is_self);
    assert_int_equal(x->is_vdso, y->is_vdso);
    vdso |= y->is_vdso;
  }
  assert_true(culpert__symbolize_map(b, 0)->is_main);
  assert_true(vdso);
  long m = culpert__symbolize_find_map(b, (uint64_t)(uintptr_t)fn);
  assert_true(m > 0);
  assert_string_equal(culpert__symbolize_map(b, (size_t)m)->path, CULPERT_FIXTURE_DWARF4);
  uint64_t addrs[] = {(uint64_t)(uintptr_t)fn, (uint64_t)(uintptr_t)symbolize_fixture_static,
                      (uint64_t)(uintptr_t)&strtoul};
  for (size_t i = 0; i < sizeof addrs / sizeof addrs[0]; i++) {
    struct culpert__symbol sa, sb;
    assert_int_equal(culpert__symbolize_addr(a, addrs[i], &sa), 0);
    assert_int_equal(culpert__symbolize_addr(b, addrs[i], &sb), 0);
    assert_string_equal(sa.name, sb.name);
    assert_int_equal(sa.start, sb.start);
  }
  culpert__symbolize_close(a);
  culpert__symbolize_close(b);
  assert_int_equal(dlclose(h), 0);
}

/* Load bias of the main executable. */
static int main_bias_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)size;
  *(uint64_t *)data = info->dlpi_addr;
  return 1;
}

static void test_symbolize_symtab_of_file(void **state)
{
  (void)state;
  char exe[PATH_MAX];
  exe_path(exe, sizeof exe);
  struct culpert__symtab *t;
  assert_int_equal(culpert__symtab_load(exe, &t), 0);
  assert_true(culpert__symtab_is_full(t));
  assert_true(culpert__symtab_count(t) > 10);
  uint64_t bias = 0;
  dl_iterate_phdr(main_bias_cb, &bias);
  uint64_t vaddr = (uint64_t)(uintptr_t)symbolize_fixture_static - bias;
  assert_string_equal(culpert__symtab_lookup(t, vaddr + 2), "symbolize_fixture_static");
  assert_null(culpert__symtab_lookup(t, 0));
  culpert__symtab_free(t);

  assert_int_equal(culpert__symtab_load("/nonexistent/culpert", &t), -ENOENT);
  assert_null(t);
  assert_int_equal(culpert__symtab_load("/proc/self/maps", &t), -ENOEXEC);
  assert_int_equal(culpert__symtab_load("/", &t), -ENOEXEC);
}

/* ---------------------------------------------------------------------- */
/* Bad files                                                               */

/* Reads the whole file at `path`. */
static unsigned char *slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long n = ftell(f);
  assert_true(n > 0);
  rewind(f);
  unsigned char *buf = malloc((size_t)n);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* Writes bytes to a temp file, loads it, looks something up, and returns
 * the load result; the test passes if this returns at all. */
static int load_bytes(const unsigned char *bytes, size_t len)
{
  char path[] = "/tmp/culpert-test-elf-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  if (len)
    assert_int_equal(write(fd, bytes, len), (ssize_t)len);
  close(fd);
  struct culpert__symtab *t = NULL;
  int rc = culpert__symtab_load(path, &t);
  if (rc == 0) {
    for (uint64_t a = 0; a < 0x20000; a += 0x101)
      (void)culpert__symtab_lookup(t, a);
  } else {
    assert_true(rc < 0);
    assert_null(t);
  }
  culpert__symtab_free(t);
  unlink(path);
  return rc;
}

static void test_symbolize_truncated_elf(void **state)
{
  (void)state;
  char exe[PATH_MAX];
  exe_path(exe, sizeof exe);
  size_t len;
  unsigned char *elf = slurp(exe, &len);
  /* Cut everywhere interesting and at 64 evenly spread sizes. */
  size_t cuts[80];
  size_t n = 0;
  cuts[n++] = 0;
  cuts[n++] = 4;
  cuts[n++] = sizeof(Elf64_Ehdr) - 1;
  cuts[n++] = sizeof(Elf64_Ehdr);
  const Elf64_Ehdr *eh = (const void *)elf;
  cuts[n++] = eh->e_shoff;
  cuts[n++] = eh->e_shoff + sizeof(Elf64_Shdr) * eh->e_shnum - 1;
  for (size_t i = 1; i <= 64; i++)
    cuts[n++] = len * i / 65;
  for (size_t i = 0; i < n; i++)
    if (cuts[i] < len)
      assert_true(load_bytes(elf, cuts[i]) <= 0);
  /* The section headers are at the end: every cut loses them. */
  assert_int_equal(load_bytes(elf, len / 2), -ENOEXEC);
  assert_int_equal(load_bytes(elf, len), 0);
  free(elf);
}

static void test_symbolize_corrupt_elf(void **state)
{
  (void)state;
  char exe[PATH_MAX];
  exe_path(exe, sizeof exe);
  size_t len;
  unsigned char *orig = slurp(exe, &len);
  unsigned char *elf = malloc(len);
  assert_non_null(elf);
  const Elf64_Ehdr *oeh = (const void *)orig;
  Elf64_Ehdr *eh = (void *)elf;

  /* Locate .symtab and its string table in the original. */
  const Elf64_Shdr *osh = (const void *)(orig + oeh->e_shoff);
  size_t symtab = 0;
  for (size_t i = 0; i < oeh->e_shnum; i++)
    if (osh[i].sh_type == SHT_SYMTAB)
      symtab = i;
  assert_true(symtab > 0);
  size_t strtab = osh[symtab].sh_link;

#define MUTATE(stmt)                                                                               \
  do {                                                                                             \
    memcpy(elf, orig, len);                                                                        \
    Elf64_Shdr *sh = (void *)(elf + oeh->e_shoff);                                                 \
    Elf64_Sym *syms = (void *)(elf + osh[symtab].sh_offset);                                       \
    (void)sh;                                                                                      \
    (void)syms;                                                                                    \
    stmt;                                                                                          \
    load_bytes(elf, len);                                                                          \
  } while (0)

  MUTATE(eh->e_shoff = UINT64_MAX - 8);
  MUTATE(eh->e_shoff = len - 1);
  MUTATE(eh->e_shnum = 0xffff);
  MUTATE(eh->e_shentsize = 7);
  MUTATE(eh->e_ident[EI_CLASS] = ELFCLASS32);
  MUTATE(sh[symtab].sh_offset = len - 8);
  MUTATE(sh[symtab].sh_size = UINT64_MAX);
  MUTATE(sh[symtab].sh_entsize = 0);
  MUTATE(sh[symtab].sh_link = 0xffffffff);
  MUTATE(sh[symtab].sh_link = (uint32_t)symtab); /* links to itself: not a STRTAB */
  MUTATE(sh[strtab].sh_size = UINT64_MAX / 2);
  MUTATE(sh[strtab].sh_offset = len);
  /* String table without a final NUL: names running off its end. */
  MUTATE(elf[osh[strtab].sh_offset + osh[strtab].sh_size - 1] = 'x');
  /* Every symbol's name offset far out of range, every size huge. */
  MUTATE(for (size_t i = 0; i < osh[symtab].sh_size / sizeof *syms; i++) {
    syms[i].st_name = 0xfffffff0u;
    syms[i].st_size = UINT64_MAX;
  });
  /* Random bytes over the section header table. */
  MUTATE(srand(7); for (size_t i = 0; i < sizeof(Elf64_Shdr) * oeh->e_shnum; i++)
                       elf[oeh->e_shoff + i] = (unsigned char)rand());
#undef MUTATE
  free(elf);
  free(orig);
}

/* Offset and size of section `name` in an ELF image (0, 0 when absent). */
static void find_section(const unsigned char *elf, const char *name, size_t *off, size_t *size,
                         size_t *index)
{
  const Elf64_Ehdr *eh = (const void *)elf;
  const Elf64_Shdr *sh = (const void *)(elf + eh->e_shoff);
  const char *names = (const char *)elf + sh[eh->e_shstrndx].sh_offset;
  *off = *size = *index = 0;
  for (size_t i = 0; i < eh->e_shnum; i++) {
    if (strcmp(names + sh[i].sh_name, name) == 0) {
      *off = sh[i].sh_offset;
      *size = sh[i].sh_size;
      *index = i;
    }
  }
}

/* Loads the image from a temp file and asks for the lines of `n`
 * addresses; returns how many got a line. */
static size_t lines_of_bytes(const unsigned char *bytes, size_t len, const uint64_t *vaddrs,
                             size_t n)
{
  char path[] = "/tmp/culpert-test-dwarf-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, bytes, len), (ssize_t)len);
  close(fd);
  struct culpert__symtab *t = NULL;
  struct culpert__srcpos pos[64];
  size_t found = 0;
  assert_true(n <= 64);
  if (culpert__symtab_load(path, &t) == 0) {
    assert_int_equal(culpert__symtab_lines(t, vaddrs, n, pos), 0);
    for (size_t i = 0; i < n; i++) {
      if (pos[i].file)
        assert_true(strlen(pos[i].file) < 4096);
      for (uint32_t k = 0; k < pos[i].ninl; k++)
        if (pos[i].inl[k].name)
          assert_true(strlen(pos[i].inl[k].name) < 65536);
      found += pos[i].line != 0;
    }
  }
  culpert__symtab_free(t);
  unlink(path);
  return found;
}

/* Random damage to one debug section: a few bytes, its size, a bit in its
 * first header, or a false claim to be compressed. */
static void damage_section(unsigned char *elf, size_t len, const unsigned char *orig,
                           const char *name, uint64_t *seed, int round)
{
  const Elf64_Ehdr *eh = (const void *)orig;
  size_t off, size, index;
  memcpy(elf, orig, len);
  find_section(orig, name, &off, &size, &index);
  if (size == 0)
    return;
  Elf64_Shdr *sh = (void *)(elf + eh->e_shoff);
  *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
  switch (round % 4) {
  case 0:
    for (int k = 0; k < 4; k++) {
      *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
      elf[off + (*seed >> 33) % size] = (unsigned char)(*seed >> 17);
    }
    break;
  case 1:
    sh[index].sh_size = (*seed >> 33) % size;
    break;
  case 2:
    elf[off + (*seed >> 33) % (size < 64 ? size : 64)] ^=
        (unsigned char)(1u << ((*seed >> 40) % 8));
    break;
  case 3:
    sh[index].sh_flags |= SHF_COMPRESSED;
    if (size >= sizeof(Elf64_Chdr)) {
      Elf64_Chdr ch = {ELFCOMPRESS_ZLIB, 0, (*seed >> 20) % (1u << 30), 1};
      memcpy(elf + off, &ch, sizeof ch);
    }
    break;
  }
}

/* Damaged DWARF (line tables, units, abbreviations, strings, range lists)
 * costs answers, never a crash or a read outside the file. */
static void test_symbolize_corrupt_dwarf(void **state)
{
  (void)state;
  static const char *const sections[] = {".debug_line", ".debug_info",     ".debug_abbrev",
                                         ".debug_str",  ".debug_line_str", ".debug_rnglists"};
  char exe[PATH_MAX];
  exe_path(exe, sizeof exe);
  size_t len;
  unsigned char *orig = slurp(exe, &len);
  unsigned char *elf = malloc(len);
  assert_non_null(elf);
  size_t off, size, index;
  find_section(orig, ".debug_line", &off, &size, &index);
  if (size == 0) {
    print_message("SKIPPED: the test binary has no DWARF\n");
    free(elf);
    free(orig);
    skip();
  }

  uint64_t bias = 0;
  dl_iterate_phdr(main_bias_cb, &bias);
  uint64_t vaddrs[64];
  vaddrs[0] = (uint64_t)(uintptr_t)symbolize_fixture_static - bias;
  for (size_t i = 1; i < 64; i++)
    vaddrs[i] = vaddrs[0] + i * 97;
  assert_true(lines_of_bytes(orig, len, vaddrs, 64) > 0); /* intact: lines */

  uint64_t seed = 12345;
  for (size_t s = 0; s < sizeof sections / sizeof sections[0]; s++) {
    for (int round = 0; round < 60; round++) {
      damage_section(elf, len, orig, sections[s], &seed, round);
      lines_of_bytes(elf, len, vaddrs, 64);
    }
  }
  free(elf);
  free(orig);
}

/* The same on zlib-compressed sections (read lazily, piece by piece):
 * damaged streams lose answers, never crash or hang. */
static void test_symbolize_corrupt_compressed_dwarf(void **state)
{
  (void)state;
  static const char *const sections[] = {".debug_line", ".debug_info",     ".debug_abbrev",
                                         ".debug_str",  ".debug_line_str", ".debug_aranges"};
  size_t len, off, size, index;
  unsigned char *orig = slurp(CULPERT_FIXTURE_GZ, &len);
  unsigned char *elf = malloc(len);
  assert_non_null(elf);
  find_section(orig, ".text", &off, &size, &index);
  assert_true(size > 0);
  const Elf64_Shdr *sh = (const void *)(orig + ((const Elf64_Ehdr *)orig)->e_shoff);
  uint64_t vaddrs[64];
  for (size_t i = 0; i < 64; i++)
    vaddrs[i] = sh[index].sh_addr + (i * 7) % size;
  assert_true(lines_of_bytes(orig, len, vaddrs, 64) > 0); /* intact: lines */

  uint64_t seed = 54321;
  for (size_t s = 0; s < sizeof sections / sizeof sections[0]; s++) {
    for (int round = 0; round < 60; round++) {
      damage_section(elf, len, orig, sections[s], &seed, round);
      lines_of_bytes(elf, len, vaddrs, 64);
    }
  }
  free(elf);
  free(orig);
}

/* Resolves every address of the .text of `path` (the C++ fixture): puts
 * the first `max` that lie in inlined code in out[] and returns how many,
 * and hands `each` the name of every function inlined anywhere. */
static size_t cxx_inlined(const char *path, uint64_t *out, size_t max,
                          void (*each)(const char *, int))
{
  size_t len, off, size, index;
  unsigned char *elf = slurp(path, &len);
  find_section(elf, ".text", &off, &size, &index);
  const Elf64_Shdr *sh = (const void *)(elf + ((const Elf64_Ehdr *)elf)->e_shoff);
  uint64_t text = sh[index].sh_addr;
  free(elf);
  assert_true(size > 0);
  uint64_t *vaddrs = malloc(size * sizeof *vaddrs);
  struct culpert__srcpos *pos = malloc(size * sizeof *pos);
  assert_non_null(vaddrs);
  assert_non_null(pos);
  for (size_t i = 0; i < size; i++)
    vaddrs[i] = text + i;
  struct culpert__symtab *t;
  assert_int_equal(culpert__symtab_load(path, &t), 0);
  assert_int_equal(culpert__symtab_lines(t, vaddrs, size, pos), 0);
  size_t n = 0;
  for (size_t i = 0; i < size; i++) {
    if (pos[i].ninl > 0 && n < max)
      out[n++] = vaddrs[i];
    for (uint32_t k = 0; each && k < pos[i].ninl; k++)
      if (pos[i].inl[k].name)
        each(pos[i].inl[k].name, pos[i].inl[k].mangled);
  }
  culpert__symtab_free(t);
  free(vaddrs);
  free(pos);
  return n;
}

static int seen_plain, seen_fill, seen_lambda, seen_bare;

static void note_name(const char *name, int mangled)
{
  if (mangled)
    return;
  seen_plain = 1;
  seen_fill |= strcmp(name, "shop::Basket<fixture_cxx_work(int)::<lambda(int)> >::fill") == 0;
  seen_lambda |= strcmp(name, "fixture_cxx_work::<lambda>::operator()") == 0;
  /* A bare member name: "fill", "operator()", "push_back<...>". */
  size_t head = strcspn(name, "<(");
  int qualified = 0;
  for (size_t i = 0; i + 1 < head; i++)
    qualified |= name[i] == ':' && name[i + 1] == ':';
  if (!qualified && strncmp(name, "operator new", 12) != 0 &&
      strncmp(name, "operator delete", 15) != 0) {
    print_message("unqualified inlined function: %s\n", name);
    seen_bare = 1;
  }
}

/* Inlined C++ functions without a linkage name (GCC gives none to the
 * functions around a lambda of an extern "C" function) are named with
 * their namespaces, classes and enclosing function, and are not marked
 * for demangling. */
static void test_symbolize_qualifies_plain_names(void **state)
{
  (void)state;
  uint64_t any[1];
  assert_true(cxx_inlined(CULPERT_FIXTURE_CXX, any, 1, note_name) > 0);
  if (!seen_plain) {
    print_message("SKIPPED: the compiler gave every inlined function a linkage name\n");
    skip();
  }
  assert_true(seen_fill);
  assert_true(seen_lambda);
  assert_false(seen_bare);
}

/* Damaged DWARF of C++ (whose names take walks of the unit's tree for
 * the scopes around a declaration) costs answers, never a crash, a hang
 * or a read outside the file. */
static void test_symbolize_corrupt_cxx_dwarf(void **state)
{
  (void)state;
  static const char *const sections[] = {".debug_info", ".debug_abbrev", ".debug_str"};
  uint64_t vaddrs[64];
  size_t n = cxx_inlined(CULPERT_FIXTURE_CXX, vaddrs, 64, NULL);
  assert_true(n > 0);
  size_t len;
  unsigned char *orig = slurp(CULPERT_FIXTURE_CXX, &len);
  unsigned char *elf = malloc(len);
  assert_non_null(elf);
  uint64_t seed = 777;
  for (size_t s = 0; s < sizeof sections / sizeof sections[0]; s++) {
    for (int round = 0; round < 120; round++) {
      damage_section(elf, len, orig, sections[s], &seed, round);
      lines_of_bytes(elf, len, vaddrs, n);
    }
  }
  free(elf);
  free(orig);
}

/* A section handed to the DWARF reader as if it were filled lazily: every
 * byte is there, and fill() only records how far it was asked to go. */
struct counted {
  struct culpert__dwarf_lazy lazy; /* first: fill() gets a pointer to it */
  size_t len;
  size_t asked; /* furthest byte asked for */
  unsigned calls;
};

static size_t counted_fill(struct culpert__dwarf_lazy *lazy, size_t upto)
{
  struct counted *c = (struct counted *)(void *)lazy;
  c->calls++;
  if (upto > c->asked)
    c->asked = upto;
  return c->len;
}

/* The DWARF sections of `elf` (this test binary), each handed out as a
 * counted section. Returns 0 when it has no DWARF with a .debug_str. */
static const char *const counted_names[] = {".debug_info",     ".debug_abbrev", ".debug_line",
                                            ".debug_line_str", ".debug_str",    ".debug_aranges",
                                            ".debug_rnglists"};
enum { COUNTED_ABBREV = 1, COUNTED_STR = 4, COUNTED_N = 7 };

static int counted_dwarf(const unsigned char *elf, struct culpert__dwarf *d,
                         struct counted c[COUNTED_N])
{
  struct culpert__dwarf_section *dst[] = {&d->info, &d->abbrev,  &d->line,    &d->line_str,
                                          &d->str,  &d->aranges, &d->rnglists};
  memset(d, 0, sizeof *d);
  memset(c, 0, COUNTED_N * sizeof *c);
  for (size_t i = 0; i < COUNTED_N; i++) {
    size_t off, size, index;
    find_section(elf, counted_names[i], &off, &size, &index);
    if (size == 0)
      continue;
    c[i].lazy.fill = counted_fill;
    c[i].lazy.piecewise = 1;
    c[i].len = size;
    dst[i]->p = elf + off;
    dst[i]->len = size;
    dst[i]->lazy = &c[i].lazy;
  }
  return d->info.p && d->str.p && d->aranges.p;
}

/* The test binary's bytes, its load bias in *bias, and its DWARF with
 * every section read counted; skips the test when the binary has no
 * .debug_str or .debug_aranges. */
static unsigned char *self_counted_dwarf(struct culpert__dwarf *d, struct counted *c,
                                         uint64_t *bias)
{
  char exe[PATH_MAX];
  exe_path(exe, sizeof exe);
  size_t len;
  unsigned char *elf = slurp(exe, &len);
  if (!counted_dwarf(elf, d, c)) {
    print_message("SKIPPED: the test binary has no DWARF with .debug_str and .debug_aranges\n");
    free(elf);
    skip();
  }
  *bias = 0;
  dl_iterate_phdr(main_bias_cb, bias);
  return elf;
}

/* The exit reads only what the profile needs: resolving the line of a
 * function with no inlined calls takes no string from .debug_str (names
 * there are those of functions and types; with libc6-dbg's compressed
 * sections, each string read meant inflating .debug_str up to it, and
 * every unit walked read all of its names). */
static void test_symbolize_strings_read_only_when_used(void **state)
{
  (void)state;
  struct culpert__dwarf d;
  struct counted c[COUNTED_N];
  uint64_t bias;
  unsigned char *elf = self_counted_dwarf(&d, c, &bias);
  uint64_t vaddr = (uint64_t)(uintptr_t)symbolize_fixture_static - bias + 4;
  struct culpert__srcpos pos;
  struct culpert__pool pool = {0};
  assert_int_equal(culpert__dwarf_resolve(&d, &vaddr, 1, &pos, &pool), 0);
  assert_non_null(pos.file);
  assert_non_null(strstr(pos.file, "test_symbolize.c"));
  assert_int_equal(pos.ninl, 0);
  assert_true(pos.line >= FIXTURE_STATIC_LINE && pos.line < FIXTURE_STATIC_LINE + 5);
  if (c[COUNTED_STR].calls != 0)
    fail_msg(".debug_str read %u times, up to byte %zu of %zu", c[COUNTED_STR].calls,
             c[COUNTED_STR].asked, c[COUNTED_STR].len);
  culpert__pool_free(&pool);
  free(elf);
}

extern void _start(void);

/* How many units resolving `vaddr` opens (each reads its abbreviation
 * table once), with or without .debug_aranges. */
static unsigned units_opened(const unsigned char *elf, uint64_t vaddr, int with_aranges)
{
  struct culpert__dwarf d;
  struct counted c[COUNTED_N];
  assert_true(counted_dwarf(elf, &d, c));
  if (!with_aranges)
    memset(&d.aranges, 0, sizeof d.aranges);
  struct culpert__srcpos pos;
  struct culpert__pool pool = {0};
  assert_int_equal(culpert__dwarf_resolve(&d, &vaddr, 1, &pos, &pool), 0);
  assert_null(pos.file);
  culpert__pool_free(&pool);
  return c[COUNTED_ABBREV].calls;
}

/* _start (crt1.o, no DWARF) ends every libunwind stack. No range of
 * .debug_aranges covers it, so it may only be in a unit that lists no
 * range there: the others are not opened (opening one reads its
 * abbreviation table), and the exit's cost does not grow with the number
 * of units in the program. Without .debug_aranges every unit is opened. */
static void test_symbolize_uncovered_address_opens_few_units(void **state)
{
  (void)state;
  struct culpert__dwarf d;
  struct counted c[COUNTED_N];
  uint64_t bias;
  unsigned char *elf = self_counted_dwarf(&d, c, &bias);
  void (*start)(void) = _start;
  uintptr_t at;
  memcpy(&at, &start, sizeof at);
  uint64_t vaddr = (uint64_t)at - bias;
  unsigned with = units_opened(elf, vaddr, 1);
  unsigned without = units_opened(elf, vaddr, 0);
  free(elf);
  print_message("units opened for _start: %u with .debug_aranges, %u without\n", with, without);
  assert_true(without >= 4);
  assert_true(with * 2 <= without);
}

/* "basename:line" of a path and line, into out. */
static void base_line(char *out, size_t len, const char *path, unsigned long line)
{
  const char *b = path ? strrchr(path, '/') : NULL;
  snprintf(out, len, "%s:%lu", b ? b + 1 : path ? path : "??", path ? line : 0);
}

/* Our source chain of `n` addresses of `file`, innermost first, one
 * "basename:line ..." string per address. */
static char **our_chains(const char *file, const uint64_t *vaddrs, size_t n)
{
  struct culpert__symtab *t;
  assert_int_equal(culpert__symtab_load(file, &t), 0);
  struct culpert__srcpos *pos = calloc(n, sizeof *pos);
  char **chains = calloc(n, sizeof *chains);
  assert_non_null(pos);
  assert_non_null(chains);
  assert_int_equal(culpert__symtab_lines(t, vaddrs, n, pos), 0);
  for (size_t i = 0; i < n; i++) {
    char buf[4096], item[512];
    base_line(buf, sizeof buf, pos[i].file, pos[i].line);
    for (uint32_t k = pos[i].ninl; k-- > 0;) {
      base_line(item, sizeof item, pos[i].inl[k].call_file, pos[i].inl[k].call_line);
      size_t used = strlen(buf);
      snprintf(buf + used, sizeof buf - used, " %s", item);
    }
    chains[i] = strdup(buf);
    assert_non_null(chains[i]);
  }
  free(pos);
  culpert__symtab_free(t);
  return chains;
}

/* The same from `llvm-symbolizer --inlining`, or NULL when it is missing. */
static char **llvm_chains(const char *file, const uint64_t *vaddrs, size_t n)
{
  if (system("command -v llvm-symbolizer >/dev/null 2>&1") != 0)
    return NULL;
  char in[] = "/tmp/culpert-test-llvm-XXXXXX";
  int fd = mkstemp(in);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  assert_non_null(f);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "0x%llx\n", (unsigned long long)vaddrs[i]);
  fclose(f);
  char cmd[PATH_MAX * 2 + 128];
  snprintf(cmd, sizeof cmd, "llvm-symbolizer --obj='%s' --inlining --functions=none < %s", file,
           in);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  char **chains = calloc(n, sizeof *chains);
  assert_non_null(chains);
  char line[4096], buf[4096] = "";
  size_t i = 0;
  while (fgets(line, sizeof line, p) && i < n) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0] == '\0') { /* end of one address */
      chains[i++] = strdup(buf);
      buf[0] = '\0';
      continue;
    }
    /* "path:line:column" */
    char *c2 = strrchr(line, ':');
    if (c2)
      *c2 = '\0';
    char *c1 = strrchr(line, ':');
    unsigned long ln = c1 ? strtoul(c1 + 1, NULL, 10) : 0;
    if (c1)
      *c1 = '\0';
    char item[512];
    base_line(item, sizeof item, strcmp(line, "??") == 0 ? NULL : line, ln);
    size_t used = strlen(buf);
    snprintf(buf + used, sizeof buf - used, "%s%s", used ? " " : "", item);
  }
  pclose(p);
  unlink(in);
  assert_int_equal(i, n);
  return chains;
}

/* The separate debug file of the libc this test runs with (libc6-dbg:
 * compressed DWARF 5 with .debug_aranges), into buf; 0 when absent. */
static int libc_debug_file(char *buf, size_t len)
{
  struct culpert__symbolizer *s;
  int found = 0;
  assert_int_equal(culpert__symbolize_open(&s), 0);
  for (size_t i = 0; i < culpert__symbolize_nmaps(s) && !found; i++) {
    const struct culpert__smap *m = culpert__symbolize_map(s, i);
    const char *b = strrchr(m->path, '/');
    if (!b || strncmp(b, "/libc.so", 8) != 0 || strlen(m->build_id) < 4)
      continue;
    snprintf(buf, len, "/usr/lib/debug/.build-id/%.2s/%s.debug", m->build_id, m->build_id + 2);
    found = access(buf, R_OK) == 0;
  }
  culpert__symbolize_close(s);
  return found;
}

/* File, line and inlined calls agree with llvm-symbolizer on addresses all
 * over the code of this executable (DWARF 5), of the DWARF 4 fixture, of
 * the fixture built with zlib-compressed debug sections, and of libc's
 * separate debug file when libc6-dbg is installed (compressed sections read
 * lazily, units found through .debug_aranges). Paths are compared by base
 * name: llvm-symbolizer prefixes relative paths with the compilation
 * directory, culpert keeps them as recorded. */
static void test_symbolize_matches_llvm_symbolizer(void **state)
{
  (void)state;
  char exe[PATH_MAX], libc_dbg[PATH_MAX];
  exe_path(exe, sizeof exe);
  const char *files[] = {exe, CULPERT_FIXTURE_DWARF4, CULPERT_FIXTURE_GZ, libc_dbg};
  size_t nfiles = libc_debug_file(libc_dbg, sizeof libc_dbg) ? 4 : 3;
  if (nfiles == 3)
    print_message("libc6-dbg not installed: libc's debug file not cross-checked\n");
  for (size_t f = 0; f < nfiles; f++) {
    size_t len, off, size, index;
    unsigned char *elf = slurp(files[f], &len);
    find_section(elf, ".text", &off, &size, &index);
    const Elf64_Shdr *sh = (const void *)(elf + ((const Elf64_Ehdr *)elf)->e_shoff);
    uint64_t text = sh[index].sh_addr;
    free(elf);
    assert_true(size > 0);

    enum { N = 400 };
    uint64_t vaddrs[N];
    uint64_t seed = 99;
    for (size_t i = 0; i < N; i++) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      vaddrs[i] = text + (seed >> 20) % size;
    }
    char **theirs = llvm_chains(files[f], vaddrs, N);
    if (!theirs) {
      print_message("SKIPPED: llvm-symbolizer not installed, no cross-check\n");
      skip();
    }
    char **ours = our_chains(files[f], vaddrs, N);
    for (size_t i = 0; i < N; i++) {
      if (strcmp(ours[i], theirs[i]) != 0)
        fail_msg("%s 0x%llx:\n  culpert         %s\n  llvm-symbolizer %s", files[f],
                 (unsigned long long)vaddrs[i], ours[i], theirs[i]);
      free(ours[i]);
      free(theirs[i]);
    }
    free(ours);
    free(theirs);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_symbolize_main_mapping_matches_system),
      cmocka_unit_test(test_symbolize_static_function_from_symtab),
      cmocka_unit_test(test_symbolize_unknown_address),
      cmocka_unit_test(test_symbolize_vdso),
      cmocka_unit_test(test_symbolize_symtab_of_file),
      cmocka_unit_test(test_symbolize_lines_dwarf5),
      cmocka_unit_test(test_symbolize_dlopen_dwarf4_then_dlclose),
      cmocka_unit_test(test_symbolize_unloaded_object_keeps_names),
      cmocka_unit_test(test_symbolize_without_loader_locks),
      cmocka_unit_test(test_symbolize_truncated_elf),
      cmocka_unit_test(test_symbolize_corrupt_elf),
      cmocka_unit_test(test_symbolize_corrupt_dwarf),
      cmocka_unit_test(test_symbolize_corrupt_compressed_dwarf),
      cmocka_unit_test(test_symbolize_qualifies_plain_names),
      cmocka_unit_test(test_symbolize_corrupt_cxx_dwarf),
      cmocka_unit_test(test_symbolize_strings_read_only_when_used),
      cmocka_unit_test(test_symbolize_uncovered_address_opens_few_units),
      cmocka_unit_test(test_symbolize_matches_llvm_symbolizer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
