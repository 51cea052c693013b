# Small helpers shared by the module CMakeLists files.

# lw_apply_sanitizers(): adds the LW_ASAN / LW_UBSAN / LW_TSAN flags globally.
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
  if(_lw_san)
    list(JOIN _lw_san "," _lw_san_list)
    add_compile_options(-fsanitize=${_lw_san_list} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    add_link_options(-fsanitize=${_lw_san_list})
  endif()
endmacro()

# lw_add_library_sources(file...): adds sources of a module folder to the library.
function(lw_add_library_sources)
  target_sources(lanework_obj PRIVATE ${ARGN})
endfunction()

# lw_add_test(NAME name SRCS a.c b.c [TIMEOUT s] [LIBS ...]): one Criterion test binary,
# registered with ctest. Tests link the static library so they can reach internal lw__
# symbols, and find the kernel images through LW_KERNEL_DIR.
function(lw_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SRCS;LIBS" ${ARGN})
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
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} --jobs=1)
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT})
  if(LW_TSAN)
    # A second worker in one process forks its fork server from a threaded process (the first
    # worker's threads); TSan refuses thread creation after such a fork unless told not to.
    set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "TSAN_OPTIONS=die_after_fork=0")
  endif()
endfunction()
