// tests/headers/kernel_cuda_host.cpp — runs the device functions of lanework/kernel_cuda.h on
// the host through tests/headers/cuda_stub.h (compiled with -include cuda_stub.h): with no
// stop word set both say false; a word set to non-zero makes them say true; in
// lw_cuda_block_should_stop only thread (0, 0, 0) reads the word, the others take its answer
// from the block's shared variable, between two barriers.
#include <stdio.h>

#include "lanework/kernel_cuda.h"

lw_stub_dim3 threadIdx, blockIdx, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
static int barriers;
extern "C" void __syncthreads(void) { ++barriers; }
extern "C" float sinf(float x) { return x; }
extern "C" float cosf(float x) { return x; }

static int failures;
#define EXPECT(cond)                                                  \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "kernel_cuda_host: line %d: %s\n", __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

int main() {
  EXPECT(lw__cuda_stop == 0);  // zero until the backend sets it
  EXPECT(!lw_cuda_should_stop());
  EXPECT(!lw_cuda_block_should_stop());
  EXPECT(barriers == 2);

  volatile lw_cuda_stop_word_t word = 0;
  lw__cuda_stop = &word;
  EXPECT(!lw_cuda_should_stop());
  word = 1;
  EXPECT(lw_cuda_should_stop());
  word = 0x80000000u;  // any non-zero value
  EXPECT(lw_cuda_should_stop());

  // Thread (0, 0, 0) reads and publishes; thread 5 of the same block reads the block's answer,
  // not the word.
  word = 1;
  threadIdx = {0, 0, 0};
  EXPECT(lw_cuda_block_should_stop());
  word = 0;
  threadIdx = {5, 0, 0};
  EXPECT(lw_cuda_block_should_stop());  // the published answer, not the word's new value
  threadIdx = {0, 0, 0};
  EXPECT(!lw_cuda_block_should_stop());
  threadIdx = {0, 1, 0};  // not the reader either
  word = 1;
  EXPECT(!lw_cuda_block_should_stop());
  EXPECT(barriers == 10);

  lw__cuda_stop = 0;
  EXPECT(!lw_cuda_should_stop());
  if (failures == 0) printf("kernel_cuda_host: ok\n");
  return failures == 0 ? 0 : 1;
}
