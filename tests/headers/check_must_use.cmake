# check_must_use.cmake: a program built with -Wall -Wextra -Werror -pedantic can drop a status
# on purpose with a (void) cast (must_use_consumer.c compiles), and still gets the warning when
# it drops one by accident (must_use_ignored.c fails, naming the unused result), in C and C++,
# in each language mode a program may use, with every compiler given (gcc, g++, clang,
# clang++ where installed).
#   cmake -DLW_INCLUDE=<include dir> -DLW_SRC=<this folder> -DLW_WORK=<scratch dir>
#         -DLW_COMPILERS="c:gcc;cxx:g++;c:clang;..." -P check_must_use.cmake
cmake_minimum_required(VERSION 3.25)
foreach(v LW_INCLUDE LW_SRC LW_WORK LW_COMPILERS)
  if(NOT ${v})
    message(FATAL_ERROR "check_must_use: pass -D${v}=...")
  endif()
endforeach()
set(warn -Wall -Wextra -Werror -pedantic)
file(REMOVE_RECURSE ${LW_WORK})
file(MAKE_DIRECTORY ${LW_WORK})

# Compiles src with compiler as lang (c or c++) in mode std; rc and diagnostics out.
function(lw_compile compiler lang std src out_rc out_err)
  execute_process(COMMAND ${compiler} -std=${std} ${warn} -I${LW_INCLUDE} -x ${lang} -c ${src}
                          -o ${LW_WORK}/out.o
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${out_rc} ${rc} PARENT_SCOPE)
  set(${out_err} "${out}${err}" PARENT_SCOPE)
endfunction()

set(n_checked 0)
foreach(entry IN LISTS LW_COMPILERS)
  string(REPLACE ":" ";" parts "${entry}")
  list(GET parts 0 kind)
  list(GET parts 1 compiler)
  if(NOT EXISTS "${compiler}")
    continue()
  endif()
  if(kind STREQUAL "c")
    set(lang c)
    set(stds c11 c17 gnu17 c2x)
  else()
    set(lang c++)
    set(stds c++14 c++17 c++20)
  endif()
  foreach(std IN LISTS stds)
    # A mode this compiler does not know is not one a program of it can use.
    execute_process(COMMAND ${compiler} -std=${std} -x ${lang} -fsyntax-only /dev/null
                    RESULT_VARIABLE known OUTPUT_QUIET ERROR_QUIET)
    if(NOT known EQUAL 0)
      continue()
    endif()
    set(what "${compiler} -std=${std}")
    lw_compile(${compiler} ${lang} ${std} ${LW_SRC}/must_use_consumer.c rc err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR
              "check_must_use: ${what}: a (void) cast does not silence LW_MUST_USE:\n${err}")
    endif()
    lw_compile(${compiler} ${lang} ${std} ${LW_SRC}/must_use_ignored.c rc err)
    if(rc EQUAL 0)
      message(FATAL_ERROR "check_must_use: ${what}: a dropped status compiles without a warning")
    endif()
    if(NOT err MATCHES "unused[-_]result|nodiscard")
      message(FATAL_ERROR "check_must_use: ${what}: must_use_ignored.c failed, but not for its "
                          "unused result:\n${err}")
    endif()
    message(STATUS "${what}: (void) silences, a dropped status warns")
    math(EXPR n_checked "${n_checked} + 1")
  endforeach()
endforeach()
if(n_checked LESS 2)
  message(FATAL_ERROR "check_must_use: only ${n_checked} compiler modes checked")
endif()
file(REMOVE_RECURSE ${LW_WORK})
