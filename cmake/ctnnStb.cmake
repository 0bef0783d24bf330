# stb (stb_image_write, included as <stb/stb_image_write.h>) has no CMake package: find its directory
# and wrap it as the imported target ctnn::stb, which ctnn's own tests and examples link (ctnn::ctnn
# does not). Used by ctnnDependencies.cmake. Sets CTNN_STB_FOUND.
if(NOT TARGET ctnn::stb)
  find_path(CTNN_STB_INCLUDE_DIR stb/stb_image_write.h
            DOC "The directory that holds stb/stb_image_write.h (Debian/Ubuntu: libstb-dev)")
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
