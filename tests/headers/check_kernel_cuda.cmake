# check_kernel_cuda.cmake: lanework/kernel_cuda.h and the CUDA C kernels of
# callables/kernels/cuda without a CUDA compiler. With cuda_stub.h standing in for CUDA's
# built-ins, a host C++ compiler (-Wall -Wextra -Werror -pedantic) compiles every kernel (the
# big program at its smallest and largest size) and kernel_cuda_host.cpp, which runs the
# header's device functions and must exit 0. Then the header alone as host C and C++ shows
# nothing of its device part (it must not declare lw_cuda_should_stop there).
#   cmake -DLW_ROOT=<source tree> -DLW_WORK=<scratch dir> -DLW_CC=<C compiler>
#         -DLW_CXX=<C++ compiler or empty> -P check_kernel_cuda.cmake
# Without a C++ compiler it prints "SKIP: ..." (the test's SKIP_REGULAR_EXPRESSION).
cmake_minimum_required(VERSION 3.25)
foreach(v LW_ROOT LW_WORK LW_CC)
  if(NOT ${v})
    message(FATAL_ERROR "check_kernel_cuda: pass -D${v}=...")
  endif()
endforeach()
if(NOT LW_CXX OR NOT EXISTS "${LW_CXX}")
  message("SKIP: no C++ compiler (g++) found; install g++ to check the CUDA kernels")
  return()
endif()

set(src ${LW_ROOT}/tests/headers)
set(kernels ${LW_ROOT}/callables/kernels/cuda)
set(warn -Wall -Wextra -Werror -pedantic)
# -Wno-unknown-pragmas: `#pragma unroll` is for the device compiler.
set(cxx ${LW_CXX} -std=c++17 ${warn} -Wno-unknown-pragmas -I${LW_ROOT}/include
        -include ${src}/cuda_stub.h)

function(lw_run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_kernel_cuda: ${what} failed (${rc}):\n${out}${err}")
  endif()
  message(STATUS "${what}: ok ${out}")
endfunction()

file(REMOVE_RECURSE ${LW_WORK})
file(MAKE_DIRECTORY ${LW_WORK})

file(GLOB cu RELATIVE ${kernels} ${kernels}/*.cu)
list(LENGTH cu n)
if(n LESS 5)
  message(FATAL_ERROR "check_kernel_cuda: found only ${n} kernels in ${kernels}")
endif()
foreach(k IN LISTS cu)
  lw_run("${k} with the CUDA stand-in" ${cxx} -x c++ -fsyntax-only ${kernels}/${k})
endforeach()
lw_run("big_program.cu -DKERNELS=8" ${cxx} -DKERNELS=8 -x c++ -fsyntax-only
       ${kernels}/big_program.cu)
# bench overlap's build (a nonce kernel, an inlined stage applied WEIGHT times).
lw_run("big_program.cu -DLW_BENCH_NONCE=7 -DWEIGHT=3" ${cxx} -DKERNELS=8 -DWEIGHT=3
       -DLW_BENCH_NONCE=7 -x c++ -fsyntax-only ${kernels}/big_program.cu)
# Its guard refuses a size it has no kernels for.
execute_process(COMMAND ${cxx} -DKERNELS=201 -x c++ -fsyntax-only ${kernels}/big_program.cu
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "KERNELS must be 8..200")
  message(FATAL_ERROR "check_kernel_cuda: big_program.cu -DKERNELS=201 was not refused:\n${err}")
endif()

lw_run("kernel_cuda_host build" ${cxx} ${src}/kernel_cuda_host.cpp -o ${LW_WORK}/kernel_cuda_host)
lw_run("kernel_cuda_host" ${LW_WORK}/kernel_cuda_host)

# Host code sees the macros and the typedef only.
file(WRITE ${LW_WORK}/host.c "#include <lanework/kernel_cuda.h>\n"
                             "lw_cuda_stop_word_t w;\n"
                             "int lw_cuda_should_stop(int);  /* not declared for the host */\n"
                             "const char *sym = LW_CUDA_STOP_SYMBOL;\n")
lw_run("kernel_cuda.h on the host as C" ${LW_CC} -std=c17 ${warn} -I${LW_ROOT}/include -c
       -x c ${LW_WORK}/host.c -o ${LW_WORK}/host_c.o)
lw_run("kernel_cuda.h on the host as C++" ${LW_CXX} -std=c++17 ${warn} -I${LW_ROOT}/include -c
       -x c++ ${LW_WORK}/host.c -o ${LW_WORK}/host_cxx.o)
file(REMOVE_RECURSE ${LW_WORK})
