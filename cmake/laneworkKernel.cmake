# lanework_add_kernel(<name> <source>... [OUTPUT_NAME <file name>] [OUTPUT_DIRECTORY <dir>])
#
# Builds a lanework kernel image: a MODULE shared object <name>.so (no "lib" prefix; the file
# name is OUTPUT_NAME when given) from C or C++ sources, against the header-only kernel ABI
# (lanework/kernel.h through the lanework::kernel target). It never links liblanework: a kernel
# is loaded into a chip child that already has the library, and it reaches lanework only
# through the lw_kernel_ctx_t and lw_kernel_args_t it is handed.
#
# Optimized (-O2) whatever the build type, since kernels are what a run spends its time in.
# Symbols are hidden except the entry points, which lanework/kernel.h declares with
# LW_KERNEL_EXPORT (lw_kernel_main, lw_kernel_prepare, lw_kernel_release), so helper functions
# of two kernels loaded into one child never interpose on each other.
#
# Shipped with the package (find_package(lanework) includes it) and used by lanework's own
# build for its kernels (callables/kernels/CMakeLists.txt).
function(lanework_add_kernel name)
  cmake_parse_arguments(K "" "OUTPUT_NAME;OUTPUT_DIRECTORY" "" ${ARGN})
  if(NOT K_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "lanework_add_kernel(${name}): no source files given")
  endif()
  if(NOT TARGET lanework::kernel)
    message(FATAL_ERROR "lanework_add_kernel(${name}): the lanework::kernel target is missing "
                        "(call find_package(lanework) first)")
  endif()
  add_library(${name} MODULE ${K_UNPARSED_ARGUMENTS})
  if(NOT K_OUTPUT_NAME)
    set(K_OUTPUT_NAME ${name})
  endif()
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    OUTPUT_NAME ${K_OUTPUT_NAME}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  if(K_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${K_OUTPUT_DIRECTORY})
  endif()
  target_link_libraries(${name} PRIVATE lanework::kernel)
  target_compile_options(${name} PRIVATE -O2)
endfunction()
