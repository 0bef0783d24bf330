#pragma once
// Reading files with clear errors, and atomic writing (temporary file + rename) so that a reader
// never sees a half-written file and a failed write leaves the old file untouched. POSIX.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <sys/types.h>  // off_t
#include <unistd.h>     // getpid, fsync

#include "../core/error.hpp"

namespace ctnn::io {

// A file opened for reading at arbitrary offsets. The constructor throws io_error naming the file
// when it is missing, not a regular file or unreadable; read() throws when the bytes are not there.
class InputFile {
 public:
  explicit InputFile(std::string path) : path_(std::move(path)) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status st = fs::status(path_, ec);
    if (st.type() == fs::file_type::not_found) throw io_error(path_ + ": cannot open: no such file");
    if (ec) throw io_error(path_ + ": cannot open: " + ec.message());
    if (st.type() == fs::file_type::directory) throw io_error(path_ + ": cannot open: is a directory");
    if (st.type() != fs::file_type::regular) throw io_error(path_ + ": cannot open: not a regular file");
    size_ = fs::file_size(path_, ec);
    if (ec) throw io_error(path_ + ": cannot determine the file size: " + ec.message());
    file_ = std::fopen(path_.c_str(), "rb");
    if (!file_) throw io_error(path_ + ": cannot open for reading: " + std::strerror(errno));
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile() { std::fclose(file_); }

  const std::string& path() const { return path_; }
  std::uintmax_t size() const { return size_; }

  // Reads exactly n bytes starting at byte offset `at`.
  void read(std::uintmax_t at, void* dst, std::size_t n) {
    if (n == 0) return;
    std::size_t got = 0;
    if (at <= std::uintmax_t(std::numeric_limits<off_t>::max()) && ::fseeko(file_, off_t(at), SEEK_SET) == 0)
      got = std::fread(dst, 1, n, file_);
    if (got != n)
      throw io_error(path_ + ": read error: wanted " + std::to_string(n) + " bytes at byte offset " +
                     std::to_string(at) + ", got " + std::to_string(got) + " (file is " +
                     std::to_string(size_) + " bytes)");
  }

 private:
  std::string path_;
  std::uintmax_t size_ = 0;
  std::FILE* file_ = nullptr;
};

// Reads the whole file. Throws io_error naming the file when it cannot be read or is larger than
// max_bytes (a guard against reading something absurd into memory).
inline std::vector<std::uint8_t> read_file(const std::string& path, std::uintmax_t max_bytes) {
  InputFile f(path);
  if (f.size() > max_bytes)
    throw io_error(path + ": file is " + std::to_string(f.size()) + " bytes, larger than the " +
                   std::to_string(max_bytes) + "-byte limit for this kind of file");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(f.size()));
  f.read(0, bytes.data(), bytes.size());
  return bytes;
}

// Writes `bytes` to `path` atomically: writes path.tmp.<pid> in the same directory, flushes it to
// disk, then renames it over `path`. On any failure the temporary is removed, `path` is left as it
// was, and io_error is thrown naming the file and the reason.
inline void write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const std::string& what) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return io_error(path + ": " + what + "; the file was not changed");
  };
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw fail("cannot create the temporary file " + tmp + ": " + std::strerror(errno));
  const std::size_t put = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  int err = put == bytes.size() ? 0 : errno;
  if (!err && std::fflush(f) != 0) err = errno;
  if (!err && ::fsync(::fileno(f)) != 0) err = errno;  // the data is on disk before the rename
  if (std::fclose(f) != 0 && !err) err = errno;
  if (err || put != bytes.size())
    throw fail("cannot write the temporary file " + tmp + " (" + std::to_string(put) + " of " +
               std::to_string(bytes.size()) + " bytes written): " + std::strerror(err ? err : EIO));
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw fail("cannot rename " + tmp + " to it: " + ec.message());
}

}  // namespace ctnn::io
