# orrery_set_warnings(target): the warning set every orrery library and program compiles with.
function(orrery_set_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Woverloaded-virtual -Wconversion -Wsign-conversion -Wdouble-promotion
    -Wformat=2 -Wimplicit-fallthrough
    # GCC 12 reports impossible overlaps in inlined std::string concatenation (GCC bug 105651).
    $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>)
endfunction()

# orrery_add_library(name SOURCES ... DEPS ...): one library per layer (src/<name>), whose public
# headers are included as "<name>/<file>.h" from src/.
function(orrery_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  orrery_check_layer_deps(${name} ${ARG_DEPS})
  add_library(orrery_${name} STATIC ${ARG_SOURCES})
  target_include_directories(orrery_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(orrery_${name} PUBLIC ${ARG_DEPS})
  orrery_set_warnings(orrery_${name})
endfunction()
