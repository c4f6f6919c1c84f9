/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * symbolize.c: mappings, build ids and ELF symbol tables of the running
 * process.
 *
 * Runs in the profile writer (never inside malloc; it allocates, opens and
 * maps files). Everything read from a file is untrusted: headers, section
 * tables, string offsets and symbol entries are checked against the file
 * size before use, so a truncated or corrupt object only loses its names.
 * Memory the loader mapped (program headers, build-id notes, the vdso) is
 * trusted as the loader trusted it.
 */
#include "loader.h"
#include "symbolize.h"

#include "dwarf.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

struct sym {
  uint64_t addr;
  uint64_t size;
  const char *name;
};

struct culpert__symtab {
  struct sym *syms; /* sorted by addr */
  size_t nsyms;
  int full;  /* from .symtab */
  void *map; /* the file's bytes (names point here), NULL for memory */
  size_t maplen;
  struct culpert__pool pool; /* what culpert__symtab_lines results point to */
};

/* One loaded object. */
struct object {
  char *path;     /* file to read symbols from; NULL for the vdso */
  char *reopen;   /* where the loaded build can still be opened when the file at
                   * `path` is gone or replaced: /proc/self/exe, map_files */
  uint64_t bias;  /* load bias: runtime address = bias + ELF vaddr */
  uint64_t image; /* vdso only: address and size of its ELF image */
  uint64_t image_len;
  char build_id[129];
  int loaded;                    /* files read (or attempted) */
  struct culpert__symtab *tab;   /* the object's own file, NULL if unreadable */
  struct culpert__symtab *dbg;   /* its separate debug file, if any */
  struct culpert__symtab *names; /* whichever of the two gives symbols */
  struct culpert__symtab *dwarf; /* whichever has .debug_line, or NULL */
};

struct culpert__symbolizer {
  struct object *objs;
  size_t nobjs;
  struct culpert__smap *maps;
  size_t *map_obj; /* object index of each mapping */
  size_t nmaps;
  size_t *by_start; /* mapping indices sorted by start address */
  char *dl_name;    /* last dladdr() name, owned copy */
  int err;
};

/* ---------------------------------------------------------------------- */
/* ELF symbol tables from bytes in memory                                  */

/*
 * Sorts syms[0..n) by address, sized symbols before unsized ones at the
 * same address (so a lookup lands on the one with a size), keeping the
 * table order otherwise. A stable partition by sizedness, then a stable
 * least-significant-digit radix sort on the address, a byte per pass,
 * skipping bytes all addresses share: a few linear passes where a
 * comparison sort of libc's ~10 000 functions took about 7 million
 * instructions at every exit. `tmp` holds n entries.
 */
static void sort_syms(struct sym *syms, struct sym *tmp, size_t n)
{
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (syms[i].size != 0)
      tmp[k++] = syms[i];
  for (size_t i = 0; i < n; i++)
    if (syms[i].size == 0)
      tmp[k++] = syms[i];
  struct sym *from = tmp, *to = syms;
  uint64_t all_or = 0, all_and = ~(uint64_t)0;
  for (size_t i = 0; i < n; i++) {
    all_or |= from[i].addr;
    all_and &= from[i].addr;
  }
  for (unsigned shift = 0; shift < 64; shift += 8) {
    if ((((all_or ^ all_and) >> shift) & 0xffu) == 0)
      continue; /* every address has the same byte here */
    size_t start[256] = {0};
    for (size_t i = 0; i < n; i++)
      start[(from[i].addr >> shift) & 0xffu]++;
    size_t sum = 0;
    for (unsigned b = 0; b < 256; b++) {
      size_t c = start[b];
      start[b] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++)
      to[start[(from[i].addr >> shift) & 0xffu]++] = from[i];
    struct sym *t = from;
    from = to;
    to = t;
  }
  if (from != syms)
    memcpy(syms, from, n * sizeof *syms);
}

/* Bounds check: [off, off + len) lies inside a buffer of `size` bytes. */
static int in_bounds(uint64_t off, uint64_t len, size_t size)
{
  return off <= size && len <= size - off;
}

/* Fills t->syms from the symbol section of `type` in the ELF image
 * [base, base + size). Returns the number of symbols read, 0 when the
 * section is absent, -ENOEXEC for a malformed image, -ENOMEM. */
static long read_symbols(struct culpert__symtab *t, const unsigned char *base, size_t size,
                         uint32_t type)
{
  const Elf64_Ehdr *eh = (const void *)base;
  if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB)
    return -ENOEXEC;
  if (eh->e_shnum == 0 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
      !in_bounds(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), size) ||
      eh->e_shoff % _Alignof(Elf64_Shdr) != 0)
    return -ENOEXEC;
  const Elf64_Shdr *sh = (const void *)(base + eh->e_shoff);
  size_t nsh = eh->e_shnum;

  for (size_t i = 0; i < nsh; i++) {
    if (sh[i].sh_type != type)
      continue;
    const Elf64_Shdr *ss = &sh[i];
    if (ss->sh_entsize != sizeof(Elf64_Sym) || !in_bounds(ss->sh_offset, ss->sh_size, size) ||
        ss->sh_offset % _Alignof(Elf64_Sym) != 0 || ss->sh_link >= nsh)
      return -ENOEXEC;
    const Elf64_Shdr *str = &sh[ss->sh_link];
    if (str->sh_type != SHT_STRTAB || !in_bounds(str->sh_offset, str->sh_size, size))
      return -ENOEXEC;
    const Elf64_Sym *es = (const void *)(base + ss->sh_offset);
    size_t nes = ss->sh_size / sizeof(Elf64_Sym);
    const char *strs = (const char *)base + str->sh_offset;
    size_t strsz = str->sh_size;

    struct sym *syms = malloc((nes ? nes : 1) * sizeof *syms);
    if (!syms)
      return -ENOMEM;
    /* A string table that ends in a NUL (every linker writes one so)
     * terminates every name in it: no search per symbol. */
    int terminated = strsz > 0 && strs[strsz - 1] == '\0';
    size_t n = 0;
    for (size_t k = 0; k < nes; k++) {
      unsigned st = ELF64_ST_TYPE(es[k].st_info);
      if ((st != STT_FUNC && st != STT_GNU_IFUNC) || es[k].st_shndx == SHN_UNDEF ||
          es[k].st_value == 0 || es[k].st_name == 0 || es[k].st_name >= strsz)
        continue;
      const char *name = strs + es[k].st_name;
      if (!terminated && !memchr(name, '\0', strsz - es[k].st_name))
        continue;
      syms[n].addr = es[k].st_value;
      syms[n].size = es[k].st_size;
      syms[n].name = name;
      n++;
    }
    struct sym *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!tmp) {
      free(syms);
      return -ENOMEM;
    }
    sort_syms(syms, tmp, n);
    free(tmp);
    free(t->syms);
    t->syms = syms;
    t->nsyms = n;
    t->full = type == SHT_SYMTAB;
    return (long)n;
  }
  return 0;
}

/* .symtab when present (and not empty), else .dynsym. */
static int read_best_symbols(struct culpert__symtab *t, const unsigned char *base, size_t size)
{
  long n = read_symbols(t, base, size, SHT_SYMTAB);
  if (n > 0)
    return 0;
  if (n < 0 && n != -ENOEXEC)
    return (int)n;
  n = read_symbols(t, base, size, SHT_DYNSYM);
  return n < 0 ? (int)n : 0;
}

/* Maps the file at `path` without reading any symbol table yet. */
static int symtab_map(const char *path, struct culpert__symtab **out)
{
  struct culpert__symtab *t = NULL;
  struct stat st;
  int rc = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  *out = NULL;
  if (fd < 0) {
    rc = -errno;
    goto out;
  }
  if (fstat(fd, &st) != 0) {
    rc = -errno;
    goto out;
  }
  if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
    rc = -ENOEXEC;
    goto out;
  }
  t = calloc(1, sizeof *t);
  if (!t) {
    rc = -ENOMEM;
    goto out;
  }
  t->maplen = (size_t)st.st_size;
  t->map = mmap(NULL, t->maplen, PROT_READ, MAP_PRIVATE, fd, 0);
  if (t->map == MAP_FAILED) {
    t->map = NULL;
    rc = -errno;
    goto out;
  }

out:
  if (fd >= 0)
    close(fd);
  if (rc) {
    culpert__symtab_free(t);
    t = NULL;
  }
  *out = t;
  return rc;
}

/* Reads the symbols of a mapped file: .symtab, else .dynsym. */
static int symtab_read(struct culpert__symtab *t)
{
  int rc = read_best_symbols(t, t->map, t->maplen);
  if (rc == 0 && t->nsyms == 0 && read_symbols(t, t->map, t->maplen, SHT_SYMTAB) == -ENOEXEC)
    rc = -ENOEXEC;
  return rc;
}

int culpert__symtab_load(const char *path, struct culpert__symtab **out)
{
  int rc = symtab_map(path, out);
  if (rc == 0) {
    rc = symtab_read(*out);
    if (rc != 0) {
      culpert__symtab_free(*out);
      *out = NULL;
    }
  }
  return rc;
}

/* Whether the mapped file has a section of type `type` (section table only). */
static int has_section_type(const struct culpert__symtab *t, uint32_t type)
{
  const Elf64_Ehdr *eh = t->map;
  if (t->maplen < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
      !in_bounds(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), t->maplen) ||
      eh->e_shoff % _Alignof(Elf64_Shdr) != 0)
    return 0;
  const Elf64_Shdr *sh = (const void *)((const unsigned char *)t->map + eh->e_shoff);
  for (size_t i = 0; i < eh->e_shnum; i++)
    if (sh[i].sh_type == type)
      return 1;
  return 0;
}

/* The FUNC symbol containing vaddr, or NULL. */
static const struct sym *lookup(const struct culpert__symtab *t, uint64_t vaddr)
{
  if (!t || t->nsyms == 0)
    return NULL;
  /* Last symbol starting at or before vaddr. */
  size_t lo = 0, hi = t->nsyms;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->syms[mid].addr <= vaddr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return NULL;
  /* A few steps back cover aliases and symbols nested in a bigger one. */
  const struct sym *unsized = NULL;
  for (size_t i = lo, steps = 0; i > 0 && steps < 8; i--, steps++) {
    const struct sym *s = &t->syms[i - 1];
    if (s->size == 0) {
      if (!unsized && i == lo)
        unsized = s;
      continue;
    }
    if (vaddr - s->addr < s->size)
      return s;
  }
  /* An assembly label without a size: trust it only as the nearest one. */
  return unsized;
}

const char *culpert__symtab_lookup(const struct culpert__symtab *t, uint64_t vaddr)
{
  const struct sym *s = lookup(t, vaddr);
  return s ? s->name : NULL;
}

size_t culpert__symtab_count(const struct culpert__symtab *t)
{
  return t ? t->nsyms : 0;
}

int culpert__symtab_is_full(const struct culpert__symtab *t)
{
  return t ? t->full : 0;
}

void culpert__symtab_free(struct culpert__symtab *t)
{
  if (!t)
    return;
  free(t->syms);
  if (t->map)
    munmap(t->map, t->maplen);
  culpert__pool_free(&t->pool);
  free(t);
}

/* ---------------------------------------------------------------------- */
/* Loaded objects                                                          */

/* Hex of the NT_GNU_BUILD_ID note among the notes at p (left bytes) into
 * hex; 1 when found. */
static int notes_build_id(const unsigned char *p, size_t left, char *hex, size_t hexlen)
{
  while (left >= sizeof(ElfW(Nhdr))) {
    const ElfW(Nhdr) *nh = (const void *)p;
    size_t namesz = (nh->n_namesz + 3u) & ~(size_t)3;
    size_t descsz = (nh->n_descsz + 3u) & ~(size_t)3;
    if (namesz > left - sizeof *nh || descsz > left - sizeof *nh - namesz)
      break;
    const unsigned char *name = p + sizeof *nh;
    const unsigned char *desc = name + namesz;
    if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
        nh->n_descsz * 2 + 1 <= hexlen) {
      for (size_t k = 0; k < nh->n_descsz; k++)
        snprintf(hex + 2 * k, 3, "%02x", desc[k]);
      return 1;
    }
    p += sizeof *nh + namesz + descsz;
    left -= sizeof *nh + namesz + descsz;
  }
  return 0;
}

/* Hex of the NT_GNU_BUILD_ID note in the PT_NOTE segments of a loaded
 * object ("" when none). The notes are in mapped memory. */
static void note_build_id(const struct dl_phdr_info *info, char *hex, size_t hexlen)
{
  hex[0] = '\0';
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_NOTE &&
        notes_build_id((const unsigned char *)(info->dlpi_addr + ph->p_vaddr), ph->p_filesz, hex,
                       hexlen))
      return;
  }
  hex[0] = '\0';
}

/* Whether the mapped file `t` is the build that is loaded: its PT_NOTE
 * segments (read through its program headers, which every loadable file
 * has) hold the build id `want`. An object loaded without a build id has
 * nothing to compare and is taken as it is. A file replaced on disk since
 * it was loaded (a package upgrade under a running service) is not. */
static int same_build(const struct culpert__symtab *t, const char *want)
{
  if (want[0] == '\0')
    return 1;
  const unsigned char *base = t->map;
  const Elf64_Ehdr *eh = (const void *)base;
  if (t->maplen < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_phentsize != sizeof(Elf64_Phdr) ||
      !in_bounds(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), t->maplen) ||
      eh->e_phoff % _Alignof(Elf64_Phdr) != 0)
    return 0;
  const Elf64_Phdr *ph = (const void *)(base + eh->e_phoff);
  char hex[129];
  for (size_t i = 0; i < eh->e_phnum; i++)
    if (ph[i].p_type == PT_NOTE && in_bounds(ph[i].p_offset, ph[i].p_filesz, t->maplen) &&
        notes_build_id(base + ph[i].p_offset, ph[i].p_filesz, hex, sizeof hex))
      return strcmp(hex, want) == 0;
  return 0;
}

struct collect {
  struct culpert__symbolizer *s;
  size_t cap_objs;
  size_t cap_maps;
  long page;
  uint64_t self_addr;
  uint64_t vdso;
  int first;
};

/* One line of /proc/self/maps: when its range holds `at` and it maps a
 * file, that file's path into out[len]. */
static int maps_line_path(const char *line, uintptr_t at, char *out, size_t len)
{
  char *end;
  unsigned long long lo = strtoull(line, &end, 16);
  if (*end != '-')
    return 0;
  unsigned long long hi = strtoull(end + 1, &end, 16);
  if (at < lo || at >= hi)
    return 0;
  const char *p = end;
  for (int field = 0; field < 4; field++) { /* perms, offset, device, inode */
    while (*p == ' ')
      p++;
    while (*p != '\0' && *p != ' ')
      p++;
  }
  while (*p == ' ')
    p++;
  size_t n = strlen(p);
  if (*p != '/' || n >= len)
    return 0;
  memcpy(out, p, n + 1);
  return 1;
}

int culpert__main_exe_path(char *out, size_t len)
{
  /* /proc/self/exe, in one system call, unless the dynamic loader was run
   * as a command (`ld.so ./prog`): /proc/self/exe is the loader then, and
   * the kernel, which started no interpreter, left AT_BASE at 0. */
  if (getauxval(AT_BASE) != 0 && len > 1) {
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    if (n > 0 && (size_t)n < len - 1) { /* else perhaps cut short */
      out[n] = '\0';
      return 0;
    }
  }
  /* Else the file mapped where the executable's program headers are (what
   * the loader put in AT_PHDR), from /proc/self/maps, read with open and
   * read alone (no stdio), as the signal-time writer needs. */
  uintptr_t at = (uintptr_t)getauxval(AT_PHDR);
  int fd = at != 0 ? open("/proc/self/maps", O_RDONLY | O_CLOEXEC) : -1;
  int found = 0;
  if (fd >= 0) {
    char buf[4096];
    size_t have = 0;
    ssize_t got;
    while (!found && (got = read(fd, buf + have, sizeof buf - 1 - have)) > 0) {
      have += (size_t)got;
      buf[have] = '\0';
      char *line = buf, *nl;
      while (!found && (nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
        *nl = '\0';
        found = maps_line_path(line, at, out, len);
        line = nl + 1;
      }
      size_t rest = have - (size_t)(line - buf);
      if (rest == sizeof buf - 1)
        rest = 0; /* a line longer than the buffer: not one with a usable path */
      memmove(buf, line, rest);
      have = rest;
    }
    close(fd);
  }
  if (found)
    return 0;
  ssize_t n = len > 1 ? readlink("/proc/self/exe", out, len - 1) : -1;
  if (n <= 0)
    return -1;
  out[n] = '\0';
  return 0;
}

static char *main_exe_path(void)
{
  char buf[PATH_MAX];
  if (culpert__main_exe_path(buf, sizeof buf) != 0)
    return strdup("/proc/self/exe");
  /* The kernel's mark of a file deleted (or replaced) since: the name stays
   * the program's, its bytes come from /proc/self/exe. */
  size_t n = strlen(buf), k = sizeof " (deleted)" - 1;
  if (n > k && strcmp(buf + n - k, " (deleted)") == 0)
    buf[n - k] = '\0';
  return strdup(buf);
}

/* Adds one object and its executable segments. `build_id` is the one
 * noted when an unloaded object was still mapped, or NULL: read it from
 * the mapped notes. An unloaded object is never the executable or the
 * vdso, and has no /proc/self/map_files entry any more. */
static int add_object(const struct dl_phdr_info *info, struct collect *c, const char *build_id)
{
  struct culpert__symbolizer *s = c->s;
  int unloaded = build_id != NULL;
  int is_main = c->first && !unloaded;
  c->first = 0;

  /* Where the ELF header sits: the load segment that maps file offset 0. */
  uint64_t header = 0;
  uint64_t image_end = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    if (ph->p_offset == 0)
      header = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_vaddr + ph->p_memsz > image_end)
      image_end = ph->p_vaddr + ph->p_memsz;
  }
  int is_vdso = !is_main && !unloaded && c->vdso != 0 && header == c->vdso;

  if (s->nobjs == c->cap_objs) {
    size_t cap = c->cap_objs ? c->cap_objs * 2 : 16;
    struct object *o = realloc(s->objs, cap * sizeof *o);
    if (!o)
      goto nomem;
    s->objs = o;
    c->cap_objs = cap;
  }
  struct object *obj = &s->objs[s->nobjs];
  memset(obj, 0, sizeof *obj);
  obj->bias = info->dlpi_addr;
  if (is_vdso) {
    obj->image = header;
    obj->image_len = image_end;
  } else if (is_main) {
    obj->path = main_exe_path();
    obj->reopen = strdup("/proc/self/exe");
  } else {
    /* An unnamed object other than the executable has no file to read:
     * its path stays "" and only dladdr() can name its code. */
    obj->path = strdup(info->dlpi_name ? info->dlpi_name : "");
  }
  if (!is_vdso && !obj->path)
    goto nomem;
  if (unloaded)
    snprintf(obj->build_id, sizeof obj->build_id, "%s", build_id);
  else
    note_build_id(info, obj->build_id, sizeof obj->build_id);
  s->nobjs++;

  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || ph->p_memsz == 0)
      continue;
    if (s->nmaps == c->cap_maps) {
      size_t cap = c->cap_maps ? c->cap_maps * 2 : 16;
      struct culpert__smap *m = realloc(s->maps, cap * sizeof *m);
      if (!m)
        goto nomem;
      s->maps = m;
      size_t *mo = realloc(s->map_obj, cap * sizeof *mo);
      if (!mo)
        goto nomem;
      s->map_obj = mo;
      c->cap_maps = cap;
    }
    struct culpert__smap *m = &s->maps[s->nmaps];
    uint64_t page = (uint64_t)c->page;
    uint64_t start = info->dlpi_addr + ph->p_vaddr;
    uint64_t aligned = start & ~(page - 1);
    memset(m, 0, sizeof *m);
    m->start = aligned;
    m->limit = (start + ph->p_memsz + page - 1) & ~(page - 1);
    m->offset = ph->p_offset >= start - aligned ? ph->p_offset - (start - aligned) : 0;
    m->path = is_vdso ? "[vdso]" : obj->path;
    memcpy(m->build_id, obj->build_id, sizeof m->build_id);
    m->is_main = is_main;
    m->is_vdso = is_vdso;
    m->is_self = !is_main && c->self_addr >= start && c->self_addr < start + ph->p_memsz;
    s->map_obj[s->nmaps] = s->nobjs - 1;
    s->nmaps++;
    if (!obj->reopen && !is_vdso && !unloaded && obj->path && obj->path[0] == '/') {
      /* The kernel's handle on this very mapping: opens the loaded file
       * even after it was replaced on disk, where permitted. */
      char alt[64];
      snprintf(alt, sizeof alt, "/proc/self/map_files/%llx-%llx", (unsigned long long)m->start,
               (unsigned long long)m->limit);
      if (!(obj->reopen = strdup(alt)))
        goto nomem;
    }
  }
  return 0;

nomem:
  s->err = -ENOMEM;
  return 1;
}

static int collect_object(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)size;
  return add_object(info, data, NULL);
}

struct start_index {
  uint64_t start;
  size_t map;
};

static int start_cmp(const void *a, const void *b)
{
  const struct start_index *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Whether [p, p + n) is mapped: mincore fails with ENOMEM on any page that
 * is not. */
static int mapped(const void *p, size_t n, long page)
{
  uintptr_t first = (uintptr_t)p & ~((uintptr_t)page - 1u);
  uintptr_t end = (uintptr_t)p + n;
  unsigned char vec[8];
  if (n == 0 || end < (uintptr_t)p || (end - first + (uintptr_t)page - 1u) / (uintptr_t)page > 8)
    return 0;
  return mincore((void *)first, end - first, vec) == 0;
}

/* The executable's program headers from the auxiliary vector, unless the
 * kernel loaded another program (the dynamic loader run as a command,
 * `ld.so ./prog`): then no PT_PHDR sits at the address given. */
static int main_phdrs(const struct link_map *m, struct dl_phdr_info *info)
{
  const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
  size_t n = getauxval(AT_PHNUM);
  int here = 0;
  for (size_t i = 0; ph != NULL && i < n; i++)
    here |= ph[i].p_type == PT_PHDR && m->l_addr + ph[i].p_vaddr == (uintptr_t)ph;
  if (!here)
    return 0;
  info->dlpi_phdr = ph;
  info->dlpi_phnum = (ElfW(Half))n;
  return 1;
}

/*
 * The loaded objects without the loader's lock: the list the loader keeps
 * for debuggers (_r_debug.r_map, the main executable first, in load order,
 * the vdso included: the same objects dl_iterate_phdr reports for the base
 * namespace). The program headers come from each object's ELF header,
 * mapped at its load address (for an executable linked at a fixed
 * address, from the auxiliary vector); an object whose header is not there
 * (or not mapped) is left out.
 */
/* The program headers of a loaded shared object, from its ELF header at
 * its load address; 0 when they are not there or not mapped. */
static int link_map_phdrs(const struct link_map *m, struct dl_phdr_info *info, long page)
{
  memset(info, 0, sizeof *info);
  info->dlpi_addr = m->l_addr;
  info->dlpi_name = m->l_name;
  const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)m->l_addr;
  if (m->l_addr == 0 || !mapped(eh, sizeof *eh, page) ||
      memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phentsize != sizeof(ElfW(Phdr)))
    return 0;
  info->dlpi_phdr = (const ElfW(Phdr) *)(m->l_addr + eh->e_phoff);
  info->dlpi_phnum = eh->e_phnum;
  return mapped(info->dlpi_phdr, info->dlpi_phnum * sizeof(ElfW(Phdr)), page);
}

static void walk_link_maps(struct collect *c)
{
  for (struct link_map *m = _r_debug.r_map; m != NULL; m = m->l_next) {
    struct dl_phdr_info info;
    int ok = link_map_phdrs(m, &info, c->page);
    if (!ok && m == _r_debug.r_map) /* an executable linked at a fixed address */
      ok = main_phdrs(m, &info) &&
           mapped(info.dlpi_phdr, info.dlpi_phnum * sizeof(ElfW(Phdr)), c->page);
    if (!ok) {
      c->first = 0; /* the executable, if it was this one, stays undescribed */
      continue;
    }
    if (collect_object(&info, sizeof info, c) != 0)
      break;
  }
}

/* ---------------------------------------------------------------------- */
/* Unloaded objects                                                        */

/*
 * What the dlclose wrapper (malloc.c) notes of an object about to be
 * unloaded: enough to describe it again once it is gone. Kept in a list
 * that only grows, at most UNLOADED_MAX objects, each build at each
 * address once (a plugin loaded and unloaded in a loop is noted once). The
 * list is appended under a lock and read without one (by a forked writer
 * too): a reader sees every note published before its count.
 */
#define UNLOADED_MAX   64
#define UNLOADED_PHDRS 16

struct culpert__unload_note {
  uint64_t bias;
  char *path; /* absolute when the loader's name could be resolved */
  char build_id[129];
  ElfW(Phdr) phdr[UNLOADED_PHDRS]; /* the PT_LOAD headers */
  ElfW(Half) phnum;
};

static struct culpert__unload_note *unloaded[UNLOADED_MAX];
static atomic_size_t n_unloaded;
static pthread_mutex_t unloaded_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_free(struct culpert__unload_note *u)
{
  if (u) {
    free(u->path);
    free(u);
  }
}

struct culpert__unload_note *culpert__symbolize_unload_begin(void *handle)
{
  struct link_map *m = NULL;
  struct dl_phdr_info info;
  long page = sysconf(_SC_PAGESIZE);
  if (handle == NULL || dlinfo(handle, RTLD_DI_LINKMAP, &m) != 0 || m == NULL ||
      m->l_name == NULL || m->l_name[0] == '\0' ||
      !link_map_phdrs(m, &info, page > 0 ? page : 4096))
    return NULL;
  struct culpert__unload_note *u = calloc(1, sizeof *u);
  if (!u)
    return NULL;
  u->bias = m->l_addr;
  /* The loader keeps the name it was given ("./plugin.so"): resolve it
   * now, while the working directory is the one it was loaded from. */
  u->path = m->l_name[0] == '/' ? NULL : realpath(m->l_name, NULL);
  if (!u->path)
    u->path = strdup(m->l_name);
  note_build_id(&info, u->build_id, sizeof u->build_id);
  for (int i = 0; i < info.dlpi_phnum && u->phnum < UNLOADED_PHDRS; i++)
    if (info.dlpi_phdr[i].p_type == PT_LOAD)
      u->phdr[u->phnum++] = info.dlpi_phdr[i];
  if (!u->path || u->phnum == 0) {
    note_free(u);
    return NULL;
  }
  return u;
}

static int still_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)size;
  return info->dlpi_addr == ((const struct culpert__unload_note *)data)->bias;
}

void culpert__symbolize_unload_end(struct culpert__unload_note *u)
{
  if (!u)
    return;
  /* dlclose only drops a reference: the object may stay. */
  if (dl_iterate_phdr(still_loaded, u) != 0) {
    note_free(u);
    return;
  }
  pthread_mutex_lock(&unloaded_lock);
  size_t n = atomic_load_explicit(&n_unloaded, memory_order_relaxed);
  int keep = n < UNLOADED_MAX;
  for (size_t i = 0; i < n && keep; i++)
    keep = !(unloaded[i]->bias == u->bias && strcmp(unloaded[i]->build_id, u->build_id) == 0 &&
             strcmp(unloaded[i]->path, u->path) == 0);
  if (keep) {
    unloaded[n] = u;
    atomic_store_explicit(&n_unloaded, n + 1, memory_order_release);
  }
  pthread_mutex_unlock(&unloaded_lock);
  if (!keep)
    note_free(u);
}

/* Whether an executable segment of `u` overlaps a mapping already in s. */
static int overlaps_maps(const struct culpert__symbolizer *s, const struct culpert__unload_note *u)
{
  for (ElfW(Half) i = 0; i < u->phnum; i++) {
    if (!(u->phdr[i].p_flags & PF_X) || u->phdr[i].p_memsz == 0)
      continue;
    uint64_t start = u->bias + u->phdr[i].p_vaddr, end = start + u->phdr[i].p_memsz;
    for (size_t k = 0; k < s->nmaps; k++)
      if (start < s->maps[k].limit && s->maps[k].start < end)
        return 1;
  }
  return 0;
}

/* The unloaded objects, newest first, where nothing loaded (or unloaded
 * later) has taken their place: samples taken in their code keep their
 * names. */
static void add_unloaded(struct collect *c)
{
  size_t n = atomic_load_explicit(&n_unloaded, memory_order_acquire);
  c->first = 0;
  for (size_t i = n; i-- > 0;) {
    const struct culpert__unload_note *u = unloaded[i];
    if (overlaps_maps(c->s, u))
      continue;
    struct dl_phdr_info info;
    memset(&info, 0, sizeof info);
    info.dlpi_addr = u->bias;
    info.dlpi_name = u->path;
    info.dlpi_phdr = u->phdr;
    info.dlpi_phnum = u->phnum;
    if (add_object(&info, c, u->build_id) != 0)
      break;
  }
}

int culpert__symbolize_open(struct culpert__symbolizer **out)
{
  struct collect c = {0};
  struct culpert__symbolizer *s = calloc(1, sizeof *s);
  struct start_index *order = NULL;
  int rc = 0;
  *out = NULL;
  if (!s)
    return -ENOMEM;
  c.s = s;
  c.page = sysconf(_SC_PAGESIZE);
  if (c.page <= 0)
    c.page = 4096;
  c.self_addr = (uint64_t)(uintptr_t)&culpert__symbolize_open;
  c.vdso = getauxval(AT_SYSINFO_EHDR);
  c.first = 1;
  if (culpert__loader_usable())
    dl_iterate_phdr(collect_object, &c);
  else
    walk_link_maps(&c);
  if (!s->err)
    add_unloaded(&c);
  if (s->err) {
    rc = s->err;
    goto out;
  }
  s->by_start = malloc((s->nmaps ? s->nmaps : 1) * sizeof *s->by_start);
  order = malloc((s->nmaps ? s->nmaps : 1) * sizeof *order);
  if (!s->by_start || !order) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < s->nmaps; i++)
    order[i] = (struct start_index){s->maps[i].start, i};
  qsort(order, s->nmaps, sizeof *order, start_cmp);
  for (size_t i = 0; i < s->nmaps; i++)
    s->by_start[i] = order[i].map;

out:
  free(order);
  if (rc) {
    culpert__symbolize_close(s);
    s = NULL;
  }
  *out = s;
  return rc;
}

void culpert__symbolize_close(struct culpert__symbolizer *s)
{
  if (!s)
    return;
  for (size_t i = 0; i < s->nobjs; i++) {
    free(s->objs[i].path);
    free(s->objs[i].reopen);
    culpert__symtab_free(s->objs[i].tab);
    culpert__symtab_free(s->objs[i].dbg);
  }
  free(s->objs);
  free(s->maps);
  free(s->map_obj);
  free(s->by_start);
  free(s->dl_name);
  free(s);
}

size_t culpert__symbolize_nmaps(const struct culpert__symbolizer *s)
{
  return s->nmaps;
}

const struct culpert__smap *culpert__symbolize_map(const struct culpert__symbolizer *s, size_t i)
{
  return i < s->nmaps ? &s->maps[i] : NULL;
}

long culpert__symbolize_find_map(const struct culpert__symbolizer *s, uint64_t addr)
{
  size_t lo = 0, hi = s->nmaps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->maps[s->by_start[mid]].start <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return -1;
  size_t i = s->by_start[lo - 1];
  return addr < s->maps[i].limit ? (long)i : -1;
}

/* The symbols and DWARF of a stripped object live in a separate debug
 * file named by its build id (Debian's *-dbg and *-dbgsym packages install
 * them there). */
static struct culpert__symtab *load_debug_file(const char *build_id)
{
  char path[256];
  struct culpert__symtab *t = NULL;
  if (strlen(build_id) < 4)
    return NULL;
  snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%.2s/%s.debug", build_id, build_id + 2);
  if (culpert__symtab_load(path, &t) != 0)
    return NULL;
  return t;
}

static int has_debug_line(const struct culpert__symtab *t);

/* Reads the files of an object once; failures leave the pointers NULL. */
static void load_object(struct object *obj)
{
  if (obj->loaded)
    return;
  obj->loaded = 1;
  if (!obj->path) {
    /* The vdso exists only in memory, where the kernel mapped all of it. */
    struct culpert__symtab *t = calloc(1, sizeof *t);
    if (!t)
      return;
    if (read_best_symbols(t, (const void *)(uintptr_t)obj->image, obj->image_len) != 0 ||
        t->nsyms == 0) {
      culpert__symtab_free(t);
      return;
    }
    obj->tab = obj->names = t;
    return;
  }
  /* The file at the object's path, if it is still the build that is
   * loaded; else the loaded build through the kernel, where it can be
   * opened; else none (the debug file by build id and dladdr remain). */
  if (symtab_map(obj->path, &obj->tab) == 0 && !same_build(obj->tab, obj->build_id)) {
    culpert__symtab_free(obj->tab);
    obj->tab = NULL;
  }
  if (!obj->tab && obj->reopen && symtab_map(obj->reopen, &obj->tab) == 0 &&
      !same_build(obj->tab, obj->build_id)) {
    culpert__symtab_free(obj->tab);
    obj->tab = NULL;
  }
  /* A stripped object (no .symtab) whose debug file has a full table
   * takes its names from there: its own .dynsym is then never read. */
  int deferred = obj->tab && !has_section_type(obj->tab, SHT_SYMTAB) && obj->build_id[0];
  if (obj->tab && !deferred && symtab_read(obj->tab) != 0) {
    culpert__symtab_free(obj->tab);
    obj->tab = NULL;
  }
  int own_full = obj->tab && obj->tab->full;
  int own_lines = obj->tab && has_debug_line(obj->tab);
  if ((!own_full || !own_lines) && obj->build_id[0])
    obj->dbg = load_debug_file(obj->build_id);
  if (deferred && (!obj->dbg || !obj->dbg->full || obj->dbg->nsyms == 0) &&
      symtab_read(obj->tab) != 0) {
    culpert__symtab_free(obj->tab);
    obj->tab = NULL;
    own_lines = 0;
  }
  obj->names = own_full || !obj->dbg || !obj->dbg->full ? obj->tab : obj->dbg;
  if (!obj->names || obj->names->nsyms == 0)
    obj->names = obj->dbg && obj->dbg->nsyms ? obj->dbg : obj->tab;
  obj->dwarf = own_lines ? obj->tab : obj->dbg && has_debug_line(obj->dbg) ? obj->dbg : NULL;
}

int culpert__symbolize_addr(struct culpert__symbolizer *s, uint64_t addr,
                            struct culpert__symbol *out)
{
  out->name = NULL;
  out->start = 0;
  long m = culpert__symbolize_find_map(s, addr);
  if (m < 0)
    return -ENOENT;
  struct object *obj = &s->objs[s->map_obj[m]];
  load_object(obj);
  const struct sym *sym = lookup(obj->names, addr - obj->bias);
  if (sym) {
    out->name = sym->name;
    out->start = sym->addr + obj->bias;
  } else if (!obj->tab && culpert__loader_usable()) {
    /* The file could not be read (deleted, replaced, no permission): the
     * loader's own view of the dynamic symbols is all there is (dladdr
     * takes the loader's lock). */
    Dl_info info;
    if (dladdr((void *)(uintptr_t)addr, &info) && info.dli_sname && info.dli_saddr) {
      char *copy = strdup(info.dli_sname);
      if (copy) {
        free(s->dl_name);
        s->dl_name = copy;
        out->name = copy;
        out->start = (uint64_t)(uintptr_t)info.dli_saddr;
      }
    }
  }
  return out->name ? 0 : -ENOENT;
}

/* ---------------------------------------------------------------------- */
/* DWARF sections                                                          */

/* Largest decompressed debug section we accept. */
#define SECTION_MAX (512u * 1024u * 1024u)

/*
 * A section's bytes. A compressed section is inflated on demand, as far as
 * the DWARF reader asks (culpert__dwarf_lazy), into a zero-filled buffer of
 * its full size: untouched pages of it cost nothing. The zlib stream is
 * inflated raw, without its Adler-32 check (the DWARF reader checks every
 * bound itself).
 */
struct section {
  struct culpert__dwarf_lazy lazy; /* first: fill() gets a pointer to it */
  const unsigned char *p;
  size_t len;
  unsigned char *owned; /* the buffer of a compressed section */
  int owned_mapped;     /* `owned` is an anonymous mapping, not from calloc */
  z_stream z;
  int z_open;  /* z holds a stream that may still produce bytes */
  size_t have; /* bytes of `owned` inflated so far */
};

/* From this size on a section buffer is mapped rather than calloc'd. */
#define MAP_FROM (64u * 1024u)

/* A zero-filled buffer of `len` bytes. A big one is an anonymous mapping:
 * the kernel zero-fills its pages as they are first touched, while calloc
 * clears the whole buffer whenever the heap serves it (which happens to
 * sections of a few MiB once the program has freed blocks that size and
 * glibc raised its mmap threshold): megabytes written for nothing. */
static unsigned char *zeroed(size_t len, int *mapped)
{
  *mapped = len >= MAP_FROM;
  if (!*mapped)
    return calloc(1, len);
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return m == MAP_FAILED ? NULL : m;
}

static void zeroed_free(unsigned char *p, size_t len, int mapped)
{
  if (p && mapped)
    munmap(p, len);
  else
    free(p);
}

/* Inflate at least this much more per call: enough to keep calls few on
 * a sequential read, little enough that a reader asking for one string or
 * unit header does not inflate tens of KiB it never looks at (with 64 KiB
 * the exit of a short run inflated twice the bytes it read). */
#define FILL_STEP (4u * 1024u)

static size_t section_fill(struct culpert__dwarf_lazy *lazy, size_t upto)
{
  struct section *sec = (struct section *)(void *)lazy;
  if (!sec->z_open)
    return sec->len;
  if (upto <= sec->have)
    return sec->have;
  size_t goal = upto + FILL_STEP < sec->len ? upto + FILL_STEP : sec->len;
  sec->z.next_out = sec->owned + sec->have;
  sec->z.avail_out = (uInt)(goal - sec->have);
  int zrc = inflate(&sec->z, Z_SYNC_FLUSH);
  sec->have = (size_t)(sec->z.next_out - sec->owned);
  if (zrc != Z_OK || sec->have >= sec->len) {
    /* Done, or a corrupt stream: what is not inflated stays zero. */
    inflateEnd(&sec->z);
    sec->z_open = 0;
    return sec->len;
  }
  return sec->have;
}

static void section_free(struct section *sec)
{
  if (sec->z_open)
    inflateEnd(&sec->z);
  zeroed_free(sec->owned, sec->len, sec->owned_mapped);
  memset(sec, 0, sizeof *sec);
}

/* The header of section `name` when its bytes lie inside the image, else
 * NULL. Reads only the section table. */
static const Elf64_Shdr *elf_find_section(const unsigned char *base, size_t size, const char *name)
{
  const Elf64_Ehdr *eh = (const void *)base;
  if (!base || size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
      !in_bounds(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), size) ||
      eh->e_shoff % _Alignof(Elf64_Shdr) != 0 || eh->e_shstrndx >= eh->e_shnum)
    return NULL;
  const Elf64_Shdr *sh = (const void *)(base + eh->e_shoff);
  const Elf64_Shdr *names = &sh[eh->e_shstrndx];
  if (!in_bounds(names->sh_offset, names->sh_size, size))
    return NULL;
  const char *strs = (const char *)base + names->sh_offset;
  size_t nlen = strlen(name);
  for (size_t i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_name >= names->sh_size || names->sh_size - sh[i].sh_name < nlen + 1 ||
        memcmp(strs + sh[i].sh_name, name, nlen + 1) != 0)
      continue;
    if (sh[i].sh_type == SHT_NOBITS || !in_bounds(sh[i].sh_offset, sh[i].sh_size, size))
      return NULL;
    return &sh[i];
  }
  return NULL;
}

/* The compression header of a compressed section and where its raw
 * deflate data starts, or NULL when it is not a zlib stream we accept:
 * the header, then 2 zlib header bytes (deflate, no preset dictionary). */
static const unsigned char *elf_zstream(const unsigned char *base, const Elf64_Shdr *sh,
                                        Elf64_Chdr *ch)
{
  const unsigned char *data = base + sh->sh_offset;
  if (sh->sh_size < sizeof *ch + 2)
    return NULL;
  memcpy(ch, data, sizeof *ch);
  const unsigned char *zs = data + sizeof *ch;
  if (ch->ch_type != ELFCOMPRESS_ZLIB || ch->ch_size == 0 || ch->ch_size > SECTION_MAX ||
      (zs[0] & 0x0f) != 8 || (zs[1] & 0x20) != 0 || ((unsigned)zs[0] << 8 | zs[1]) % 31 != 0)
    return NULL;
  return zs + 2;
}

/* Finds section `name` in the ELF image. An uncompressed one is used in
 * place; a compressed one is set up to be inflated lazily (nothing is
 * inflated here). `piecewise`: the reader asks for it piece by piece.
 * Returns 0 (sec->p NULL when absent or unusable) or -ENOMEM. */
static int elf_section(const unsigned char *base, size_t size, const char *name,
                       struct section *sec, int piecewise)
{
  memset(sec, 0, sizeof *sec);
  const Elf64_Shdr *sh = elf_find_section(base, size, name);
  if (!sh)
    return 0;
  if (!(sh->sh_flags & SHF_COMPRESSED)) {
    sec->p = base + sh->sh_offset;
    sec->len = sh->sh_size;
    return 0;
  }
  Elf64_Chdr ch;
  const unsigned char *raw = elf_zstream(base, sh, &ch);
  if (!raw)
    return 0;
  sec->owned = zeroed(ch.ch_size, &sec->owned_mapped);
  if (!sec->owned)
    return -ENOMEM;
  sec->len = ch.ch_size;
  if (inflateInit2(&sec->z, -15) != Z_OK) {
    section_free(sec);
    return 0;
  }
  sec->z_open = 1;
  sec->z.next_in = (Bytef *)(uintptr_t)raw;
  sec->z.avail_in = (uInt)(sh->sh_size - (uint64_t)(raw - (base + sh->sh_offset)));
  sec->lazy.fill = section_fill;
  sec->lazy.piecewise = piecewise;
  sec->p = sec->owned;
  return 0;
}

/* Whether the image has a section `name` of some bytes; reads only the
 * section table and compression header (never allocates or inflates). */
static int elf_has_section(const unsigned char *base, size_t size, const char *name)
{
  const Elf64_Shdr *sh = elf_find_section(base, size, name);
  if (!sh)
    return 0;
  if (!(sh->sh_flags & SHF_COMPRESSED))
    return sh->sh_size > 0;
  Elf64_Chdr ch;
  return elf_zstream(base, sh, &ch) != NULL;
}

static int has_debug_line(const struct culpert__symtab *t)
{
  return t && t->map && elf_has_section(t->map, t->maplen, ".debug_line");
}

/* The source positions of `n` addresses of the file behind `t`. */
static int symtab_resolve(struct culpert__symtab *t, const uint64_t *vaddrs, size_t n,
                          struct culpert__srcpos *out)
{
  static const char *const names[] = {
      ".debug_info",        ".debug_abbrev", ".debug_line",   ".debug_line_str", ".debug_str",
      ".debug_str_offsets", ".debug_addr",   ".debug_ranges", ".debug_rnglists", ".debug_aranges"};
  struct section sec[sizeof names / sizeof names[0]];
  struct culpert__dwarf d;
  struct culpert__dwarf_section *dst[] = {&d.info,     &d.abbrev,      &d.line, &d.line_str,
                                          &d.str,      &d.str_offsets, &d.addr, &d.ranges,
                                          &d.rnglists, &d.aranges};
  size_t nsec = sizeof names / sizeof names[0];
  int rc = 0;

  memset(sec, 0, sizeof sec);
  for (size_t i = 0; i < n; i++)
    out[i] = (struct culpert__srcpos){NULL, 0, 0, NULL, 0};
  if (!t || !t->map)
    return 0;
  for (size_t i = 0; i < nsec && rc == 0; i++) {
    /* Read piece by piece: units of .debug_info and .debug_line, tables
     * of .debug_abbrev, strings of .debug_line_str and .debug_str, lists
     * of .debug_rnglists, sets of .debug_aranges. */
    rc = elf_section(t->map, t->maplen, names[i], &sec[i],
                     i <= 4 || dst[i] == &d.rnglists || dst[i] == &d.aranges);
    dst[i]->p = sec[i].p;
    dst[i]->len = sec[i].len;
    dst[i]->lazy = sec[i].owned ? &sec[i].lazy : NULL;
  }
  if (rc == 0)
    rc = culpert__dwarf_resolve(&d, vaddrs, n, out, &t->pool);
  for (size_t i = 0; i < nsec; i++)
    section_free(&sec[i]);
  return rc;
}

int culpert__symbolize_lines(struct culpert__symbolizer *s, const uint64_t *addrs, size_t n,
                             struct culpert__srcpos *out)
{
  uint64_t *vaddrs = NULL;
  size_t *which = NULL;
  struct culpert__srcpos *part = NULL;
  long *obj_of = NULL;
  int rc = 0;
  for (size_t i = 0; i < n; i++)
    out[i] = (struct culpert__srcpos){NULL, 0, 0, NULL, 0};
  if (n == 0)
    return 0;
  vaddrs = malloc(n * sizeof *vaddrs);
  which = malloc(n * sizeof *which);
  part = malloc(n * sizeof *part);
  obj_of = malloc(n * sizeof *obj_of);
  if (!vaddrs || !which || !part || !obj_of) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    long m = culpert__symbolize_find_map(s, addrs[i]);
    obj_of[i] = m < 0 ? -1 : (long)s->map_obj[m];
  }
  for (size_t o = 0; o < s->nobjs && rc == 0; o++) {
    struct object *obj = &s->objs[o];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      if (obj_of[i] == (long)o) {
        vaddrs[k] = addrs[i] - obj->bias;
        which[k++] = i;
      }
    }
    if (k == 0)
      continue;
    load_object(obj);
    if (!obj->dwarf)
      continue;
    rc = symtab_resolve(obj->dwarf, vaddrs, k, part);
    for (size_t i = 0; i < k; i++)
      out[which[i]] = part[i];
  }

out:
  free(vaddrs);
  free(which);
  free(part);
  free(obj_of);
  return rc;
}

int culpert__symtab_lines(struct culpert__symtab *t, const uint64_t *vaddrs, size_t n,
                          struct culpert__srcpos *out)
{
  return symtab_resolve(t, vaddrs, n, out);
}
