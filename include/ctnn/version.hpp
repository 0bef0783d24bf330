#pragma once
// The one place the version number lives; CMake reads it from here.
#define CTNN_VERSION_MAJOR 0
#define CTNN_VERSION_MINOR 1
#define CTNN_VERSION_PATCH 0

namespace ctnn {
inline constexpr int version_major = CTNN_VERSION_MAJOR;
inline constexpr int version_minor = CTNN_VERSION_MINOR;
inline constexpr int version_patch = CTNN_VERSION_PATCH;
}  // namespace ctnn
