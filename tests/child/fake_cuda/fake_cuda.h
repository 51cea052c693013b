// tests/child/fake_cuda/fake_cuda.h — what the fake CUDA driver (libfake_cuda.so), the fake
// NVRTC (libfake_nvrtc.so), the fake nvJitLink (libfake_nvjitlink.so) and the tests share. A test
// double only: built for the tests, never installed, loaded by the cuda backend through
// LW_CUDA_LIBRARY / LW_NVRTC_LIBRARY.
//
// The fake runs "kernels" on one CPU thread per stream. A module is either the fake NVRTC's
// output (FAKE_CUBIN_MAGIC, then the compile's arch and options, then the source text) or an
// ELF with e_machine EM_CUDA (190); its kernels are the built-in ones below whose name the
// module holds ("name(" in source text, a ".text.name" section name in an ELF). A source that
// mentions lw__cuda_stop gets that module global (8 bytes, a pointer the backend sets).
//
// Built-in kernels (parameters in order, sizes in bytes):
//   empty()                                      does nothing
//   vector_add(float *a, float *b, float *c, u64 n)   c[i] = a[i] + b[i] for each thread i < n
//   pack_probe(u64 *out, u64 a, u64 *in, float f, u64 b)
//       out[0] = a, out[1] = in[0], out[2] = the bits of f, out[3] = b
//   poll_stop()                                  spins until *lw__cuda_stop != 0 (at most 30 s)
//   sleep_ms(u64 ms)                             sleeps ms, ignoring the stop word
//   illegal_address()                            makes its context's error sticky (700)
//   fault_after_ms(u64 ms)                       sleeps ms, then as illegal_address
// Markers in the source text: FAKE_COMPILE_ERROR fails the compile with a log naming it;
// FAKE_LOAD_FAIL fails cuModuleLoadData with CUDA_ERROR_NO_BINARY_FOR_GPU (209).
//
// Events: with LW_FAKE_CUDA_LOG=<path> set, each of these appends one line
//   "<event> pid=<pid> thread=<thread name> ctx=<0|1> <detail>"
// (ctx: whether a context was current on the calling thread): init, ctx_create, ptx_jit
// (a module load of PTX text, which the real driver compiles: kernels are its ".entry name("),
// module_load (detail: the kernels' names), module_unload, launch (detail: the kernel), compile
// (the fake NVRTC; detail: its options), link (the fake nvJitLink; detail: its options),
// htod_async (detail: bytes), event_record, mem_alloc (detail: bytes), mem_free,
// host_register (detail: bytes), host_unregister, illegal_address (a kernel touched memory
// neither allocated nor registered: the context's error turns sticky, 700; detail: bytes),
// stream_sync, no_context (a call that needed a context found none; detail: the call).
#ifndef LANEWORK_TESTS_FAKE_CUDA_H_
#define LANEWORK_TESTS_FAKE_CUDA_H_

#define FAKE_CUBIN_MAGIC "LWFAKECUBIN1\n"
// The fake NVRTC's version; its builtins library is libnvrtc-builtins.so.<this>.
#define FAKE_NVRTC_MAJOR 12
#define FAKE_NVRTC_MINOR 9
#define FAKE_NVRTC_BUILTINS "libnvrtc-builtins.so.12.9"

#ifdef __cplusplus
extern "C" {
#endif

// Exported by libfake_cuda.so for the fake NVRTC: 1 when a context is current on the calling
// thread, and the event log.
int lw_fake_cuda_context_current(void);
// For the tests: while on is non-zero, a stream that reaches a 4-byte host-to-device copy of
// the value 0 (a stop word's reset) waits there; 0 lets it go.
void lw_fake_cuda_hold_zero_word_copies(int on);
// For the tests: while on is non-zero, cuMemHostUnregister waits before it unregisters.
void lw_fake_cuda_hold_unregisters(int on);
void lw_fake_cuda_log(const char *event, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_TESTS_FAKE_CUDA_H_
