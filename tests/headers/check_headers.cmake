# check_headers.cmake: every public header compiles on its own as C++ (and as C), one
# translation unit per header plus one with lanework.h and kernel.h together; then the layout
# of every public struct is compared between C and C++ (layout_*.c*).
#   cmake -DLW_INCLUDE=<include dir> -DLW_SRC=<this folder> -DLW_WORK=<scratch dir>
#         -DLW_CC=<C compiler> -DLW_CXX=<C++ compiler or empty> -P check_headers.cmake
# Without a C++ compiler it prints "SKIP: ..." (the test's SKIP_REGULAR_EXPRESSION), so ctest
# reports it skipped rather than passed.
cmake_minimum_required(VERSION 3.25)
foreach(v LW_INCLUDE LW_SRC LW_WORK LW_CC)
  if(NOT ${v})
    message(FATAL_ERROR "check_headers: pass -D${v}=...")
  endif()
endforeach()
if(NOT LW_CXX OR NOT EXISTS "${LW_CXX}")
  message("SKIP: no C++ compiler (g++) found; install g++ to check the headers as C++")
  return()
endif()

set(warn -Wall -Wextra -Werror -pedantic)
# -Wshadow too for C++: a C++ program that builds with it includes lanework.h.
set(cxx ${LW_CXX} -std=c++17 ${warn} -Wshadow -I${LW_INCLUDE})
set(cc ${LW_CC} -std=c17 ${warn} -Wstrict-prototypes -Wmissing-prototypes -I${LW_INCLUDE})

function(lw_run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_headers: ${what} failed (${rc}):\n${out}${err}")
  endif()
  message(STATUS "${what}: ok ${out}")
endfunction()

file(REMOVE_RECURSE ${LW_WORK})
file(MAKE_DIRECTORY ${LW_WORK})
file(GLOB headers RELATIVE ${LW_INCLUDE}/lanework ${LW_INCLUDE}/lanework/*.h)
list(LENGTH headers n)
if(n LESS 10)
  message(FATAL_ERROR "check_headers: found only ${n} headers in ${LW_INCLUDE}/lanework")
endif()
foreach(h IN LISTS headers)
  set(tu ${LW_WORK}/${h}.cpp)
  file(WRITE ${tu} "#include <lanework/${h}>\n")
  lw_run("${h} as C++" ${cxx} -x c++ -fsyntax-only ${tu})
  lw_run("${h} as C" ${cc} -x c -fsyntax-only ${tu})
endforeach()
file(WRITE ${LW_WORK}/all.cpp "#include <lanework/lanework.h>\n#include <lanework/kernel.h>\n")
lw_run("lanework.h + kernel.h as C++" ${cxx} -x c++ -fsyntax-only ${LW_WORK}/all.cpp)

lw_run("layout C" ${cc} -c ${LW_SRC}/layout_c.c -o ${LW_WORK}/layout_c.o)
lw_run("layout C main" ${cc} -c ${LW_SRC}/layout_main.c -o ${LW_WORK}/layout_main.o)
lw_run("layout C++" ${cxx} -c ${LW_SRC}/layout_cxx.cpp -o ${LW_WORK}/layout_cxx.o)
lw_run("layout link" ${LW_CXX} ${LW_WORK}/layout_main.o ${LW_WORK}/layout_c.o
       ${LW_WORK}/layout_cxx.o -o ${LW_WORK}/layout)
lw_run("layout compare" ${LW_WORK}/layout)
file(REMOVE_RECURSE ${LW_WORK})
