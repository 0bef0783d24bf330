# The CUDA architectures a project that uses ctnn compiles for, when it has not chosen any.
# Included by ctnn's own CMakeLists.txt (top level or add_subdirectory) and by the installed
# ctnnConfig.cmake, so that all three ways of using ctnn agree.
#
# Left alone, CMake compiles CUDA for nvcc's default (sm_75 for nvcc 13), which runs ctnn's kernels on
# Hopper only through PTX JIT. ctnn's default is 90 (Hopper). A choice made by the project is kept:
# -DCMAKE_CUDA_ARCHITECTURES=..., the CUDAARCHS environment variable, or set(CMAKE_CUDA_ARCHITECTURES)
# before this runs. Targets created before this runs keep the value they were created with.
set(CTNN_DEFAULT_CUDA_ARCHITECTURES 90)

function(ctnn_default_cuda_architectures)
  set(help "CUDA architectures (ctnn's default; set it to choose)")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    if(NOT "$ENV{CUDAARCHS}" STREQUAL "")
      return()  # CMake will take CUDAARCHS when CUDA is enabled
    endif()
    # CUDA is not enabled yet; enable_language(CUDA) takes this value instead of detecting one.
    set(CMAKE_CUDA_ARCHITECTURES ${CTNN_DEFAULT_CUDA_ARCHITECTURES} CACHE STRING "${help}")
  else()
    # CUDA is enabled already. CMake's own pick carries the help string "CUDA architectures" (as does
    # CUDAARCHS, hence the check); a -D value carries another, a normal variable shadows the entry.
    get_property(entry_help CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY HELPSTRING)
    if(NOT entry_help STREQUAL "CUDA architectures" OR NOT "$ENV{CUDAARCHS}" STREQUAL ""
       OR NOT "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "$CACHE{CMAKE_CUDA_ARCHITECTURES}")
      return()
    endif()
    set(CMAKE_CUDA_ARCHITECTURES ${CTNN_DEFAULT_CUDA_ARCHITECTURES} CACHE STRING "${help}" FORCE)
  endif()
  message(STATUS "ctnn: CMAKE_CUDA_ARCHITECTURES was not set; using ctnn's default "
                 "${CTNN_DEFAULT_CUDA_ARCHITECTURES} (set it, e.g. to native, to choose)")
endfunction()

# ctnn_use_wgmma(target...): where the targets build for Hopper (90 in their CUDA_ARCHITECTURES), build
# them for 90a in its place, so that their TF32 convolutions can run on wgmma (kernels/conv_wgmma.cuh;
# wgmma is not in sm_90's instruction set). 90a code runs on Hopper only: no PTX for later GPUs. Elsewhere
# the kernels' probe (conv_wgmma_available) says no and the other TF32 kernels run.
function(ctnn_use_wgmma)
  foreach(target ${ARGN})
    get_target_property(archs ${target} CUDA_ARCHITECTURES)
    if(NOT archs OR NOT "90" IN_LIST archs)
      continue()
    endif()
    list(TRANSFORM archs REPLACE "^90$" "90a")
    set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "${archs}")
  endforeach()
endfunction()
