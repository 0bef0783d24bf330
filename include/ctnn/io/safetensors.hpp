#pragma once
// safetensors files (https://github.com/huggingface/safetensors): named tensors plus string metadata.
//
//   bytes 0-7   N, the header length, little-endian uint64
//   bytes 8..   N bytes of JSON (ctnn pads with spaces to a multiple of 8):
//               {"__metadata__": {"format": "ctnn", ...},
//                "layers.0.weight": {"dtype": "F32", "shape": [6,1,5,5], "data_offsets": [0, 600]}, ...}
//   then        the data section: each tensor's little-endian elements at its data_offsets (relative to
//               the start of the section), contiguous, no gaps, nothing after the last tensor.
//
// The generic layer (checkpoints: parameters, layer state, optimizer state, counters):
//
//   struct Tensor { name, dtype ("F32", "I64", ...), shape, bytes };   Tensor::from_floats / from_int64s
//   write_safetensors(path, tensors, metadata);       // atomic (file.hpp); F32 values must be finite
//   SafetensorsFile f(path);                           // validates the whole structure up front
//   f.metadata(), f.has(name), f.names(), f.dtype(name), f.shape(name)
//   f.floats(name, shape)  f.int64s(name, shape)       // dtype and shape checked; floats must be finite
//
// A network's parameters (names layers.<i>.weight / layers.<i>.bias, i the layer's position in the
// Seq, in PyTorch's layouts), in BufferPlan<Net> layout (each tensor at its plan offset, padding zero):
//
//   save_safetensors<Net>(path, params [, extra_metadata]);
//   std::vector<float> p = load_safetensors<Net>(path [, &metadata_out]);
//   parameter_tensors<Net>(params, prefix) / read_parameters<Net>(file, prefix)   // inside checkpoints
//
// Reading accepts any key and tensor order, so safetensors.torch.save_file's files load. Every error
// is an io_error naming the file (made printable) and what did not match, with byte offsets. Limits
// (SafetensorsLimits, documented in docs/limits.md): header 1 MiB, 65,536 tensors, rank 8.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../network/plan.hpp"
#include "../version.hpp"
#include "file.hpp"
#include "json.hpp"
#include "printable.hpp"

namespace ctnn::io {

struct Tensor {
  std::string name;
  std::string dtype;  // safetensors dtype: "F32", "I64", ... (ctnn writes and reads F32 and I64)
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;  // little-endian elements, row-major

  static Tensor from_floats(std::string name, std::vector<std::int64_t> shape, std::span<const float> values) {
    return make(std::move(name), "F32", std::move(shape), values);
  }
  static Tensor from_int64s(std::string name, std::vector<std::int64_t> shape,
                            std::span<const std::int64_t> values) {
    return make(std::move(name), "I64", std::move(shape), values);
  }

 private:
  template <class T>
  static Tensor make(std::string name, const char* dtype, std::vector<std::int64_t> shape, std::span<const T> v) {
    static_assert(std::endian::native == std::endian::little,
                  "ctnn: safetensors I/O assumes a little-endian host");
    Tensor t{std::move(name), dtype, std::move(shape), std::vector<std::byte>(v.size() * sizeof(T))};
    if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return t;
  }
};

// Bounds on what a file may ask of the reader (memory and time), far above what ctnn writes.
struct SafetensorsLimits {
  std::uint64_t header_bytes = std::uint64_t{1} << 20;  // JSON header (LeNet-5's is 1 KB)
  std::size_t tensors = 65'536;
  std::size_t rank = 8;
};

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

// Bytes per element of each safetensors dtype; 0 for an unknown one.
inline std::size_t dtype_size(std::string_view d) {
  if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E5M2" || d == "F8_E4M3") return 1;
  if (d == "I16" || d == "U16" || d == "F16" || d == "BF16") return 2;
  if (d == "I32" || d == "U32" || d == "F32") return 4;
  if (d == "I64" || d == "U64" || d == "F64") return 8;
  return 0;
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

// Elements in shape, or -1 when a dimension is negative or the product exceeds `bound`.
inline std::int64_t element_count(const std::vector<std::int64_t>& shape, std::uint64_t bound) {
  std::uint64_t n = 1;
  for (const std::int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > bound / std::uint64_t(d)) return -1;
    n *= std::uint64_t(d);
  }
  return n > bound ? -1 : std::int64_t(n);
}

inline void put_u64(std::string& out, std::uint64_t v) {
  for (int k = 0; k < 8; ++k) out += char(v >> (8 * k) & 0xff);
}

inline bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace detail::safetensors

// Writes the tensors (in the given order) and the metadata to path as safetensors, atomically: the
// old file is replaced only once the new one is complete on disk. Throws std::invalid_argument for a
// malformed tensor (empty, duplicate or "__metadata__" name, unknown dtype, byte count not matching
// the shape, text that is not UTF-8), io_error (old file untouched) when an F32 value is not finite
// or the file cannot be written.
inline void write_safetensors(const std::string& path, const std::vector<Tensor>& tensors,
                              const std::map<std::string, std::string>& metadata = {}) {
  namespace st = detail::safetensors;
  auto bad = [](const std::string& what) { return std::invalid_argument("ctnn::io::write_safetensors: " + what); };
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!st::valid_utf8(k) || !st::valid_utf8(v))
        throw bad("metadata \"" + printable(k) + "\" is not valid UTF-8");
      header += (first ? "" : ",") + json::quote(k) + ":" + json::quote(v);
      first = false;
    }
    header += "}";
  }
  std::vector<const Tensor*> sorted;
  for (const auto& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](const Tensor* a, const Tensor* b) { return a->name < b->name; });
  for (std::size_t k = 1; k < sorted.size(); ++k)
    if (sorted[k]->name == sorted[k - 1]->name)
      throw bad("two tensors are named \"" + printable(sorted[k]->name) + "\"");
  std::uint64_t data_bytes = 0;
  for (const auto& t : tensors) {
    const std::string name = printable(t.name);
    if (t.name.empty() || t.name == "__metadata__" || !st::valid_utf8(t.name))
      throw bad("invalid tensor name \"" + name + "\"");
    const std::size_t size = st::dtype_size(t.dtype);
    if (size == 0) throw bad(name + ": unknown dtype \"" + printable(t.dtype) + "\"");
    const std::int64_t count = st::element_count(t.shape, std::uint64_t(t.bytes.size()));
    if (count < 0 || std::uint64_t(count) * size != t.bytes.size())
      throw bad(name + ": " + std::to_string(t.bytes.size()) + " bytes do not make a " + t.dtype +
                " tensor of shape " + st::shape_str(t.shape));
    if (t.dtype == "F32")
      for (std::size_t k = 0; k < std::size_t(count); ++k) {
        float x;
        std::memcpy(&x, t.bytes.data() + 4 * k, 4);
        if (!std::isfinite(x))
          throw io_error(printable(path) + ": not saved: " + name + " element " + std::to_string(k) + " is " +
                         (std::isnan(x) ? "NaN" : "infinite") +
                         " (did training diverge?); the file was not changed");
      }
    if (header.size() > 1) header += ',';
    header += json::quote(t.name) + ":{\"dtype\":" + json::quote(t.dtype) +
              ",\"shape\":" + st::shape_str(t.shape) +
              ",\"data_offsets\":" + st::offsets_str(data_bytes, data_bytes + t.bytes.size()) + "}";
    data_bytes += t.bytes.size();
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned

  std::string file;
  file.reserve(8 + header.size() + data_bytes);
  st::put_u64(file, header.size());
  file += header;
  for (const auto& t : tensors) file.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  write_file_atomically(path, file);
}

// A safetensors file, its structure validated in the constructor (header, every entry, data offsets
// tiling the data section exactly); tensor data is read when asked for. Not copyable; reads are
// thread-safe.
class SafetensorsFile {
 public:
  struct Entry {
    std::string dtype;
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0, end = 0;  // data_offsets, relative to the data section
  };

  explicit SafetensorsFile(const std::string& path, const SafetensorsLimits& limits = {})
      : file_(std::make_unique<InputFile>(path)), name_(printable(path)) {
    const std::uintmax_t size = file_->size();
    if (size < 8)
      fail("file is " + std::to_string(size) +
           " bytes, too short for a safetensors file (it starts with an 8-byte header length)");
    unsigned char len[8];
    file_->read(0, len, 8);
    std::uint64_t n = 0;
    for (int k = 7; k >= 0; --k) n = n << 8 | len[k];
    if (n > limits.header_bytes)
      fail("header length (bytes 0-7, little-endian) is " + std::to_string(n) + ", more than the " +
           std::to_string(limits.header_bytes) + "-byte limit: not a safetensors file?");
    if (n > size - 8)
      fail("header length (bytes 0-7, little-endian) is " + std::to_string(n) + " but only " +
           std::to_string(size - 8) + " bytes follow: file truncated or not a safetensors file");
    if (n < 2)
      fail("header length (bytes 0-7, little-endian) is " + std::to_string(n) +
           ", too short for a JSON object: not a safetensors file?");
    header_bytes_ = n;
    data_bytes_ = size - 8 - n;
    std::string text(n, '\0');
    file_->read(8, text.data(), n);
    parse_header(text, limits);
    check_offsets();
  }

  const std::string& path() const { return file_->path(); }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  std::vector<std::string> names() const {  // sorted
    std::vector<std::string> out;
    for (const auto& [k, e] : entries_) out.push_back(k);
    return out;
  }
  const std::string& dtype(const std::string& name) const { return entry(name).dtype; }
  const std::vector<std::int64_t>& shape(const std::string& name) const { return entry(name).shape; }
  const Entry& entry(const std::string& name) const {
    const auto it = entries_.find(name);
    if (it == entries_.end()) fail("missing tensor " + printable(name));
    return it->second;
  }

  // The F32 tensor `name`, which must have this shape; every value must be finite.
  std::vector<float> floats(const std::string& name, const std::vector<std::int64_t>& shape) const {
    std::vector<float> v(elements(name, "F32", shape));
    const std::uint64_t at = read(name, v.data(), v.size() * 4);
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        fail(printable(name) + ": element " + std::to_string(i) + " (byte offset " + std::to_string(at + 4 * i) +
             ") is " + (std::isnan(v[i]) ? "NaN" : "infinite") +
             "; the values are unusable (did training diverge?)");
    return v;
  }

  // The I64 tensor `name`, which must have this shape.
  std::vector<std::int64_t> int64s(const std::string& name, const std::vector<std::int64_t>& shape) const {
    std::vector<std::int64_t> v(elements(name, "I64", shape));
    read(name, v.data(), v.size() * 8);
    return v;
  }

  [[noreturn]] void fail(const std::string& what) const { throw io_error(name_ + ": " + what); }

 private:
  std::unique_ptr<InputFile> file_;
  std::string name_;  // printable path
  std::uint64_t header_bytes_ = 0, data_bytes_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;

  std::size_t elements(const std::string& name, const char* dtype, const std::vector<std::int64_t>& shape) const {
    namespace st = detail::safetensors;
    const Entry& e = entry(name);
    if (e.dtype != dtype)
      fail(printable(name) + ": dtype " + printable(e.dtype) + " is not supported, expected " + dtype);
    if (e.shape != shape)
      fail(printable(name) + ": expected shape " + st::shape_str(shape) + ", found " + st::shape_str(e.shape));
    return std::size_t((e.end - e.begin) / st::dtype_size(dtype));
  }

  // Reads tensor `name`'s bytes into dst; returns the file offset they start at.
  std::uint64_t read(const std::string& name, void* dst, std::size_t n) const {
    const Entry& e = entry(name);
    const std::uint64_t at = 8 + header_bytes_ + e.begin;
    file_->read(at, dst, n);
    static_assert(std::endian::native == std::endian::little,
                  "ctnn: safetensors I/O assumes a little-endian host");
    return at;
  }

  static std::string at(const json::Value& v) { return " (byte offset " + std::to_string(8 + v.offset) + ")"; }

  void parse_header(const std::string& text, const SafetensorsLimits& limits) {
    json::Value root;
    try {
      root = json::parse(text);
    } catch (const json::syntax_error& e) {
      fail("malformed header JSON at byte offset " + std::to_string(8 + e.offset) + ": " + e.what());
    }
    if (root.kind != json::Value::Kind::object)
      fail(std::string("the header must be a JSON object, found ") + json::kind_name(root.kind));
    for (const auto& [key, v, key_at] : root.object) {
      if (key == "__metadata__") {
        read_metadata(v);
        continue;
      }
      if (entries_.size() == limits.tensors)
        fail("more than " + std::to_string(limits.tensors) + " tensors (the limit)" + at(v));
      entries_[key] = read_entry(key, v, limits);
    }
  }

  void read_metadata(const json::Value& v) {
    if (v.kind != json::Value::Kind::object)
      fail(std::string("__metadata__ must be an object of strings, found ") + json::kind_name(v.kind) + at(v));
    for (const auto& [k, s, key_at] : v.object) {
      if (s.kind != json::Value::Kind::string)
        fail("__metadata__ value \"" + printable(k) + "\" must be a string, found " + json::kind_name(s.kind) +
             at(s));
      metadata_[k] = s.string;
    }
  }

  std::int64_t non_negative(const std::string& name, const char* what, const json::Value& v) const {
    if (v.kind != json::Value::Kind::integer)
      fail("tensor \"" + name + "\": " + what + " must be an integer, found " + json::kind_name(v.kind) + at(v));
    if (v.integer < 0)
      fail("tensor \"" + name + "\": " + what + " must not be negative, found " + std::to_string(v.integer) +
           at(v));
    return v.integer;
  }

  Entry read_entry(const std::string& key, const json::Value& v, const SafetensorsLimits& limits) const {
    namespace st = detail::safetensors;
    const std::string name = printable(key);
    if (v.kind != json::Value::Kind::object)
      fail("tensor \"" + name + "\": expected an object with dtype, shape and data_offsets, found " +
           json::kind_name(v.kind) + at(v));
    for (const auto& [k, unused, key_at] : v.object)
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        fail("tensor \"" + name + "\": unexpected field \"" + printable(k) +
             "\" (expected dtype, shape, data_offsets)" + at(unused));
    auto field = [&](const char* k) {
      const json::Value* f = v.find(k);
      if (!f) fail("tensor \"" + name + "\": missing field \"" + k + "\"" + at(v));
      return f;
    };
    Entry e;
    const json::Value* dtype = field("dtype");
    if (dtype->kind != json::Value::Kind::string)
      fail("tensor \"" + name + "\": dtype must be a string, found " + json::kind_name(dtype->kind) + at(*dtype));
    e.dtype = dtype->string;
    if (st::dtype_size(e.dtype) == 0)
      fail("tensor \"" + name + "\": unknown dtype \"" + printable(e.dtype) + "\"" + at(*dtype));
    const json::Value* shape = field("shape");
    if (shape->kind != json::Value::Kind::array)
      fail("tensor \"" + name + "\": shape must be an array, found " + json::kind_name(shape->kind) + at(*shape));
    if (shape->array.size() > limits.rank)
      fail("tensor \"" + name + "\": rank " + std::to_string(shape->array.size()) + " is above the limit of " +
           std::to_string(limits.rank) + at(*shape));
    for (const auto& d : shape->array) e.shape.push_back(non_negative(name, "a shape dimension", d));
    const json::Value* offsets = field("data_offsets");
    if (offsets->kind != json::Value::Kind::array || offsets->array.size() != 2)
      fail("tensor \"" + name + "\": data_offsets must be an array [begin, end]" + at(*offsets));
    e.begin = std::uint64_t(non_negative(name, "data_offsets begin", offsets->array[0]));
    e.end = std::uint64_t(non_negative(name, "data_offsets end", offsets->array[1]));
    if (e.end < e.begin)
      fail("tensor \"" + name + "\": data_offsets " + st::offsets_str(e.begin, e.end) + " end before they begin" +
           at(*offsets));
    // The span must match the shape; the count is bounded by the file so that nothing overflows.
    const std::size_t size = st::dtype_size(e.dtype);
    const std::int64_t count = st::element_count(e.shape, data_bytes_ / size + 1);
    if (count < 0 || std::uint64_t(count) * size != e.end - e.begin)
      fail(name + ": data_offsets " + st::offsets_str(e.begin, e.end) + " span " +
           std::to_string(e.end - e.begin) + " bytes, but " + e.dtype + " " + st::shape_str(e.shape) + " needs " +
           (count < 0 ? "more than the file holds" : std::to_string(std::uint64_t(count) * size)));
    return e;
  }

  // Ranges tile the data section exactly: sorted by begin, each starts where the previous ended.
  void check_offsets() const {
    namespace st = detail::safetensors;
    std::vector<std::pair<const std::string*, const Entry*>> order;
    for (const auto& [k, e] : entries_) order.emplace_back(&k, &e);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.second->begin != b.second->begin ? a.second->begin < b.second->begin
                                                : a.second->end < b.second->end;
    });
    std::uint64_t cursor = 0;
    const std::string* previous = nullptr;
    const Entry* prev = nullptr;
    for (const auto& [k, e] : order) {
      const std::string where = printable(*k) + ": data_offsets " + st::offsets_str(e->begin, e->end);
      if (e->end > data_bytes_)
        fail(where + " run past the end of the data section (" + std::to_string(data_bytes_) +
             " bytes after the header): file truncated?");
      if (e->begin < cursor)
        fail(where + " overlap " + printable(*previous) + "'s " + st::offsets_str(prev->begin, prev->end));
      if (e->begin > cursor)
        fail(where + " leave " + std::to_string(e->begin - cursor) + " unused bytes before them" +
             (previous ? " (after " + printable(*previous) + ")" : " (at the start of the data section)") +
             "; safetensors data must be contiguous");
      cursor = e->end;
      previous = k;
      prev = e;
    }
    if (cursor != data_bytes_)
      fail(std::to_string(data_bytes_ - cursor) +
           " trailing bytes after the last tensor's data (from byte offset " +
           std::to_string(8 + header_bytes_ + cursor) + " to the end of the file)");
  }
};

namespace detail::safetensors {

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

// Every parameter tensor of Net, in layer order.
template <class Net>
std::vector<Expected> expected_tensors(const std::string& prefix = "") {
  using Plan = BufferPlan<Net>;
  std::vector<Expected> out;
  Net::for_each_layer([&](auto index) {
    constexpr std::size_t i = decltype(index)::value;
    using B = typename Net::template bound_at<i>;
    const std::string p = prefix + "layers." + std::to_string(i);
    if constexpr (B::weight_count > 0)
      out.push_back({p + ".weight", dims_of<typename B::weight_shape>(), Plan::weight_offset[i], B::weight_count});
    if constexpr (B::bias_count > 0)
      out.push_back({p + ".bias", dims_of<typename B::bias_shape>(), Plan::bias_offset[i], B::bias_count});
  });
  return out;
}

inline std::string version_string() {
  return std::to_string(version_major) + "." + std::to_string(version_minor) + "." + std::to_string(version_patch);
}

}  // namespace detail::safetensors

// Net's parameter tensors from params (BufferPlan<Net> layout), named <prefix>layers.<i>.weight/bias.
// Throws std::invalid_argument when params has the wrong size.
template <class Net>
std::vector<Tensor> parameter_tensors(const std::vector<float>& params, const std::string& prefix = "") {
  using Plan = BufferPlan<Net>;
  if (params.size() != Plan::param_floats)
    throw std::invalid_argument("ctnn::io: params has " + std::to_string(params.size()) + " floats, expected " +
                                std::to_string(Plan::param_floats) + " (the BufferPlan layout of this network)");
  std::vector<Tensor> out;
  for (const auto& t : detail::safetensors::expected_tensors<Net>(prefix))
    out.push_back(Tensor::from_floats(t.name, t.shape, std::span<const float>(params).subspan(t.offset, t.count)));
  return out;
}

// Net's parameters (BufferPlan<Net> layout, padding zero) from the tensors <prefix>layers.<i>.weight/
// bias of `file`. Throws io_error naming the tensor when one is missing, of another shape or dtype,
// or not finite. Tensors the network lacks are ignored here (load_safetensors refuses them).
template <class Net>
std::vector<float> read_parameters(const SafetensorsFile& file, const std::string& prefix = "") {
  std::vector<float> params(BufferPlan<Net>::param_floats, 0.0f);
  for (const auto& t : detail::safetensors::expected_tensors<Net>(prefix)) {
    const std::vector<float> v = file.floats(t.name, t.shape);
    std::copy(v.begin(), v.end(), params.begin() + std::ptrdiff_t(t.offset));
  }
  return params;
}

// Writes params (BufferPlan<Net> layout) to path as safetensors, atomically, with the metadata
// format=ctnn, ctnn_version and network (network_description<Net>()) plus `extra` (which may not
// redefine those three). Throws std::invalid_argument when params has the wrong size, io_error (old
// file untouched) when a parameter is not finite or the file cannot be written.
template <class Net>
void save_safetensors(const std::string& path, const std::vector<float>& params,
                      const std::map<std::string, std::string>& extra = {}) {
  std::map<std::string, std::string> meta = extra;
  for (const char* key : {"format", "ctnn_version", "network"})
    if (meta.count(key))
      throw std::invalid_argument(std::string("ctnn::io::save_safetensors: extra metadata may not set \"") + key +
                                  "\" (ctnn writes it)");
  meta["format"] = "ctnn";
  meta["ctnn_version"] = detail::safetensors::version_string();
  meta["network"] = network_description<Net>();
  write_safetensors(path, parameter_tensors<Net>(params), meta);
}

// Reads a safetensors file holding exactly Net's tensors (any order) into a parameter array in
// BufferPlan<Net> layout (padding zero); the file's metadata goes to *metadata when given. Throws
// io_error naming the file and what was wrong; a file for another network says so, with both
// networks' descriptions where the file has one.
template <class Net>
std::vector<float> load_safetensors(const std::string& path,
                                    std::map<std::string, std::string>* metadata = nullptr,
                                    const SafetensorsLimits& limits = {}) {
  namespace st = detail::safetensors;
  const SafetensorsFile file(path, limits);
  const auto expected = st::expected_tensors<Net>();
  const auto meta = file.metadata().find("network");
  const std::string different =
      ": the file holds the parameters of a different network (" +
      (meta != file.metadata().end() ? "file: " + printable(meta->second) + "; " : std::string()) +
      "expected: " + network_description<Net>() + ")";
  std::vector<std::string> extra;
  for (const auto& name : file.names())
    if (std::none_of(expected.begin(), expected.end(), [&](const auto& t) { return t.name == name; }))
      extra.push_back(printable(name));
  std::string extra_list;
  for (const auto& e : extra) extra_list += (extra_list.empty() ? "" : ", ") + e;
  for (const auto& t : expected) {
    if (!file.has(t.name))
      file.fail("missing tensor " + t.name + " (expected F32 " + st::shape_str(t.shape) + ")" +
                (extra.empty() ? std::string() : "; the file has tensors this network does not: " + extra_list) +
                (extra.empty() ? std::string() : different));
    if (file.dtype(t.name) != "F32")
      file.fail(t.name + ": dtype " + printable(file.dtype(t.name)) +
                " is not supported, expected F32 (ctnn's parameters are float32)");
    if (file.shape(t.name) != t.shape)
      file.fail(t.name + ": expected shape " + st::shape_str(t.shape) + ", found " +
                st::shape_str(file.shape(t.name)) + different);
  }
  if (!extra.empty())
    file.fail("unexpected tensor " + extra.front() +
              (extra.size() > 1 ? " (and " + std::to_string(extra.size() - 1) + " more)" : "") +
              ": this network has no such tensor" + different);
  std::vector<float> params = read_parameters<Net>(file);
  if (metadata) *metadata = file.metadata();
  return params;
}

}  // namespace ctnn::io
