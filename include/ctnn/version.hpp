#pragma once
// The one place the version number lives; CMake reads it from here.
#define CTNN_VERSION_MAJOR 0
#define CTNN_VERSION_MINOR 1
#define CTNN_VERSION_PATCH 0

#include <string>

namespace ctnn {
inline constexpr int version_major = CTNN_VERSION_MAJOR;
inline constexpr int version_minor = CTNN_VERSION_MINOR;
inline constexpr int version_patch = CTNN_VERSION_PATCH;
// "major.minor.patch"
inline std::string version_string() {
  return std::to_string(version_major) + "." + std::to_string(version_minor) + "." + std::to_string(version_patch);
}
}  // namespace ctnn
