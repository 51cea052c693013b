// callables/image_check.c — the per-format checks of kernel image bytes; the contract, and why
// they exist, is in callables/image_check.h.
//
// Every value read from the image is untrusted: offsets and sizes are added and multiplied
// with the overflow builtins only, and a range is "inside" when its checked end is at most the
// image's size. Headers are copied out with memcpy, never cast in place (the bytes may sit at
// any alignment).
#include "callables/image_check.h"

#include <elf.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lanes/error.h"

#if defined(__x86_64__)
#define LW_HOST_EM EM_X86_64
#define LW_HOST_EM_NAME "EM_X86_64"
#elif defined(__aarch64__)
#define LW_HOST_EM EM_AARCH64
#define LW_HOST_EM_NAME "EM_AARCH64"
#else
#error "lanework: unsupported host architecture (add its e_machine here)"
#endif

// The ELF fields are read as this host's integers, which is right for ELFDATA2LSB only on a
// little-endian host; both supported hosts are, as is their ELF (ELFDATA2LSB is required).
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "lanework: the image checks read little-endian fields as host integers"
#endif

// RELR relocations came to <elf.h> with glibc 2.36; a build on an older one still checks them.
#ifndef DT_RELR
#define DT_RELRSZ 35
#define DT_RELR 36
#define DT_RELRENT 37
#endif

#define LW_SPIRV_MAGIC 0x07230203u
#define LW_SPIRV_HEADER_WORDS 5u

typedef unsigned long long ull;  // for printing 64-bit values with %llx / %llu

// "callable <name>: image is not a valid kernel: <why>"; INVALID_ARGUMENT.
static lw_status_t refuse(const char *name, lw_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static lw_status_t refuse(const char *name, lw_error_t *err, const char *fmt, ...) {
  char why[LW_ERROR_MESSAGE_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                       LW__CALLABLE_NAME_FMT ": image is not a valid kernel: %s",
                       LW__CALLABLE_NAME_ARGS(name), why);
}

// The checks every format starts with: something there, and not too much of it.
static lw_status_t check_size(const uint8_t *p, size_t bytes, const char *name,
                              lw_error_t *err) {
  if (p == NULL || bytes == 0) return refuse(name, err, "image is empty (0 bytes)");
  if ((uint64_t)bytes > LW_MAX_IMAGE_BYTES) {
    return refuse(name, err, "%zu bytes exceeds LW_MAX_IMAGE_BYTES (%llu bytes)", bytes,
                  (ull)LW_MAX_IMAGE_BYTES);
  }
  return LW_OK;
}

// ---------------------------------------------------------------------------------------------
// ELF

typedef struct elf_image {
  const uint8_t *p;
  uint64_t bytes;
  const char *name;
  lw_error_t *err;
  Elf64_Ehdr eh;
} elf_image_t;

// True when [off, off + len) lies inside the image. *out_end gets its end, or 0 when the sum
// overflows (so a caller tells the two failures apart by end < off).
static bool in_image(const elf_image_t *im, uint64_t off, uint64_t len, uint64_t *out_end) {
  uint64_t end;
  if (__builtin_add_overflow(off, len, &end)) {
    *out_end = 0;
    return false;
  }
  *out_end = end;
  return end <= im->bytes;
}

// Program header i (the table was checked to lie inside the image).
static Elf64_Phdr phdr_at(const elf_image_t *im, uint32_t i) {
  Elf64_Phdr ph;
  memcpy(&ph, im->p + im->eh.e_phoff + (uint64_t)i * sizeof(Elf64_Phdr), sizeof ph);
  return ph;
}

static const char *segment_type_name(uint32_t type) {
  switch (type) {
    case PT_LOAD: return "PT_LOAD";
    case PT_DYNAMIC: return "PT_DYNAMIC";
    case PT_INTERP: return "PT_INTERP";
    case PT_NOTE: return "PT_NOTE";
    case PT_SHLIB: return "PT_SHLIB";
    case PT_PHDR: return "PT_PHDR";
    case PT_TLS: return "PT_TLS";
    case PT_GNU_EH_FRAME: return "PT_GNU_EH_FRAME";
    case PT_GNU_STACK: return "PT_GNU_STACK";
    case PT_GNU_RELRO: return "PT_GNU_RELRO";
    case PT_GNU_PROPERTY: return "PT_GNU_PROPERTY";
    default: return "another type";
  }
}

// True when [addr, addr + len) in memory lies inside one PT_LOAD segment's memory
// [p_vaddr, p_vaddr + p_memsz) (file_only: inside its file bytes [p_vaddr, p_vaddr +
// p_filesz)); *out_off then gets the file offset of addr. A range of length 0 must still start
// inside one. Segments were checked: no sum below overflows.
static bool find_in_load(const elf_image_t *im, uint64_t addr, uint64_t len, bool file_only,
                         uint64_t *out_off) {
  uint64_t end;
  if (__builtin_add_overflow(addr, len, &end)) return false;
  for (uint32_t i = 0; i < im->eh.e_phnum; ++i) {
    Elf64_Phdr ph = phdr_at(im, i);
    if (ph.p_type != PT_LOAD) continue;
    uint64_t seg_end = ph.p_vaddr + (file_only ? ph.p_filesz : ph.p_memsz);
    bool inside = addr >= ph.p_vaddr && end <= seg_end && (len > 0 || addr < seg_end);
    if (inside) {
      if (out_off) *out_off = ph.p_offset + (addr - ph.p_vaddr);
      return true;
    }
  }
  return false;
}

// The identification every ELF image shares, host kernel or CUBIN: the magic, a whole ELF64
// header (copied into im->eh), ELFCLASS64, ELFDATA2LSB, EV_CURRENT, e_ehsize.
static lw_status_t check_elf_ident(elf_image_t *im) {
  const char *name = im->name;
  lw_error_t *err = im->err;
  if (im->bytes < SELFMAG || memcmp(im->p, ELFMAG, SELFMAG) != 0) {
    return refuse(name, err, "not an ELF image (bad magic)");
  }
  if (im->bytes < sizeof(Elf64_Ehdr)) {
    return refuse(name, err, "truncated ELF header (%llu bytes, need %zu)", (ull)im->bytes,
                  sizeof(Elf64_Ehdr));
  }
  memcpy(&im->eh, im->p, sizeof im->eh);
  const Elf64_Ehdr *eh = &im->eh;
  if (eh->e_ident[EI_CLASS] != ELFCLASS64) {
    return refuse(name, err, "not a 64-bit ELF image (EI_CLASS %u, need ELFCLASS64)",
                  (unsigned)eh->e_ident[EI_CLASS]);
  }
  if (eh->e_ident[EI_DATA] != ELFDATA2LSB) {
    return refuse(name, err, "not a little-endian ELF image (EI_DATA %u, need ELFDATA2LSB)",
                  (unsigned)eh->e_ident[EI_DATA]);
  }
  if (eh->e_ident[EI_VERSION] != EV_CURRENT || eh->e_version != EV_CURRENT) {
    return refuse(name, err, "unknown ELF version (EI_VERSION %u, e_version %u; need %u)",
                  (unsigned)eh->e_ident[EI_VERSION], (unsigned)eh->e_version,
                  (unsigned)EV_CURRENT);
  }
  return LW_OK;
}

// The program header table: 1..LW_ELF_MAX_PROGRAM_HEADERS entries of the ELF64 size, inside
// the image. optional: a table of 0 entries is fine (a CUBIN's loader reads sections).
static lw_status_t check_phdr_table(const elf_image_t *im, bool optional) {
  const char *name = im->name;
  lw_error_t *err = im->err;
  const Elf64_Ehdr *eh = &im->eh;
  if (eh->e_phnum == 0) {
    if (optional) return LW_OK;
    return refuse(name, err, "no program headers (e_phnum 0): nothing to load");
  }
  if (eh->e_phnum > LW_ELF_MAX_PROGRAM_HEADERS) {
    return refuse(name, err, "%u program headers%s, more than LW_ELF_MAX_PROGRAM_HEADERS (%d)",
                  (unsigned)eh->e_phnum, eh->e_phnum == PN_XNUM ? " (PN_XNUM)" : "",
                  LW_ELF_MAX_PROGRAM_HEADERS);
  }
  if (eh->e_phentsize != sizeof(Elf64_Phdr)) {
    return refuse(name, err, "program header size e_phentsize is %u, not %zu",
                  (unsigned)eh->e_phentsize, sizeof(Elf64_Phdr));
  }
  // e_phnum <= LW_ELF_MAX_PROGRAM_HEADERS: the product cannot overflow.
  uint64_t table = (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), end = 0;
  if (!in_image(im, eh->e_phoff, table, &end)) {
    if (end < eh->e_phoff) {
      return refuse(name, err, "ELF program header table at 0x%llx + 0x%llx bytes overflows",
                    (ull)eh->e_phoff, (ull)table);
    }
    return refuse(name, err,
                  "ELF program header table [0x%llx, 0x%llx) ends past the image (%llu bytes): "
                  "truncated?",
                  (ull)eh->e_phoff, (ull)end, (ull)im->bytes);
  }
  return LW_OK;
}

static lw_status_t check_elf_header(elf_image_t *im) {
  const char *name = im->name;
  lw_error_t *err = im->err;
  LW_RETURN_IF_ERROR(check_elf_ident(im));
  const Elf64_Ehdr *eh = &im->eh;
  // Before the type: a CUBIN is ET_EXEC, and "not a shared object" would hide what it is.
  if (eh->e_machine == EM_CUDA) {
    return refuse(name, err,
                  "a CUDA CUBIN (e_machine %u EM_CUDA), not a host shared object: it is a "
                  "kernel for a cuda chip, registered as LW_IMAGE_CUBIN (or AUTO)",
                  (unsigned)EM_CUDA);
  }
  if (eh->e_type != ET_DYN) {
    return refuse(name, err,
                  "not a shared object (e_type %u, need ET_DYN; build the kernel with -shared "
                  "-fPIC)",
                  (unsigned)eh->e_type);
  }
  if (eh->e_machine != LW_HOST_EM) {
    return refuse(name, err,
                  "built for another machine (e_machine %u, this host needs %u " LW_HOST_EM_NAME
                  ")",
                  (unsigned)eh->e_machine, (unsigned)LW_HOST_EM);
  }
  if (eh->e_ehsize != sizeof(Elf64_Ehdr)) {
    return refuse(name, err, "ELF header size e_ehsize is %u, not %zu", (unsigned)eh->e_ehsize,
                  sizeof(Elf64_Ehdr));
  }
  return check_phdr_table(im, false);
}

// One segment's file bytes [p_offset, p_offset + p_filesz) inside the image.
static lw_status_t check_segment_file_range(const elf_image_t *im, uint32_t i,
                                            const Elf64_Phdr *ph) {
  const char *type = segment_type_name(ph->p_type);
  uint64_t end = 0;
  if (__builtin_add_overflow(ph->p_offset, ph->p_filesz, &end)) {
    return refuse(im->name, im->err,
                  "ELF segment %u (%s): offset 0x%llx + file size 0x%llx overflows", i, type,
                  (ull)ph->p_offset, (ull)ph->p_filesz);
  }
  if (end > im->bytes) {
    return refuse(im->name, im->err,
                  "ELF segment %u (%s) [0x%llx, 0x%llx) ends past the image (%llu bytes): "
                  "truncated?",
                  i, type, (ull)ph->p_offset, (ull)end, (ull)im->bytes);
  }
  return LW_OK;
}

// Every segment's file bytes inside the image; the PT_LOAD rules.
static lw_status_t check_segments(const elf_image_t *im) {
  const char *name = im->name;
  lw_error_t *err = im->err;
  bool any_load = false;
  uint64_t prev_end = 0;
  uint32_t n_dynamic = 0;
  for (uint32_t i = 0; i < im->eh.e_phnum; ++i) {
    Elf64_Phdr ph = phdr_at(im, i);
    if (ph.p_type == PT_NULL) continue;
    LW_RETURN_IF_ERROR(check_segment_file_range(im, i, &ph));
    if (ph.p_type == PT_DYNAMIC && ++n_dynamic > 1) {
      return refuse(name, err, "ELF segment %u is a second PT_DYNAMIC segment", i);
    }
    if (ph.p_type != PT_LOAD) continue;
    if (ph.p_filesz > ph.p_memsz) {
      return refuse(name, err,
                    "ELF segment %u (PT_LOAD): file size 0x%llx exceeds its memory size 0x%llx",
                    i, (ull)ph.p_filesz, (ull)ph.p_memsz);
    }
    uint64_t vend = 0;
    if (__builtin_add_overflow(ph.p_vaddr, ph.p_memsz, &vend)) {
      return refuse(name, err,
                    "ELF segment %u (PT_LOAD): address 0x%llx + memory size 0x%llx overflows", i,
                    (ull)ph.p_vaddr, (ull)ph.p_memsz);
    }
    if (ph.p_align > 1) {
      if ((ph.p_align & (ph.p_align - 1)) != 0) {
        return refuse(name, err, "ELF segment %u (PT_LOAD): alignment 0x%llx is not a power of 2",
                      i, (ull)ph.p_align);
      }
      if ((ph.p_vaddr & (ph.p_align - 1)) != (ph.p_offset & (ph.p_align - 1))) {
        return refuse(name, err,
                      "ELF segment %u (PT_LOAD): address 0x%llx and offset 0x%llx differ modulo "
                      "its alignment 0x%llx",
                      i, (ull)ph.p_vaddr, (ull)ph.p_offset, (ull)ph.p_align);
      }
    }
    if (any_load && ph.p_vaddr < prev_end) {
      return refuse(name, err,
                    "ELF segment %u (PT_LOAD) at 0x%llx starts before the end 0x%llx of the "
                    "PT_LOAD segment before it (out of order or overlapping)",
                    i, (ull)ph.p_vaddr, (ull)prev_end);
    }
    any_load = true;
    prev_end = vend;
  }
  if (!any_load) return refuse(name, err, "no PT_LOAD segment: nothing to map");
  // ld.so reads these through the mapping, at the load address plus p_vaddr: outside every
  // loaded segment that is a read of unmapped memory.
  for (uint32_t i = 0; i < im->eh.e_phnum; ++i) {
    Elf64_Phdr ph = phdr_at(im, i);
    switch (ph.p_type) {
      case PT_DYNAMIC:
      case PT_TLS:
      case PT_NOTE:
      case PT_GNU_EH_FRAME:
      case PT_GNU_PROPERTY:
      case PT_PHDR:
        break;
      default:
        continue;
    }
    if (!find_in_load(im, ph.p_vaddr, ph.p_filesz, false, NULL)) {
      return refuse(name, err,
                    "ELF segment %u (%s) at address 0x%llx (0x%llx bytes) lies outside every "
                    "PT_LOAD segment",
                    i, segment_type_name(ph.p_type), (ull)ph.p_vaddr, (ull)ph.p_filesz);
    }
  }
  return LW_OK;
}

// The dynamic tags below DT_NUM_CHECKED are kept by number; the few from the OS range by name.
#define DT_NUM_CHECKED 38

typedef struct dyn_info {
  bool has[DT_NUM_CHECKED];
  uint64_t val[DT_NUM_CHECKED];
  bool has_gnu_hash, has_versym, has_verdef, has_verneed;
  uint64_t gnu_hash, versym, verdef, verneed;
} dyn_info_t;

static Elf64_Dyn dyn_at(const elf_image_t *im, uint64_t off, uint64_t j) {
  Elf64_Dyn d;
  memcpy(&d, im->p + off + j * sizeof(Elf64_Dyn), sizeof d);
  return d;
}

// An address entry (and its size entry, or 0 for none) inside a PT_LOAD segment.
static lw_status_t check_dyn_range(const elf_image_t *im, const char *what, uint64_t addr,
                                   uint64_t len) {
  if (find_in_load(im, addr, len, false, NULL)) return LW_OK;
  return refuse(im->name, im->err,
                "ELF dynamic entry %s [0x%llx, +0x%llx) lies outside every PT_LOAD segment", what,
                (ull)addr, (ull)len);
}

static lw_status_t check_dyn_entsize(const elf_image_t *im, const dyn_info_t *d, int tag,
                                     const char *what, int ent_tag, const char *ent_what,
                                     uint64_t want) {
  if (!d->has[tag]) return LW_OK;
  if (!d->has[ent_tag] || d->val[ent_tag] != want) {
    return refuse(im->name, im->err, "ELF dynamic entry %s without %s = %llu", what, ent_what,
                  (ull)want);
  }
  return LW_OK;
}

// The dynamic array: what ld.so reads from it before the kernel's own code runs.
static lw_status_t check_dynamic(const elf_image_t *im) {
  const char *name = im->name;
  lw_error_t *err = im->err;
  Elf64_Phdr dyn = {0};
  bool found = false;
  for (uint32_t i = 0; i < im->eh.e_phnum && !found; ++i) {
    dyn = phdr_at(im, i);
    found = dyn.p_type == PT_DYNAMIC;
  }
  if (!found) return LW_OK;  // dlopen refuses it with its own words
  uint64_t off = 0;
  if (!find_in_load(im, dyn.p_vaddr, dyn.p_filesz, true, &off)) {
    return refuse(name, err,
                  "the dynamic array at address 0x%llx (0x%llx bytes) is not inside a PT_LOAD "
                  "segment's file bytes",
                  (ull)dyn.p_vaddr, (ull)dyn.p_filesz);
  }
  uint64_t n = dyn.p_filesz / sizeof(Elf64_Dyn);
  dyn_info_t d;
  memset(&d, 0, sizeof d);
  bool terminated = false;
  uint64_t used = 0;
  // As ld.so does, a later entry of a tag replaces an earlier one.
  for (uint64_t j = 0; j < n && !terminated; ++j, ++used) {
    Elf64_Dyn e = dyn_at(im, off, j);
    if (e.d_tag == DT_NULL) {
      terminated = true;
    } else if (e.d_tag > 0 && e.d_tag < DT_NUM_CHECKED) {
      d.has[e.d_tag] = true;
      d.val[e.d_tag] = e.d_un.d_val;
    } else if (e.d_tag == DT_GNU_HASH) {
      d.has_gnu_hash = true;
      d.gnu_hash = e.d_un.d_ptr;
    } else if (e.d_tag == DT_VERSYM) {
      d.has_versym = true;
      d.versym = e.d_un.d_ptr;
    } else if (e.d_tag == DT_VERDEF) {
      d.has_verdef = true;
      d.verdef = e.d_un.d_ptr;
    } else if (e.d_tag == DT_VERNEED) {
      d.has_verneed = true;
      d.verneed = e.d_un.d_ptr;
    }
  }
  if (!terminated) {
    return refuse(name, err, "the dynamic array (%llu entries) has no DT_NULL at its end",
                  (ull)n);
  }
  // ld.so asserts these (or dereferences the entry-size entry without looking): a mismatch
  // would abort the process inside dlopen. Both supported hosts relocate with RELA only.
  LW_RETURN_IF_ERROR(check_dyn_entsize(im, &d, DT_RELA, "DT_RELA", DT_RELAENT, "DT_RELAENT",
                                       sizeof(Elf64_Rela)));
  LW_RETURN_IF_ERROR(check_dyn_entsize(im, &d, DT_RELR, "DT_RELR", DT_RELRENT, "DT_RELRENT",
                                       sizeof(Elf64_Xword)));
  if (d.has[DT_PLTREL] && d.val[DT_PLTREL] != DT_RELA) {
    return refuse(name, err, "ELF dynamic entry DT_PLTREL is %llu, this host needs DT_RELA (%d)",
                  (ull)d.val[DT_PLTREL], DT_RELA);
  }
  if (d.has[DT_SYMENT] && d.val[DT_SYMENT] != sizeof(Elf64_Sym)) {
    return refuse(name, err, "ELF dynamic entry DT_SYMENT is %llu, not %zu",
                  (ull)d.val[DT_SYMENT], sizeof(Elf64_Sym));
  }
  static const struct {
    int tag, size_tag;
    const char *what;
  } k_ranges[] = {
      {DT_STRTAB, DT_STRSZ, "DT_STRTAB"},      {DT_SYMTAB, 0, "DT_SYMTAB"},
      {DT_HASH, 0, "DT_HASH"},                 {DT_RELA, DT_RELASZ, "DT_RELA"},
      {DT_REL, DT_RELSZ, "DT_REL"},            {DT_JMPREL, DT_PLTRELSZ, "DT_JMPREL"},
      {DT_RELR, DT_RELRSZ, "DT_RELR"},         {DT_INIT, 0, "DT_INIT"},
      {DT_FINI, 0, "DT_FINI"},                 {DT_INIT_ARRAY, DT_INIT_ARRAYSZ, "DT_INIT_ARRAY"},
      {DT_FINI_ARRAY, DT_FINI_ARRAYSZ, "DT_FINI_ARRAY"},
      {DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ, "DT_PREINIT_ARRAY"},
  };
  for (size_t k = 0; k < sizeof k_ranges / sizeof k_ranges[0]; ++k) {
    if (!d.has[k_ranges[k].tag]) continue;
    uint64_t len = k_ranges[k].size_tag && d.has[k_ranges[k].size_tag]
                       ? d.val[k_ranges[k].size_tag]
                       : 0;
    LW_RETURN_IF_ERROR(check_dyn_range(im, k_ranges[k].what, d.val[k_ranges[k].tag], len));
  }
  if (d.has_gnu_hash) LW_RETURN_IF_ERROR(check_dyn_range(im, "DT_GNU_HASH", d.gnu_hash, 0));
  if (d.has_versym) LW_RETURN_IF_ERROR(check_dyn_range(im, "DT_VERSYM", d.versym, 0));
  if (d.has_verdef) LW_RETURN_IF_ERROR(check_dyn_range(im, "DT_VERDEF", d.verdef, 0));
  if (d.has_verneed) LW_RETURN_IF_ERROR(check_dyn_range(im, "DT_VERNEED", d.verneed, 0));

  // The names ld.so reads as strings: NUL-terminated inside the string table's file bytes.
  uint64_t str_off = 0, str_size = d.val[DT_STRSZ];
  bool have_strings = d.has[DT_STRTAB] && d.has[DT_STRSZ] &&
                      find_in_load(im, d.val[DT_STRTAB], str_size, true, &str_off);
  for (uint64_t j = 0; j < used; ++j) {
    Elf64_Dyn e = dyn_at(im, off, j);
    const char *what = e.d_tag == DT_NEEDED    ? "DT_NEEDED"
                       : e.d_tag == DT_SONAME  ? "DT_SONAME"
                       : e.d_tag == DT_RPATH   ? "DT_RPATH"
                       : e.d_tag == DT_RUNPATH ? "DT_RUNPATH"
                                               : NULL;
    if (what == NULL) continue;
    if (!have_strings) {
      return refuse(name, err,
                    "ELF dynamic entry %s, but no string table (DT_STRTAB and DT_STRSZ inside a "
                    "PT_LOAD segment's file bytes) to hold its name",
                    what);
    }
    uint64_t s = e.d_un.d_val;
    if (s >= str_size || memchr(im->p + str_off + s, 0, str_size - s) == NULL) {
      return refuse(name, err,
                    "ELF dynamic entry %s names offset 0x%llx, not a NUL-terminated string in "
                    "the string table (0x%llx bytes)",
                    what, (ull)s, (ull)str_size);
    }
  }
  return LW_OK;
}

static Elf64_Shdr shdr_at(const elf_image_t *im, uint64_t i) {
  Elf64_Shdr sh;
  memcpy(&sh, im->p + im->eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof sh);
  return sh;
}

// "section 27 (.symtab)", or "section 27" when the name table does not give a name.
static void section_label(const elf_image_t *im, const Elf64_Shdr *names, uint64_t i,
                          uint32_t sh_name, char *out, size_t cap) {
  int n = snprintf(out, cap, "section %llu", (ull)i);
  if (names == NULL || n < 0 || (size_t)n >= cap || sh_name >= names->sh_size) return;
  const char *s = (const char *)im->p + names->sh_offset + sh_name;
  size_t max = (size_t)(names->sh_size - sh_name);
  const char *nul = memchr(s, 0, max);
  if (nul == NULL || nul == s) return;
  snprintf(out + n, cap - (size_t)n, " (%.*s)", (int)(nul - s < 32 ? nul - s : 32), s);
}

// The section header table and every section's file bytes inside the image. ld.so never
// reads them, but a truncated image is mostly cut there (the table sits at the end), and a
// debugger or a profiler that opens the kernel would.
static lw_status_t check_sections(const elf_image_t *im) {
  const char *name = im->name;
  lw_error_t *err = im->err;
  const Elf64_Ehdr *eh = &im->eh;
  if (eh->e_shoff == 0) {
    if (eh->e_shnum != 0) {
      return refuse(name, err, "e_shnum is %u, but there is no section header table (e_shoff 0)",
                    (unsigned)eh->e_shnum);
    }
    return LW_OK;
  }
  if (eh->e_shentsize != sizeof(Elf64_Shdr)) {
    return refuse(name, err, "section header size e_shentsize is %u, not %zu",
                  (unsigned)eh->e_shentsize, sizeof(Elf64_Shdr));
  }
  uint64_t end = 0;
  if (!in_image(im, eh->e_shoff, sizeof(Elf64_Shdr), &end)) {
    return refuse(name, err,
                  "ELF section header table at 0x%llx starts past the image (%llu bytes): "
                  "truncated?",
                  (ull)eh->e_shoff, (ull)im->bytes);
  }
  // Extended numbering: with e_shnum 0 (or e_shstrndx SHN_XINDEX) the real value sits in
  // section 0's sh_size (sh_link).
  Elf64_Shdr s0 = shdr_at(im, 0);
  uint64_t shnum = eh->e_shnum != 0 ? eh->e_shnum : s0.sh_size;
  uint64_t table = 0;
  if (__builtin_mul_overflow(shnum, (uint64_t)sizeof(Elf64_Shdr), &table) ||
      !in_image(im, eh->e_shoff, table, &end)) {
    return refuse(name, err,
                  "ELF section header table (%llu sections at 0x%llx) ends past the image "
                  "(%llu bytes): truncated?",
                  (ull)shnum, (ull)eh->e_shoff, (ull)im->bytes);
  }
  uint64_t shstrndx = eh->e_shstrndx == SHN_XINDEX ? s0.sh_link : eh->e_shstrndx;
  Elf64_Shdr names_sh;
  const Elf64_Shdr *names = NULL;
  if (shstrndx != SHN_UNDEF) {
    if (shstrndx >= shnum) {
      return refuse(name, err, "e_shstrndx %llu is not a section (there are %llu)",
                    (ull)shstrndx, (ull)shnum);
    }
    names_sh = shdr_at(im, shstrndx);
    if (names_sh.sh_type != SHT_STRTAB) {
      return refuse(name, err, "e_shstrndx %llu names a section of type %u, not SHT_STRTAB",
                    (ull)shstrndx, (unsigned)names_sh.sh_type);
    }
    if (!in_image(im, names_sh.sh_offset, names_sh.sh_size, &end)) {
      return refuse(name, err,
                    "ELF section %llu (the section names) [0x%llx, +0x%llx) ends past the image "
                    "(%llu bytes): truncated?",
                    (ull)shstrndx, (ull)names_sh.sh_offset, (ull)names_sh.sh_size,
                    (ull)im->bytes);
    }
    names = &names_sh;
  }
  // Section 0 is reserved (it holds the extended counts, if any).
  for (uint64_t i = 1; i < shnum; ++i) {
    Elf64_Shdr sh = shdr_at(im, i);
    if (sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_NULL) continue;
    if (in_image(im, sh.sh_offset, sh.sh_size, &end)) continue;
    char label[64];
    section_label(im, names, i, sh.sh_name, label, sizeof label);
    if (end < sh.sh_offset) {
      return refuse(name, err, "ELF %s: offset 0x%llx + size 0x%llx overflows", label,
                    (ull)sh.sh_offset, (ull)sh.sh_size);
    }
    return refuse(name, err, "ELF %s [0x%llx, 0x%llx) ends past the image (%llu bytes): truncated?",
                  label, (ull)sh.sh_offset, (ull)end, (ull)im->bytes);
  }
  return LW_OK;
}

lw_status_t lw__image_check_elf(const uint8_t *elf, size_t bytes, const char *name,
                                lw_error_t *err) {
  LW_RETURN_IF_ERROR(check_size(elf, bytes, name, err));
  elf_image_t im = {.p = elf, .bytes = bytes, .name = name, .err = err};
  LW_RETURN_IF_ERROR(check_elf_header(&im));
  LW_RETURN_IF_ERROR(check_segments(&im));
  LW_RETURN_IF_ERROR(check_dynamic(&im));
  return check_sections(&im);
}

// ---------------------------------------------------------------------------------------------
// SPIR-V and OpenCL C

static uint32_t word_at(const uint8_t *p, size_t i) {
  uint32_t w;
  memcpy(&w, p + 4 * i, sizeof w);
  return w;
}

lw_status_t lw__image_check_spirv(const uint8_t *il, size_t bytes, const char *name,
                                  lw_error_t *err) {
  LW_RETURN_IF_ERROR(check_size(il, bytes, name, err));
  if (bytes < 4 || word_at(il, 0) != LW_SPIRV_MAGIC) {
    return refuse(name, err, "not a SPIR-V module (bad magic; need 0x%08x in this host's byte "
                  "order)", LW_SPIRV_MAGIC);
  }
  if (bytes % 4 != 0) {
    return refuse(name, err, "not a SPIR-V module (length %zu is not a whole number of 32-bit "
                  "words)", bytes);
  }
  size_t words = bytes / 4;
  if (words < LW_SPIRV_HEADER_WORDS) {
    return refuse(name, err, "truncated SPIR-V module (%zu bytes; its header alone is %u)",
                  bytes, 4 * LW_SPIRV_HEADER_WORDS);
  }
  for (size_t i = LW_SPIRV_HEADER_WORDS; i < words;) {
    uint32_t w = word_at(il, i);
    uint32_t count = w >> 16, opcode = w & 0xffffu;
    if (count == 0) {
      return refuse(name, err, "SPIR-V instruction at word %zu (opcode %u) has a word count of 0",
                    i, opcode);
    }
    if (count > words - i) {
      return refuse(name, err,
                    "SPIR-V instruction at word %zu (opcode %u, %u words) ends past the module "
                    "(%zu words): truncated?",
                    i, opcode, count, words);
    }
    i += count;
  }
  return LW_OK;
}

// Source text, OpenCL C or CUDA C: not empty, no NUL byte but one at the very end.
static lw_status_t check_source_text(const uint8_t *src, size_t bytes, const char *name,
                                     bool detected, const char *lang, lw_error_t *err) {
  LW_RETURN_IF_ERROR(check_size(src, bytes, name, err));
  const uint8_t *nul = memchr(src, 0, bytes);
  if (nul == NULL || nul == src + bytes - 1) return LW_OK;
  size_t at = (size_t)(nul - src);
  if (detected) {
    return refuse(name, err,
                  "no ELF, SPIR-V or fatbin magic, no PTX, and not OpenCL C or CUDA C source "
                  "either (a NUL byte at offset %zu of %zu)",
                  at, bytes);
  }
  return refuse(name, err,
                "%s source has a NUL byte at offset %zu of %zu (binary data given as %s?)", lang,
                at, bytes, lang);
}

lw_status_t lw__image_check_opencl_c(const uint8_t *src, size_t bytes, const char *name,
                                     bool detected, lw_error_t *err) {
  return check_source_text(src, bytes, name, detected, "OpenCL C", err);
}

// ---------------------------------------------------------------------------------------------
// The CUDA formats

lw_status_t lw__image_check_cuda_c(const uint8_t *src, size_t bytes, const char *name,
                                   bool detected, lw_error_t *err) {
  return check_source_text(src, bytes, name, detected, "CUDA C", err);
}

// The length of text without the one NUL a C string may end with.
static size_t text_len(const uint8_t *p, size_t bytes) {
  return bytes > 0 && p[bytes - 1] == 0 ? bytes - 1 : bytes;
}

static bool is_blank(uint8_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// From i, past white space and the comments PTX and CUDA C share (// to the end of the line,
// /* to */; one left open runs to the end of the text).
static size_t skip_blank(const uint8_t *p, size_t n, size_t i) {
  while (i < n) {
    if (is_blank(p[i])) {
      ++i;
    } else if (p[i] == '/' && i + 1 < n && p[i + 1] == '/') {
      i += 2;
      while (i < n && p[i] != '\n') ++i;
    } else if (p[i] == '/' && i + 1 < n && p[i + 1] == '*') {
      i += 2;
      while (i + 1 < n && !(p[i] == '*' && p[i + 1] == '/')) ++i;
      i = i + 1 < n ? i + 2 : n;
    } else {
      break;
    }
  }
  return i;
}

// A PTX token from i (not blank, not a comment): up to white space or a comment; a quoted
// string (a .file name may hold "//") is part of it.
static size_t ptx_token_end(const uint8_t *p, size_t n, size_t i) {
  while (i < n && !is_blank(p[i])) {
    if (p[i] == '/' && i + 1 < n && (p[i + 1] == '/' || p[i + 1] == '*')) break;
    if (p[i] == '"') {
      for (++i; i < n && p[i] != '"' && p[i] != '\n'; ++i) {}
      if (i < n && p[i] == '"') ++i;
      continue;
    }
    ++i;
  }
  return i;
}

static bool token_is(const uint8_t *p, size_t start, size_t end, const char *word) {
  size_t len = strlen(word);
  return end - start == len && memcmp(p + start, word, len) == 0;
}

bool lw__image_is_ptx(const uint8_t *p, size_t bytes) {
  if (p == NULL) return false;
  size_t n = text_len(p, bytes);
  size_t i = skip_blank(p, n, 0);
  return i < n && token_is(p, i, ptx_token_end(p, n, i), ".version");
}

// "8.5": digits, a dot, digits.
static bool is_ptx_version(const uint8_t *p, size_t start, size_t end) {
  size_t i = start, major = 0, minor = 0;
  for (; i < end && p[i] >= '0' && p[i] <= '9'; ++i) ++major;
  if (i == end || p[i] != '.') return false;
  for (++i; i < end && p[i] >= '0' && p[i] <= '9'; ++i) ++minor;
  return i == end && major > 0 && minor > 0;
}

lw_status_t lw__image_check_ptx(const uint8_t *src, size_t bytes, const char *name,
                                lw_error_t *err) {
  LW_RETURN_IF_ERROR(check_size(src, bytes, name, err));
  const uint8_t *nul = memchr(src, 0, bytes);
  if (nul != NULL && nul != src + bytes - 1) {
    return refuse(name, err, "PTX has a NUL byte at offset %zu of %zu (binary data given as PTX?)",
                  (size_t)(nul - src), bytes);
  }
  size_t n = text_len(src, bytes);
  size_t i = skip_blank(src, n, 0);
  if (i == n) return refuse(name, err, "PTX holds only comments and white space");
  size_t end = ptx_token_end(src, n, i);
  if (!token_is(src, i, end, ".version")) {
    return refuse(name, err,
                  "PTX must start with a .version directive (after comments), but starts with "
                  "'%.*s' at offset %zu",
                  (int)(end - i < 32 ? end - i : 32), (const char *)src + i, i);
  }
  size_t v = skip_blank(src, n, end), v_end = ptx_token_end(src, n, v);
  if (!is_ptx_version(src, v, v_end)) {
    return refuse(name, err, "PTX .version is followed by '%.*s', not a version such as 8.5",
                  (int)(v_end - v < 32 ? v_end - v : 32), (const char *)src + v);
  }
  for (i = skip_blank(src, n, v_end); i < n; i = skip_blank(src, n, end)) {
    end = ptx_token_end(src, n, i);
    if (token_is(src, i, end, ".target")) return LW_OK;
  }
  return refuse(name, err, "PTX has no .target directive (the sm_XY it was written for)");
}

static bool is_ident_char(uint8_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Past a string or character literal that starts at i (an escape skips the next byte; a line
// end closes one left open, as a compiler would complain).
static size_t skip_literal(const uint8_t *p, size_t n, size_t i) {
  uint8_t quote = p[i++];
  while (i < n && p[i] != quote && p[i] != '\n') i += (p[i] == '\\' && i + 1 < n) ? 2 : 1;
  return i < n && p[i] == quote ? i + 1 : i;
}

bool lw__image_is_cuda_c(const uint8_t *p, size_t bytes) {
  if (p == NULL) return false;
  size_t n = text_len(p, bytes);
  bool after_extern = false;
  for (size_t i = skip_blank(p, n, 0); i < n; i = skip_blank(p, n, i)) {
    size_t start = i;
    if (p[i] == '"' || p[i] == '\'') {
      i = skip_literal(p, n, i);
      // extern "C": C has no linkage specifications, so OpenCL C never holds one.
      if (after_extern && i - start == 3 && p[start] == '"' && p[start + 1] == 'C') return true;
      after_extern = false;
    } else if (is_ident_char(p[i])) {
      while (i < n && is_ident_char(p[i])) ++i;
      // __global__ (OpenCL C's address space is __global, without the trailing underscores).
      if (token_is(p, start, i, "__global__")) return true;
      after_extern = token_is(p, start, i, "extern");
    } else {
      ++i;
      after_extern = false;
    }
  }
  return false;
}

bool lw__image_is_cubin(const uint8_t *p, size_t bytes) {
  if (p == NULL || bytes < offsetof(Elf64_Ehdr, e_machine) + sizeof(Elf64_Half)) return false;
  if (memcmp(p, ELFMAG, SELFMAG) != 0) return false;
  // e_machine sits at the same offset in ELF32 and ELF64 headers; a CUBIN is little-endian.
  Elf64_Half machine;
  memcpy(&machine, p + offsetof(Elf64_Ehdr, e_machine), sizeof machine);
  return machine == EM_CUDA;
}

lw_status_t lw__image_check_cubin(const uint8_t *p, size_t bytes, const char *name,
                                  lw_error_t *err) {
  LW_RETURN_IF_ERROR(check_size(p, bytes, name, err));
  elf_image_t im = {.p = p, .bytes = bytes, .name = name, .err = err};
  LW_RETURN_IF_ERROR(check_elf_ident(&im));
  const Elf64_Ehdr *eh = &im.eh;
  if (eh->e_machine != EM_CUDA) {
    return refuse(name, err, "not a CUBIN (e_machine %u%s, need %u EM_CUDA)",
                  (unsigned)eh->e_machine,
                  eh->e_machine == LW_HOST_EM ? " " LW_HOST_EM_NAME ": a host shared object?" : "",
                  (unsigned)EM_CUDA);
  }
  if (eh->e_type != ET_EXEC && eh->e_type != ET_REL) {
    return refuse(name, err,
                  "a CUBIN is ET_EXEC (nvcc -cubin, NVRTC) or ET_REL (relocatable device code), "
                  "not e_type %u",
                  (unsigned)eh->e_type);
  }
  if (eh->e_ehsize != sizeof(Elf64_Ehdr)) {
    return refuse(name, err, "ELF header size e_ehsize is %u, not %zu", (unsigned)eh->e_ehsize,
                  sizeof(Elf64_Ehdr));
  }
  LW_RETURN_IF_ERROR(check_phdr_table(&im, true));
  for (uint32_t i = 0; i < eh->e_phnum; ++i) {
    Elf64_Phdr ph = phdr_at(&im, i);
    if (ph.p_type != PT_NULL) LW_RETURN_IF_ERROR(check_segment_file_range(&im, i, &ph));
  }
  // The driver finds a CUBIN's kernels, their parameters and their code through its sections.
  if (eh->e_shoff == 0) {
    return refuse(name, err,
                  "a CUBIN without a section header table (e_shoff 0): its kernels are found "
                  "through its sections");
  }
  return check_sections(&im);
}

int lw__image_cubin_has_kernel(const uint8_t *p, size_t bytes, const char *entry, char *kernels,
                               size_t kernels_bytes) {
  if (kernels_bytes > 0) kernels[0] = '\0';
  // The CUBIN's own check first: past it the section table and every section lie inside the
  // bytes. A CUBIN it refuses is left to the driver's load to judge.
  lw_error_t scratch;
  if (lw__image_check_cubin(p, bytes, "cubin", &scratch) != LW_OK) return -1;
  elf_image_t im = {.p = p, .bytes = bytes};
  memcpy(&im.eh, p, sizeof im.eh);
  const Elf64_Ehdr *eh = &im.eh;
  Elf64_Shdr s0 = shdr_at(&im, 0);
  uint64_t shnum = eh->e_shnum != 0 ? eh->e_shnum : s0.sh_size;
  uint64_t shstrndx = eh->e_shstrndx == SHN_XINDEX ? s0.sh_link : eh->e_shstrndx;
  if (shstrndx == SHN_UNDEF) return -1;  // no section names to look in
  Elf64_Shdr names = shdr_at(&im, shstrndx);
  static const char kText[] = ".text.";
  const size_t text_len = sizeof(kText) - 1, entry_len = strlen(entry);
  size_t used = 0;
  bool cut = false;
  for (uint64_t i = 1; i < shnum; ++i) {
    Elf64_Shdr sh = shdr_at(&im, i);
    if (sh.sh_name >= names.sh_size) continue;
    const char *s = (const char *)p + names.sh_offset + sh.sh_name;
    const char *nul = memchr(s, 0, (size_t)(names.sh_size - sh.sh_name));
    if (nul == NULL || (size_t)(nul - s) <= text_len || memcmp(s, kText, text_len) != 0) continue;
    const char *fn = s + text_len;
    size_t fn_len = (size_t)(nul - fn);
    if (fn_len == entry_len && memcmp(fn, entry, entry_len) == 0) return 1;
    if (cut || kernels_bytes == 0) continue;
    int n = snprintf(kernels + used, kernels_bytes - used, "%s%.*s", used ? ", " : "",
                     (int)fn_len, fn);
    if (n < 0 || (size_t)n >= kernels_bytes - used) {
      cut = true;  // the list ends with what fitted
      kernels[used] = '\0';
      snprintf(kernels + used, kernels_bytes - used, "%s", used ? ", ..." : "...");
    } else {
      used += (size_t)n;
    }
  }
  if (kernels_bytes > 0 && kernels[0] == '\0') snprintf(kernels, kernels_bytes, "none");
  return 0;
}

// The fat binary container: a 16-byte header, then entries (each a header and its payload)
// that tile the fatSize bytes after the header exactly.
#define LW_FATBIN_MAGIC 0xBA55ED50u
#define LW_FATBIN_VERSION 1u
#define LW_FATBIN_HEADER_BYTES 16u
// The fields of an entry's header this check reads: u16 kind, u16 version, u32 header size,
// u64 payload size.
#define LW_FATBIN_ENTRY_MIN_BYTES 16u

bool lw__image_is_fatbin(const uint8_t *p, size_t bytes) {
  return p != NULL && bytes >= 4 && word_at(p, 0) == LW_FATBIN_MAGIC;
}

static bool all_zero(const uint8_t *p, uint64_t from, uint64_t to) {
  for (uint64_t i = from; i < to; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

lw_status_t lw__image_check_fatbin(const uint8_t *p, size_t bytes, const char *name,
                                   lw_error_t *err) {
  LW_RETURN_IF_ERROR(check_size(p, bytes, name, err));
  if (!lw__image_is_fatbin(p, bytes)) {
    return refuse(name, err, "not a CUDA fat binary (bad magic; need 0x%08x, little-endian)",
                  LW_FATBIN_MAGIC);
  }
  if (bytes < LW_FATBIN_HEADER_BYTES) {
    return refuse(name, err, "truncated fat binary header (%zu bytes, need %u)", bytes,
                  LW_FATBIN_HEADER_BYTES);
  }
  uint16_t version, header_size;
  uint64_t fat_size;
  memcpy(&version, p + 4, sizeof version);
  memcpy(&header_size, p + 6, sizeof header_size);
  memcpy(&fat_size, p + 8, sizeof fat_size);
  if (version != LW_FATBIN_VERSION) {
    return refuse(name, err, "fat binary version %u (version %u is the one known)",
                  (unsigned)version, LW_FATBIN_VERSION);
  }
  if (header_size < LW_FATBIN_HEADER_BYTES || header_size > bytes) {
    return refuse(name, err,
                  "fat binary header size %u is outside [%u, %zu] (the header's own size, at "
                  "most the image)",
                  (unsigned)header_size, LW_FATBIN_HEADER_BYTES, bytes);
  }
  uint64_t end;
  if (__builtin_add_overflow((uint64_t)header_size, fat_size, &end) || end > bytes) {
    return refuse(name, err,
                  "fat binary of %u + %llu bytes (header + fatSize) ends past the image "
                  "(%zu bytes): truncated?",
                  (unsigned)header_size, (ull)fat_size, bytes);
  }
  unsigned entries = 0;
  uint64_t off = header_size;
  while (off < end) {
    if (end - off < LW_FATBIN_ENTRY_MIN_BYTES) {
      if (all_zero(p, off, end)) break;
      return refuse(name, err,
                    "fat binary: %llu bytes left at offset 0x%llx, too few for an entry header "
                    "(%u)",
                    (ull)(end - off), (ull)off, LW_FATBIN_ENTRY_MIN_BYTES);
    }
    uint16_t kind;
    uint32_t entry_header;
    uint64_t payload, entry_end;
    memcpy(&kind, p + off, sizeof kind);
    memcpy(&entry_header, p + off + 4, sizeof entry_header);
    memcpy(&payload, p + off + 8, sizeof payload);
    // Zeros where an entry would start: padding to the end (every byte of it zero).
    if (kind == 0 && entry_header == 0 && all_zero(p, off, end)) break;
    if (entry_header < LW_FATBIN_ENTRY_MIN_BYTES) {
      return refuse(name, err,
                    "fat binary entry %u at offset 0x%llx has a header size of %u, less than "
                    "its %u bytes of fixed fields",
                    entries, (ull)off, entry_header, LW_FATBIN_ENTRY_MIN_BYTES);
    }
    if (__builtin_add_overflow(off, (uint64_t)entry_header, &entry_end) ||
        __builtin_add_overflow(entry_end, payload, &entry_end) || entry_end > end) {
      return refuse(name, err,
                    "fat binary entry %u at offset 0x%llx (kind %u, %u-byte header, %llu-byte "
                    "payload) ends past the fat binary's end 0x%llx: truncated?",
                    entries, (ull)off, (unsigned)kind, entry_header, (ull)payload, (ull)end);
    }
    ++entries;
    off = entry_end;
  }
  if (entries == 0) return refuse(name, err, "fat binary holds no entries (no CUBIN, no PTX)");
  if (!all_zero(p, end, bytes)) {
    return refuse(name, err,
                  "%llu bytes after the fat binary's end 0x%llx are not zero padding (a second "
                  "fat binary? register one at a time)",
                  (ull)(bytes - end), (ull)end);
  }
  return LW_OK;
}
