// The layout of every public struct as C++ sees it (see layout_list.h).
#include <cstddef>

#include <lanework/kernel.h>
#include <lanework/lanework.h>

#include "layout.h"

#define LW_LAYOUT(t) {#t, sizeof(t), alignof(t)},
#define LW_LAYOUT_FIELD(t, f) {#t "." #f, offsetof(t, f), 0},
static const lw_layout_entry_t entries[] = {
#include "layout_list.h"
};

size_t lw_layout_cxx(const lw_layout_entry_t **out) {
  *out = entries;
  return sizeof(entries) / sizeof(entries[0]);
}

extern "C" int lw_layout_cxx_should_stop(const lw_kernel_ctx_t *ctx);
int lw_layout_cxx_should_stop(const lw_kernel_ctx_t *ctx) {
  return lw_kernel_should_stop(ctx) ? 1 : 0;
}
