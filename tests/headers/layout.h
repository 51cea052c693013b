// One line of a struct layout: a type's size and alignment, or a field's offset (align 0).
#ifndef LW_TESTS_HEADERS_LAYOUT_H_
#define LW_TESTS_HEADERS_LAYOUT_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lw_layout_entry {
  const char *name;
  size_t size_or_offset;
  size_t align;
} lw_layout_entry_t;

size_t lw_layout_c(const lw_layout_entry_t **out);
size_t lw_layout_cxx(const lw_layout_entry_t **out);

#ifdef __cplusplus
}
#endif
#endif  // LW_TESTS_HEADERS_LAYOUT_H_
