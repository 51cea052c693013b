// Compares the layouts C and C++ compute for every public struct (layout_list.h) and also
// runs lw_kernel_should_stop as C++ compiled it (layout_cxx_should_stop) on a cancel word the C
// side owns, so a C++ kernel and the C library really share that word. Exit 0 when all agree.
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <lanework/kernel.h>

#include "layout.h"

int lw_layout_cxx_should_stop(const lw_kernel_ctx_t *ctx);

int main(void) {
  const lw_layout_entry_t *c = NULL, *cxx = NULL;
  size_t n_c = lw_layout_c(&c), n_cxx = lw_layout_cxx(&cxx);
  int bad = 0;
  if (n_c != n_cxx) {
    fprintf(stderr, "layout: C lists %zu entries, C++ %zu\n", n_c, n_cxx);
    return 1;
  }
  for (size_t i = 0; i < n_c; ++i) {
    if (strcmp(c[i].name, cxx[i].name) != 0 || c[i].size_or_offset != cxx[i].size_or_offset ||
        c[i].align != cxx[i].align) {
      fprintf(stderr, "layout: %s is %zu (align %zu) in C but %zu (align %zu) in C++\n",
              c[i].name, c[i].size_or_offset, c[i].align, cxx[i].size_or_offset, cxx[i].align);
      bad = 1;
    }
  }
  lw_kernel_cancel_word_t word = 8;
  lw_kernel_ctx_t ctx = {.abi_version = LW_KERNEL_ABI_VERSION, .cancel_word = &word,
                         .generation = 8};
  int before = lw_layout_cxx_should_stop(&ctx);
  atomic_fetch_or(&word, 1);  // what a canceller does (lanes/cancel.h)
  int after = lw_layout_cxx_should_stop(&ctx);
  if (before != 0 || after != 1) {
    fprintf(stderr, "layout: C++ lw_kernel_should_stop said %d before and %d after a cancel "
            "(want 0 then 1)\n", before, after);
    bad = 1;
  }
  if (!bad) printf("layout: %zu entries agree between C and C++; should_stop agrees\n", n_c);
  return bad;
}
