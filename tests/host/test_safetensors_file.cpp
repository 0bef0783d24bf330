// The generic safetensors layer: Tensor, write_safetensors, SafetensorsFile (checkpoints), metadata
// through save/load_safetensors<Net>, and the bounds on what a hostile header can cost.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <ctnn/ctnn.hpp>
#include <ctnn/io/json.hpp>
#include <ctnn/io/safetensors.hpp>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "temp_dir.hpp"

namespace {

using namespace ctnn;
using Tiny = Network<Seq<Conv<2, 3>, ReLU, Dense<3>, Softmax>, Input<1, 5, 5>>;

std::string le64(std::uint64_t v) {
  std::string s;
  for (int k = 0; k < 8; ++k) s += char(v >> (8 * k) & 0xff);
  return s;
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}
template <class F>
std::string io_error_of(F&& f) {
  try {
    f();
  } catch (const io_error& e) {
    return e.what();
  }
  FAIL("expected a ctnn::io_error");
  return {};
}
template <class F>
std::string invalid_argument_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  FAIL("expected std::invalid_argument");
  return {};
}

std::vector<float> tiny_params() {
  std::vector<float> p(BufferPlan<Tiny>::param_floats, 0.0f);
  for (std::size_t i = 0; i < Tiny::layer_count; ++i) {
    for (std::size_t k = 0; k < BufferPlan<Tiny>::weight_count[i]; ++k)
      p[BufferPlan<Tiny>::weight_offset[i] + k] = 0.25f * float(k) - 1.0f;
    for (std::size_t k = 0; k < BufferPlan<Tiny>::bias_count[i]; ++k)
      p[BufferPlan<Tiny>::bias_offset[i] + k] = float(k) + 0.5f;
  }
  return p;
}

}  // namespace

TEST_CASE("safetensors file: F32 and I64 tensors and metadata round-trip", "[safetensors]") {
  ctnn_test::TempDir dir{"ctnn_test_st_file"};
  const std::string path = dir / "checkpoint.safetensors";
  const std::vector<float> m = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
  const std::vector<std::int64_t> step = {std::numeric_limits<std::int64_t>::min(), -1, 0, 12345678901234LL};
  std::vector<io::Tensor> tensors = {io::Tensor::from_floats("optimizer.m", {2, 3}, m),
                                     io::Tensor::from_int64s("counters", {4}, step),
                                     io::Tensor::from_floats("empty", {0, 5}, {}),
                                     io::Tensor::from_int64s("scalar", {}, std::vector<std::int64_t>{7})};
  const std::map<std::string, std::string> meta = {{"kind", "checkpoint"}, {"epoch", "3"}, {"note", "é \"q\" \n"}};
  io::write_safetensors(path, tensors, meta);

  const io::SafetensorsFile f(path);
  CHECK(f.metadata() == meta);
  CHECK(f.names() == std::vector<std::string>{"counters", "empty", "optimizer.m", "scalar"});
  CHECK(f.has("counters"));
  CHECK_FALSE(f.has("nope"));
  CHECK(f.dtype("counters") == "I64");
  CHECK(f.shape("optimizer.m") == std::vector<std::int64_t>{2, 3});
  CHECK(f.floats("optimizer.m", {2, 3}) == m);
  CHECK(f.int64s("counters", {4}) == step);
  CHECK(f.floats("empty", {0, 5}).empty());
  CHECK(f.int64s("scalar", {}) == std::vector<std::int64_t>{7});

  // Wrong shape, wrong dtype, missing: the message names the file, the tensor and both shapes.
  CHECK_THAT(io_error_of([&] {
               (void)f.floats("optimizer.m", {3, 2});
             }),
             Catch::Equals(path + ": optimizer.m: expected shape [3,2], found [2,3]"));
  CHECK_THAT(io_error_of([&] { (void)f.floats("counters", {4}); }),
             Catch::Equals(path + ": counters: dtype I64 is not supported, expected F32"));
  CHECK_THAT(io_error_of([&] { (void)f.int64s("nope", {1}); }), Catch::Equals(path + ": missing tensor nope"));
}

TEST_CASE("safetensors file: non-finite floats are refused when read and when written", "[safetensors]") {
  ctnn_test::TempDir dir{"ctnn_test_st_file"};
  const std::string path = dir / "x.safetensors";
  const float inf = std::numeric_limits<float>::infinity();
  const std::string msg = io_error_of([&] {
    io::write_safetensors(path, {io::Tensor::from_floats("v", {3}, std::vector<float>{1, inf, 2})}, {});
  });
  CHECK_THAT(msg, Catch::Contains("v element 1 is infinite") && Catch::Contains("not changed"));
  CHECK(dir.entries() == 0);

  // A file made elsewhere with an Inf: the header is fine, the value is refused with its offset.
  const std::string header = R"({"v":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string data(8, '\0');
  data[6] = '\x80', data[7] = '\x7f';  // element 1 = 0x7f800000 = +Inf
  write_bytes(path, le64(header.size()) + header + data);
  const io::SafetensorsFile f(path);
  CHECK_THAT(io_error_of([&] { (void)f.floats("v", {2}); }),
             Catch::StartsWith(path + ": v: element 1 (byte offset " + std::to_string(8 + header.size() + 4) +
                               ") is infinite"));
}

TEST_CASE("safetensors file: malformed tensors are refused before anything is written", "[safetensors]") {
  ctnn_test::TempDir dir{"ctnn_test_st_file"};
  const std::string path = dir / "x.safetensors";
  const std::vector<float> three = {1, 2, 3};
  auto write = [&](std::vector<io::Tensor> t, std::map<std::string, std::string> m = {}) {
    return invalid_argument_of([&] { io::write_safetensors(path, t, m); });
  };
  CHECK_THAT(write({io::Tensor::from_floats("a", {2, 2}, three)}),
             Catch::Contains("a: 12 bytes do not make a F32 tensor of shape [2,2]"));
  CHECK_THAT(write({io::Tensor::from_floats("a", {3}, three), io::Tensor::from_floats("a", {3}, three)}),
             Catch::Contains("two tensors are named \"a\""));
  CHECK_THAT(write({io::Tensor::from_floats("__metadata__", {3}, three)}), Catch::Contains("invalid tensor name"));
  CHECK_THAT(write({io::Tensor::from_floats("", {3}, three)}), Catch::Contains("invalid tensor name"));
  CHECK_THAT(write({io::Tensor{"a", "F33", {1}, std::vector<std::byte>(4)}}),
             Catch::Contains("unknown dtype \"F33\""));
  CHECK_THAT(write({}, {{"k", "\xff"}}), Catch::Contains("metadata \"k\" is not valid UTF-8"));
  CHECK_THAT(write({io::Tensor::from_floats("a", {-1, -3}, three)}), Catch::Contains("do not make"));
  CHECK(dir.entries() == 0);
}

TEST_CASE("safetensors file: network parameters with extra metadata, and inside a checkpoint", "[safetensors]") {
  ctnn_test::TempDir dir{"ctnn_test_st_file"};
  const std::string path = dir / "tiny.safetensors";
  const auto params = tiny_params();
  io::save_safetensors<Tiny>(path, params, {{"epoch", "4"}, {"accuracy", "0.99"}});
  std::map<std::string, std::string> meta;
  CHECK(io::load_safetensors<Tiny>(path, &meta) == params);
  CHECK(meta.at("epoch") == "4");
  CHECK(meta.at("accuracy") == "0.99");
  CHECK(meta.at("format") == "ctnn");
  CHECK(meta.at("network") == io::network_description<Tiny>());
  CHECK_THAT(invalid_argument_of([&] {
               io::save_safetensors<Tiny>(path, params, {{"format", "x"}});
             }),
             Catch::Contains("may not set \"format\""));

  // A checkpoint: parameters and optimizer state under prefixes, a step counter.
  auto tensors = io::parameter_tensors<Tiny>(params, "model.");
  auto velocity = io::parameter_tensors<Tiny>(std::vector<float>(params.size(), 0.125f), "optimizer.velocity.");
  tensors.insert(tensors.end(), velocity.begin(), velocity.end());
  tensors.push_back(io::Tensor::from_int64s("step", {1}, std::vector<std::int64_t>{1000}));
  const std::string ckpt = dir / "ckpt.safetensors";
  io::write_safetensors(ckpt, tensors, {{"format", "ctnn-checkpoint"}});
  const io::SafetensorsFile f(ckpt);
  CHECK(io::read_parameters<Tiny>(f, "model.") == params);
  std::vector<float> v = io::read_parameters<Tiny>(f, "optimizer.velocity.");
  for (std::size_t i = 0; i < Tiny::layer_count; ++i)
    for (std::size_t k = 0; k < BufferPlan<Tiny>::weight_count[i]; ++k)
      CHECK(v[BufferPlan<Tiny>::weight_offset[i] + k] == 0.125f);
  CHECK(f.int64s("step", {1}) == std::vector<std::int64_t>{1000});
  CHECK_THAT(io_error_of([&] { (void)io::read_parameters<Tiny>(f, "ema."); }),
             Catch::Equals(ckpt + ": missing tensor ema.layers.0.weight"));
  // A checkpoint is not a model file: load_safetensors names what it did not expect.
  CHECK_THAT(io_error_of([&] { (void)io::load_safetensors<Tiny>(ckpt); }),
             Catch::Contains("missing tensor layers.0.weight"));
}

// Issue 10, item 8: the duplicate-key check was quadratic (200k keys: 36.6 s) and a 100 MB header was
// parsed (7.4 GB of memory). Now: n log n, and the header is limited to 1 MiB unless the caller says.
TEST_CASE("safetensors file: many keys are checked quickly, huge headers refused up front", "[safetensors]") {
  ctnn_test::TempDir dir{"ctnn_test_st_file"};
  std::string header = "{";
  for (int k = 0; k < 200'000; ++k) header += (k ? ",\"" : "\"") + std::to_string(k) + "\":0";
  header += ",\"17\":1}";
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)io::json::parse(header);
    FAIL("duplicate key not found");
  } catch (const io::json::syntax_error& e) {
    CHECK(std::string(e.what()) == "duplicate key \"17\" in object");
    CHECK(e.offset == header.size() - 7);  // the second "17"
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(seconds < 5.0);  // was 36.6 s; a few hundred ms even unoptimised

  // The 2.1 MB header is over the 1 MiB limit; a caller may raise it.
  const std::string path = dir / "big.safetensors";
  write_bytes(path, le64(header.size()) + header);
  CHECK_THAT(io_error_of([&] { io::SafetensorsFile f(path); }),
             Catch::Contains("more than the 1048576-byte limit"));
  io::SafetensorsLimits roomy;
  roomy.header_bytes = 8 << 20;
  CHECK_THAT(io_error_of([&] { io::SafetensorsFile f(path, roomy); }), Catch::Contains("duplicate key \"17\""));
  // A declared 100 MB header is refused from its 8 length bytes, before any allocation.
  write_bytes(path, le64(100'000'000) + "{}");
  CHECK_THAT(io_error_of([&] { io::SafetensorsFile f(path); }),
             Catch::Contains("is 100000000, more than the 1048576-byte limit"));

  // The tensor count and rank limits.
  io::write_safetensors(path, {io::Tensor::from_floats("a", {1}, std::vector<float>{1}),
                               io::Tensor::from_floats("b", {1, 1, 1}, std::vector<float>{2})});
  io::SafetensorsLimits small;
  small.tensors = 1;
  CHECK_THAT(io_error_of([&] { io::SafetensorsFile f(path, small); }),
             Catch::Contains("more than 1 tensors (the limit)"));
  small.tensors = 2;
  small.rank = 2;
  CHECK_THAT(io_error_of([&] { io::SafetensorsFile f(path, small); }),
             Catch::Contains("tensor \"b\": rank 3 is above the limit of 2"));
}

// Issue 10, item 12: names and header strings from a file must not put escape sequences on a terminal.
TEST_CASE("safetensors file: control characters from the file are escaped in messages", "[safetensors]") {
  ctnn_test::TempDir dir{"ctnn_test_st_file"};
  const std::string path = dir / "evil\x1b[2J.safetensors";
  const std::string header =
      "{\"a\\u001b]0;pwned\\u0007\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}";
  write_bytes(path, le64(header.size()) + header + std::string(8, '\0'));
  const std::string msg = io_error_of([&] { io::SafetensorsFile f(path); });
  CHECK_THAT(msg, Catch::StartsWith((dir / "evil\\x1b[2J.safetensors") + ": a\\x1b]0;pwned\\x07: data_offsets"));
  for (const char c : msg) CHECK((static_cast<unsigned char>(c) >= 0x20 && c != 0x7f));
}
