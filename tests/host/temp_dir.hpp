#pragma once
// A fresh directory for a test's files, removed with everything in it when the test ends.
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <iterator>
#include <string>
#include <system_error>

namespace ctnn_test {

struct TempDir {
  std::filesystem::path path;

  explicit TempDir(const std::string& prefix = "ctnn_test") {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path / name).string(); }
  std::string operator/(const std::string& name) const { return file(name); }
  std::size_t entries() const {
    return std::size_t(std::distance(std::filesystem::directory_iterator(path),
                                     std::filesystem::directory_iterator()));
  }
};

}  // namespace ctnn_test
