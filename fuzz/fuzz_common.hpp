#pragma once
// libFuzzer harness helpers. A harness accepts any bytes: ctnn must answer with a value or a
// ctnn::io_error (a json::syntax_error for the JSON reader); anything else (another exception, a
// crash, a sanitizer report, a timeout, running out of the memory limit) is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

namespace ctnn_fuzz {

inline std::span<const std::uint8_t> bytes(const std::uint8_t* data, std::size_t size) {
  return {data, size};
}

// A file holding these bytes, for the readers that take a path; one per process, rewritten per input.
inline const std::string& scratch_file(const std::uint8_t* data, std::size_t size) {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string p = std::string(dir && *dir ? dir : "/tmp") + "/ctnn_fuzz_" + std::to_string(::getpid());
    static std::string removed_at_exit = p;
    std::atexit([] { std::remove(removed_at_exit.c_str()); });
    return p;
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace ctnn_fuzz
