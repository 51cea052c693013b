// tests/callables/test_image_validate.c — the checks of kernel image bytes
// (callables/image_check.h): every damaged image of tests/callables/bad_images.h, every cut of
// a real kernel, one corruption per ELF rule, SPIR-V and OpenCL C, lw__image_load refusing
// what it must never dlopen, and `lanework pack` refusing the same files for the same reasons.
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "callables/bad_images.h"
#include "callables/image.h"
#include "callables/image_check.h"
#include "callables_test_util.h"

static lw_error_t err;

static void setup(void) { memset(&err, 0, sizeof err); }

TestSuite(image_validate, .init = setup, .timeout = 120);

static void assert_refused(lw_status_t st, const char *what, const char *needle) {
  cr_assert_eq(st, LW_INVALID_ARGUMENT, "%s: status %s, message '%s'", what,
               lw_status_name(st), err.message);
  cr_assert_eq(err.code, LW_INVALID_ARGUMENT, "%s", what);
  cr_assert_not_null(strstr(err.message, needle), "%s: message '%s' lacks '%s'", what,
                     err.message, needle);
}

// ---- the damaged images -------------------------------------------------------------------

Test(image_validate, every_built_kernel_passes) {
  DIR *d = opendir(lw_test_kernel_dir());
  cr_assert_not_null(d);
  int seen = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 4 || strcmp(e->d_name + len - 3, ".so") != 0) continue;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(len - 3), e->d_name);
    size_t n = 0;
    uint8_t *elf = test_read_kernel(name, &n);
    cr_assert_eq(lw__image_check_elf(elf, n, name, &err), LW_OK, "%s", err.message);
    free(elf);
    ++seen;
  }
  closedir(d);
  cr_assert_gt(seen, 10, "found %d kernels", seen);
}

Test(image_validate, each_damaged_image_is_refused_naming_the_callable_and_what_is_wrong) {
  lw_test_bad_images_t set;
  lw_test_bad_images_make(&set, "vector_add");
  for (size_t i = 0; i < set.count; ++i) {
    const lw_test_bad_image_t *b = &set.image[i];
    memset(&err, 0, sizeof err);
    lw_status_t st;
    if (b->zstd) {
      lw_image_bytes_t out;
      st = lw__image_decode(b->bytes, b->n, "vadd", &out, &err);
    } else {
      st = lw__image_check_elf(b->bytes, b->n, "vadd", &err);
    }
    assert_refused(st, b->what, b->reason);
    cr_assert(strncmp(err.message, "callable vadd: ", 15) == 0, "%s: '%s'", b->what,
              err.message);
  }
  lw_test_bad_images_free(&set);
}

Test(image_validate, every_cut_of_a_kernel_is_refused) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("vector_add", &n);
  cr_assert_eq(lw__image_check_elf(elf, n, "whole", &err), LW_OK, "%s", err.message);
  for (size_t cut = 0; cut < n; ++cut) {
    // An exact-size copy, so a check that read past the cut would read past the allocation
    // (ASan builds report it).
    uint8_t *copy = malloc(cut ? cut : 1);
    cr_assert_not_null(copy);
    memcpy(copy, elf, cut);
    cr_assert_eq(lw__image_check_elf(copy, cut, "cut", &err), LW_INVALID_ARGUMENT,
                 "the kernel cut at %zu of %zu bytes passed", cut, n);
    free(copy);
  }
  free(elf);
}

Test(image_validate, load_refuses_a_damaged_image_instead_of_handing_it_to_dlopen) {
  lw_test_bad_images_t set;
  lw_test_bad_images_make(&set, "vector_add");
  int fds = test_count_fds();
  for (size_t i = 0; i < set.count; ++i) {
    const lw_test_bad_image_t *b = &set.image[i];
    if (b->zstd) continue;  // lw__image_load takes plain ELF bytes
    lw_loaded_image_t img;
    memset(&err, 0, sizeof err);
    assert_refused(lw__image_load(b->bytes, b->n, NULL, "vadd", &img, &err), b->what,
                   b->reason);
    cr_assert_null(img.dl, "%s", b->what);
  }
  cr_assert_eq(test_count_fds(), fds, "a refused load left an fd open");
  lw_test_bad_images_free(&set);
}

// ---- one corruption per rule ----------------------------------------------------------------

typedef struct kernel_copy {
  uint8_t *p;
  size_t n;
  Elf64_Ehdr eh;
} kernel_copy_t;

static kernel_copy_t copy_kernel(const char *name) {
  kernel_copy_t k;
  k.p = test_read_kernel(name, &k.n);
  memcpy(&k.eh, k.p, sizeof k.eh);
  return k;
}

static Elf64_Phdr get_ph(const kernel_copy_t *k, uint32_t i) {
  Elf64_Phdr ph;
  memcpy(&ph, k->p + k->eh.e_phoff + i * sizeof ph, sizeof ph);
  return ph;
}

static void put_ph(kernel_copy_t *k, uint32_t i, const Elf64_Phdr *ph) {
  memcpy(k->p + k->eh.e_phoff + i * sizeof *ph, ph, sizeof *ph);
}

static void put_eh(kernel_copy_t *k) { memcpy(k->p, &k->eh, sizeof k->eh); }

// The index of the first program header of type, or fails the test.
static uint32_t find_ph(const kernel_copy_t *k, uint32_t type, uint32_t nth) {
  for (uint32_t i = 0; i < k->eh.e_phnum; ++i) {
    if (get_ph(k, i).p_type == type && nth-- == 0) return i;
  }
  cr_assert_fail("the kernel has no program header of type 0x%x", type);
  return 0;
}

// The file offset of the dynamic entry with tag, or fails the test (PT_DYNAMIC's p_offset is
// where the array sits in the file).
static size_t find_dyn(const kernel_copy_t *k, int64_t tag) {
  Elf64_Phdr dyn = get_ph(k, find_ph(k, PT_DYNAMIC, 0));
  for (size_t off = dyn.p_offset; off + sizeof(Elf64_Dyn) <= dyn.p_offset + dyn.p_filesz;
       off += sizeof(Elf64_Dyn)) {
    Elf64_Dyn d;
    memcpy(&d, k->p + off, sizeof d);
    if (d.d_tag == tag) return off;
  }
  cr_assert_fail("the kernel has no dynamic entry 0x%llx", (unsigned long long)tag);
  return 0;
}

static void expect_refused(kernel_copy_t *k, const char *what, const char *needle) {
  memset(&err, 0, sizeof err);
  assert_refused(lw__image_check_elf(k->p, k->n, "k", &err), what, needle);
  free(k->p);
}

Test(image_validate, header_fields_other_than_the_magic_are_checked) {
  kernel_copy_t k = copy_kernel("vector_add");
  k.eh.e_phentsize = 32;
  put_eh(&k);
  expect_refused(&k, "e_phentsize", "program header size e_phentsize is 32, not 56");

  k = copy_kernel("vector_add");
  k.eh.e_shentsize = 40;
  put_eh(&k);
  expect_refused(&k, "e_shentsize", "section header size e_shentsize is 40, not 64");

  k = copy_kernel("vector_add");
  k.eh.e_version = 7;
  put_eh(&k);
  expect_refused(&k, "e_version", "unknown ELF version");

  k = copy_kernel("vector_add");
  k.eh.e_phnum = 0;
  put_eh(&k);
  expect_refused(&k, "e_phnum 0", "no program headers");

  k = copy_kernel("vector_add");
  k.eh.e_phnum = PN_XNUM;
  put_eh(&k);
  expect_refused(&k, "PN_XNUM", "more than LW_ELF_MAX_PROGRAM_HEADERS");

  k = copy_kernel("vector_add");
  k.eh.e_shstrndx = (Elf64_Half)(k.eh.e_shnum + 5);
  put_eh(&k);
  expect_refused(&k, "e_shstrndx", "is not a section");

  k = copy_kernel("vector_add");
  k.eh.e_shstrndx = 1;  // .note.gnu.build-id, a note
  put_eh(&k);
  expect_refused(&k, "e_shstrndx on a note", "not SHT_STRTAB");
}

Test(image_validate, segment_rules_are_checked_with_overflow_in_mind) {
  kernel_copy_t k = copy_kernel("vector_add");
  uint32_t i = find_ph(&k, PT_LOAD, 1);
  Elf64_Phdr ph = get_ph(&k, i);
  ph.p_filesz = ph.p_memsz + 1;
  put_ph(&k, i, &ph);
  expect_refused(&k, "filesz > memsz", "exceeds its memory size");

  // An offset that wraps around with the size: a check that added without overflow in mind
  // would find the end "inside" the image.
  k = copy_kernel("vector_add");
  ph = get_ph(&k, i);
  ph.p_offset = UINT64_MAX - 8;
  put_ph(&k, i, &ph);
  expect_refused(&k, "offset overflow", "overflows");

  k = copy_kernel("vector_add");
  ph = get_ph(&k, i);
  ph.p_vaddr = UINT64_MAX - 8;
  ph.p_offset = ph.p_vaddr & (ph.p_align - 1);
  put_ph(&k, i, &ph);
  expect_refused(&k, "vaddr overflow", "overflows");

  k = copy_kernel("vector_add");
  ph = get_ph(&k, i);
  ph.p_align = 0x3000;
  put_ph(&k, i, &ph);
  expect_refused(&k, "alignment", "is not a power of 2");

  k = copy_kernel("vector_add");
  ph = get_ph(&k, i);
  ph.p_vaddr += 8;
  put_ph(&k, i, &ph);
  expect_refused(&k, "vaddr/offset", "differ modulo its alignment");

  // Two PT_LOAD headers swapped: out of order.
  k = copy_kernel("vector_add");
  uint32_t a = find_ph(&k, PT_LOAD, 0), b = find_ph(&k, PT_LOAD, 1);
  Elf64_Phdr pa = get_ph(&k, a), pb = get_ph(&k, b);
  put_ph(&k, a, &pb);
  put_ph(&k, b, &pa);
  expect_refused(&k, "loads out of order", "out of order or overlapping");

  // The dynamic array moved to an address no segment maps.
  k = copy_kernel("vector_add");
  i = find_ph(&k, PT_DYNAMIC, 0);
  ph = get_ph(&k, i);
  ph.p_vaddr = 0x40000000;
  put_ph(&k, i, &ph);
  expect_refused(&k, "PT_DYNAMIC outside", "(PT_DYNAMIC) at address 0x40000000");

  // A note past the end of the file (its file range, not only PT_LOAD's, is checked).
  k = copy_kernel("vector_add");
  i = find_ph(&k, PT_NOTE, 0);
  ph = get_ph(&k, i);
  ph.p_offset = k.n - 4;
  put_ph(&k, i, &ph);
  expect_refused(&k, "PT_NOTE past the end", "(PT_NOTE)");

  // No PT_LOAD at all.
  k = copy_kernel("vector_add");
  for (uint32_t j = 0; j < k.eh.e_phnum; ++j) {
    ph = get_ph(&k, j);
    if (ph.p_type == PT_LOAD) ph.p_type = PT_NULL;
    put_ph(&k, j, &ph);
  }
  expect_refused(&k, "no PT_LOAD", "no PT_LOAD segment");
}

Test(image_validate, the_dynamic_array_is_checked_as_ld_so_reads_it) {
  kernel_copy_t k = copy_kernel("vector_add");
  Elf64_Dyn d = {.d_tag = DT_RELAENT, .d_un = {.d_val = 12}};
  memcpy(k.p + find_dyn(&k, DT_RELAENT), &d, sizeof d);
  expect_refused(&k, "DT_RELAENT", "DT_RELA without DT_RELAENT = 24");

  k = copy_kernel("vector_add");
  d = (Elf64_Dyn){.d_tag = DT_STRTAB, .d_un = {.d_ptr = 0x7fff0000}};
  memcpy(k.p + find_dyn(&k, DT_STRTAB), &d, sizeof d);
  expect_refused(&k, "DT_STRTAB", "DT_STRTAB [0x7fff0000");

  k = copy_kernel("vector_add");
  d = (Elf64_Dyn){.d_tag = DT_STRSZ, .d_un = {.d_val = 0x100000}};
  memcpy(k.p + find_dyn(&k, DT_STRSZ), &d, sizeof d);
  expect_refused(&k, "DT_STRSZ too big", "lies outside every PT_LOAD segment");

  k = copy_kernel("vector_add");
  d = (Elf64_Dyn){.d_tag = DT_PLTREL, .d_un = {.d_val = DT_REL}};
  memcpy(k.p + find_dyn(&k, DT_RELACOUNT), &d, sizeof d);
  expect_refused(&k, "DT_PLTREL", "this host needs DT_RELA");

  // A name offset past the string table.
  k = copy_kernel("vector_add");
  d = (Elf64_Dyn){.d_tag = DT_NEEDED, .d_un = {.d_val = 0x1000}};
  memcpy(k.p + find_dyn(&k, DT_RELACOUNT), &d, sizeof d);
  expect_refused(&k, "DT_NEEDED", "DT_NEEDED names offset 0x1000");

  // Every DT_NULL turned into something else: nothing ends the array.
  k = copy_kernel("vector_add");
  Elf64_Phdr dyn = get_ph(&k, find_ph(&k, PT_DYNAMIC, 0));
  for (size_t off = dyn.p_offset; off + sizeof d <= dyn.p_offset + dyn.p_filesz;
       off += sizeof d) {
    memcpy(&d, k.p + off, sizeof d);
    if (d.d_tag == DT_NULL) d.d_tag = DT_DEBUG;
    memcpy(k.p + off, &d, sizeof d);
  }
  expect_refused(&k, "no DT_NULL", "has no DT_NULL");
}

Test(image_validate, section_table_and_sections_lie_inside_the_image) {
  kernel_copy_t k = copy_kernel("vector_add");
  // Section 1's offset moved past the end.
  Elf64_Shdr sh;
  size_t at = k.eh.e_shoff + sizeof sh;
  memcpy(&sh, k.p + at, sizeof sh);
  sh.sh_offset = k.n;
  memcpy(k.p + at, &sh, sizeof sh);
  expect_refused(&k, "section past the end", "ELF section 1 (.note.gnu.build-id) [");

  k = copy_kernel("vector_add");
  memcpy(&sh, k.p + at, sizeof sh);
  sh.sh_size = UINT64_MAX - 4;
  memcpy(k.p + at, &sh, sizeof sh);
  expect_refused(&k, "section size overflow", "overflows");

  // Extended numbering: e_shnum 0 takes the count from section 0, which says too many.
  k = copy_kernel("vector_add");
  k.eh.e_shnum = 0;
  put_eh(&k);
  memcpy(&sh, k.p + k.eh.e_shoff, sizeof sh);
  sh.sh_size = 1u << 20;
  memcpy(k.p + k.eh.e_shoff, &sh, sizeof sh);
  expect_refused(&k, "extended count", "sections at 0x");

  k = copy_kernel("vector_add");
  k.eh.e_shoff = UINT64_MAX - 16;
  put_eh(&k);
  expect_refused(&k, "e_shoff overflow", "section header table");

  // No section table at all is a valid image (what sstrip leaves); a count without one is not.
  k = copy_kernel("vector_add");
  k.eh.e_shoff = 0;
  k.eh.e_shnum = 0;
  k.eh.e_shstrndx = 0;
  put_eh(&k);
  cr_assert_eq(lw__image_check_elf(k.p, k.n, "k", &err), LW_OK, "%s", err.message);
  k.eh.e_shnum = 3;
  put_eh(&k);
  expect_refused(&k, "e_shnum without e_shoff", "no section header table");
}

// ---- SPIR-V and OpenCL C ------------------------------------------------------------------

Test(image_validate, spirv_modules_are_refused_when_cut_short) {
  // The header, then OpCapability Shader (2 words) and OpMemoryModel Logical GLSL450 (3).
  uint32_t m[10] = {0x07230203u, 0x00010000u, 0, 8, 0,
                    (2u << 16) | 17u, 1, (3u << 16) | 14u, 0, 1};
  const uint8_t *p = (const uint8_t *)m;
  cr_assert_eq(lw__image_check_spirv(p, sizeof m, "il", &err), LW_OK, "%s", err.message);
  cr_assert_eq(lw__image_check_spirv(p, 20, "il", &err), LW_OK, "a header alone: %s",
               err.message);
  assert_refused(lw__image_check_spirv(p, 8, "il", &err), "8 bytes", "truncated SPIR-V module");
  assert_refused(lw__image_check_spirv(p, 36, "il", &err), "cut in an instruction",
                 "SPIR-V instruction at word 7 (opcode 14, 3 words) ends past the module");
  assert_refused(lw__image_check_spirv(p, 6, "il", &err), "6 bytes", "not a whole number");
  m[5] = 17u;  // word count 0
  assert_refused(lw__image_check_spirv(p, sizeof m, "il", &err), "word count 0",
                 "word count of 0");
  assert_refused(lw__image_check_spirv(p, 0, "il", &err), "empty", "image is empty");
}

Test(image_validate, garbage_without_a_magic_is_not_taken_for_opencl_source) {
  const uint8_t junk[] = {0x13, 0x37, 0x00, 0x42, 0x99};
  lw_image_bytes_t out;
  lw_image_format_t f;
  assert_refused(lw__image_decode_format(junk, sizeof junk, "junk", LW_IMAGE_AUTO, &out, &f, &err),
                 "junk",
                 "no ELF, SPIR-V or fatbin magic, no PTX, and not OpenCL C or CUDA C source "
                 "either");
  assert_refused(
      lw__image_decode_format(junk, sizeof junk, "junk", LW_IMAGE_OPENCL_C, &out, &f, &err),
      "junk as OpenCL C", "OpenCL C source has a NUL byte at offset 2 of 5");
  const char src[] = "__kernel void k(__global int *a) { a[0] = 1; }";
  cr_assert_eq(lw__image_decode_format(src, sizeof src, "src", LW_IMAGE_AUTO, &out, &f, &err),
               LW_OK, "%s", err.message);
  cr_assert_eq(f, LW_IMAGE_OPENCL_C);
  lw__image_bytes_release(&out);
}

// ---- lanework pack ------------------------------------------------------------------------

typedef struct pack_result {
  int code;
  char *err;
} pack_result_t;

static pack_result_t run_pack(const char *in, const char *out) {
  FILE *errf = tmpfile();
  cr_assert_not_null(errf);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(fileno(errf), 2);
    const char *tool = lw_test_tool_path();
    execl(tool, tool, "pack", in, "-o", out, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status), "lanework pack %s died: status 0x%x", in, status);
  pack_result_t r = {WEXITSTATUS(status), lw_test_read_all(errf)};
  fclose(errf);
  return r;
}

static void write_file(const char *path, const uint8_t *p, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  cr_assert_geq(fd, 0, "%s", path);
  cr_assert_eq(write(fd, p, n), (ssize_t)n);
  cr_assert_eq(close(fd), 0);
}

Test(image_validate, pack_refuses_each_damaged_image_for_the_same_reason) {
  char dir[] = "/tmp/lw-pack-bad.XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char in[512], out[512];
  snprintf(in, sizeof in, "%s/vadd.so", dir);
  snprintf(out, sizeof out, "%s/vadd.lwk", dir);
  lw_test_bad_images_t set;
  lw_test_bad_images_make(&set, "vector_add");

  // The whole kernel packs: the refusals below are about the bytes.
  write_file(in, set.elf, set.elf_bytes);
  pack_result_t r = run_pack(in, out);
  cr_assert_eq(r.code, 0, "%s", r.err);
  free(r.err);
  cr_assert_eq(unlink(out), 0);

  for (size_t i = 0; i < set.count; ++i) {
    const lw_test_bad_image_t *b = &set.image[i];
    if (b->zstd) continue;  // already packed: pack says so
    if (b->mapped_bytes) {
      // A sparse file of the same size: the kernel, then a hole.
      write_file(in, set.elf, set.elf_bytes);
      cr_assert_eq(truncate(in, (off_t)b->n), 0);
    } else {
      write_file(in, b->bytes, b->n);
    }
    r = run_pack(in, out);
    cr_assert_neq(r.code, 0, "pack accepted %s", b->what);
    cr_assert_not_null(strstr(r.err, b->reason), "%s: stderr '%s' lacks '%s'", b->what, r.err,
                       b->reason);
    if (!b->mapped_bytes) {
      // The very words of the check, so pack and register agree.
      memset(&err, 0, sizeof err);
      cr_assert_eq(lw__image_check_elf(b->bytes, b->n, NULL, &err), LW_INVALID_ARGUMENT);
      const char *why = strstr(err.message, "image is not a valid kernel: ");
      cr_assert_not_null(why, "%s", err.message);
      cr_assert_not_null(strstr(r.err, why), "%s: stderr '%s' lacks '%s'", b->what, r.err, why);
    }
    free(r.err);
    cr_assert_eq(access(out, F_OK), -1, "pack wrote %s for %s", out, b->what);
  }
  lw_test_bad_images_free(&set);
  unlink(in);
  cr_assert_eq(rmdir(dir), 0, "pack left files in %s", dir);
}
