// safetensors save/load: round trip, layout, atomic writes, PyTorch's ordering, and a clear error for
// every way a file can be wrong. Also the small JSON reader the loader uses.
#include <catch2/catch.hpp>

#include "temp_dir.hpp"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>


#include <ctnn/ctnn.hpp>
#include <ctnn/core/random.hpp>
#include <ctnn/io/json.hpp>
#include <ctnn/io/safetensors.hpp>
#include <ctnn/network/plan.hpp>

namespace {

namespace fs = std::filesystem;
using namespace ctnn;

using LeNet5 = Network<Seq<Conv<6, 5, Pad<2>>, ReLU, Pool<2>, Conv<16, 5>, ReLU, Pool<2>, Dense<120>, ReLU,
                           Dense<84>, ReLU, Dense<10>, Softmax>,
                       Input<1, 28, 28>>;
// LeNet-5 with a 3×3 first convolution: same activation shapes, different layers.0.weight.
using LeNet5k3 = Network<Seq<Conv<6, 3, Pad<1>>, ReLU, Pool<2>, Conv<16, 5>, ReLU, Pool<2>, Dense<120>, ReLU,
                             Dense<84>, ReLU, Dense<10>, Softmax>,
                         Input<1, 28, 28>>;
// layers.0.weight [2,1,3,3], layers.0.bias [2], layers.2.weight [3,18], layers.2.bias [3].
using Tiny = Network<Seq<Conv<2, 3>, ReLU, Dense<3>, Softmax>, Input<1, 5, 5>>;


std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// Random values in every tensor, zero in the plan's padding.
template <class Net>
std::vector<float> random_params(std::uint64_t seed) {
  using Plan = BufferPlan<Net>;
  std::vector<float> p(Plan::param_floats, 0.0f);
  Random rng(seed);
  for (std::size_t i = 0; i < Net::layer_count; ++i) {
    for (std::size_t k = 0; k < Plan::weight_count[i]; ++k)
      p[Plan::weight_offset[i] + k] = float(rng.uniform(-1, 1));
    for (std::size_t k = 0; k < Plan::bias_count[i]; ++k)
      p[Plan::bias_offset[i] + k] = float(rng.uniform(-1, 1));
  }
  return p;
}

std::string le64(std::uint64_t v) {
  std::string s;
  for (int k = 0; k < 8; ++k) s += char(v >> (8 * k) & 0xff);
  return s;
}
std::string floats_le(const std::vector<float>& v) {
  std::string s;
  for (const float x : v) {
    std::uint32_t b;
    std::memcpy(&b, &x, 4);
    for (int k = 0; k < 4; ++k) s += char(b >> (8 * k) & 0xff);
  }
  return s;
}
std::string make_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}
std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

// The Tiny network's tensors as safetensors.torch.save_file lays them out: metadata first, then
// tensors sorted by name (all F32), data in that order, header padded with spaces to 8 bytes.
const std::vector<float> tiny_b0 = {0.5f, -0.5f};
const std::vector<float> tiny_w0 = [] {
  std::vector<float> v(18);
  for (int k = 0; k < 18; ++k) v[k] = 0.01f * k;
  return v;
}();
const std::vector<float> tiny_b2 = {1.0f, 2.0f, 3.0f};
const std::vector<float> tiny_w2 = [] {
  std::vector<float> v(54);
  for (int k = 0; k < 54; ++k) v[k] = -0.001f * k;
  return v;
}();
const std::string tiny_header_unpadded =
    R"({"__metadata__":{"format":"pt"},)"
    R"("layers.0.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
    R"("layers.0.weight":{"dtype":"F32","shape":[2,1,3,3],"data_offsets":[8,80]},)"
    R"("layers.2.bias":{"dtype":"F32","shape":[3],"data_offsets":[80,92]},)"
    R"("layers.2.weight":{"dtype":"F32","shape":[3,18],"data_offsets":[92,308]}})";
std::string padded(std::string h) { return h.append((8 - h.size() % 8) % 8, ' '); }
const std::string tiny_data =
    floats_le(tiny_b0) + floats_le(tiny_w0) + floats_le(tiny_b2) + floats_le(tiny_w2);

void check_tiny_values(const std::vector<float>& p) {
  using Plan = BufferPlan<Tiny>;
  REQUIRE(p.size() == Plan::param_floats);
  std::vector<float> want(Plan::param_floats, 0.0f);
  std::copy(tiny_w0.begin(), tiny_w0.end(), want.begin() + std::ptrdiff_t(Plan::weight_offset[0]));
  std::copy(tiny_b0.begin(), tiny_b0.end(), want.begin() + std::ptrdiff_t(Plan::bias_offset[0]));
  std::copy(tiny_w2.begin(), tiny_w2.end(), want.begin() + std::ptrdiff_t(Plan::weight_offset[2]));
  std::copy(tiny_b2.begin(), tiny_b2.end(), want.begin() + std::ptrdiff_t(Plan::bias_offset[2]));
  CHECK(p == want);
}

// The io_error message f throws (the test fails when it throws none).
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

}  // namespace

TEST_CASE("safetensors: LeNet-5 parameters round-trip bit-exactly in the specified layout", "[safetensors]") {
  ctnn_test::TempDir dir{"ctnn_test_safetensors"};
  const std::string path = dir.file("lenet5.safetensors");
  const auto params = random_params<LeNet5>(7);
  io::save_safetensors<LeNet5>(path, params);

  const auto loaded = io::load_safetensors<LeNet5>(path);
  REQUIRE(loaded.size() == params.size());
  CHECK(std::memcmp(loaded.data(), params.data(), params.size() * sizeof(float)) == 0);

  // The bytes: 8-byte little-endian length, space-padded JSON, then 61,706 floats.
  const std::string bytes = slurp(path);
  REQUIRE(bytes.size() >= 8);
  std::uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = n << 8 | std::uint8_t(bytes[std::size_t(k)]);
  CHECK(n % 8 == 0);
  CHECK(bytes.size() == 8 + n + LeNet5::param_count * 4);
  const std::string header = bytes.substr(8, n);
  CHECK(header.front() == '{');
  CHECK(header.find(R"("layers.0.weight":{"dtype":"F32","shape":[6,1,5,5],"data_offsets":[0,600]})") !=
        std::string::npos);
  CHECK(header.find(R"("layers.10.bias":{"dtype":"F32","shape":[10],"data_offsets":[246784,246824]})") !=
        std::string::npos);

  const io::json::Value root = io::json::parse(header);
  REQUIRE(root.kind == io::json::Value::Kind::object);
  const io::json::Value* meta = root.find("__metadata__");
  REQUIRE(meta != nullptr);
  CHECK(meta->find("format")->string == "ctnn");
  CHECK(meta->find("ctnn_version")->string == "0.1.0");
  CHECK(meta->find("network")->string ==
        "Input (1x28x28) -> Conv 6@5x5 pad 2 (6x28x28) -> ReLU (6x28x28) -> MaxPool 2x2 (6x14x14) -> "
        "Conv 16@5x5 (16x10x10) -> ReLU (16x10x10) -> MaxPool 2x2 (16x5x5) -> Dense 120 (120) -> "
        "ReLU (120) -> Dense 84 (84) -> ReLU (84) -> Dense 10 (10) -> Softmax (10)");
  // Every tensor of the network, with its PyTorch shape and a range that matches it.
  const std::vector<std::pair<std::string, std::vector<int>>> want = {
      {"layers.0.weight", {6, 1, 5, 5}}, {"layers.0.bias", {6}},          {"layers.3.weight", {16, 6, 5, 5}},
      {"layers.3.bias", {16}},           {"layers.6.weight", {120, 400}}, {"layers.6.bias", {120}},
      {"layers.8.weight", {84, 120}},    {"layers.8.bias", {84}},         {"layers.10.weight", {10, 84}},
      {"layers.10.bias", {10}}};
  CHECK(root.object.size() == want.size() + 1);
  std::int64_t cursor = 0;
  for (const auto& [name, shape] : want) {
    const io::json::Value* t = root.find(name);
    REQUIRE(t != nullptr);
    std::vector<int> got;
    std::int64_t count = 1;
    for (const auto& d : t->find("shape")->array) got.push_back(int(d.integer)), count *= d.integer;
    CHECK(got == shape);
    CHECK(t->find("data_offsets")->array[0].integer == cursor);
    CHECK(t->find("data_offsets")->array[1].integer == cursor + 4 * count);
    cursor += 4 * count;
  }
  // The first weight's floats sit at the start of the data section, little-endian.
  CHECK(bytes.substr(8 + n, 600) == floats_le(std::vector<float>(params.begin(), params.begin() + 150)));
}

TEST_CASE("safetensors: save replaces the file atomically and leaves it untouched on failure",
          "[safetensors]") {
  ctnn_test::TempDir dir{"ctnn_test_safetensors"};
  const std::string path = dir.file("tiny.safetensors");
  const auto first = random_params<Tiny>(1), second = random_params<Tiny>(2);
  io::save_safetensors<Tiny>(path, first);
  io::save_safetensors<Tiny>(path, second);
  CHECK(io::load_safetensors<Tiny>(path) == second);
  CHECK(dir.entries() == 1);  // no temporary left behind

  const std::string before = slurp(path);
  auto bad = second;
  bad[BufferPlan<Tiny>::weight_offset[2] + 5] = std::numeric_limits<float>::quiet_NaN();
  const std::string msg = io_error_of([&] { io::save_safetensors<Tiny>(path, bad); });
  CHECK_THAT(msg, Catch::Contains(path) && Catch::Contains("layers.2.weight element 5 is NaN") &&
                      Catch::Contains("not changed"));
  CHECK(slurp(path) == before);
  CHECK(dir.entries() == 1);

  const std::string nowhere = dir.file("no/such/dir/tiny.safetensors");
  const std::string msg2 = io_error_of([&] { io::save_safetensors<Tiny>(nowhere, second); });
  CHECK_THAT(msg2, Catch::Contains(nowhere) && Catch::Contains("cannot create the temporary file"));
  CHECK(dir.entries() == 1);

  CHECK_THROWS_AS(io::save_safetensors<Tiny>(path, std::vector<float>(3)), std::invalid_argument);
}

TEST_CASE("safetensors: files in PyTorch's key and tensor order load", "[safetensors]") {
  ctnn_test::TempDir dir{"ctnn_test_safetensors"};
  const std::string path = dir.file("torch.safetensors");
  write_bytes(path, make_file(padded(tiny_header_unpadded), tiny_data));
  check_tiny_values(io::load_safetensors<Tiny>(path));

  // Unpadded header, fields in another order, whitespace, no metadata.
  const std::string loose =
      "{ \"layers.2.weight\" : {\"data_offsets\": [92, 308], \"shape\": [3, 18], \"dtype\": \"F32\"},\n"
      "  \"layers.0.weight\" : {\"shape\": [2, 1, 3, 3], \"dtype\": \"F32\", \"data_offsets\": [8, 80]},\n"
      "  \"layers.2.bias\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [80, 92]},\n"
      "  \"layers.0.bias\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}\t}\r\n";
  write_bytes(path, make_file(loose, tiny_data));
  check_tiny_values(io::load_safetensors<Tiny>(path));

  // ctnn's own output loads in a program that reads with the same network.
  io::save_safetensors<Tiny>(path, io::load_safetensors<Tiny>(path));
  check_tiny_values(io::load_safetensors<Tiny>(path));
}

TEST_CASE("safetensors: LeNet-5 as safetensors 0.8 wrote it from PyTorch loads", "[safetensors]") {
  // The header of safetensors.torch.save_file(model.state_dict(), ...) for LeNet-5 with ctnn's names
  // (safetensors 0.8.0, torch 2.11), verbatim: tensors sorted by name, so layers.10 precedes layers.3.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"layers.0.bias":{"dtype":"F32","shape":[6],"data_offsets":[0,24]},)"
      R"("layers.0.weight":{"dtype":"F32","shape":[6,1,5,5],"data_offsets":[24,624]},)"
      R"("layers.10.bias":{"dtype":"F32","shape":[10],"data_offsets":[624,664]},)"
      R"("layers.10.weight":{"dtype":"F32","shape":[10,84],"data_offsets":[664,4024]},)"
      R"("layers.3.bias":{"dtype":"F32","shape":[16],"data_offsets":[4024,4088]},)"
      R"("layers.3.weight":{"dtype":"F32","shape":[16,6,5,5],"data_offsets":[4088,13688]},)"
      R"("layers.6.bias":{"dtype":"F32","shape":[120],"data_offsets":[13688,14168]},)"
      R"("layers.6.weight":{"dtype":"F32","shape":[120,400],"data_offsets":[14168,206168]},)"
      R"("layers.8.bias":{"dtype":"F32","shape":[84],"data_offsets":[206168,206504]},)"
      R"("layers.8.weight":{"dtype":"F32","shape":[84,120],"data_offsets":[206504,246824]}}  )";
  REQUIRE(header.size() == 792);
  using Plan = BufferPlan<LeNet5>;
  // Tensors in the file's order: (layer, is_weight). Element k of tensor t holds t + k / 1e6.
  const std::vector<std::pair<std::size_t, bool>> file_order = {
      {0, false}, {0, true},  {10, false}, {10, true}, {3, false},
      {3, true},  {6, false}, {6, true},   {8, false}, {8, true}};
  std::string data;
  std::vector<float> want(Plan::param_floats, 0.0f);
  for (std::size_t t = 0; t < file_order.size(); ++t) {
    const auto [layer, weight] = file_order[t];
    const std::size_t count = weight ? Plan::weight_count[layer] : Plan::bias_count[layer];
    const std::size_t offset = weight ? Plan::weight_offset[layer] : Plan::bias_offset[layer];
    std::vector<float> v(count);
    for (std::size_t k = 0; k < count; ++k) v[k] = want[offset + k] = float(double(t) + double(k) * 1e-6);
    data += floats_le(v);
  }
  ctnn_test::TempDir dir{"ctnn_test_safetensors"};
  const std::string path = dir.file("torch_lenet5.safetensors");
  write_bytes(path, make_file(header, data));
  CHECK(io::load_safetensors<LeNet5>(path) == want);
}

TEST_CASE("safetensors: a file for another network is refused, naming the tensor and both shapes",
          "[safetensors]") {
  ctnn_test::TempDir dir{"ctnn_test_safetensors"};
  const std::string path = dir.file("k3.safetensors");
  io::save_safetensors<LeNet5k3>(path, random_params<LeNet5k3>(3));
  const std::string msg = io_error_of([&] { io::load_safetensors<LeNet5>(path); });
  CHECK_THAT(msg, Catch::StartsWith(path + ": layers.0.weight: expected shape [6,1,5,5], found [6,1,3,3]") &&
                      Catch::Contains("different network"));

  const std::string msg2 = io_error_of([&] { io::load_safetensors<Tiny>(path); });
  CHECK_THAT(msg2, Catch::Contains("layers.0.weight: expected shape [2,1,3,3], found [6,1,3,3]") &&
                       Catch::Contains("(file: Input (1x28x28) -> Conv 6@3x3 pad 1 (6x28x28) -> ") &&
                       Catch::Contains("; expected: Input (1x5x5) -> Conv 2@3x3 (2x3x3) -> ReLU (2x3x3) -> "
                                       "Dense 3 (3) -> Softmax (3))"));
}

TEST_CASE("safetensors: every malformed file gets a clear error naming the file", "[safetensors]") {
  ctnn_test::TempDir dir{"ctnn_test_safetensors"};
  const std::string path = dir.file("bad.safetensors");
  const std::string h = tiny_header_unpadded;
  struct Case {
    const char* what;
    std::string bytes;
    std::vector<std::string> says;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::string nan_data = tiny_data;
  nan_data.replace(8 + 4 * 3, 4, floats_le({nan}));
  const std::vector<Case> cases = {
      {"empty file", "", {"file is 0 bytes, too short"}},
      {"5 bytes", "\x01\x02\x03\x04\x05", {"file is 5 bytes, too short"}},
      {"absurd header length",
       le64(std::uint64_t{1} << 40) + "{}",
       {"is 1099511627776, more than the 1048576-byte limit"}},
      {"header longer than the file",
       le64(1000) + std::string(20, ' '),
       {"is 1000 but only 20 bytes follow"}},
      {"header too short", le64(1) + "{", {"is 1, too short for a JSON object"}},
      {"header not an object", make_file("[1,2]", ""), {"the header must be a JSON object, found an array"}},
      {"truncated JSON",
       make_file(h.substr(0, 40), tiny_data),
       {"malformed header JSON at byte offset 40: unterminated string"}},
      {"trailing comma",
       make_file(replaced(h, "[92,308]}}", "[92,308]},}"), tiny_data),
       {"malformed header JSON", "expected a string key in object, found '}'"}},
      {"not JSON at all",
       make_file("hello", ""),
       {"malformed header JSON at byte offset 8: expected a JSON value, found 'h'"}},
      {"fractional number",
       make_file(replaced(h, "[3,18]", "[3,18.0]"), tiny_data),
       {"expected an integer, found a number with a fraction or exponent"}},
      {"duplicate key",
       make_file(replaced(h, "\"layers.2.bias\"", "\"layers.0.bias\""), tiny_data),
       {"duplicate key \"layers.0.bias\""}},
      {"invalid UTF-8", make_file(replaced(h, "pt", "p\xff"), tiny_data), {"invalid UTF-8 lead byte"}},
      {"metadata not strings",
       make_file(replaced(h, "\"pt\"", "1"), tiny_data),
       {"__metadata__ value \"format\" must be a string, found an integer"}},
      {"tensor entry not an object",
       make_file(replaced(h, R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})", "7"), tiny_data),
       {"tensor \"layers.0.bias\": expected an object with dtype, shape and data_offsets, found an integer"}},
      {"unknown field",
       make_file(replaced(h, "\"shape\":[2],", "\"shape\":[2],\"stride\":[1],"), tiny_data),
       {"tensor \"layers.0.bias\": unexpected field \"stride\""}},
      {"missing field",
       make_file(replaced(h, ",\"data_offsets\":[80,92]", ""), tiny_data),
       {"tensor \"layers.2.bias\": missing field \"data_offsets\""}},
      {"negative dimension",
       make_file(replaced(h, "[3,18]", "[-3,18]"), tiny_data),
       {"tensor \"layers.2.weight\": a shape dimension must not be negative, found -3"}},
      {"offsets not a pair",
       make_file(replaced(h, "[80,92]", "[80]"), tiny_data),
       {"tensor \"layers.2.bias\": data_offsets must be an array [begin, end]"}},
      {"offsets reversed",
       make_file(replaced(h, "[80,92]", "[92,80]"), tiny_data),
       {"tensor \"layers.2.bias\": data_offsets [92,80] end before they begin"}},
      {"missing tensor",
       make_file(replaced(h, R"(,"layers.2.weight":{"dtype":"F32","shape":[3,18],"data_offsets":[92,308]})", ""),
                 tiny_data.substr(0, 92)),
       {"missing tensor layers.2.weight (expected F32 [3,18])"}},
      {"a missing tensor's data left in place",
       make_file(replaced(h, R"(,"layers.2.bias":{"dtype":"F32","shape":[3],"data_offsets":[80,92]})", ""),
                 tiny_data),
       {"layers.2.weight: data_offsets [92,308] leave 12 unused bytes before them (after layers.0.weight)"}},
      {"renamed tensor",
       make_file(replaced(h, "layers.2.weight", "layers.3.weight"), tiny_data),
       {"missing tensor layers.2.weight (expected F32 [3,18]); the file has tensors this network does not: "
        "layers.3.weight",
        "different network"}},
      {"extra tensor",
       make_file(replaced(h, "}}", R"(},"extra":{"dtype":"F32","shape":[1],"data_offsets":[308,312]}})"),
                 tiny_data + floats_le({1.0f})),
       {"unexpected tensor extra: this network has no such tensor"}},
      {"dtype not F32",
       make_file(replaced(h, R"("F32","shape":[2,1)", R"("I32","shape":[2,1)"), tiny_data),
       {"layers.0.weight: dtype I32 is not supported, expected F32"}},
      {"unknown dtype",
       make_file(replaced(h, R"("F32","shape":[2,1)", R"("Q7","shape":[2,1)"), tiny_data),
       {"tensor \"layers.0.weight\": unknown dtype \"Q7\""}},
      {"dtype size does not match the span",
       make_file(replaced(h, R"("F32","shape":[2,1)", R"("F16","shape":[2,1)"), tiny_data),
       {"layers.0.weight: data_offsets [8,80] span 72 bytes, but F16 [2,1,3,3] needs 36"}},
      {"shape mismatch",
       make_file(replaced(h, "[3,18]", "[18,3]"), tiny_data),
       {"layers.2.weight: expected shape [3,18], found [18,3]"}},
      {"range does not match shape",
       make_file(replaced(h, "[92,308]", "[92,312]"), tiny_data + "abcd"),
       {"layers.2.weight: data_offsets [92,312] span 220 bytes, but F32 [3,18] needs 216"}},
      {"overlapping ranges",
       make_file(replaced(replaced(h, "[80,92]", "[76,88]"), "[92,308]", "[88,304]"), tiny_data),
       {"layers.2.bias: data_offsets [76,88] overlap layers.0.weight's [8,80]"}},
      {"gap between ranges",
       make_file(replaced(replaced(h, "[80,92]", "[84,96]"), "[92,308]", "[96,312]"), tiny_data + "abcd"),
       {"layers.2.bias: data_offsets [84,96] leave 4 unused bytes before them (after layers.0.weight)"}},
      {"truncated data",
       make_file(h, tiny_data.substr(0, 300)),
       {"layers.2.weight: data_offsets [92,308] run past the end of the data section (300 bytes after the "
        "header)"}},
      {"trailing bytes",
       make_file(h, tiny_data + "xyz"),
       {"3 trailing bytes after the last tensor's data (from byte offset " +
        std::to_string(8 + h.size() + 308)}},
      {"NaN parameter",
       make_file(h, nan_data),
       {"layers.0.weight: element 3 (byte offset " + std::to_string(8 + h.size() + 20) + ") is NaN"}},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      write_bytes(path, c.bytes);
      const std::string msg = io_error_of([&] { io::load_safetensors<Tiny>(path); });
      INFO(c.what << ": " << msg);
      CHECK_THAT(msg, Catch::StartsWith(path + ": "));
      for (const auto& s : c.says) CHECK_THAT(msg, Catch::Contains(s));
    }
  }
}

TEST_CASE("safetensors: missing file, directory", "[safetensors]") {
  ctnn_test::TempDir dir{"ctnn_test_safetensors"};
  const std::string missing = dir.file("nope.safetensors");
  CHECK_THAT(io_error_of([&] { io::load_safetensors<Tiny>(missing); }),
             Catch::Equals(missing + ": cannot open: no such file"));
  CHECK_THAT(io_error_of([&] { io::load_safetensors<Tiny>(dir.path.string()); }),
             Catch::Contains("is a directory"));
}

TEST_CASE("json: strict reader", "[safetensors][json]") {
  using io::json::parse;
  using Kind = io::json::Value::Kind;
  const auto v = parse(
      R"( {"a": [1, -2, 0, 9223372036854775807, -9223372036854775808],)"
      R"( "b": {"c": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"},)"
      "\n\t\r"
      R"( "t": true, "f": false, "n": null, "e": {}, "l": []} )");
  REQUIRE(v.kind == Kind::object);
  const auto& a = v.find("a")->array;
  REQUIRE(a.size() == 5);
  CHECK(a[1].integer == -2);
  CHECK(a[3].integer == std::numeric_limits<std::int64_t>::max());
  CHECK(a[4].integer == std::numeric_limits<std::int64_t>::min());
  CHECK(v.find("b")->find("c")->string == "x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(v.find("t")->boolean);
  CHECK(v.find("f")->kind == Kind::boolean);
  CHECK(v.find("n")->kind == Kind::null);
  CHECK(v.find("missing") == nullptr);
  CHECK(parse(io::json::quote("a\"b\\c\n\x01")).string == "a\"b\\c\n\x01");

  auto error = [](const std::string& text) {
    try {
      parse(text);
    } catch (const io::json::syntax_error& e) {
      return std::to_string(e.offset) + ": " + e.what();
    }
    return std::string("no error");
  };
  CHECK(error("[01]") == "1: leading zeros are not allowed in JSON numbers");
  CHECK(error("9223372036854775808") == "0: integer out of the 64-bit range");
  CHECK(error("[1e5]") == "1: expected an integer, found a number with a fraction or exponent");
  CHECK(error("\"a\nb\"") == "2: control character byte 0x0a in string (it must be escaped)");
  CHECK(error(R"("\x")") == "1: invalid escape '\\x' in string");
  CHECK(error(R"("\ud800")") == "1: high surrogate not followed by a low surrogate");
  CHECK(error(R"("\udc00")") == "1: lone low surrogate in \\u escape");
  CHECK(error("\"abc") == "0: unterminated string");
  CHECK(error("{\"a\":1 \"b\":2}") == "7: expected '}' or ',' after object member, found '\"'");
  CHECK(error("[1] x") == "4: expected the end of the text after the JSON value, found 'x'");
  CHECK(error("\"\xc0\x80\"") == "1: invalid UTF-8 sequence");
  CHECK(error("\"\xe2\x82\"") == "1: invalid UTF-8 continuation byte");
  CHECK(error("\"\xe2\x82") == "1: truncated UTF-8 sequence");
  CHECK(error(std::string(100, '[') + std::string(100, ']')) == "65: nesting deeper than 64 levels");
  CHECK(error("") == "0: expected a JSON value, found the end of the text");
  CHECK(error("tru") == "0: expected a JSON value, found 't'");
}
