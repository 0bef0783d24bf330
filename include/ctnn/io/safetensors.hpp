#pragma once
// A network's parameters as a safetensors file (https://github.com/huggingface/safetensors):
//
//   bytes 0-7   N, the header length, little-endian uint64
//   bytes 8..   N bytes of JSON (padded with spaces to a multiple of 8):
//               {"__metadata__": {"format": "ctnn", "ctnn_version": "0.1.0", "network": "..."},
//                "layers.0.weight": {"dtype": "F32", "shape": [6,1,5,5], "data_offsets": [0, 600]},
//                ...}
//   then        the data section: each tensor's little-endian floats at its data_offsets (relative to
//               the start of the section), contiguous, no gaps, nothing after the last tensor.
//
// Tensors are named layers.<i>.weight / layers.<i>.bias with i the layer's position in the Seq, in
// PyTorch's layouts (Net::bound_at<i>::weight_shape / bias_shape). The loader accepts any key and
// tensor order, so a file written by safetensors.torch.save_file for a model with the same names
// loads; it checks everything and says what did not match (a shape mismatch names the tensor and
// both shapes, which is how a file for another network shows itself).
//
//   ctnn::io::save_safetensors<Net>("lenet5.safetensors", params);      // atomic: temp + rename
//   std::vector<float> params = ctnn::io::load_safetensors<Net>("lenet5.safetensors");
//
// params is in BufferPlan<Net> layout (each tensor at its plan offset, padding zero).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../network/plan.hpp"
#include "../version.hpp"
#include "file.hpp"
#include "json.hpp"

namespace ctnn::io {

// A one-line description of the network (each layer's label and output shape), stored in the file's
// metadata: "Input (1x28x28) -> Conv 6@5x5 pad 2 (6x28x28) -> ReLU (6x28x28) -> ... -> Softmax (10)".
template <class Net>
std::string network_description() {
  std::string s = "Input " + Net::input_shape::str();
  Net::for_each_layer([&](auto index) {
    constexpr std::size_t i = decltype(index)::value;
    s += " -> " + Net::template layer_at<i>::label() + " " + Net::template shape_at<i>::str();
  });
  return s;
}

namespace detail::safetensors {

// The reference implementation refuses larger headers too.
inline constexpr std::uint64_t max_header_bytes = 100'000'000;

struct Expected {
  std::string name;
  std::vector<std::int64_t> shape;
  std::size_t offset;  // into the BufferPlan parameter array
  std::size_t count;   // floats
};

template <class S>
std::vector<std::int64_t> dims_of() {
  std::vector<std::int64_t> d;
  for (std::size_t k = 0; k < S::rank; ++k) d.push_back(S::dims[k]);
  return d;
}

// Every tensor of Net, in layer order.
template <class Net>
std::vector<Expected> expected_tensors() {
  using Plan = BufferPlan<Net>;
  std::vector<Expected> out;
  Net::for_each_layer([&](auto index) {
    constexpr std::size_t i = decltype(index)::value;
    using B = typename Net::template bound_at<i>;
    const std::string prefix = "layers." + std::to_string(i);
    if constexpr (B::weight_count > 0)
      out.push_back(
          {prefix + ".weight", dims_of<typename B::weight_shape>(), Plan::weight_offset[i], B::weight_count});
    if constexpr (B::bias_count > 0)
      out.push_back(
          {prefix + ".bias", dims_of<typename B::bias_shape>(), Plan::bias_offset[i], B::bias_count});
  });
  return out;
}

// (Built by appending: GCC 12 warns falsely (-Wrestrict) about "literal" + std::string at -O3.)
inline std::string shape_str(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (k) s += ',';
    s += std::to_string(shape[k]);
  }
  s += ']';
  return s;
}

inline std::string offsets_str(std::uint64_t begin, std::uint64_t end) {
  std::string s = "[";
  s += std::to_string(begin);
  s += ',';
  s += std::to_string(end);
  s += ']';
  return s;
}

// A tensor entry of the header, checked for form (not yet against the network).
struct Entry {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;
};

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& what) const { throw io_error(path_ + ": " + what); }

  // The header's tensor entries and __metadata__ (file byte offsets in messages).
  void parse_header(const std::string& text) {
    json::Value root;
    try {
      root = json::parse(text);
    } catch (const json::syntax_error& e) {
      fail("malformed header JSON at byte offset " + std::to_string(8 + e.offset) + ": " + e.what());
    }
    if (root.kind != json::Value::Kind::object)
      fail(std::string("the header must be a JSON object, found ") + json::kind_name(root.kind));
    for (const auto& [key, v] : root.object) {
      if (key == "__metadata__") read_metadata(v);
      else entries_.push_back(read_entry(key, v));
    }
  }

  const std::vector<Entry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;

  std::string at(const json::Value& v) const { return " (byte offset " + std::to_string(8 + v.offset) + ")"; }

  void read_metadata(const json::Value& v) {
    if (v.kind != json::Value::Kind::object)
      fail(std::string("__metadata__ must be an object of strings, found ") + json::kind_name(v.kind) +
           at(v));
    for (const auto& [k, s] : v.object) {
      if (s.kind != json::Value::Kind::string)
        fail("__metadata__ value \"" + k + "\" must be a string, found " + json::kind_name(s.kind) + at(s));
      metadata_[k] = s.string;
    }
  }

  std::int64_t non_negative(const std::string& name, const char* what, const json::Value& v) const {
    if (v.kind != json::Value::Kind::integer)
      fail("tensor \"" + name + "\": " + what + " must be an integer, found " + json::kind_name(v.kind) +
           at(v));
    if (v.integer < 0)
      fail("tensor \"" + name + "\": " + what + " must not be negative, found " + std::to_string(v.integer) +
           at(v));
    return v.integer;
  }

  Entry read_entry(const std::string& name, const json::Value& v) const {
    if (v.kind != json::Value::Kind::object)
      fail("tensor \"" + name + "\": expected an object with dtype, shape and data_offsets, found " +
           json::kind_name(v.kind) + at(v));
    for (const auto& [k, unused] : v.object)
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        fail("tensor \"" + name + "\": unexpected field \"" + k + "\" (expected dtype, shape, data_offsets)" +
             at(unused));
    auto field = [&](const char* k) {
      const json::Value* f = v.find(k);
      if (!f) fail("tensor \"" + name + "\": missing field \"" + k + "\"" + at(v));
      return f;
    };
    Entry e;
    e.name = name;
    const json::Value* dtype = field("dtype");
    if (dtype->kind != json::Value::Kind::string)
      fail("tensor \"" + name + "\": dtype must be a string, found " + json::kind_name(dtype->kind) +
           at(*dtype));
    e.dtype = dtype->string;
    const json::Value* shape = field("shape");
    if (shape->kind != json::Value::Kind::array)
      fail("tensor \"" + name + "\": shape must be an array, found " + json::kind_name(shape->kind) +
           at(*shape));
    for (const auto& d : shape->array) e.shape.push_back(non_negative(name, "a shape dimension", d));
    const json::Value* offsets = field("data_offsets");
    if (offsets->kind != json::Value::Kind::array || offsets->array.size() != 2)
      fail("tensor \"" + name + "\": data_offsets must be an array [begin, end]" + at(*offsets));
    e.begin = std::uint64_t(non_negative(name, "data_offsets begin", offsets->array[0]));
    e.end = std::uint64_t(non_negative(name, "data_offsets end", offsets->array[1]));
    if (e.end < e.begin)
      fail("tensor \"" + name + "\": data_offsets " + offsets_str(e.begin, e.end) + " end before they begin" +
           at(*offsets));
    return e;
  }
};

inline void put_u64(std::string& out, std::uint64_t v) {
  for (int k = 0; k < 8; ++k) out += char(v >> (8 * k) & 0xff);
}

}  // namespace detail::safetensors

// Writes params (BufferPlan<Net> layout) to path as safetensors, atomically: the old file is replaced
// only once the new one is complete on disk. Throws std::invalid_argument when params has the wrong
// size, io_error (old file untouched) when a parameter is not finite or the file cannot be written.
template <class Net>
void save_safetensors(const std::string& path, const std::vector<float>& params) {
  namespace st = detail::safetensors;
  using Plan = BufferPlan<Net>;
  if (params.size() != Plan::param_floats)
    throw std::invalid_argument("ctnn::io::save_safetensors: params has " + std::to_string(params.size()) +
                                " floats, expected " + std::to_string(Plan::param_floats) +
                                " (the BufferPlan layout of this network)");
  const auto tensors = st::expected_tensors<Net>();
  const std::string version = std::to_string(version_major) + "." + std::to_string(version_minor) + "." +
                              std::to_string(version_patch);
  std::string header = "{\"__metadata__\":{\"format\":\"ctnn\",\"ctnn_version\":" + json::quote(version) +
                       ",\"network\":" + json::quote(network_description<Net>()) + "}";
  std::uint64_t data_bytes = 0;
  for (const auto& t : tensors) {
    const std::uint64_t bytes = t.count * sizeof(float);
    header += "," + json::quote(t.name) + ":{\"dtype\":\"F32\",\"shape\":" + st::shape_str(t.shape) +
              ",\"data_offsets\":" + st::offsets_str(data_bytes, data_bytes + bytes) + "}";
    data_bytes += bytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned

  std::string file;
  file.reserve(8 + header.size() + data_bytes);
  st::put_u64(file, header.size());
  file += header;
  for (const auto& t : tensors)
    for (std::size_t k = 0; k < t.count; ++k) {
      const float x = params[t.offset + k];
      if (!std::isfinite(x))
        throw io_error(path + ": not saved: " + t.name + " element " + std::to_string(k) + " is " +
                       (std::isnan(x) ? "NaN" : "infinite") +
                       " (did training diverge?); the file was not changed");
      const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
      for (int b = 0; b < 4; ++b) file += char(bits >> (8 * b) & 0xff);
    }
  write_file_atomically(path, file);
}

// Reads a safetensors file holding exactly Net's tensors (any order) into a parameter array in
// BufferPlan<Net> layout (padding zero). Throws io_error naming the file and what was wrong.
template <class Net>
std::vector<float> load_safetensors(const std::string& path) {
  namespace st = detail::safetensors;
  st::Reader reader(path);
  InputFile file(path);
  const std::uintmax_t size = file.size();
  if (size < 8)
    reader.fail("file is " + std::to_string(size) +
                " bytes, too short for a safetensors file (it starts with an 8-byte header length)");
  unsigned char len[8];
  file.read(0, len, 8);
  std::uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = n << 8 | len[k];
  if (n > st::max_header_bytes)
    reader.fail("header length (bytes 0-7, little-endian) is " + std::to_string(n) + ", more than the " +
                std::to_string(st::max_header_bytes) + "-byte limit: not a safetensors file?");
  if (n > size - 8)
    reader.fail("header length (bytes 0-7, little-endian) is " + std::to_string(n) + " but only " +
                std::to_string(size - 8) + " bytes follow: file truncated or not a safetensors file");
  if (n < 2)
    reader.fail("header length (bytes 0-7, little-endian) is " + std::to_string(n) +
                ", too short for a JSON object: not a safetensors file?");
  std::string text(n, '\0');
  file.read(8, text.data(), n);
  reader.parse_header(text);

  // Match the file's tensors against the network's.
  const auto expected = st::expected_tensors<Net>();
  const std::string ours = network_description<Net>();
  const auto meta = reader.metadata().find("network");
  const std::string different =
      ": the file holds the parameters of a different network (" +
      (meta != reader.metadata().end() ? "file: " + meta->second + "; " : std::string()) +
      "expected: " + ours + ")";
  std::map<std::string, const st::Entry*> found;
  for (const auto& e : reader.entries()) found[e.name] = &e;
  std::vector<std::string> extra;
  for (const auto& e : reader.entries()) {
    const bool known =
        std::any_of(expected.begin(), expected.end(), [&](const auto& t) { return t.name == e.name; });
    if (!known) extra.push_back(e.name);
  }
  std::string extra_list;
  for (const auto& e : extra) extra_list += (extra_list.empty() ? "" : ", ") + e;
  for (const auto& t : expected) {
    const auto it = found.find(t.name);
    if (it == found.end())
      reader.fail(
          "missing tensor " + t.name + " (expected F32 " + st::shape_str(t.shape) + ")" +
          (extra.empty() ? std::string() : "; the file has tensors this network does not: " + extra_list) +
          (extra.empty() ? std::string() : different));
    const st::Entry& e = *it->second;
    if (e.dtype != "F32")
      reader.fail(t.name + ": dtype " + e.dtype +
                  " is not supported, expected F32 (ctnn's parameters are float32)");
    if (e.shape != t.shape)
      reader.fail(t.name + ": expected shape " + st::shape_str(t.shape) + ", found " +
                  st::shape_str(e.shape) + different);
  }
  if (!extra.empty())
    reader.fail("unexpected tensor " + extra.front() +
                (extra.size() > 1 ? " (and " + std::to_string(extra.size() - 1) + " more)" : "") +
                ": this network has no such tensor" + different);

  // Data offsets: each range matches its shape, ranges tile the data section exactly.
  const std::uint64_t data_size = size - 8 - n;
  std::vector<std::pair<const st::Entry*, std::size_t>> order;  // entry, index into expected
  for (std::size_t k = 0; k < expected.size(); ++k) order.emplace_back(found[expected[k].name], k);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first->begin != b.first->begin ? a.first->begin < b.first->begin : a.first->end < b.first->end;
  });
  std::uint64_t cursor = 0;
  const st::Entry* previous = nullptr;
  for (const auto& [e, k] : order) {
    const std::uint64_t need = expected[k].count * sizeof(float);
    const std::string where = e->name + ": data_offsets " + st::offsets_str(e->begin, e->end);
    if (e->end - e->begin != need)
      reader.fail(where + " span " + std::to_string(e->end - e->begin) + " bytes, but F32 " +
                  st::shape_str(e->shape) + " needs " + std::to_string(need));
    if (e->end > data_size)
      reader.fail(where + " run past the end of the data section (" + std::to_string(data_size) +
                  " bytes after the header): file truncated?");
    if (e->begin < cursor)
      reader.fail(where + " overlap " + previous->name + "'s " +
                  st::offsets_str(previous->begin, previous->end));
    if (e->begin > cursor)
      reader.fail(where + " leave " + std::to_string(e->begin - cursor) + " unused bytes before them" +
                  (previous ? " (after " + previous->name + ")" : " (at the start of the data section)") +
                  "; safetensors data must be contiguous");
    cursor = e->end;
    previous = e;
  }
  if (cursor != data_size)
    reader.fail(std::to_string(data_size - cursor) +
                " trailing bytes after the last tensor's data (from byte offset " +
                std::to_string(8 + n + cursor) + " to the end of the file)");

  using Plan = BufferPlan<Net>;
  std::vector<float> params(Plan::param_floats, 0.0f);
  std::vector<unsigned char> bytes;
  for (const auto& [e, k] : order) {
    const auto& t = expected[k];
    bytes.resize(t.count * sizeof(float));
    file.read(8 + n + e->begin, bytes.data(), bytes.size());
    for (std::size_t i = 0; i < t.count; ++i) {
      const unsigned char* p = &bytes[4 * i];
      const std::uint32_t bits = std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
                                 std::uint32_t(p[3]) << 24;
      const float x = std::bit_cast<float>(bits);
      if (!std::isfinite(x))
        reader.fail(t.name + ": element " + std::to_string(i) + " (byte offset " +
                    std::to_string(8 + n + e->begin + 4 * i) + ") is " +
                    (std::isnan(x) ? "NaN" : "infinite") + "; the model is unusable (did training diverge?)");
      params[t.offset + i] = x;
    }
  }
  return params;
}

}  // namespace ctnn::io
