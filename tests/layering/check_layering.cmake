# check_layering.cmake: checks DESIGN §2's dependency direction over the source text.
#   cmake -DLW_ROOT=<source root> -P tests/layering/check_layering.cmake
# Exits non-zero and prints "file:line: rule" for every violation; prints one summary line
# when the tree is clean.
#
# Rules (the same table as the lw_<module> targets' DEPENDS in the module CMakeLists):
# - Each library module may include its own headers, those of the modules it uses, and the
#   public headers (include/lanework, "lanework/..."), which every layer may use:
#     parent    -> child, mailbox, callables, lanes
#     child     -> mailbox, callables, lanes
#     mailbox   -> lanes
#     callables -> lanes
#     lanes     -> (nothing)
#   An include of a higher layer, or of a lower one that is not declared (mailbox ->
#   callables), is a violation.
# - The public headers (include/lanework) include only public headers: they are installed,
#   and an internal header is not.
# - The example kernels (callables/kernels) are built against the public kernel ABI alone and
#   never link liblanework, so they include only public headers and their own.
# - No file of the library includes anything outside these folders (tests/, tools/ ...).
# - The include graph among parent/ files has no cycle (DESIGN §9: no circles between the
#   parent's files); each cycle is printed as a chain of files.
# - parent/worker_impl.h (struct lw_worker, the wiring) is included only by parent/worker.c
#   and parent/wake.c: every other parent file includes the headers of the components it
#   calls, and reaches no component through the worker (DESIGN §9). No exception.
#
# Both #include "x" and #include <x> are read. A quoted include resolves as the compiler
# does: first next to the including file, then from the module root ("lanes/error.h").
# An angle include whose first component is not a module (<stdio.h>) is a system header.
# Known exceptions: none. An exception would be listed in LW_LAYERING_EXCEPTIONS below as
# "file:included path", each with a comment saying why it cannot be fixed yet.

cmake_minimum_required(VERSION 3.25)

if(NOT LW_ROOT)
  message(FATAL_ERROR "check_layering: pass the source root as -DLW_ROOT=<dir>")
endif()
get_filename_component(LW_ROOT "${LW_ROOT}" ABSOLUTE)
if(NOT IS_DIRECTORY "${LW_ROOT}")
  message(FATAL_ERROR "check_layering: LW_ROOT=${LW_ROOT} is not a directory")
endif()

set(LW_LAYERING_EXCEPTIONS "")

# The parent files that may include parent/worker_impl.h: the wiring itself.
set(LW_WORKER_IMPL_USERS parent/worker.c parent/wake.c)

set(_modules lanes callables mailbox child parent)
# Rank: higher numbers are higher layers; used to name a violation "higher layer".
set(_rank_lanes 1)
set(_rank_callables 2)
set(_rank_mailbox 3)
set(_rank_child 4)
set(_rank_parent 5)
set(_uses_lanes "")
set(_uses_callables lanes)
set(_uses_mailbox lanes)
set(_uses_child mailbox callables lanes)
set(_uses_parent child mailbox callables lanes)

set(_files "")
foreach(m IN LISTS _modules)
  file(GLOB_RECURSE _f RELATIVE "${LW_ROOT}" "${LW_ROOT}/${m}/*.c" "${LW_ROOT}/${m}/*.h")
  list(APPEND _files ${_f})
endforeach()
file(GLOB_RECURSE _f RELATIVE "${LW_ROOT}" "${LW_ROOT}/include/lanework/*.h")
list(APPEND _files ${_f})
list(SORT _files)
if(NOT _files)
  message(FATAL_ERROR "check_layering: no sources under ${LW_ROOT}/{lanes,callables,mailbox,"
                      "child,parent,include/lanework}: wrong LW_ROOT?")
endif()

# _lw_layer_of(rel out): the layer a path relative to LW_ROOT belongs to: a module name,
# "lanework" (public headers), "kernels" (callables/kernels) or "" (outside the library).
function(_lw_layer_of rel out)
  set(layer "")
  if(rel MATCHES "^include/lanework/")
    set(layer lanework)
  elseif(rel MATCHES "^callables/kernels/")
    set(layer kernels)
  elseif(rel MATCHES "^([a-z_]+)/")
    if(CMAKE_MATCH_1 IN_LIST _modules)
      set(layer ${CMAKE_MATCH_1})
    endif()
  endif()
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

set(_violations 0)
set(_n_includes 0)
set(_parent_nodes "")

foreach(rel IN LISTS _files)
  _lw_layer_of("${rel}" own)
  get_filename_component(dir "${LW_ROOT}/${rel}" DIRECTORY)
  file(READ "${LW_ROOT}/${rel}" content)
  set(rest "\n${content}")
  set(line_base 0)
  file(STRINGS "${LW_ROOT}/${rel}" incs REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  if(own STREQUAL "parent")
    list(APPEND _parent_nodes "${rel}")
    set(_edges_${rel} "")
  endif()
  foreach(inc IN LISTS incs)
    # The line number: the first whole line equal to this one after the previous include.
    string(FIND "${rest}" "\n${inc}" pos)
    string(SUBSTRING "${rest}" 0 ${pos} before)
    string(REGEX MATCHALL "\n" nls "${before}")
    list(LENGTH nls n)
    math(EXPR lineno "${line_base} + ${n} + 1")
    set(line_base ${lineno})
    string(LENGTH "\n${inc}" len)
    math(EXPR cut "${pos} + ${len}")
    string(SUBSTRING "${rest}" ${cut} -1 rest)

    if(NOT inc MATCHES "^[ \t]*#[ \t]*include[ \t]*([<\"])([^>\"]+)[>\"]")
      continue()
    endif()
    set(quote "${CMAKE_MATCH_1}")
    set(path "${CMAKE_MATCH_2}")
    string(REGEX MATCH "^[^/]+" first "${path}")
    set(target "")
    if(quote STREQUAL "\"" AND EXISTS "${dir}/${path}")
      get_filename_component(abs "${dir}/${path}" ABSOLUTE)
      file(RELATIVE_PATH target "${LW_ROOT}" "${abs}")
    elseif(first STREQUAL "lanework")
      set(target "include/${path}")
    elseif(first IN_LIST _modules)
      set(target "${path}")
    elseif(quote STREQUAL "\"" AND path MATCHES "^\\.\\./")
      # A relative path that leaves the folder but names no existing file: still judge it.
      get_filename_component(abs "${dir}/${path}" ABSOLUTE)
      file(RELATIVE_PATH target "${LW_ROOT}" "${abs}")
    else()
      continue()  # a system or third-party header (<stdio.h>, <zstd.h>)
    endif()
    math(EXPR _n_includes "${_n_includes} + 1")
    _lw_layer_of("${target}" layer)

    if("${rel}:${path}" IN_LIST LW_LAYERING_EXCEPTIONS)
      continue()
    endif()
    set(why "")
    if(layer STREQUAL "")
      set(why "${own} includes ${target}, which is outside the library's modules")
    elseif(layer STREQUAL own)
      # its own headers
    elseif(own STREQUAL "lanework")
      if(NOT layer STREQUAL "lanework")
        set(why "public header includes ${target} of ${layer}: installed headers may "
                "include only lanework/ headers")
      endif()
    elseif(own STREQUAL "kernels")
      if(NOT layer STREQUAL "lanework")
        set(why "kernel includes ${target} of ${layer}: kernels build against the public "
                "kernel ABI (lanework/) alone")
      endif()
    elseif(layer STREQUAL "lanework")
      # the public layer, usable everywhere
    elseif(layer STREQUAL "kernels")
      set(why "${own} includes ${target} of the example kernels, which no library module uses")
    elseif(NOT layer IN_LIST _uses_${own})
      set(uses "${_uses_${own}}")
      string(REPLACE ";" ", " uses "${uses}")
      if(uses STREQUAL "")
        set(uses "no other module")
      endif()
      if(_rank_${layer} GREATER _rank_${own})
        set(kind "a higher layer")
      else()
        set(kind "a module it does not declare")
      endif()
      set(why "${own} includes ${target} of ${layer}, ${kind} (DESIGN §2: ${own} uses ${uses})")
    endif()
    if(NOT why AND own STREQUAL "parent" AND target STREQUAL "parent/worker_impl.h" AND
       NOT rel STREQUAL "parent/worker_impl.h" AND NOT rel IN_LIST LW_WORKER_IMPL_USERS)
      set(why "parent/worker_impl.h is the wiring of worker.c and wake.c only: include the "
              "headers of the components this file calls (DESIGN §9)")
    endif()
    if(why)
      string(REPLACE ";" "" why "${why}")
      message(NOTICE "${rel}:${lineno}: ${why}")
      math(EXPR _violations "${_violations} + 1")
    endif()
    if(own STREQUAL "parent" AND layer STREQUAL "parent")
      list(APPEND _edges_${rel} "${target}")
    endif()
  endforeach()
endforeach()

# Cycles among parent/ files: a depth-first search; a file met again while it is still on
# the path is a cycle, printed from that file round to itself.
set(_cycles 0)
function(_lw_visit node)
  set(path ${_lw_path} "${node}")
  set_property(GLOBAL PROPERTY "LW_STATE:${node}" open)
  foreach(next IN LISTS _edges_${node})
    get_property(state GLOBAL PROPERTY "LW_STATE:${next}")
    if(state STREQUAL "open")
      list(FIND path "${next}" at)
      list(SUBLIST path ${at} -1 ring)
      list(APPEND ring "${next}")
      string(REPLACE ";" " -> " ring "${ring}")
      message(NOTICE "${node}: include cycle among parent files: ${ring} (DESIGN §9)")
      get_property(c GLOBAL PROPERTY LW_CYCLES)
      math(EXPR c "${c} + 1")
      set_property(GLOBAL PROPERTY LW_CYCLES ${c})
    elseif(NOT state STREQUAL "done")
      set(_lw_path ${path})
      _lw_visit("${next}")
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY "LW_STATE:${node}" done)
endfunction()
set_property(GLOBAL PROPERTY LW_CYCLES 0)
foreach(node IN LISTS _parent_nodes)
  get_property(state GLOBAL PROPERTY "LW_STATE:${node}")
  if(NOT state)
    set(_lw_path "")
    _lw_visit("${node}")
  endif()
endforeach()
get_property(_cycles GLOBAL PROPERTY LW_CYCLES)

list(LENGTH _files _n_files)
if(_violations GREATER 0 OR _cycles GREATER 0)
  message(NOTICE "layering: ${_violations} include(s) against DESIGN §2 and ${_cycles} "
                 "include cycle(s) among parent files, in ${LW_ROOT}")
  message(FATAL_ERROR "layering check failed (the lines above name each file and rule)")
endif()
message(STATUS "layering: ${_n_files} files, ${_n_includes} module includes, no violation, "
               "no cycle among parent files")
