# check_error_channel.cmake: checks DESIGN §9's one internal error channel over the source text.
#   cmake -DLW_ROOT=<source root> -P tests/layering/check_error_channel.cmake
# Exits non-zero and prints "file:line: rule" for every violation; prints one summary line
# when the tree is clean.
#
# The rule (lanes/error.h): below the public API, functions return a status and fill an
# lw_error_t *err (lw__error_set); only public entry points touch the thread-local last error.
# So in the checked modules, lw__fail(), lw__last_error_store() and lw_last_error() may be
# called only inside the body of a public entry point: a function declared LW_API in
# include/lanework/*.h. The list of public functions is read from those headers, so a new
# public function needs no entry here. Everything else is a violation: a static helper, an
# lw__ function, or a call at file scope (a macro would hide the caller).
#
# Checked modules: lanes, callables, mailbox, child, parent (LW_ERROR_CHANNEL_MODULES below).
# lanes/error.c is not checked: it implements the thread-local last error.
# Known exceptions, listed in LW_ERROR_CHANNEL_EXCEPTIONS below as "file:function", each with a
# comment saying why: parent/runs.c:execute_run, parent/l4_serve.c:launch.
#
# How a function is found (the house style, enforced by clang-format, makes this reliable):
# a definition starts on a line at column 0 that names the function before its first "(" and
# does not end with ";" (one that does is a declaration); its body ends at the next line that
# starts with "}". Comments after "//" are ignored.

cmake_minimum_required(VERSION 3.25)

if(NOT LW_ROOT)
  message(FATAL_ERROR "check_error_channel: pass the source root as -DLW_ROOT=<dir>")
endif()
get_filename_component(LW_ROOT "${LW_ROOT}" ABSOLUTE)
if(NOT IS_DIRECTORY "${LW_ROOT}")
  message(FATAL_ERROR "check_error_channel: LW_ROOT=${LW_ROOT} is not a directory")
endif()

# -DLW_ERROR_CHANNEL_MODULES="..." checks other modules (a new one before it joins the default);
# the tests use this default.
if(NOT DEFINED LW_ERROR_CHANNEL_MODULES)
  set(LW_ERROR_CHANNEL_MODULES lanes callables mailbox child parent)
endif()
# parent/runs.c:execute_run reads lw_last_error() once, right after the user's orch function
# returned, on the thread that ran it: the orch function's error is whatever the
# failing public call it made (lw_orch_submit_*, lw_handle_wait, ...) stored there, and that
# read is the documented public contract (include/lanework/orch.h: the run fails "with that
# error", whose message is the last error the failing call left). No err can reach it
# through the user's function, whose signature is public.
# parent/l4_serve.c:launch reads lw_last_error() right after lw_worker_run_async refused to
# start the L3 run of a batch of tasks: the L4's rank server is a client of the L3's public API,
# and the refusal's reason (the text its DONE carries to the L4) is only in the last error that
# public call left, on this thread.
set(LW_ERROR_CHANNEL_EXCEPTIONS "parent/runs.c:execute_run" "parent/l4_serve.c:launch")
set(_skip_files lanes/error.c)

# The public entry points: every function declared LW_API in the public headers.
file(GLOB _pub_headers "${LW_ROOT}/include/lanework/*.h")
set(_public "")
foreach(h IN LISTS _pub_headers)
  file(STRINGS "${h}" decls REGEX "^[ \t]*LW_API[ \t].*[A-Za-z_][A-Za-z0-9_]*[ \t]*\\(")
  foreach(d IN LISTS decls)
    if(d MATCHES "([A-Za-z_][A-Za-z0-9_]*)[ \t]*\\(")
      list(APPEND _public "${CMAKE_MATCH_1}")
    endif()
  endforeach()
endforeach()
if(NOT _public)
  message(FATAL_ERROR "check_error_channel: no LW_API function in ${LW_ROOT}/include/lanework: "
                      "wrong LW_ROOT?")
endif()

set(_files "")
foreach(m IN LISTS LW_ERROR_CHANNEL_MODULES)
  file(GLOB_RECURSE _f RELATIVE "${LW_ROOT}" "${LW_ROOT}/${m}/*.c" "${LW_ROOT}/${m}/*.h")
  list(APPEND _files ${_f})
endforeach()
list(REMOVE_ITEM _files ${_skip_files})
list(SORT _files)
if(NOT _files)
  message(FATAL_ERROR "check_error_channel: no sources under ${LW_ROOT} in "
                      "${LW_ERROR_CHANNEL_MODULES}: wrong LW_ROOT?")
endif()

set(_violations 0)
set(_n_calls 0)
foreach(rel IN LISTS _files)
  file(READ "${LW_ROOT}/${rel}" content)
  # Make every line one list element: CMake lists split on ";" and group on "[...]", so both
  # are replaced first (no rule below needs them).
  string(REPLACE ";" "<semi>" content "${content}")
  string(REPLACE "[" "<lb>" content "${content}")
  string(REPLACE "]" "<rb>" content "${content}")
  string(REPLACE "\\" "<bs>" content "${content}")
  string(REPLACE "\n" ";" lines "${content}")
  set(lineno 0)
  set(fn "")
  foreach(line IN LISTS lines)
    math(EXPR lineno "${lineno} + 1")
    string(REGEX REPLACE "//.*$" "" code "${line}")
    if(code MATCHES "^[A-Za-z_][^(]*\\(")
      # A definition (or, ending with ";", a declaration): the identifier just before the
      # first "(" names the function. The line itself names functions; it calls none.
      set(fn "")
      string(REGEX MATCH "^[^(]*" head "${code}")
      if(NOT code MATCHES "<semi>[ \t]*$" AND head MATCHES "([A-Za-z_][A-Za-z0-9_]*)[ \t]*$")
        set(fn "${CMAKE_MATCH_1}")
      endif()
      continue()
    elseif(code MATCHES "^}")
      set(fn "")
      continue()
    endif()
    string(REGEX MATCHALL "(lw__fail|lw__last_error_store|lw_last_error)[ \t]*\\(" calls
           "${code}")
    foreach(call IN LISTS calls)
      string(REGEX REPLACE "[ \t]*\\($" "" callee "${call}")
      math(EXPR _n_calls "${_n_calls} + 1")
      if(fn STREQUAL "")
        set(who "file scope")
      elseif(fn IN_LIST _public)
        continue()  # a public entry point: the one place the thread-local error is set
      elseif("${rel}:${fn}" IN_LIST LW_ERROR_CHANNEL_EXCEPTIONS)
        continue()
      else()
        set(who "${fn}(), which is not a public entry point,")
      endif()
      message(NOTICE "${rel}:${lineno}: ${who} calls ${callee}: below the public API a "
                     "function fills its lw_error_t *err and returns the status (DESIGN §9)")
      math(EXPR _violations "${_violations} + 1")
    endforeach()
  endforeach()
endforeach()

list(LENGTH _files _n_files)
list(LENGTH _public _n_public)
if(_violations GREATER 0)
  message(NOTICE "error channel: ${_violations} use(s) of the thread-local last error outside "
                 "a public entry point, in ${LW_ROOT}")
  message(FATAL_ERROR "error channel check failed (the lines above name each file and function)")
endif()
message(STATUS "error channel: ${_n_files} files, ${_n_calls} use(s) of the thread-local last "
               "error, all in the ${_n_public} public entry points")
