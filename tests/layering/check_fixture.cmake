# check_fixture.cmake: runs a source check (check_layering.cmake, check_error_channel.cmake) on
# a fixture tree and checks its verdict, so the check itself cannot silently pass.
#   cmake -DLW_CHECK=<check_*.cmake> -DLW_FIXTURE=<tree> -DLW_EXPECT_FAIL=ON|OFF -P ...
# With LW_EXPECT_FAIL=ON the check must exit non-zero and print every line of
# <tree>/expected.txt (each one violation, file:line and rule, or the summary); with OFF it
# must pass.
cmake_minimum_required(VERSION 3.25)
foreach(v LW_CHECK LW_FIXTURE)
  if(NOT ${v})
    message(FATAL_ERROR "check_fixture: pass -D${v}=...")
  endif()
endforeach()
get_filename_component(check "${LW_CHECK}" NAME_WE)
execute_process(COMMAND ${CMAKE_COMMAND} -DLW_ROOT=${LW_FIXTURE} -P ${LW_CHECK}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
message(STATUS "${check} on ${LW_FIXTURE} exited ${rc}:\n${all}")
if(NOT LW_EXPECT_FAIL)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${check} rejected the clean fixture ${LW_FIXTURE}")
  endif()
  return()
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "${check} passed ${LW_FIXTURE}, which breaks its rule on purpose")
endif()
file(STRINGS ${LW_FIXTURE}/expected.txt expected)
if(NOT expected)
  message(FATAL_ERROR "check_fixture: ${LW_FIXTURE}/expected.txt lists nothing")
endif()
set(missing 0)
foreach(line IN LISTS expected)
  string(FIND "${all}" "${line}" at)
  if(at EQUAL -1)
    message(NOTICE "missing from the check's output: ${line}")
    math(EXPR missing "${missing} + 1")
  endif()
endforeach()
if(missing GREATER 0)
  message(FATAL_ERROR "${check} failed on ${LW_FIXTURE}, but ${missing} expected "
                      "finding(s) are missing (listed above)")
endif()
