# Finds ctnn's dependencies; when one is missing, says which Debian package provides it.
include(GNUInstallDirs)

macro(ctnn_require package debian_package)
  find_package(${package} ${ARGN} QUIET)
  if(NOT ${package}_FOUND)
    message(FATAL_ERROR "ctnn: ${package} was not found. On Debian/Ubuntu install it with:\n"
                        "  sudo apt-get install ${debian_package}\n"
                        "or run scripts/install_deps.sh, which installs everything ctnn needs.")
  endif()
  # A package required in this file is one the ctnn::ctnn target needs: the installed
  # ctnnConfig.cmake looks for it again (ctnnInstall.cmake writes the calls from this list).
  if(CMAKE_CURRENT_LIST_FILE STREQUAL _ctnn_dependencies_file)
    string(JOIN " " _ctnn_args ${ARGN})
    string(APPEND CTNN_CONFIG_DEPENDENCIES "ctnn_find_dependency(${package} ${debian_package} ${_ctnn_args})\n")
  endif()
endmacro()
set(_ctnn_dependencies_file "${CMAKE_CURRENT_LIST_FILE}")
set(CTNN_CONFIG_DEPENDENCIES "")

# A machine without these packages (the GPU machine) can use copies of this machine's, made by
# scripts/vendor_deps.sh as a small install prefix: -DCTNN_VENDOR_DIR=<repo>/.vendor puts that prefix
# first in every search (find_package, find_path, find_library) below and in the subdirectories.
set(CTNN_VENDOR_DIR "" CACHE PATH "Dependencies copied by scripts/vendor_deps.sh, searched before the system's")
if(CTNN_VENDOR_DIR)
  if(NOT EXISTS "${CTNN_VENDOR_DIR}/include/boost/hana.hpp")
    message(FATAL_ERROR "ctnn: CTNN_VENDOR_DIR=${CTNN_VENDOR_DIR} holds no vendored dependencies; "
                        "make it with scripts/vendor_deps.sh on a machine that has them")
  endif()
  list(PREPEND CMAKE_PREFIX_PATH "${CTNN_VENDOR_DIR}")
  # Boost's package lives under lib/<arch>/cmake, searched only when <arch> matches this compiler's.
  file(GLOB _ctnn_vendor_boost LIST_DIRECTORIES true "${CTNN_VENDOR_DIR}/lib/*/cmake/Boost-*")
  if(_ctnn_vendor_boost)
    list(GET _ctnn_vendor_boost 0 Boost_DIR)
  endif()
  message(STATUS "ctnn: using the dependencies vendored in ${CTNN_VENDOR_DIR}")
endif()

ctnn_require(Boost libboost-dev 1.70 CONFIG)   # Boost.Hana (header-only)
ctnn_require(ZLIB zlib1g-dev)                  # gzip-compressed IDX files

# stb_image_write makes the images of ctnn's own tests and examples (the lenet5 example's --report);
# ctnn::ctnn does not need stb.
if(CTNN_BUILD_TESTS OR CTNN_BUILD_EXAMPLES)
  include(${CMAKE_CURRENT_LIST_DIR}/ctnnStb.cmake)  # stb (no CMake package): the target ctnn::stb
  if(NOT CTNN_STB_FOUND)
    message(FATAL_ERROR "ctnn: stb (stb/stb_image_write.h) was not found; ctnn's tests and examples "
                        "need it. On Debian/Ubuntu install it with:\n"
                        "  sudo apt-get install libstb-dev\n"
                        "or run scripts/install_deps.sh, which installs everything ctnn needs.")
  endif()
endif()
