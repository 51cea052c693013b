# check_big_program.cmake: runs callables/kernels/cuda/gen_big_program.cmake into LW_WORK and
# fails unless the output is byte for byte the committed big_program.cu (edit the generator,
# run it with -DOUT=callables/kernels/cuda/big_program.cu, commit both).
#   cmake -DLW_GEN=<generator> -DLW_COMMITTED=<big_program.cu> -DLW_WORK=<scratch file>
#         -P check_big_program.cmake
cmake_minimum_required(VERSION 3.25)
foreach(v LW_GEN LW_COMMITTED LW_WORK)
  if(NOT ${v})
    message(FATAL_ERROR "check_big_program: pass -D${v}=...")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -DOUT=${LW_WORK} -P ${LW_GEN} RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_big_program: the generator failed (${rc}): ${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${LW_WORK} ${LW_COMMITTED}
                RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "check_big_program: ${LW_COMMITTED} is not what ${LW_GEN} writes "
                      "(regenerate it: cmake -DOUT=${LW_COMMITTED} -P ${LW_GEN})")
endif()
file(REMOVE ${LW_WORK})
message(STATUS "big_program.cu is the generator's output")
