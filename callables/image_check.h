// callables/image_check.h — the checks a kernel image's bytes pass before anything loads them,
// one per format: an ELF shared object (the sim backend), SPIR-V IL and OpenCL C source (the
// opencl backend), CUDA C source, PTX, a CUBIN and a fat binary (the cuda backend), and the
// tests AUTO detection uses for the CUDA formats. A zstd frame (a packed .lwk) is decompressed
// first, bounded and checked by callables/image.c; what comes out is checked here like any other
// image.
//
// Who calls them: every register, at L2 on the chip's register lane before the backend's load
// and at L3 in the program's process (lw_worker_register, before anything is sent to a chip
// child), then again in the chip child; lw__image_load before its dlopen; `lanework pack`
// before it packs. So an image that fails here fails its register with INVALID_ARGUMENT and is
// never handed to dlopen, to an OpenCL compiler, to NVRTC or to the CUDA driver.
//
// What they are for: damaged files (a truncated copy, a download cut short, garbage, a kernel
// built for another machine, something far too big) must not crash the process that loads
// them. ld.so maps an ELF image's segments straight from its bytes, and a segment that ends
// past the end of a truncated image is a SIGBUS on its first touch, which no error code can
// report. They are not a sandbox: a kernel image is code, and an image crafted to pass these
// checks can still do whatever a kernel can (docs/api.md, "What register checks in an image").
//
// Limits: an image holds at most LW_MAX_IMAGE_BYTES bytes (lanework/callable.h; decompressed),
// an ELF image at most LW_ELF_MAX_PROGRAM_HEADERS program headers.
//
// Thread safety: pure functions of their arguments; any thread. The bytes may sit at any
// alignment (every header is copied out before it is read) and are never written.
#ifndef LANEWORK_CALLABLES_IMAGE_CHECK_H_
#define LANEWORK_CALLABLES_IMAGE_CHECK_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lanework/callable.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Program headers an ELF image may have. Compilers and linkers write about ten; a limit keeps
// the cost of the checks (each special segment is looked up among the loaded ones) bounded for
// any input.
#define LW_ELF_MAX_PROGRAM_HEADERS 256

// Messages about a callable say "callable <name>: ..."; a descriptor without a name says
// "callable: ...". Every message of these checks then says "image is not a valid kernel: "
// and what is wrong, with offsets in hex and sizes in bytes.
#define LW__CALLABLE_NAME_FMT "callable%s%s"
#define LW__CALLABLE_NAME_ARGS(name) ((name) ? " " : ""), ((name) ? (name) : "")

// An ELF image the sim backend can hand to dlopen without crashing:
//   - not empty, at most LW_MAX_IMAGE_BYTES bytes;
//   - the header is whole and sane: the magic, ELFCLASS64, ELFDATA2LSB, EV_CURRENT, ET_DYN,
//     this host's e_machine, e_ehsize / e_phentsize / e_shentsize the sizes of the ELF64
//     structs, 1..LW_ELF_MAX_PROGRAM_HEADERS program headers (PN_XNUM refused);
//   - the program header table and every segment's file range [p_offset, p_offset + p_filesz)
//     lie inside the image; a PT_LOAD segment has p_filesz <= p_memsz, an alignment that is 0
//     or a power of two with p_vaddr and p_offset congruent modulo it, and starts at or after
//     the end of the one before (there is at least one);
//   - the segments ld.so reads through the mapping (PT_DYNAMIC, PT_TLS's initial image,
//     PT_NOTE, PT_GNU_EH_FRAME, PT_GNU_PROPERTY, PT_PHDR) lie inside a PT_LOAD segment, the
//     dynamic array inside one's file bytes, ended by DT_NULL; its address entries
//     (DT_STRTAB, DT_SYMTAB, the hash tables, the relocation tables, init/fini code and arrays,
//     the version tables) and their sizes lie inside a PT_LOAD segment; its entry sizes
//     (DT_RELAENT, DT_RELRENT, DT_SYMENT, DT_PLTREL) are the ones ld.so expects;
//     its string offsets (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH) name NUL-terminated
//     strings inside DT_STRSZ;
//   - the section header table (if any; extended numbering read from section 0) and every
//     section's file range but SHT_NOBITS's lie inside the image, and e_shstrndx is
//     SHN_UNDEF or names an SHT_STRTAB section.
// All arithmetic on the image's values is checked for overflow. INVALID_ARGUMENT naming the
// callable and the first thing wrong ("callable vadd: image is not a valid kernel: ELF
// segment 1 (PT_LOAD) [0x1000, 0x1161) ends past the image (4000 bytes): truncated?").
LW_MUST_USE lw_status_t lw__image_check_elf(const uint8_t *elf, size_t bytes, const char *name,
                                            lw_error_t *err);

// A SPIR-V module in this host's byte order: the magic 0x07230203, a whole number of 32-bit
// words, and, past the 5-word header, instructions whose word counts (the high half of each
// instruction's first word) are not 0 and tile the module exactly, so a module cut in the
// middle of an instruction is refused. INVALID_ARGUMENT as above.
LW_MUST_USE lw_status_t lw__image_check_spirv(const uint8_t *il, size_t bytes, const char *name,
                                              lw_error_t *err);

// OpenCL C source: not empty, and no NUL byte except one at the very end (the source goes to
// the compiler with its length; a NUL before the end would cut it short without a word).
// detected: the format was not given but guessed (no magic, no PTX, no CUDA C marker), so a
// NUL byte means the bytes are no kernel of any format, and the message says so.
LW_MUST_USE lw_status_t lw__image_check_opencl_c(const uint8_t *src, size_t bytes,
                                                 const char *name, bool detected,
                                                 lw_error_t *err);

// CUDA C/C++ source (NVRTC): the same text rules as OpenCL C.
LW_MUST_USE lw_status_t lw__image_check_cuda_c(const uint8_t *src, size_t bytes,
                                               const char *name, bool detected,
                                               lw_error_t *err);

// PTX text: no NUL byte but one at the very end (the driver and nvJitLink take PTX as a C
// string); the first thing after white space and comments (// and /* */) is a `.version`
// directive followed by a version number ("8.5"), and a `.target` directive follows somewhere
// (outside comments). INVALID_ARGUMENT as above.
LW_MUST_USE lw_status_t lw__image_check_ptx(const uint8_t *src, size_t bytes, const char *name,
                                            lw_error_t *err);

// A CUBIN (a CUDA ELF for one sm_XY): the ELF identification of lw__image_check_elf (magic, a
// whole ELF64 header, ELFCLASS64, ELFDATA2LSB, EV_CURRENT), e_machine EM_CUDA (190), e_type
// ET_EXEC or ET_REL, e_ehsize the ELF64 header's size; a program header table (optional) of at
// most LW_ELF_MAX_PROGRAM_HEADERS entries and every segment's file bytes inside the image; a
// section header table, and every section, checked as for an ELF image. The host-only rules
// (ET_DYN, the dynamic array, PT_LOAD order) do not apply: no CUBIN reaches dlopen, and an
// ELF image with e_machine EM_CUDA is refused by lw__image_check_elf as "a CUDA CUBIN".
LW_MUST_USE lw_status_t lw__image_check_cubin(const uint8_t *p, size_t bytes, const char *name,
                                              lw_error_t *err);

// Whether the CUBIN p holds a kernel named entry: a section named ".text.<entry>", the code
// section a CUBIN gives each of its functions (what cuModuleGetFunction finds is among them).
// Returns 1 when it does; 0 when it does not, with the names its ".text." sections give written
// to kernels (", "-separated, cut to fit kernels_bytes, "none" when there are none); -1 when
// the bytes fail lw__image_check_cubin or name no section names table (nothing is said then:
// the driver's load decides). Reads only inside [p, p + bytes); for a CUBIN from NVRTC or
// nvJitLink as for one a register was given.
int lw__image_cubin_has_kernel(const uint8_t *p, size_t bytes, const char *entry, char *kernels,
                               size_t kernels_bytes);

// A CUDA fat binary (what nvcc -fatbin writes): the little-endian word 0xBA55ED50, version 1,
// a header size of at least 16 bytes, header + fatSize (the u64 at offset 8) inside the image;
// the entries after the header (each a u16 kind, a u16 version, a u32 header size of at least
// 16 and a u64 payload size, its payload right after its header) tile the fatSize bytes
// exactly, zero padding aside; at least one entry; bytes past the fat binary only zeros.
LW_MUST_USE lw_status_t lw__image_check_fatbin(const uint8_t *p, size_t bytes, const char *name,
                                               lw_error_t *err);

// What LW_IMAGE_AUTO asks of the bytes (callables/image.c, lw__image_detect_format). Each reads
// only what it needs; none checks the format (the checks above do).
// An ELF magic and e_machine EM_CUDA (the little-endian u16 at offset 18).
bool lw__image_is_cubin(const uint8_t *p, size_t bytes);
// The fat binary magic 0xBA55ED50 as the first little-endian word.
bool lw__image_is_fatbin(const uint8_t *p, size_t bytes);
// Text whose first token after white space and comments is `.version`.
bool lw__image_is_ptx(const uint8_t *p, size_t bytes);
// Text with a CUDA-only marker outside comments and string literals: the keyword `__global__`,
// or `extern "C"` (C, so OpenCL C, has no linkage specifications). Source text without one
// is taken for OpenCL C.
bool lw__image_is_cuda_c(const uint8_t *p, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CALLABLES_IMAGE_CHECK_H_
