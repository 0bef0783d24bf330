# `cmake --install` rules: the headers, docs, LICENSE, an exported CMake package (find_package(ctnn))
# and pkg-config files. ctnn is header-only, so everything goes to architecture-independent places:
#   <prefix>/include/ctnn/                 the headers
#   <prefix>/share/cmake/ctnn/             ctnnConfig.cmake, ctnnConfigVersion.cmake, ctnnTargets.cmake
#   <prefix>/share/pkgconfig/ctnn.pc       host flags: -std=c++20, include dirs, zlib
#   <prefix>/share/pkgconfig/ctnn-cuda.pc  cudart and cuBLAS (only when built with CUDA)
#   <prefix>/share/doc/ctnn/               README.md, LICENSE, docs/*.md
include(CMakePackageConfigHelpers)

set(_ctnn_cmake_dir ${CMAKE_INSTALL_DATADIR}/cmake/ctnn)
set(_ctnn_pc_dir ${CMAKE_INSTALL_DATADIR}/pkgconfig)
# GNUInstallDirs names DOCDIR after the first project; under a parent project that is the parent.
if(PROJECT_IS_TOP_LEVEL)
  set(_ctnn_doc_dir ${CMAKE_INSTALL_DOCDIR})
else()
  set(_ctnn_doc_dir ${CMAKE_INSTALL_DATAROOTDIR}/doc/ctnn)
endif()

install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY docs DESTINATION ${_ctnn_doc_dir})  # docs/ beside README.md, as its links expect
install(FILES README.md LICENSE DESTINATION ${_ctnn_doc_dir})

install(TARGETS ctnn EXPORT ctnnTargets)
install(EXPORT ctnnTargets NAMESPACE ctnn:: DESTINATION ${_ctnn_cmake_dir})
configure_package_config_file(cmake/ctnnConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ctnnConfig.cmake
  INSTALL_DESTINATION ${_ctnn_cmake_dir})
# Header-only: any architecture may use it.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ctnnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ctnnConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/ctnnConfigVersion.cmake
              cmake/ctnnCudaArchitectures.cmake
        DESTINATION ${_ctnn_cmake_dir})

# --- pkg-config. The flags of the dependencies come from the imported targets ctnn links (so a
# dependency added to the target appears here too), leaving out what the compiler searches anyway.
function(_ctnn_pc_flags cflags_var libs_var)
  set(cflags "")
  set(libs "")
  set(todo ${ARGN})
  set(seen "")
  while(todo)
    list(POP_FRONT todo item)
    if(item IN_LIST seen OR item MATCHES "^\\$<")
      continue()  # done already, or a generator expression (none of ctnn's dependencies uses one)
    endif()
    list(APPEND seen ${item})
    if(NOT TARGET ${item})
      if(item MATCHES "^-")
        list(APPEND libs ${item})     # a flag such as -pthread
      elseif(IS_ABSOLUTE "${item}")
        list(APPEND libs ${item})     # a library file by its path (CUDA::cudart's librt.a with newer CMake)
      else()
        list(APPEND libs -l${item})   # a plain library name such as m or dl
      endif()
      continue()
    endif()
    get_target_property(includes ${item} INTERFACE_INCLUDE_DIRECTORIES)
    foreach(dir IN LISTS includes)
      if(dir AND NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
        list(APPEND cflags -I${dir})
      endif()
    endforeach()
    get_target_property(type ${item} TYPE)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(location ${item} LOCATION)
      cmake_path(GET location PARENT_PATH dir)
      cmake_path(GET location FILENAME file)
      if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
        list(APPEND libs -L${dir})
      endif()
      if(file MATCHES "^lib(.+)\\.(so|a)(\\..*)?$")
        list(APPEND libs -l${CMAKE_MATCH_1})
      else()
        list(APPEND libs ${location})
      endif()
    endif()
    get_target_property(deps ${item} INTERFACE_LINK_LIBRARIES)
    if(deps)
      list(APPEND todo ${deps})
    endif()
  endwhile()
  list(REMOVE_DUPLICATES cflags)
  list(REMOVE_DUPLICATES libs)
  string(JOIN " " cflags ${cflags})
  string(JOIN " " libs ${libs})
  set(${cflags_var} "${cflags}" PARENT_SCOPE)
  set(${libs_var} "${libs}" PARENT_SCOPE)
endfunction()

# The .pc files find the prefix from their own location, so the install can be moved.
cmake_path(RELATIVE_PATH CMAKE_INSTALL_PREFIX BASE_DIRECTORY ${CMAKE_INSTALL_PREFIX}/${_ctnn_pc_dir}
           OUTPUT_VARIABLE CTNN_PC_PREFIX)
set(CTNN_PC_PREFIX "\${pcfiledir}/${CTNN_PC_PREFIX}")
get_target_property(_ctnn_links ctnn INTERFACE_LINK_LIBRARIES)
list(FILTER _ctnn_links EXCLUDE REGEX "^CUDA::")
_ctnn_pc_flags(CTNN_PC_CFLAGS CTNN_PC_LIBS ${_ctnn_links})
if(CTNN_PC_CFLAGS)
  string(PREPEND CTNN_PC_CFLAGS " ")  # after -I${includedir} on the Cflags line
endif()
configure_file(cmake/ctnn.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ctnn.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ctnn.pc DESTINATION ${_ctnn_pc_dir})
if(CTNN_HAS_CUDA)
  _ctnn_pc_flags(CTNN_PC_CUDA_CFLAGS CTNN_PC_CUDA_LIBS CUDA::cudart CUDA::cublas CUDA::cublasLt)
  configure_file(cmake/ctnn-cuda.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ctnn-cuda.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ctnn-cuda.pc DESTINATION ${_ctnn_pc_dir})
endif()
