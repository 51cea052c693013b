// The layout of every public struct as C sees it (see layout_list.h).
#include <stddef.h>

#include <lanework/kernel.h>
#include <lanework/lanework.h>

#include "layout.h"

#define LW_LAYOUT(t) {#t, sizeof(t), _Alignof(t)},
#define LW_LAYOUT_FIELD(t, f) {#t "." #f, offsetof(t, f), 0},
static const lw_layout_entry_t entries[] = {
#include "layout_list.h"
};

size_t lw_layout_c(const lw_layout_entry_t **out) {
  *out = entries;
  return sizeof(entries) / sizeof(entries[0]);
}
