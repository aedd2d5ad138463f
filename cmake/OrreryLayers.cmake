# The layer table (cmake/layers.txt), enforced twice: orrery_add_library refuses a library that
# links an orrery layer its line does not list (at configure time), and the check_layers target
# (part of every build) refuses a source that includes such a layer's header.
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/layers.txt ORRERY_LAYER_LINES)
foreach(line IN LISTS ORRERY_LAYER_LINES)
  string(REGEX REPLACE "#.*" "" line "${line}")
  string(STRIP "${line}" line)
  if(line STREQUAL "")
    continue()
  endif()
  string(REGEX MATCH "^([a-z_]+):(.*)$" matched "${line}")
  if(NOT matched)
    message(FATAL_ERROR "cmake/layers.txt: cannot read '${line}' (expected 'layer: dep dep ...')")
  endif()
  separate_arguments(deps UNIX_COMMAND "${CMAKE_MATCH_2}")
  set(ORRERY_LAYER_${CMAKE_MATCH_1} "${deps}")
  set(ORRERY_LAYER_${CMAKE_MATCH_1}_KNOWN TRUE)
endforeach()

# Fails the configuration when `layer` links orrery_<x> for an x its line does not list.
function(orrery_check_layer_deps layer)
  if(NOT ORRERY_LAYER_${layer}_KNOWN)
    message(FATAL_ERROR "orrery_${layer}: no line for layer '${layer}' in cmake/layers.txt")
  endif()
  foreach(dep IN LISTS ARGN)
    if(dep MATCHES "^orrery_(.+)$")
      set(used ${CMAKE_MATCH_1})
      if(NOT used IN_LIST ORRERY_LAYER_${layer})
        message(FATAL_ERROR "orrery_${layer} links ${dep}, but cmake/layers.txt allows "
                            "${layer}: ${ORRERY_LAYER_${layer}}")
      endif()
    endif()
  endforeach()
endfunction()

# Every source under src/ checked against the table at each build that changes one.
function(orrery_add_layer_check)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*.h
       ${PROJECT_SOURCE_DIR}/src/*.cpp)
  set(stamp ${CMAKE_BINARY_DIR}/check_layers.stamp)
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check_layers.py
            --table ${PROJECT_SOURCE_DIR}/cmake/layers.txt --src ${PROJECT_SOURCE_DIR}/src
            --stamp ${stamp}
    DEPENDS ${sources} ${PROJECT_SOURCE_DIR}/cmake/layers.txt
            ${PROJECT_SOURCE_DIR}/scripts/check_layers.py
    COMMENT "Checking that every layer includes only the layers cmake/layers.txt allows"
    VERBATIM)
  add_custom_target(check_layers ALL DEPENDS ${stamp})
endfunction()
