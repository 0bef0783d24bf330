# stb (stb_image, included as <stb/stb_image.h>) has no CMake package: find its directory and wrap it
# as the imported target ctnn::stb, which ctnn::ctnn links. Used by ctnnDependencies.cmake and by the
# installed ctnnConfig.cmake. Sets CTNN_STB_FOUND.
if(NOT TARGET ctnn::stb)
  find_path(CTNN_STB_INCLUDE_DIR stb/stb_image.h
            DOC "The directory that holds stb/stb_image.h (Debian/Ubuntu: libstb-dev)")
  if(CTNN_STB_INCLUDE_DIR)
    add_library(ctnn::stb INTERFACE IMPORTED)
    set_target_properties(ctnn::stb PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CTNN_STB_INCLUDE_DIR}")
  endif()
endif()
if(TARGET ctnn::stb)
  set(CTNN_STB_FOUND TRUE)
else()
  set(CTNN_STB_FOUND FALSE)
endif()
