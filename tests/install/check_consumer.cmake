# check_consumer.cmake: installs the build into scratch prefixes and uses it as a user would.
#   1. cmake --install --prefix W/prefix; the test fixtures are not installed, the example
#      kernels and their README are, with LICENSE and NEWS.md.
#   2. find_package(lanework) (consumer/): the program against the shared library, the static
#      one, and as C++; a kernel of the consumer's own in C++ (lanework_add_kernel); each
#      program runs the installed vector_add found through LANEWORK_KERNEL_DIR and the own
#      kernel, and prints lw_version().
#   3. pkg-config (lanework.pc): the program in C (shared), in C (static: pkg-config --static,
#      run without the shared library on the loader's path) and in C++ (g++), the kernel folder
#      from --variable=kerneldir.
#   4. The installed `lanework info`, with LW_KERNEL_DIR unset, names the installed kernels.
#   5. A /usr-like prefix (W/root/usr): pkg-config's prefix, includedir and kerneldir point
#      into it; DESTDIR=W/destdir with --prefix /usr writes prefix=/usr.
#   6. Every C block of README.md and docs/ built against the /usr-like install with
#      pkg-config (scripts/check_doc_code --pkg-config), the runnable ones run.
#   cmake -DLW_BUILD_DIR=<build> -DLW_WORK=<scratch dir> -DLW_CONSUMER=<consumer source>
#         -DLW_CC=<C compiler> -DLW_CXX=<C++ compiler> [-DLW_SOURCE_DIR=<the tree>]
#         -P check_consumer.cmake
cmake_minimum_required(VERSION 3.25)
foreach(v LW_BUILD_DIR LW_WORK LW_CONSUMER LW_CC)
  if(NOT ${v})
    message(FATAL_ERROR "check_consumer: pass -D${v}=...")
  endif()
endforeach()
if(NOT LW_CXX OR NOT EXISTS "${LW_CXX}")
  message(FATAL_ERROR "check_consumer: no C++ compiler (install g++; scripts/common.sh does)")
endif()

function(lw_run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_consumer: ${what} failed (${rc}):\n${out}${err}")
  endif()
  message(STATUS "${what}: ok ${out}")
  set(lw_out "${out}" PARENT_SCOPE)
endfunction()

function(lw_expect_contains what text needle)
  string(FIND "${text}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check_consumer: ${what}: expected '${needle}' in:\n${text}")
  endif()
endfunction()

file(REMOVE_RECURSE ${LW_WORK})
file(MAKE_DIRECTORY ${LW_WORK})
file(REAL_PATH ${LW_WORK} LW_WORK)

# 1. Install and what it holds.
set(prefix ${LW_WORK}/prefix)
lw_run("install" ${CMAKE_COMMAND} --install ${LW_BUILD_DIR} --prefix ${prefix})
file(GLOB pcfile ${prefix}/lib*/pkgconfig/lanework.pc ${prefix}/lib/*/pkgconfig/lanework.pc)
if(NOT pcfile)
  message(FATAL_ERROR "check_consumer: no lanework.pc under ${prefix}/lib*")
endif()
get_filename_component(pcdir ${pcfile} DIRECTORY)
get_filename_component(libdir ${pcdir} DIRECTORY)
set(kerneldir ${libdir}/lanework/kernels)
foreach(f ${kerneldir}/vector_add.so ${kerneldir}/gemm.so ${kerneldir}/noop.so
          ${kerneldir}/README.md ${kerneldir}/opencl/vector_add.cl
          ${kerneldir}/cuda/vector_add.cu ${kerneldir}/cuda/big_program.cu
          ${kerneldir}/cuda/lanework/kernel_cuda.h ${prefix}/include/lanework/kernel_cuda.h
          ${prefix}/share/doc/lanework/LICENSE ${prefix}/share/doc/lanework/NEWS.md
          ${libdir}/cmake/lanework/laneworkKernel.cmake)
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "check_consumer: the install lacks ${f}")
  endif()
endforeach()
foreach(fixture crash abort fail bad_prepare no_entry record gate fork_sleeper)
  if(EXISTS ${kerneldir}/${fixture}.so)
    message(FATAL_ERROR "check_consumer: the test fixture ${fixture}.so was installed")
  endif()
endforeach()

# 2. find_package.
set(cm ${LW_WORK}/cmake)
lw_run("find_package configure" ${CMAKE_COMMAND} -S ${LW_CONSUMER} -B ${cm}
       -DCMAKE_C_COMPILER=${LW_CC} -DCMAKE_CXX_COMPILER=${LW_CXX} -DCMAKE_PREFIX_PATH=${prefix})
lw_run("find_package build" ${CMAKE_COMMAND} --build ${cm})
set(own_kernel ${cm}/consumer_axpy.so)
foreach(variant shared static cxx)
  lw_run("find_package ${variant} run" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir}
         ${cm}/consumer_${variant} ${kerneldir} ${own_kernel})
  lw_expect_contains("find_package ${variant}" "${lw_out}" "own kernel")
endforeach()
# The L4 worker (lanework::l4), where this lanework was built with MPI: under mpirun -np 2.
if(EXISTS ${LW_BUILD_DIR}/parent/liblanework_l4.a)
  if(NOT EXISTS ${cm}/consumer_l4)
    message(FATAL_ERROR "check_consumer: lanework::l4 was built here but the consumer did not "
                        "get it from find_package")
  endif()
  find_program(LW_MPIRUN mpirun REQUIRED)
  lw_run("find_package l4 run" ${CMAKE_COMMAND} -E env OMPI_ALLOW_RUN_AS_ROOT=1
         OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=${libdir}
         timeout -s KILL 60 ${LW_MPIRUN} -np 2 --oversubscribe --bind-to none --mca btl self,vader
         ${cm}/consumer_l4 ${kerneldir})
  lw_expect_contains("find_package l4" "${lw_out}" "l4: ok")
endif()
# With no argument the program uses the folder LANEWORK_KERNEL_DIR gave it at build time.
lw_run("find_package LANEWORK_KERNEL_DIR" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir}
       ${cm}/consumer_shared)
lw_expect_contains("LANEWORK_KERNEL_DIR" "${lw_out}" "vector_add from ${kerneldir}: ok")

# 3. pkg-config.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(pc ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pcdir} ${PKG_CONFIG})
function(lw_pc out)
  execute_process(COMMAND ${pc} ${ARGN} lanework RESULT_VARIABLE rc
                  OUTPUT_VARIABLE v OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_consumer: pkg-config ${ARGN} lanework failed in ${pcdir}")
  endif()
  set(${out} "${v}" PARENT_SCOPE)
endfunction()
lw_pc(pc_kerneldir --variable=kerneldir)
if(NOT pc_kerneldir STREQUAL kerneldir)
  message(FATAL_ERROR "check_consumer: kerneldir is '${pc_kerneldir}', want '${kerneldir}'")
endif()
lw_pc(cflags --cflags)
lw_pc(libs --libs)
lw_pc(static_libs --static --libs)
separate_arguments(cflags UNIX_COMMAND "${cflags}")
separate_arguments(libs UNIX_COMMAND "${libs}")
separate_arguments(static_libs UNIX_COMMAND "${static_libs}")
# --static lists the private libraries; the archive itself is chosen with -Bstatic.
list(TRANSFORM static_libs REPLACE "^-llanework$" "-Wl,-Bstatic;-llanework;-Wl,-Bdynamic")
set(def -DLW_CONSUMER_KERNEL_DIR="${pc_kerneldir}")
set(src ${LW_CONSUMER}/main.c)
set(warn -Wall -Wextra -Werror -pedantic)
lw_run("pkg-config C build" ${LW_CC} -std=c17 ${warn} ${src} ${def} ${cflags} ${libs}
       -o ${LW_WORK}/pc_shared)
lw_run("pkg-config C static build" ${LW_CC} -std=c17 ${warn} ${src} ${def} ${cflags}
       ${static_libs} -o ${LW_WORK}/pc_static)
lw_run("pkg-config C++ build" ${LW_CXX} -x c++ -std=c++17 ${warn} ${src} ${def} ${cflags}
       -x none ${libs} -o ${LW_WORK}/pc_cxx)
lw_run("pkg-config C run" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir}
       ${LW_WORK}/pc_shared)
lw_expect_contains("pkg-config C" "${lw_out}" "vector_add from ${kerneldir}: ok")
# No LD_LIBRARY_PATH: only a program with liblanework linked in can start.
lw_run("pkg-config C static run" ${LW_WORK}/pc_static)
lw_run("pkg-config C++ run" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir}
       ${LW_WORK}/pc_cxx ${kerneldir} ${own_kernel})
lw_expect_contains("pkg-config C++" "${lw_out}" ", C++")

# 4. The installed CLI finds the installed kernels by itself.
lw_run("installed lanework info" ${CMAKE_COMMAND} -E env --unset=LW_KERNEL_DIR
       ${prefix}/bin/lanework info)
lw_expect_contains("installed lanework info" "${lw_out}" "${kerneldir}")

# 5. A /usr-like prefix, and DESTDIR with --prefix /usr (how distributions package it).
set(usr ${LW_WORK}/root/usr)
lw_run("install to root/usr" ${CMAKE_COMMAND} --install ${LW_BUILD_DIR} --prefix ${usr})
file(RELATIVE_PATH rel_libdir ${prefix} ${libdir})
set(pc ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${usr}/${rel_libdir}/pkgconfig ${PKG_CONFIG})
set(pcdir ${usr}/${rel_libdir}/pkgconfig)
foreach(check "prefix=${usr}" "includedir=${usr}/include"
              "kerneldir=${usr}/${rel_libdir}/lanework/kernels")
  string(REPLACE "=" ";" kv "${check}")
  list(GET kv 0 var)
  list(GET kv 1 want)
  lw_pc(got --variable=${var})
  if(NOT got STREQUAL want)
    message(FATAL_ERROR "check_consumer: /usr-like install: ${var} is '${got}', want '${want}'")
  endif()
endforeach()
lw_run("root/usr lanework info" ${CMAKE_COMMAND} -E env --unset=LW_KERNEL_DIR
       ${usr}/bin/lanework info)
lw_expect_contains("root/usr lanework info" "${lw_out}" "${usr}/${rel_libdir}/lanework/kernels")
lw_run("DESTDIR install" ${CMAKE_COMMAND} -E env DESTDIR=${LW_WORK}/destdir
       ${CMAKE_COMMAND} --install ${LW_BUILD_DIR} --prefix /usr)
file(STRINGS ${LW_WORK}/destdir/usr/${rel_libdir}/pkgconfig/lanework.pc prefix_line
     REGEX "^prefix=")
if(NOT prefix_line STREQUAL "prefix=/usr")
  message(FATAL_ERROR "check_consumer: DESTDIR install wrote '${prefix_line}', want prefix=/usr")
endif()

# 6. The README's programs (and every other C block of README.md and docs/) as a new user copies
#    them: built against the installed lanework through pkg-config, in C and (blocks marked
#    cxx) in C++, and the runnable ones run with the installed kernels.
if(LW_SOURCE_DIR)
  lw_run("README and docs code against the install" ${CMAKE_COMMAND} -E env
         PKG_CONFIG_PATH=${pcdir} CC=${LW_CC} CXX=${LW_CXX} --unset=LW_KERNEL_DIR
         bash ${LW_SOURCE_DIR}/scripts/check_doc_code --pkg-config)
  lw_expect_contains("README and docs code against the install" "${lw_out}" "; 0 failed")
endif()
file(REMOVE_RECURSE ${LW_WORK})
