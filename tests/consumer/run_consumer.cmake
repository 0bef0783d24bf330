# Uses ctnn the way a user would, in one of five modes, and checks the result. Run as
#   cmake -DMODE=<mode> -DCTNN_SOURCE_DIR=<src> -DCTNN_BINARY_DIR=<build> -DWORK_DIR=<scratch>
#         -DGENERATOR=<generator> -DCXX_COMPILER=<c++> [-DPKG_CONFIG=<pkg-config>] [-DNVCC=<nvcc>]
#         [-DFORWARD=<a|b|...>]
#         -P run_consumer.cmake
# find_package:          `cmake --install` ctnn's build into WORK_DIR/prefix and check what it holds;
#                        configure find_package/ with CMAKE_PREFIX_PATH=<prefix>, check that it found
#                        that copy, build and run it; without zlib, find_package(ctnn) must fail and
#                        name zlib's Debian package.
# find_package_cuda:     the same as a CUDA project: it also builds and runs cuda_main.cu, and must get
#                        ctnn's default CUDA architecture (90); a second configure with
#                        CMAKE_CUDA_ARCHITECTURES=80 must keep 80.
# pkg_config:            install, then compile find_package/main.cpp with only
#                        `pkg-config --cflags --libs ctnn` and run it; with ctnn-cuda.pc, also compile
#                        pkg_config/cuda_main.cpp with `pkg-config --cflags --libs ctnn-cuda`, and
#                        with NVCC, find_package/cuda_main.cu with nvcc and the same flags.
# add_subdirectory:      configure add_subdirectory/ (a C++-only project), check that ctnn's tests,
#                        install rules and CUDA stayed off and the project's languages are only CXX;
#                        build, run, `cmake --install` it and check that no ctnn file was installed;
#                        then with -DCTNN_INSTALL=ON, check that ctnn's files are installed.
# add_subdirectory_cuda: configure add_subdirectory/ as a CUDA project: ctnn follows it into CUDA and
#                        sets the default architecture (configure only).
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
    list(JOIN ARGN " " command)
    message(FATAL_ERROR "${what} failed (${rc}):\n${command}\n${out}")
  endif()
  message(STATUS "${what}: ok")
  set(output "${out}" PARENT_SCOPE)
endfunction()

function(check condition_text)
  if(NOT (${ARGN}))
    message(FATAL_ERROR "check failed: ${condition_text}")
  endif()
endfunction()

# Fails unless TEXT contains PART (no regex: paths may hold regex characters).
function(check_contains what text part)
  string(FIND "${text}" "${part}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check failed: ${what}: '${text}' lacks '${part}'")
  endif()
endfunction()

# The value of VAR in BUILD's CMakeCache.txt, in OUT ("" when absent).
function(cache_value build var out)
  file(STRINGS "${build}/CMakeCache.txt" line REGEX "^${var}:")
  string(REGEX REPLACE "^[^=]*=" "" value "${line}")
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

# Installs ctnn's build into PREFIX and checks that every promised file is there.
function(install_ctnn prefix)
  run("install ctnn into ${prefix}" ${CMAKE_COMMAND} --install "${CTNN_BINARY_DIR}" --prefix "${prefix}")
  foreach(file include/ctnn/ctnn.hpp include/ctnn/version.hpp
               share/cmake/ctnn/ctnnConfig.cmake share/cmake/ctnn/ctnnConfigVersion.cmake
               share/cmake/ctnn/ctnnTargets.cmake share/pkgconfig/ctnn.pc
               share/doc/ctnn/LICENSE share/doc/ctnn/README.md share/doc/ctnn/docs/errors.md)
    if(NOT EXISTS "${prefix}/${file}")
      message(FATAL_ERROR "the install lacks ${file}")
    endif()
  endforeach()
endfunction()

# Checks that the consumer printed what main.cpp prints.
function(check_consumer_output text)
  foreach(expected "LeNet-5 has 61706 parameters" "forward FLOPs    845,882 per sample"
                   "labels: 7 2 1" "image: 3x2, last pixel 250")
    string(FIND "${text}" "${expected}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "the consumer's output lacks '${expected}':\n${text}")
    endif()
  endforeach()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(build "${WORK_DIR}/build")
set(prefix "${WORK_DIR}/prefix")
string(REPLACE "|" ";" forward "${FORWARD}")
set(consumers "${CMAKE_CURRENT_LIST_DIR}")
set(configure ${CMAKE_COMMAND} -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
              -DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON ${forward})

if(MODE MATCHES "^find_package")
  install_ctnn("${prefix}")
  set(cuda OFF)
  if(MODE STREQUAL "find_package_cuda")
    set(cuda ON)
  endif()
  run("configure the consumer" ${configure} -S "${consumers}/find_package" -B "${build}"
      -DCMAKE_PREFIX_PATH=${prefix} -DCONSUMER_CUDA=${cuda})
  # The consumer must have found the installed copy, not some other ctnn.
  cache_value("${build}" ctnn_DIR ctnn_dir)
  check_contains("ctnn_DIR is in the prefix" "${ctnn_dir}" "${prefix}/")
  run("build the consumer" ${CMAKE_COMMAND} --build "${build}")
  run("run the consumer" "${build}/consumer" "${WORK_DIR}")
  check_consumer_output("${output}")
  if(NOT cuda)
    # A dependency that cannot be found: find_package(ctnn) fails and names its Debian package.
    execute_process(COMMAND ${configure} -S "${consumers}/find_package" -B "${WORK_DIR}/build-no-zlib"
                            -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    check("configuring without zlib fails" NOT rc EQUAL 0)
    check_contains("the message without zlib" "${out}" "ctnn needs ZLIB; on Debian/Ubuntu: sudo apt-get install zlib1g-dev")
    message(STATUS "without zlib, find_package(ctnn) says what to install: ok")
  endif()
  if(cuda)
    cache_value("${build}" CMAKE_CUDA_ARCHITECTURES arch)
    check("a consumer that chose no architecture gets ctnn's 90 (got ${arch})" arch STREQUAL "90")
    run("run the CUDA consumer" "${build}/consumer_cuda")
    check("the CUDA consumer's output: ${output}" output MATCHES "CUDA consumer: runtime [0-9]+, cuBLAS [0-9]+, 8806 parameters")
    run("configure the consumer with its own architecture" ${configure} -S "${consumers}/find_package"
        -B "${WORK_DIR}/build80" -DCMAKE_PREFIX_PATH=${prefix} -DCONSUMER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=80)
    cache_value("${WORK_DIR}/build80" CMAKE_CUDA_ARCHITECTURES arch)
    check("a consumer's own CMAKE_CUDA_ARCHITECTURES=80 is kept (got ${arch})" arch STREQUAL "80")
  endif()

elseif(MODE STREQUAL "pkg_config")
  if(NOT PKG_CONFIG)
    message(FATAL_ERROR "run_consumer.cmake: -DPKG_CONFIG=<pkg-config> is required")
  endif()
  install_ctnn("${prefix}")
  # Only this prefix's .pc files, and the system's for what they may require.
  set(pkg_config ${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${prefix}/share/pkgconfig" ${PKG_CONFIG})
  run("pkg-config --modversion ctnn" ${pkg_config} --modversion ctnn)
  string(STRIP "${output}" version)
  file(STRINGS "${CTNN_SOURCE_DIR}/include/ctnn/version.hpp" lines REGEX "#define CTNN_VERSION_")
  string(REGEX REPLACE "[^;]*MAJOR ([0-9]+);[^;]*MINOR ([0-9]+);[^;]*PATCH ([0-9]+)" "\\1.\\2.\\3" expected "${lines}")
  check("pkg-config's version ${version} is version.hpp's ${expected}" version STREQUAL expected)
  run("pkg-config --cflags --libs ctnn" ${pkg_config} --cflags --libs ctnn)
  string(STRIP "${output}" flags)
  message(STATUS "ctnn's flags: ${flags}")
  check_contains("the flags name the installed headers" "${flags}" "-I${prefix}/share/pkgconfig/../../include")
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run("compile the consumer with those flags" ${CXX_COMPILER} -O1 "${consumers}/find_package/main.cpp"
      -o "${WORK_DIR}/consumer" ${flags})
  run("run the consumer" "${WORK_DIR}/consumer" "${WORK_DIR}")
  check_consumer_output("${output}")
  if(EXISTS "${prefix}/share/pkgconfig/ctnn-cuda.pc")
    run("pkg-config --cflags --libs ctnn-cuda" ${pkg_config} --cflags --libs ctnn-cuda)
    string(STRIP "${output}" flags)
    message(STATUS "ctnn-cuda's flags: ${flags}")
    separate_arguments(flags UNIX_COMMAND "${flags}")
    run("compile the CUDA host consumer with those flags" ${CXX_COMPILER} -O1
        "${consumers}/pkg_config/cuda_main.cpp" -o "${WORK_DIR}/consumer_cuda" ${flags})
    run("run the CUDA host consumer" "${WORK_DIR}/consumer_cuda")
    check("its output: ${output}" output MATCHES "cudart [0-9]+, cuBLAS [0-9]+, LeNet-5 has 61706 parameters")
    if(NVCC)  # the README's nvcc line: nvcc_flags, the default architecture, the ctnn-cuda flags
      run("pkg-config --variable=nvcc_flags ctnn-cuda" ${pkg_config} --variable=nvcc_flags ctnn-cuda)
      separate_arguments(nvcc_flags UNIX_COMMAND "${output}")
      run("pkg-config --variable=cuda_architectures ctnn-cuda" ${pkg_config} --variable=cuda_architectures ctnn-cuda)
      string(STRIP "${output}" arch)
      check("ctnn-cuda.pc's cuda_architectures is 90 (got ${arch})" arch STREQUAL "90")
      run("compile the CUDA consumer with nvcc and those flags" ${NVCC} -O2 -arch=sm_${arch} ${nvcc_flags}
          "${consumers}/find_package/cuda_main.cu" -o "${WORK_DIR}/consumer_nvcc" ${flags})
      run("run the nvcc-built consumer" "${WORK_DIR}/consumer_nvcc")
      check("its output: ${output}" output MATCHES "CUDA consumer: runtime [0-9]+, cuBLAS [0-9]+, 8806 parameters")
    endif()
  endif()

elseif(MODE MATCHES "^add_subdirectory")
  set(cuda OFF)
  if(MODE STREQUAL "add_subdirectory_cuda")
    set(cuda ON)
  endif()
  run("configure the consumer" ${configure} -S "${consumers}/add_subdirectory" -B "${build}"
      -DCTNN_SOURCE_DIR=${CTNN_SOURCE_DIR} -DCONSUMER_CUDA=${cuda} -DCMAKE_INSTALL_PREFIX=${prefix})
  # ctnn is not top-level there: its tests, examples, benchmarks and install rules must be off, and
  # CUDA follows the parent.
  foreach(option CTNN_BUILD_TESTS CTNN_BUILD_EXAMPLES CTNN_BUILD_BENCHMARKS CTNN_INSTALL)
    cache_value("${build}" ${option} value)
    check("${option} is OFF in a consumer's build (got '${value}')" value STREQUAL "OFF")
  endforeach()
  file(READ "${build}/enabled_languages.txt" languages)
  cache_value("${build}" CTNN_ENABLE_CUDA enable_cuda)
  cache_value("${build}" CMAKE_CUDA_COMPILER cuda_compiler)
  if(NOT cuda)
    check("the parent's languages are CXX only (got '${languages}')" languages STREQUAL "CXX")
    check("CTNN_ENABLE_CUDA follows the parent: OFF (got '${enable_cuda}')" enable_cuda STREQUAL "OFF")
    check("ctnn looked for no CUDA compiler (CMAKE_CUDA_COMPILER='${cuda_compiler}')" NOT cuda_compiler)
  else()
    check("CTNN_ENABLE_CUDA follows the parent: ON (got '${enable_cuda}')" enable_cuda STREQUAL "ON")
    cache_value("${build}" CMAKE_CUDA_ARCHITECTURES arch)
    check("a parent that chose no architecture gets ctnn's 90 (got ${arch})" arch STREQUAL "90")
    return()  # configure only: building CUDA is find_package_cuda's job
  endif()

  run("build the consumer" ${CMAKE_COMMAND} --build "${build}")
  run("run the consumer" "${build}/consumer")
  check("the consumer's output: ${output}" output MATCHES "LeNet-5 has 61706 parameters")

  # The parent's install gets its program and nothing of ctnn's.
  run("install the consumer" ${CMAKE_COMMAND} --install "${build}")
  check("the parent's program is installed" EXISTS "${prefix}/bin/consumer")
  file(GLOB_RECURSE installed RELATIVE "${prefix}" "${prefix}/*")
  check("the parent's install holds only bin/consumer (got: ${installed})" installed STREQUAL "bin/consumer")

  # Asked with CTNN_INSTALL=ON, ctnn installs itself, its docs under its own name.
  set(prefix2 "${WORK_DIR}/prefix-with-ctnn")
  run("configure the consumer with CTNN_INSTALL=ON" ${CMAKE_COMMAND} -DCTNN_INSTALL=ON "${build}")
  run("build the consumer" ${CMAKE_COMMAND} --build "${build}")
  run("install the consumer and ctnn" ${CMAKE_COMMAND} --install "${build}" --prefix "${prefix2}")
  foreach(file bin/consumer include/ctnn/ctnn.hpp share/cmake/ctnn/ctnnConfig.cmake share/pkgconfig/ctnn.pc
               share/doc/ctnn/LICENSE)
    check("with CTNN_INSTALL=ON the install holds ${file}" EXISTS "${prefix2}/${file}")
  endforeach()

else()
  message(FATAL_ERROR "unknown MODE ${MODE}")
endif()
