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
#include "symbolize.h"

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

struct sym {
  uint64_t addr;
  uint64_t size;
  const char *name;
};

struct culpert__symtab {
  struct sym *syms; /* sorted by addr */
  size_t nsyms;
  int full;         /* from .symtab */
  void *map;        /* the file's bytes (names point here), NULL for memory */
  size_t maplen;
};

/* One loaded object. */
struct object {
  char *path;        /* file to read symbols from; NULL for the vdso */
  uint64_t bias;     /* load bias: runtime address = bias + ELF vaddr */
  uint64_t image;    /* vdso only: address and size of its ELF image */
  uint64_t image_len;
  char build_id[129];
  int loaded;                 /* symbol table attempted */
  struct culpert__symtab *tab; /* NULL when nothing could be read */
};

struct culpert__symbolizer {
  struct object *objs;
  size_t nobjs;
  struct culpert__smap *maps;
  size_t *map_obj;  /* object index of each mapping */
  size_t nmaps;
  size_t *by_start; /* mapping indices sorted by start address */
  char *dl_name;    /* last dladdr() name, owned copy */
  int err;
};

/* ---------------------------------------------------------------------- */
/* ELF symbol tables from bytes in memory                                  */

static int sym_cmp(const void *a, const void *b) {
  const struct sym *x = a, *y = b;
  if (x->addr != y->addr)
    return x->addr < y->addr ? -1 : 1;
  /* Sized symbols first, so a lookup lands on the one with a size. */
  if ((x->size == 0) != (y->size == 0))
    return x->size ? -1 : 1;
  return 0;
}

/* Bounds check: [off, off + len) lies inside a buffer of `size` bytes. */
static int in_bounds(uint64_t off, uint64_t len, size_t size) {
  return off <= size && len <= size - off;
}

/* Fills t->syms from the symbol section of `type` in the ELF image
 * [base, base + size). Returns the number of symbols read, 0 when the
 * section is absent, -ENOEXEC for a malformed image, -ENOMEM. */
static long read_symbols(struct culpert__symtab *t, const unsigned char *base, size_t size,
                         uint32_t type) {
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
    size_t n = 0;
    for (size_t k = 0; k < nes; k++) {
      unsigned st = ELF64_ST_TYPE(es[k].st_info);
      if ((st != STT_FUNC && st != STT_GNU_IFUNC) || es[k].st_shndx == SHN_UNDEF ||
          es[k].st_value == 0 || es[k].st_name == 0 || es[k].st_name >= strsz)
        continue;
      const char *name = strs + es[k].st_name;
      if (!memchr(name, '\0', strsz - es[k].st_name))
        continue;
      syms[n].addr = es[k].st_value;
      syms[n].size = es[k].st_size;
      syms[n].name = name;
      n++;
    }
    qsort(syms, n, sizeof *syms, sym_cmp);
    free(t->syms);
    t->syms = syms;
    t->nsyms = n;
    t->full = type == SHT_SYMTAB;
    return (long)n;
  }
  return 0;
}

/* .symtab when present (and not empty), else .dynsym. */
static int read_best_symbols(struct culpert__symtab *t, const unsigned char *base, size_t size) {
  long n = read_symbols(t, base, size, SHT_SYMTAB);
  if (n > 0)
    return 0;
  if (n < 0 && n != -ENOEXEC)
    return (int)n;
  n = read_symbols(t, base, size, SHT_DYNSYM);
  return n < 0 ? (int)n : 0;
}

int culpert__symtab_load(const char *path, struct culpert__symtab **out) {
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
  rc = read_best_symbols(t, t->map, t->maplen);
  if (rc == 0 && t->nsyms == 0 && read_symbols(t, t->map, t->maplen, SHT_SYMTAB) == -ENOEXEC)
    rc = -ENOEXEC;

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

const char *culpert__symtab_lookup(const struct culpert__symtab *t, uint64_t vaddr) {
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
      return s->name;
  }
  /* An assembly label without a size: trust it only as the nearest one. */
  return unsized ? unsized->name : NULL;
}

size_t culpert__symtab_count(const struct culpert__symtab *t) { return t ? t->nsyms : 0; }

int culpert__symtab_is_full(const struct culpert__symtab *t) { return t ? t->full : 0; }

void culpert__symtab_free(struct culpert__symtab *t) {
  if (!t)
    return;
  free(t->syms);
  if (t->map)
    munmap(t->map, t->maplen);
  free(t);
}

/* ---------------------------------------------------------------------- */
/* Loaded objects                                                          */

/* Hex of the NT_GNU_BUILD_ID note in the PT_NOTE segments of a loaded
 * object ("" when none). The notes are in mapped memory. */
static void note_build_id(const struct dl_phdr_info *info, char *hex, size_t hexlen) {
  hex[0] = '\0';
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE)
      continue;
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    size_t left = ph->p_filesz;
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
        return;
      }
      p += sizeof *nh + namesz + descsz;
      left -= sizeof *nh + namesz + descsz;
    }
  }
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

static char *main_exe_path(void) {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return strdup("/proc/self/exe");
  buf[n] = '\0';
  return strdup(buf);
}

static int collect_object(struct dl_phdr_info *info, size_t size, void *data) {
  struct collect *c = data;
  struct culpert__symbolizer *s = c->s;
  int is_main = c->first;
  (void)size;
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
  int is_vdso = !is_main && c->vdso != 0 && header == c->vdso;

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
  } else if (is_main || !info->dlpi_name || !info->dlpi_name[0]) {
    obj->path = main_exe_path();
  } else {
    obj->path = strdup(info->dlpi_name);
  }
  if (!is_vdso && !obj->path)
    goto nomem;
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
  }
  return 0;

nomem:
  s->err = -ENOMEM;
  return 1;
}

static const struct culpert__symbolizer *sort_ctx;

static int by_start_cmp(const void *a, const void *b) {
  uint64_t x = sort_ctx->maps[*(const size_t *)a].start;
  uint64_t y = sort_ctx->maps[*(const size_t *)b].start;
  return x < y ? -1 : x > y;
}

int culpert__symbolize_open(struct culpert__symbolizer **out) {
  struct collect c = {0};
  struct culpert__symbolizer *s = calloc(1, sizeof *s);
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
  dl_iterate_phdr(collect_object, &c);
  if (s->err) {
    rc = s->err;
    goto out;
  }
  s->by_start = malloc((s->nmaps ? s->nmaps : 1) * sizeof *s->by_start);
  if (!s->by_start) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < s->nmaps; i++)
    s->by_start[i] = i;
  /* qsort has no context argument; the writer is the only caller and is
   * not reentrant with itself, but keep the window as small as possible. */
  sort_ctx = s;
  qsort(s->by_start, s->nmaps, sizeof *s->by_start, by_start_cmp);
  sort_ctx = NULL;

out:
  if (rc) {
    culpert__symbolize_close(s);
    s = NULL;
  }
  *out = s;
  return rc;
}

void culpert__symbolize_close(struct culpert__symbolizer *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->nobjs; i++) {
    free(s->objs[i].path);
    culpert__symtab_free(s->objs[i].tab);
  }
  free(s->objs);
  free(s->maps);
  free(s->map_obj);
  free(s->by_start);
  free(s->dl_name);
  free(s);
}

size_t culpert__symbolize_nmaps(const struct culpert__symbolizer *s) { return s->nmaps; }

const struct culpert__smap *culpert__symbolize_map(const struct culpert__symbolizer *s,
                                                   size_t i) {
  return i < s->nmaps ? &s->maps[i] : NULL;
}

long culpert__symbolize_find_map(const struct culpert__symbolizer *s, uint64_t addr) {
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

/* The symbols of a stripped object live in a separate debug file named by
 * its build id (Debian's *-dbgsym packages install them there). */
static struct culpert__symtab *load_debug_file(const char *build_id) {
  char path[256];
  struct culpert__symtab *t = NULL;
  if (strlen(build_id) < 4)
    return NULL;
  snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%.2s/%s.debug", build_id, build_id + 2);
  if (culpert__symtab_load(path, &t) != 0)
    return NULL;
  if (!t->full) {
    culpert__symtab_free(t);
    return NULL;
  }
  return t;
}

/* Reads the symbols of an object once; failures leave obj->tab NULL. */
static void load_object(struct object *obj) {
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
    obj->tab = t;
    return;
  }
  culpert__symtab_load(obj->path, &obj->tab);
  if ((!obj->tab || !obj->tab->full) && obj->build_id[0]) {
    struct culpert__symtab *dbg = load_debug_file(obj->build_id);
    if (dbg) {
      culpert__symtab_free(obj->tab);
      obj->tab = dbg;
    }
  }
}

int culpert__symbolize_addr(struct culpert__symbolizer *s, uint64_t addr,
                            struct culpert__symbol *out) {
  out->name = NULL;
  out->file = NULL;
  out->line = 0;
  long m = culpert__symbolize_find_map(s, addr);
  if (m < 0)
    return -ENOENT;
  struct object *obj = &s->objs[s->map_obj[m]];
  load_object(obj);
  if (obj->tab)
    out->name = culpert__symtab_lookup(obj->tab, addr - obj->bias);
  if (!out->name && !obj->tab) {
    /* The file could not be read (deleted, replaced, no permission): the
     * loader's own view of the dynamic symbols is all there is. */
    Dl_info info;
    if (dladdr((void *)(uintptr_t)addr, &info) && info.dli_sname && info.dli_saddr) {
      char *copy = strdup(info.dli_sname);
      if (copy) {
        free(s->dl_name);
        s->dl_name = copy;
        out->name = copy;
      }
    }
  }
  return out->name ? 0 : -ENOENT;
}
