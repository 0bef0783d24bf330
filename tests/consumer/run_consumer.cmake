# Builds and runs one of the consumer projects against ctnn, the way a user would. Run as
#   cmake -DMODE=find_package|add_subdirectory -DCTNN_SOURCE_DIR=<src> -DCTNN_BINARY_DIR=<build>
#         -DWORK_DIR=<scratch> -DGENERATOR=<generator> -DCXX_COMPILER=<c++> [-DFORWARD=<a|b|...>]
#         -P run_consumer.cmake
# find_package:     `cmake --install` ctnn's build into WORK_DIR/prefix, then configure the consumer
#                   with CMAKE_PREFIX_PATH=<prefix> and check that it found that copy;
# add_subdirectory: configure the consumer with CTNN_SOURCE_DIR and check that ctnn's tests stayed off.
# Then build it, run it, and check that it prints LeNet-5's parameter count.
# FORWARD holds -D settings for the consumer's configure (dependency locations of ctnn's own build),
# separated by |.
cmake_minimum_required(VERSION 3.25)

foreach(var MODE CTNN_SOURCE_DIR CTNN_BINARY_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake: -D${var}=... is required")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n${out}")
  endif()
  message(STATUS "${what}: ok")
  set(output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(build "${WORK_DIR}/build")
string(REPLACE "|" ";" forward "${FORWARD}")
set(configure ${CMAKE_COMMAND} -S "${CMAKE_CURRENT_LIST_DIR}/${MODE}" -B "${build}" -G "${GENERATOR}"
              -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release
              -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON ${forward})

if(MODE STREQUAL "find_package")
  set(prefix "${WORK_DIR}/prefix")
  run("install ctnn into ${prefix}" ${CMAKE_COMMAND} --install "${CTNN_BINARY_DIR}" --prefix "${prefix}")
  file(GLOB_RECURSE config "${prefix}/*/ctnnConfig.cmake")
  if(NOT config OR NOT EXISTS "${prefix}/include/ctnn/ctnn.hpp")
    message(FATAL_ERROR "the install lacks ctnnConfig.cmake or the headers")
  endif()
  run("configure the consumer" ${configure} -DCMAKE_PREFIX_PATH=${prefix})
  # The consumer must have found the installed copy, not some other ctnn.
  file(STRINGS "${build}/CMakeCache.txt" ctnn_dir REGEX "^ctnn_DIR:")
  string(FIND "${ctnn_dir}" "${prefix}/" at)
  if(NOT at GREATER -1)
    message(FATAL_ERROR "the consumer found ctnn elsewhere: ${ctnn_dir}")
  endif()
elseif(MODE STREQUAL "add_subdirectory")
  run("configure the consumer" ${configure} -DCTNN_SOURCE_DIR=${CTNN_SOURCE_DIR})
  # ctnn is not top-level there: its tests, examples and benchmarks must be off.
  foreach(option CTNN_BUILD_TESTS CTNN_BUILD_EXAMPLES CTNN_BUILD_BENCHMARKS)
    file(STRINGS "${build}/CMakeCache.txt" line REGEX "^${option}:")
    if(NOT line MATCHES "=OFF$")
      message(FATAL_ERROR "${option} should be OFF in a consumer's build, got: ${line}")
    endif()
  endforeach()
else()
  message(FATAL_ERROR "unknown MODE ${MODE}")
endif()

run("build the consumer" ${CMAKE_COMMAND} --build "${build}")
run("run the consumer" "${build}/consumer")
if(NOT output MATCHES "LeNet-5 has 61706 parameters")
  message(FATAL_ERROR "unexpected output from the consumer:\n${output}")
endif()
message(STATUS "the consumer printed: ${output}")
