/* tests/headers/must_use_ignored.c — a status dropped without a cast: LW_MUST_USE must make
 * this fail under -Werror wherever it means something (check_must_use.cmake), so the check
 * that a cast silences it cannot pass by LW_MUST_USE meaning nothing. */
#include <lanework/lanework.h>

void forgets(lw_args_t *a);

void forgets(lw_args_t *a) { lw_args_add_scalar(a, 1); }
