# Finds ctnn's dependencies; when one is missing, says which Debian package provides it.
include(GNUInstallDirs)

macro(ctnn_require package debian_package)
  find_package(${package} ${ARGN} QUIET)
  if(NOT ${package}_FOUND)
    message(FATAL_ERROR "ctnn: ${package} was not found. On Debian/Ubuntu install it with:\n"
                        "  sudo apt-get install ${debian_package}\n"
                        "or run scripts/install_deps.sh, which installs everything ctnn needs.")
  endif()
endmacro()

ctnn_require(Boost libboost-dev 1.70 CONFIG)   # Boost.Hana (header-only)
ctnn_require(ZLIB zlib1g-dev)                  # gzip-compressed IDX files
