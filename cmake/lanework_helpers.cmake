# Small helpers shared by the module CMakeLists files.

# lw_apply_sanitizers(): adds the LW_ASAN / LW_UBSAN / LW_TSAN flags globally, and leaves the
# compile flags in LW_SANITIZE_FLAGS (empty without sanitizers) for what is built outside CMake
# against this build (the docs' code check).
macro(lw_apply_sanitizers)
  if(LW_TSAN AND (LW_ASAN OR LW_UBSAN))
    message(FATAL_ERROR "LW_TSAN cannot be combined with LW_ASAN or LW_UBSAN")
  endif()
  set(_lw_san "")
  if(LW_ASAN)
    list(APPEND _lw_san address)
  endif()
  if(LW_UBSAN)
    list(APPEND _lw_san undefined)
  endif()
  if(LW_TSAN)
    list(APPEND _lw_san thread)
  endif()
  set(LW_SANITIZE_FLAGS "")
  if(_lw_san)
    list(JOIN _lw_san "," _lw_san_list)
    set(_lw_san_opts -fsanitize=${_lw_san_list} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    add_compile_options(${_lw_san_opts})
    list(JOIN _lw_san_opts " " LW_SANITIZE_FLAGS)
    add_link_options(-fsanitize=${_lw_san_list})
  endif()
endmacro()

# lw_add_module(name SOURCES file... [DEPENDS module...] [PRIVATE_LIBS target...]):
# one library module of DESIGN §2 (lanes, callables, mailbox, child, parent) as the OBJECT
# library lw_<name>; liblanework.so/.a are packaged from the objects of every module
# (LW_MODULE_TARGETS). DEPENDS names the lower modules this one may use, as in §2's table, and
# must already be defined (the folders are added bottom-up).
#
# A module sees only its own headers, those of the modules it declares and include/lanework:
# the project root is deliberately not an include directory of the library. Each module
# publishes its folder through a view directory in the build tree,
# <build>/lw_module_views/<name>/<name> -> <source>/<name>, so "lanes/error.h" resolves there
# and an #include of a module that is not declared fails to compile with "No such file".
# tests/layering/check_layering.cmake states the same rules over the source text, so a
# violation is also named (file:line and rule) without a build.
#
# Calls are checked too: lw_<name>_link_check is a shared object of this module's objects and
# those of every module below it that it declares (directly or through them), linked with
# --no-undefined, so a call into an undeclared or higher module (say, a prototype written by
# hand instead of an #include) fails the build with "undefined reference". Not built under
# the sanitizers, whose runtime a shared object does not always link (clang).
function(lw_add_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPENDS;PRIVATE_LIBS" ${ARGN})
  set(t lw_${name})
  add_library(${t} OBJECT ${M_SOURCES})
  set(view ${PROJECT_BINARY_DIR}/lw_module_views/${name})
  file(MAKE_DIRECTORY ${view})
  # Recreated at every configure: CREATE_LINK replaces a link left by an older source path.
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${name} ${view}/${name} SYMBOLIC)
  target_include_directories(${t} PUBLIC ${view} ${PROJECT_SOURCE_DIR}/include)
  target_compile_definitions(${t} PRIVATE LW_BUILDING_LIBRARY=1)
  foreach(dep IN LISTS M_DEPENDS)
    if(NOT TARGET lw_${dep})
      message(FATAL_ERROR "module ${name} depends on ${dep}, which is not defined before it")
    endif()
    target_link_libraries(${t} PUBLIC lw_${dep})
  endforeach()
  if(M_PRIVATE_LIBS)
    target_link_libraries(${t} PRIVATE ${M_PRIVATE_LIBS})
  endif()
  set_property(GLOBAL APPEND PROPERTY LW_MODULE_TARGETS ${t})

  set(closure ${name})
  foreach(dep IN LISTS M_DEPENDS)
    get_property(dep_closure GLOBAL PROPERTY LW_MODULE_CLOSURE_${dep})
    list(APPEND closure ${dep_closure})
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set_property(GLOBAL PROPERTY LW_MODULE_CLOSURE_${name} ${closure})
  if(NOT (LW_ASAN OR LW_UBSAN OR LW_TSAN))
    set(objects "")
    foreach(m IN LISTS closure)
      list(APPEND objects $<TARGET_OBJECTS:lw_${m}>)
    endforeach()
    add_library(${t}_link_check SHARED ${objects})
    target_link_options(${t}_link_check PRIVATE -Wl,--no-undefined)
    target_link_libraries(${t}_link_check PRIVATE ${LW_LINK_LIBS})
  endif()
endfunction()

# lw_add_test(NAME name SRCS a.c b.c [TIMEOUT s] [LIBS ...] [LENGTH_ENV VAR default_s]):
# one Criterion test binary, registered with ctest. Tests link the static library so they can
# reach internal lw__ symbols, and find the kernel images through LW_KERNEL_DIR.
# LENGTH_ENV: the test runs for as many seconds as the environment variable VAR says when it
# starts (default_s when unset), so its ctest TIMEOUT is 2 x those seconds (rounded up) plus
# TIMEOUT, computed when ctest runs rather than when CMake configures.
function(lw_add_test)
  cmake_parse_arguments(T "WHEN_CUDA_DEVICE" "NAME;TIMEOUT" "SRCS;LIBS;LENGTH_ENV" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SRCS})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${T_NAME} PRIVATE lanework_static PkgConfig::CRITERION m ${T_LIBS})
  target_compile_definitions(${T_NAME} PRIVATE
    LW_KERNEL_DIR="${LW_KERNEL_OUTPUT_DIR}" LW_TOOL_PATH="$<TARGET_FILE:lanework_cli>")
  add_dependencies(${T_NAME} lw_kernels lw_test_kernels lanework_cli)
  if(LW_TSAN)
    # Criterion cannot start under ThreadSanitizer (Snaipe/Criterion#274): TSan builds compile
    # the same sources against the Criterion-compatible runner in tests/tsan_shim.
    target_include_directories(${T_NAME} BEFORE PRIVATE ${PROJECT_SOURCE_DIR}/tests/tsan_shim)
  endif()
  set(_env "")
  if(LW_TSAN)
    # A second worker in one process forks its fork server from a threaded process (the first
    # worker's threads); TSan refuses thread creation after such a fork unless told not to.
    set(_env "TSAN_OPTIONS=die_after_fork=0")
  endif()
  if(T_LENGTH_ENV)
    list(GET T_LENGTH_ENV 0 _var)
    list(GET T_LENGTH_ENV 1 _default)
    # A TIMEOUT fixed at configure time would kill a run asked to last longer. ctest includes
    # the directory's TEST_INCLUDE_FILES while it reads the test list (before the tests the
    # directory adds itself), so this file registers the test there, with the TIMEOUT
    # derived from $ENV{VAR} as it is then. math() knows only integers: whole seconds + 1.
    set(_file ${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_ctest.cmake)
    set(_env_property "")
    if(_env)
      set(_env_property "ENVIRONMENT \"${_env}\"")
    endif()
    file(GENERATE OUTPUT ${_file} CONTENT "\
# Generated by lw_add_test: registers ${T_NAME} with a timeout that follows ${_var}.
set(_lw_length \"${_default}\")
if(NOT \"\$ENV{${_var}}\" STREQUAL \"\")
  set(_lw_length \"\$ENV{${_var}}\")
endif()
string(REGEX MATCH \"^[0-9]+\" _lw_whole \"\${_lw_length}\")
if(_lw_whole STREQUAL \"\")
  set(_lw_whole 0)
endif()
math(EXPR _lw_timeout \"(\${_lw_whole} + 1) * 2 + ${T_TIMEOUT}\")
add_test(${T_NAME} \"$<TARGET_FILE:${T_NAME}>\" --jobs=1)
set_tests_properties(${T_NAME} PROPERTIES TIMEOUT \${_lw_timeout} ${_env_property})
")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_file})
    return()
  endif()
  if(T_WHEN_CUDA_DEVICE)
    # Built on every machine (scripts/gpu-check carries it to one with a GPU), listed in ctest
    # only when `lanework info --json` finds a CUDA device as ctest reads the test list: a
    # machine without one (CI) neither runs it nor counts it.
    set(_file ${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_ctest.cmake)
    set(_env_property "")
    if(_env)
      set(_env_property "ENVIRONMENT \"${_env}\"")
    endif()
    file(GENERATE OUTPUT ${_file} CONTENT "\
# Generated by lw_add_test: registers ${T_NAME} when this machine has a CUDA device.
execute_process(COMMAND \"$<TARGET_FILE:lanework_cli>\" info --json
                OUTPUT_VARIABLE _lw_info RESULT_VARIABLE _lw_rc ERROR_QUIET TIMEOUT 60)
set(_lw_devices 0)
if(_lw_rc EQUAL 0)
  string(JSON _lw_n ERROR_VARIABLE _lw_e LENGTH \"\${_lw_info}\" backends)
  if(NOT _lw_e AND _lw_n GREATER 0)
    math(EXPR _lw_last \"\${_lw_n} - 1\")
    foreach(_lw_i RANGE \${_lw_last})
      string(JSON _lw_name ERROR_VARIABLE _lw_e GET \"\${_lw_info}\" backends \${_lw_i} name)
      if(_lw_name STREQUAL \"cuda\")
        string(JSON _lw_devices ERROR_VARIABLE _lw_e LENGTH \"\${_lw_info}\" backends
               \${_lw_i} devices)
      endif()
    endforeach()
  endif()
endif()
if(_lw_devices GREATER 0)
  add_test(${T_NAME} \"$<TARGET_FILE:${T_NAME}>\" --jobs=1)
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} ${_env_property})
endif()
")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_file})
    return()
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} --jobs=1)
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT})
  if(_env)
    set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${_env}")
  endif()
endfunction()
