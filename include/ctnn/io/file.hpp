#pragma once
// Reading files with clear errors, and atomic writing (temporary file + rename) so that a reader
// never sees a half-written file and a failed write leaves the old file untouched. POSIX.
//
//   InputFile f(path);  f.read(offset, dst, n);         // thread-safe (pread); throws io_error
//   read_file(path, max_bytes)                          // whole file, with a size limit
//   write_file_atomically(path, bytes)                  // keeps a symlink and the file's permissions
//   probe_writable(path)                                // before long work: can path be written?
//
// Every message names the file (made printable: see printable.hpp).
#include <atomic>
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

#include <fcntl.h>      // open
#include <sys/stat.h>   // fstat, fchmod
#include <sys/types.h>  // off_t
#include <unistd.h>     // pread, write, fsync, getpid, fchown

#include "../core/error.hpp"
#include "printable.hpp"

namespace ctnn::io {

// A file opened for reading at arbitrary offsets. The constructor throws io_error naming the file
// when it is missing, not a regular file or unreadable; read() throws when the bytes are not there.
class InputFile {
 public:
  explicit InputFile(std::string path) : path_(std::move(path)) {
    const std::string name = printable(path_);
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // O_NONBLOCK: a FIFO must not hang us
    if (fd_ < 0) {
      if (errno == ENOENT) throw io_error(name + ": cannot open: no such file");
      throw io_error(name + ": cannot open for reading: " + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail_close(name + ": cannot determine the file size: " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) fail_close(name + ": cannot open: is a directory");
    if (!S_ISREG(st.st_mode)) fail_close(name + ": cannot open: not a regular file");
    size_ = std::uintmax_t(st.st_size);
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile() { ::close(fd_); }

  const std::string& path() const { return path_; }
  std::uintmax_t size() const { return size_; }

  // Reads exactly n bytes starting at byte offset `at`.
  void read(std::uintmax_t at, void* dst, std::size_t n) const {
    std::size_t got = 0;
    int err = 0;
    while (got < n) {
      if (at + got > std::uintmax_t(std::numeric_limits<off_t>::max())) break;
      const ::ssize_t r = ::pread(fd_, static_cast<char*>(dst) + got, n - got, off_t(at + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) err = errno;
      if (r <= 0) break;
      got += std::size_t(r);
    }
    if (got != n)
      throw io_error(printable(path_) + ": read error: wanted " + std::to_string(n) + " bytes at byte offset " +
                     std::to_string(at) + ", got " + std::to_string(got) + " (file is " +
                     std::to_string(size_) + " bytes" + (err ? std::string(": ") + std::strerror(err) : "") +
                     ")");
  }

 private:
  std::string path_;
  std::uintmax_t size_ = 0;
  int fd_ = -1;

  [[noreturn]] void fail_close(const std::string& what) {
    ::close(fd_);
    throw io_error(what);
  }
};

// Reads the whole file. Throws io_error naming the file when it cannot be read or is larger than
// max_bytes (a guard against reading something absurd into memory).
inline std::vector<std::uint8_t> read_file(const std::string& path, std::uintmax_t max_bytes) {
  InputFile f(path);
  if (f.size() > max_bytes)
    throw io_error(printable(path) + ": file is " + std::to_string(f.size()) + " bytes, larger than the " +
                   std::to_string(max_bytes) + "-byte limit for this kind of file");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(f.size()));
  f.read(0, bytes.data(), bytes.size());
  return bytes;
}

namespace detail::file {

// Where writing `path` really goes: symlinks followed (relative ones from the link's directory), so
// that saving through a link replaces the file it points to and keeps the link.
inline std::filesystem::path resolve_links(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p = path;
  for (int hops = 0;; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
    if (hops == 40)
      throw io_error(printable(path) + ": too many levels of symbolic links; the file was not changed");
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) throw io_error(printable(path) + ": cannot read the symbolic link: " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
}

// A temporary name beside `target`, unique across processes and the threads of this one.
inline std::string temp_name(const std::filesystem::path& target) {
  static std::atomic<unsigned long> counter{0};
  return target.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

}  // namespace detail::file

// Writes `bytes` to `path` atomically: writes a temporary file in the same directory, flushes it to
// disk, then renames it over `path`. A symlink at `path` is followed (the link stays, its target is
// replaced); an existing file's permission bits (and owner, where allowed) are kept; a new file gets
// 0666 less the umask. On any failure the temporary is removed, `path` is left as it was, and
// io_error is thrown naming the file and the reason.
inline void write_file_atomically(const std::string& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const std::string name = printable(path);
  const fs::path target = detail::file::resolve_links(path);
  struct stat old {};
  const bool existed = ::stat(target.c_str(), &old) == 0;
  if (existed && S_ISDIR(old.st_mode)) throw io_error(name + ": cannot write: is a directory");
  if (existed && !S_ISREG(old.st_mode))
    throw io_error(name + ": cannot write: not a regular file; the file was not changed");

  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {  // EEXIST: a stale temporary of a dead pid
    tmp = detail::file::temp_name(target);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0)
    throw io_error(name + ": cannot create the temporary file " + printable(tmp) + ": " + std::strerror(errno) +
                   "; the file was not changed");
  auto fail = [&](const std::string& what, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return io_error(name + ": " + what + ": " + std::strerror(err) + "; the file was not changed");
  };
  if (existed) {
    if ((old.st_uid != ::geteuid() || old.st_gid != ::getegid()) && ::fchown(fd, old.st_uid, old.st_gid) != 0) {
      // Only root may give a file away; the file then belongs to us, as any editor's save would do.
    }
    if (::fchmod(fd, old.st_mode & 07777) != 0) throw fail("cannot set the permissions of " + printable(tmp), errno);
  }
  std::size_t put = 0;
  while (put < bytes.size()) {
    const ::ssize_t w = ::write(fd, bytes.data() + put, bytes.size() - put);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw fail("cannot write the temporary file " + printable(tmp) + " (" + std::to_string(put) + " of " +
                     std::to_string(bytes.size()) + " bytes written)",
                 w < 0 ? errno : EIO);
    put += std::size_t(w);
  }
  if (::fsync(fd) != 0) throw fail("cannot flush the temporary file " + printable(tmp) + " to disk", errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) throw fail("cannot close the temporary file " + printable(tmp), errno);
  if (::rename(tmp.c_str(), target.c_str()) != 0)
    throw fail("cannot rename " + printable(tmp) + " to " + printable(target.string()), errno);
  // Make the rename itself durable; a failure here cannot be undone and loses nothing, so it is ignored.
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

// Checks, before long work, that write_file_atomically(path, ...) will be able to write: the
// directory exists and a file can be created in it, and path is not a directory. Creates and removes
// one temporary file; never touches path itself. Throws io_error naming the file and the reason.
inline void probe_writable(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string name = printable(path);
  if (path.empty()) throw io_error("output path is empty");
  const fs::path target = detail::file::resolve_links(path);
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw io_error(name + ": cannot write: is a directory");
    if (!S_ISREG(st.st_mode)) throw io_error(name + ": cannot write: not a regular file");
  }
  const std::string tmp = detail::file::temp_name(target);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::error_code ec;
    if (err == ENOENT || !fs::is_directory(dir, ec))
      throw io_error(name + ": cannot write: the directory " + printable(dir.string()) + " does not exist");
    throw io_error(name + ": cannot write in the directory " + printable(dir.string()) + ": " +
                   std::strerror(err));
  }
  ::close(fd);
  ::unlink(tmp.c_str());
}

}  // namespace ctnn::io
