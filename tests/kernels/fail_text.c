// tests/kernels/fail_text.c — fails in the way scalar 0 picks, for tests of lw_kernel_fail:
//   0: lw_kernel_fail(ctx, "n (%llu) is not a multiple of 4", scalar 1)
//   1: fills the whole fail buffer with control bytes, stray UTF-8 and no NUL, returns -9
//   2: writes a text, then returns 0 (a success: the text is not read)
//   3: lw_kernel_fail with a text longer than any buffer (400 'x' then "END")
//   4: returns -5 and says nothing
//   5: writes "caf\xC3\xA9 ok" (well-formed UTF-8), returns -6
// Its prepare hook fails with a text when the callable is named "fail_text_prepare".
#include <string.h>

#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_prepare(lw_kernel_ctx_t *ctx) {
  if (strcmp(ctx->name, "fail_text_prepare") == 0) {
    return lw_kernel_fail(ctx, "table of %d entries cannot be built", 12);
  }
  return 0;
}

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  uint64_t mode = lw_kernel_arg_u64(args, 0);
  switch (mode) {
    case 0:
      return lw_kernel_fail(ctx, "n (%llu) is not a multiple of 4",
                            (unsigned long long)lw_kernel_arg_u64(args, 1));
    case 1:
      for (uint32_t i = 0; i < ctx->fail_bytes; ++i) {
        static const char junk[] = {'a', '\n', '\x1b', 'b', '\xff', '\xc3', '\x7f', 'c'};
        ctx->fail_text[i] = junk[i % sizeof(junk)];
      }
      return -9;
    case 2:
      (void)lw_kernel_fail(ctx, "this text is not an error");
      return 0;
    case 3: {
      char big[404];
      memset(big, 'x', 400);
      memcpy(big + 400, "END", 4);
      return lw_kernel_fail(ctx, "%s", big);
    }
    case 5:
      (void)lw_kernel_fail(ctx, "caf\xC3\xA9 ok");
      return -6;
    default:
      return -5;
  }
}
