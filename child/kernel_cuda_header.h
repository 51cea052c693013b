// child/kernel_cuda_header.h — the text of include/lanework/kernel_cuda.h, built into the
// library (child/CMakeLists.txt writes it from the header at configure time), so the cuda
// backend hands it to NVRTC in memory: a CUDA C kernel's `#include "lanework/kernel_cuda.h"`
// compiles with no include folder given (docs/cuda.md).
#ifndef LANEWORK_CHILD_KERNEL_CUDA_HEADER_H_
#define LANEWORK_CHILD_KERNEL_CUDA_HEADER_H_

#include <stddef.h>

// The include name kernels use, and the header's bytes (NUL-terminated; lw__kernel_cuda_header
// _bytes excludes the NUL).
#define LW_KERNEL_CUDA_HEADER_NAME "lanework/kernel_cuda.h"
extern const unsigned char lw__kernel_cuda_header[];
extern const size_t lw__kernel_cuda_header_bytes;

#endif  // LANEWORK_CHILD_KERNEL_CUDA_HEADER_H_
