# tests/layering/check_afterfork.cmake — the code that runs between fork (or vfork) and exec
# lives in parent/fs_afterfork.c (parent/fs_afterfork.h), and calls only async-signal-safe
# functions and raw syscalls: a copy of a multi-threaded program may hold any lock forever, and
# a vfork child shares the program's memory. This check lists the functions the object file
# calls (its undefined symbols, `nm -u`) and fails on any not in the list below.
#   -DLW_OBJECT=<fs_afterfork.c.o> -DLW_NM=<nm>
# Sanitizer hooks (__asan_*, __tsan_*, __ubsan_*, __sanitizer_*) are the build's, not calls of
# the code, and are allowed.
set(allowed
  syscall fcntl fcntl64 dup2 open open64 close getrlimit getrlimit64 _exit
  # lw__fs_vfork_exec, in the caller around the vfork: the child's stack, the vfork, the reap.
  mmap mmap64 munmap clone waitpid __errno_location
  # Under ThreadSanitizer the vfork is a plain fork (see lw__fs_vfork_exec).
  fork
  __stack_chk_fail _GLOBAL_OFFSET_TABLE_)
if(NOT LW_OBJECT OR NOT EXISTS "${LW_OBJECT}")
  message(FATAL_ERROR "check_afterfork: no object file '${LW_OBJECT}'")
endif()
execute_process(COMMAND ${LW_NM} -u "${LW_OBJECT}" OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_afterfork: ${LW_NM} -u ${LW_OBJECT} failed (${rc})")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(bad "")
set(seen 0)
foreach(line IN LISTS lines)
  string(STRIP "${line}" line)
  if(line STREQUAL "")
    continue()
  endif()
  string(REGEX REPLACE "^U[ \t]+" "" sym "${line}")
  string(REGEX REPLACE "@.*$" "" sym "${sym}")
  math(EXPR seen "${seen} + 1")
  if(sym MATCHES "^__(asan|tsan|ubsan|sanitizer|msan)_")
    continue()
  endif()
  list(FIND allowed "${sym}" i)
  if(i LESS 0)
    list(APPEND bad "${sym}")
  endif()
endforeach()
if(seen EQUAL 0)
  message(FATAL_ERROR "check_afterfork: ${LW_OBJECT} calls nothing at all: wrong file?")
endif()
if(bad)
  message(FATAL_ERROR "parent/fs_afterfork.c calls functions that are not async-signal-safe "
                      "raw syscalls: ${bad} (see parent/fs_afterfork.h; add a function to the "
                      "list in tests/layering/check_afterfork.cmake only if it is)")
endif()
message(STATUS "check_afterfork: ${seen} calls, all allowed")
