// tests/child/fake_cuda/fake_nvrtc_builtins.c — stands in for NVRTC's builtins library
// (libnvrtc-builtins.so.MAJOR.MINOR), which the fake NVRTC, like NVRTC, needs loaded to
// compile. Test double only.
__attribute__((visibility("default"))) int lw_fake_nvrtc_builtins(void);
__attribute__((visibility("default"))) int lw_fake_nvrtc_builtins(void) { return 1; }
