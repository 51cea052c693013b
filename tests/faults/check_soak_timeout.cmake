# tests/faults/check_soak_timeout.cmake — run by ctest (test_faults_soak_ctest_timeout) with
# -DCTEST=<ctest> -DBUILD_DIR=<build folder>. Checks that ctest gives test_faults_soak a
# timeout that follows LW_SOAK_SECONDS: asked for 600 s, the soak needs more than its own
# Criterion bound of 2 x 600 + 60 s, whatever ctest's --timeout default says.
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env LW_SOAK_SECONDS=600
          ${CTEST} --timeout 300 --show-only=json-v1 -R "^test_faults_soak$"
  WORKING_DIRECTORY ${BUILD_DIR}
  OUTPUT_VARIABLE json
  ERROR_VARIABLE err
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ctest --show-only failed (${rc}): ${err}")
endif()
string(JSON n_tests LENGTH "${json}" tests)
if(NOT n_tests EQUAL 1)
  message(FATAL_ERROR "expected test_faults_soak once in the test list, found ${n_tests}")
endif()
set(timeout "")
string(JSON n_props LENGTH "${json}" tests 0 properties)
math(EXPR last "${n_props} - 1")
foreach(i RANGE ${last})
  string(JSON name GET "${json}" tests 0 properties ${i} name)
  if(name STREQUAL "TIMEOUT")
    string(JSON timeout GET "${json}" tests 0 properties ${i} value)
  endif()
endforeach()
if(timeout STREQUAL "")
  message(FATAL_ERROR "test_faults_soak has no TIMEOUT property: ctest --timeout would apply")
endif()
if(timeout LESS_EQUAL 1260)
  message(FATAL_ERROR "with LW_SOAK_SECONDS=600 ctest gives test_faults_soak ${timeout} s; "
                      "it needs more than 1260 s")
endif()
message(STATUS "with LW_SOAK_SECONDS=600 ctest gives test_faults_soak ${timeout} s")
