# check_consumer.cmake: installs the build into a scratch prefix and builds a program outside
# the project against it, through find_package(lanework) (shared and static) and through
# pkg-config (lanework.pc), then runs each program.
#   cmake -DLW_BUILD_DIR=<build> -DLW_WORK=<scratch dir> -DLW_CONSUMER=<consumer source>
#         -DLW_CC=<C compiler> -P check_consumer.cmake
cmake_minimum_required(VERSION 3.25)
foreach(v LW_BUILD_DIR LW_WORK LW_CONSUMER LW_CC)
  if(NOT ${v})
    message(FATAL_ERROR "check_consumer: pass -D${v}=...")
  endif()
endforeach()

function(lw_run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_consumer: ${what} failed (${rc}):\n${out}${err}")
  endif()
  message(STATUS "${what}: ok ${out}")
endfunction()

file(REMOVE_RECURSE ${LW_WORK})
set(prefix ${LW_WORK}/prefix)
lw_run("install" ${CMAKE_COMMAND} --install ${LW_BUILD_DIR} --prefix ${prefix})
file(GLOB pcdir LIST_DIRECTORIES true ${prefix}/lib*/pkgconfig)
if(NOT pcdir)
  message(FATAL_ERROR "check_consumer: no lanework.pc under ${prefix}/lib*/pkgconfig")
endif()
get_filename_component(libdir ${pcdir} DIRECTORY)

lw_run("find_package configure" ${CMAKE_COMMAND} -S ${LW_CONSUMER} -B ${LW_WORK}/cmake
       -DCMAKE_C_COMPILER=${LW_CC} -DCMAKE_PREFIX_PATH=${prefix})
lw_run("find_package build" ${CMAKE_COMMAND} --build ${LW_WORK}/cmake)
lw_run("find_package shared run"
       ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${LW_WORK}/cmake/consumer_shared)
lw_run("find_package static run" ${LW_WORK}/cmake/consumer_static)

find_program(PKG_CONFIG pkg-config REQUIRED)
set(pc_env ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pcdir})
execute_process(COMMAND ${pc_env} ${PKG_CONFIG} --cflags --libs lanework
                RESULT_VARIABLE rc OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_consumer: pkg-config does not find lanework in ${pcdir}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
lw_run("pkg-config build" ${LW_CC} ${LW_CONSUMER}/main.c ${flags} -o ${LW_WORK}/pc_shared)
lw_run("pkg-config run"
       ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${LW_WORK}/pc_shared)
file(REMOVE_RECURSE ${LW_WORK})
