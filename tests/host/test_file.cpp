// io/file.hpp: atomic writes that keep symlinks and permissions and do not mix threads' files,
// probe_writable, InputFile's refusals, and printable() for messages.
#include <catch2/catch.hpp>

#include "temp_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <ctnn/io/file.hpp>
#include <ctnn/io/printable.hpp>

namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
template <class F>
std::string io_error_of(F&& f) {
  try {
    f();
  } catch (const ctnn::io_error& e) {
    return e.what();
  }
  FAIL("expected a ctnn::io_error");
  return {};
}

}  // namespace

// Issue 10, item 10: the temporary was path.tmp.<pid>, shared by the threads of one process.
TEST_CASE("file: concurrent atomic writes of one path leave one complete file", "[file]") {
  ctnn_test::TempDir dir{"ctnn_test_file"};
  const std::string path = dir / "out.bin";
  constexpr int threads = 8, rounds = 20;
  std::vector<std::string> contents;
  for (int t = 0; t < threads; ++t) contents.push_back(std::string(std::size_t(20000 + 997 * t), char('a' + t)));
  std::vector<std::thread> pool;
  std::vector<std::string> errors(threads);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        for (int r = 0; r < rounds; ++r) ctnn::io::write_file_atomically(path, contents[std::size_t(t)]);
      } catch (const std::exception& e) {
        errors[std::size_t(t)] = e.what();
      }
    });
  for (auto& th : pool) th.join();
  for (const auto& e : errors) CHECK(e.empty());
  const std::string got = slurp(path);
  bool one_of = false;
  for (const auto& c : contents) one_of = one_of || got == c;
  CHECK(one_of);
  CHECK(dir.entries() == 1);  // no temporaries left
}

// Issue 10, item 12: saving over a file lost its permissions and replaced a symlink.
TEST_CASE("file: an atomic write keeps the file's permissions and a symlink to it", "[file]") {
  ctnn_test::TempDir dir{"ctnn_test_file"};
  const std::string real = dir / "real.bin", link = dir / "link.bin";
  ctnn::io::write_file_atomically(real, "old");
  REQUIRE(::chmod(real.c_str(), 0640) == 0);
  fs::create_symlink("real.bin", link);  // relative, as `ln -s real.bin link.bin` makes it
  ctnn::io::write_file_atomically(link, "new contents");
  CHECK(fs::is_symlink(link));
  CHECK(fs::read_symlink(link) == "real.bin");
  CHECK(slurp(real) == "new contents");
  struct stat st {};
  REQUIRE(::stat(real.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(dir.entries() == 2);

  // A dangling link: the file is created where it points.
  const std::string dangling = dir / "dangling.bin";
  fs::create_symlink(dir / "target.bin", dangling);
  ctnn::io::write_file_atomically(dangling, "x");
  CHECK(fs::is_symlink(dangling));
  CHECK(slurp(dir / "target.bin") == "x");

  // A link loop is refused with a message, not followed forever.
  fs::create_symlink("loop2", dir / "loop1");
  fs::create_symlink("loop1", dir / "loop2");
  CHECK_THAT(io_error_of([&] { ctnn::io::write_file_atomically(dir / "loop1", "x"); }),
             Catch::Contains("too many levels of symbolic links"));
  // A directory in the way.
  fs::create_directory(dir / "sub");
  CHECK_THAT(io_error_of([&] { ctnn::io::write_file_atomically(dir / "sub", "x"); }),
             Catch::Contains("is a directory"));
}

TEST_CASE("file: probe_writable says up front whether a path can be written", "[file]") {
  ctnn_test::TempDir dir{"ctnn_test_file"};
  CHECK_NOTHROW(ctnn::io::probe_writable(dir / "new.bin"));
  CHECK(dir.entries() == 0);
  CHECK_THAT(io_error_of([&] { ctnn::io::probe_writable(dir / "no/such/dir/x.bin"); }),
             Catch::Contains("the directory " + (dir / "no/such/dir") + " does not exist"));
  CHECK_THAT(io_error_of([&] { ctnn::io::probe_writable(dir.path.string()); }), Catch::Contains("is a directory"));
  if (::geteuid() != 0) {  // root writes anywhere
    fs::create_directory(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_THAT(io_error_of([&] { ctnn::io::probe_writable(dir / "ro/x.bin"); }),
               Catch::Contains("cannot write in the directory") && Catch::Contains("Permission denied"));
    CHECK_THAT(io_error_of([&] { ctnn::io::write_file_atomically(dir / "ro/x.bin", "x"); }),
               Catch::Contains("cannot create the temporary file") && Catch::Contains("not changed"));
    fs::permissions(dir / "ro", fs::perms::owner_all);
  }
}

TEST_CASE("file: InputFile refuses what is not a readable regular file, without hanging", "[file]") {
  ctnn_test::TempDir dir{"ctnn_test_file"};
  const std::string fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(io_error_of([&] { ctnn::io::InputFile f(fifo); }), Catch::Contains("not a regular file"));
  CHECK_THAT(io_error_of([&] { ctnn::io::read_file("/dev/null", 10); }), Catch::Contains("not a regular file"));
  ctnn::io::write_file_atomically(dir / "five", "12345");
  ctnn::io::InputFile f(dir / "five");
  char buf[8];
  CHECK_THAT(io_error_of([&] { f.read(3, buf, 4); }),
             Catch::Contains("wanted 4 bytes at byte offset 3, got 2 (file is 5 bytes)"));
  CHECK_THAT(io_error_of([&] { (void)ctnn::io::read_file(dir / "five", 4); }),
             Catch::Contains("file is 5 bytes, larger than the 4-byte limit"));
}

TEST_CASE("printable: control characters, escape sequences and invalid UTF-8 are escaped", "[file]") {
  using ctnn::io::printable;
  CHECK(printable("plain/path é.png") == "plain/path é.png");
  CHECK(printable("a\x1b[31mred\x07") == "a\\x1b[31mred\\x07");
  CHECK(printable("tab\tnl\ndel\x7f") == "tab\\x09nl\\x0adel\\x7f");
  CHECK(printable("\xc2\x9b" "2J") == "\\xc2\\x9b2J");  // C1 CSI
  CHECK(printable("bad\xff\xc3") == "bad\\xff\\xc3");
  CHECK(printable("back\\slash") == "back\\\\slash");
  CHECK(printable(std::string(1000, 'x')).size() == 303);
}
