// The fuzzers' seed corpora (fuzz/corpus/<target>/) hold valid files: each must load. Inputs a
// fuzzer once found troublesome (fuzz/regressions/<target>/) must be answered with an io_error.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <ctnn/io/idx.hpp>
#include <ctnn/io/image.hpp>
#include <ctnn/io/json.hpp>
#include <ctnn/io/safetensors.hpp>
#include <ctnn/train/checkpoint.hpp>

namespace {

namespace fs = std::filesystem;
const fs::path fuzz_dir = fs::path(__FILE__).parent_path().parent_path().parent_path() / "fuzz";

std::vector<std::uint8_t> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Loads one input as the given fuzz target reads it; throws what the reader throws.
void load(const std::string& target, const fs::path& file) {
  const auto b = slurp(file);
  if (target == "json") {
    try {
      (void)ctnn::io::json::parse(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
    } catch (const ctnn::io::json::syntax_error& e) {
      throw ctnn::io_error(std::string("json: ") + e.what());
    }
  } else if (target == "safetensors") {
    const ctnn::io::SafetensorsFile f(file.string());
    for (const auto& n : f.names())
      if (f.dtype(n) == "F32") (void)f.floats(n, f.shape(n));
  } else if (target == "checkpoint") {
    (void)ctnn::class_names_of(ctnn::weight_file_metadata(file.string()));
  } else if (target == "idx_raw" || target == "idx_gzip") {
    // Images or labels: the input loads when it is either.
    for (const std::uint8_t rank : {3, 1}) {
      try {
        ctnn::io::detail::IdxStream in(b.data(), b.size(), file.string());
        std::vector<std::uint8_t> payload;
        (void)ctnn::io::detail::read_idx(in, rank, "x", "data", payload);
        return;
      } catch (const ctnn::io_error&) {
        if (rank == 1) throw;
      }
    }
  } else {
    (void)ctnn::io::decode_gray_image(b, file.string());
  }
}

std::vector<std::pair<std::string, fs::path>> files_under(const fs::path& dir) {
  std::vector<std::pair<std::string, fs::path>> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& t : fs::directory_iterator(dir))
    for (const auto& f : fs::directory_iterator(t.path())) out.emplace_back(t.path().filename().string(), f.path());
  return out;
}

}  // namespace

TEST_CASE("fuzz seeds are valid files of their format", "[fuzz]") {
  const auto seeds = files_under(fuzz_dir / "corpus");
  REQUIRE(seeds.size() >= 20);
  for (const auto& [target, file] : seeds) {
    INFO(target << ": " << file.string());
    CHECK_NOTHROW(load(target, file));
  }
}

TEST_CASE("fuzz findings are refused with an io_error", "[fuzz]") {
  for (const auto& [target, file] : files_under(fuzz_dir / "regressions")) {
    INFO(target << ": " << file.string());
    CHECK_THROWS_AS(load(target, file), ctnn::io_error);
  }
}
