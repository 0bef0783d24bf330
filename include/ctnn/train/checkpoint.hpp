#pragma once
// Weight files and checkpoints: safetensors files whose tensor names are PyTorch's
// (layers.<i>.weight, layers.<i>.bias, layers.<i>.<state> such as running_mean), so that an
// nn.Sequential of the same layers loads them, and whose metadata describes the network.
//
//   trainer.save_weights(path)      parameters, layer state; metadata: the network, mean and std
//   trainer.save_weights(path, extra)   the same plus extra metadata (e.g. class_names_metadata(names));
//                                   the keys ctnn writes itself cannot be overridden
//   weight_file_metadata(path)      a weight file's metadata, without a trainer (structure validated)
//   class_names_of(metadata)        the class names stored under "class_names" (a JSON array of
//                                   strings), empty when there are none
//   trainer.load_weights(path)      checks the network and restores all of it, normalisation included;
//                                   a file without metadata (written by PyTorch) loads by tensor shapes
//   trainer.save_checkpoint(path)   all of the above plus the optimizer's state
//                                   (optimizer.<state name>.layers.<i>.weight ...), the epoch reached and
//                                   the step count: everything a run needs to continue exactly
//   trainer.load_checkpoint(path)   refuses a checkpoint of another network, optimizer or loss, saying
//                                   what differs; the next fit continues from the stored epoch
//
// Writes are atomic (a temporary file renamed over the target).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../io/json.hpp"
#include "../io/safetensors.hpp"
#include "../network/plan.hpp"
#include "../version.hpp"

namespace ctnn {
namespace detail {

inline void check_size(const char* what, std::size_t got, std::size_t expected, const char* name) {
  if (got != expected)
    throw std::invalid_argument(std::string("ctnn: ") + what + " got " + std::to_string(got) + " floats, expected " +
                                std::to_string(expected) + " (" + name + ")");
}

// One tensor of a file and where its values live in the trainer's arrays.
struct FileTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  enum Source { params, state, optimizer } source;
  std::size_t offset;  // into the array of `source`
  std::size_t count;
  bool integer = false;  // stored as I64
};

// Every parameter and state tensor of Net, in layer order.
template <class Net>
std::vector<FileTensor> model_tensors() {
  using Plan = BufferPlan<Net>;
  std::vector<FileTensor> out;
  Net::for_each_layer([&](auto index) {
    constexpr std::size_t i = decltype(index)::value;
    using B = typename Net::template bound_at<i>;
    const std::string prefix = "layers." + std::to_string(i) + ".";
    if constexpr (requires { B::param_tensors(); }) {  // a block (Residual): layers.<i>.<j>.weight, ...
      for (const auto& t : B::param_tensors())
        out.push_back({prefix + t.name, t.shape, FileTensor::params, Plan::weight_offset[i] + t.offset, t.count});
    } else if constexpr (B::weight_count > 0)
      out.push_back({prefix + "weight", io::detail::safetensors::dims_of<typename B::weight_shape>(), FileTensor::params, Plan::weight_offset[i],
                     B::weight_count});
    if constexpr (B::bias_count > 0)
      out.push_back({prefix + "bias", io::detail::safetensors::dims_of<typename B::bias_shape>(), FileTensor::params, Plan::bias_offset[i],
                     B::bias_count});
    std::size_t at = Plan::state_offset[i];
    for (const StateTensor& s : state_tensors_of<B>()) {
      // A one-value integer (num_batches_tracked) is a scalar in PyTorch's files.
      std::vector<std::int64_t> shape;
      if (!(s.integer && s.count == 1)) shape.push_back(std::int64_t(s.count));
      out.push_back({prefix + s.name, shape, FileTensor::state, at, s.count, s.integer});
      at += s.count;
    }
  });
  return out;
}

// The optimizer's state tensors: slot k of parameter tensor p is optimizer.<slot name>.<p's name>.
template <class Net, class Opt>
std::vector<FileTensor> optimizer_tensors() {
  std::vector<FileTensor> out;
  for (std::size_t k = 0; k < Opt::state_slots; ++k)
    for (const FileTensor& t : model_tensors<Net>())
      if (t.source == FileTensor::params)
        out.push_back({std::string("optimizer.") + Opt::state_names[k] + "." + t.name, t.shape, FileTensor::optimizer,
                       k * BufferPlan<Net>::param_floats + t.offset, t.count});
  return out;
}

inline io::Tensor to_file(const FileTensor& t, const std::vector<float>& values) {
  io::Tensor f;
  f.name = t.name;
  f.shape = t.shape;
  if (t.integer) {
    f.dtype = "I64";
    f.bytes.resize(t.count * sizeof(std::int64_t));
    for (std::size_t k = 0; k < t.count; ++k) {
      const std::int64_t v = std::int64_t(std::llround(values[t.offset + k]));
      std::memcpy(f.bytes.data() + k * sizeof v, &v, sizeof v);  // little-endian hosts only (as safetensors)
    }
  } else {
    f.dtype = "F32";
    f.bytes.resize(t.count * sizeof(float));
    std::memcpy(f.bytes.data(), values.data() + t.offset, t.count * sizeof(float));
  }
  return f;
}

inline void from_file(const io::SafetensorsFile& file, const FileTensor& t, std::vector<float>& values) {
  if (t.integer) {
    const std::vector<std::int64_t> v = file.int64s(t.name, t.shape);
    for (std::size_t k = 0; k < t.count; ++k) values[t.offset + k] = float(v[k]);
  } else {
    const std::vector<float> v = file.floats(t.name, t.shape);
    std::copy(v.begin(), v.end(), values.begin() + std::ptrdiff_t(t.offset));
  }
}

inline std::vector<std::string> split_layers(const std::string& description) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  for (;;) {
    const std::size_t next = description.find(" -> ", at);
    parts.push_back(description.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) return parts;
    at = next + 4;
  }
}

// Throws unless the file's "network" metadata is this network's, listing the layers that differ.
template <class Net>
void check_network(const std::string& path, const std::map<std::string, std::string>& meta) {
  const auto it = meta.find("network");
  if (it == meta.end()) return;  // a file from elsewhere (PyTorch): the tensor shapes decide
  const std::string here = io::network_description<Net>();
  if (it->second == here) return;
  const std::vector<std::string> a = split_layers(it->second), b = split_layers(here);
  std::string diff;
  int shown = 0;
  for (std::size_t i = 0; i < std::max(a.size(), b.size()) && shown < 4; ++i) {
    const std::string there = i < a.size() ? a[i] : "nothing", mine = i < b.size() ? b[i] : "nothing";
    if (there == mine) continue;
    diff += "\n  " + (i == 0 ? std::string("input") : "layer " + std::to_string(i - 1)) + ": the file has " + there +
            ", this network " + mine;
    ++shown;
  }
  if (a.size() != b.size())
    diff += "\n  the file has " + std::to_string(a.size() - 1) + " layers, this network " + std::to_string(b.size() - 1);
  throw io_error(path + ": saved for another network:" + diff);
}

inline std::string meta_or(const std::map<std::string, std::string>& meta, const std::string& key,
                           const std::string& fallback = "") {
  const auto it = meta.find(key);
  return it == meta.end() ? fallback : it->second;
}

// A number from the metadata, or an io_error naming the file and key.
inline double meta_number(const std::string& path, const std::map<std::string, std::string>& meta,
                          const std::string& key) {
  const auto it = meta.find(key);
  if (it == meta.end()) throw io_error(path + ": the metadata lacks \"" + key + "\"");
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != it->second.size() || !std::isfinite(v))
    throw io_error(path + ": metadata \"" + key + "\" is not a finite number: \"" + it->second + "\"");
  return v;
}

// save_weights / load_weights / save_checkpoint / load_checkpoint for a Trainer (Derived), which
// provides parameters(), layer_state(), optimizer_state(), their setters, set_normalization() and the
// loop's progress (train/loop.hpp).
template <class Derived, class Net, class Opt, class Loss>
class Checkpointing {
 public:
  void save_weights(const std::string& path, const std::map<std::string, std::string>& extra = {}) const {
    std::map<std::string, std::string> meta = model_metadata();
    meta["format"] = "ctnn";
    for (const auto& [key, value] : extra) meta.emplace(key, value);  // never replaces ctnn's own keys
    io::write_safetensors(path, files(model_tensors<Net>()), meta);
  }
  void load_weights(const std::string& path) {
    const io::SafetensorsFile file(path);
    const auto& meta = file.metadata();
    check_network<Net>(path, meta);
    std::vector<float> p(BufferPlan<Net>::param_floats, 0.f), s(BufferPlan<Net>::state_floats, 0.f);
    read(file, model_tensors<Net>(), p, s, nullptr);
    float mean = self().mean(), stddev = self().stddev();
    if (meta.count("mean") || meta.count("std"))
      mean = float(meta_number(path, meta, "mean")), stddev = float(meta_number(path, meta, "std"));
    self().set_normalization(mean, stddev);
    self().set_parameters(p);
    self().set_layer_state(s);
  }

  void save_checkpoint(const std::string& path) const {
    std::map<std::string, std::string> meta = model_metadata();
    meta["format"] = "ctnn-checkpoint";
    meta["optimizer"] = Opt::name;
    meta["loss"] = Loss::name;
    meta["epoch"] = std::to_string(self().epoch());
    meta["step"] = std::to_string(self().step());
    std::vector<FileTensor> all = model_tensors<Net>();
    for (const FileTensor& t : optimizer_tensors<Net, Opt>()) all.push_back(t);
    io::write_safetensors(path, files(all), meta);
  }
  void load_checkpoint(const std::string& path) {
    const io::SafetensorsFile file(path);
    const auto& meta = file.metadata();
    if (meta_or(meta, "format") != "ctnn-checkpoint")
      throw io_error(path + ": not a ctnn checkpoint (metadata \"format\" is \"" + meta_or(meta, "format") +
                     "\", expected \"ctnn-checkpoint\"); a weight file loads with load_weights");
    check_network<Net>(path, meta);
    for (const auto& [key, mine] : {std::pair<std::string, std::string>{"optimizer", Opt::name},
                                    std::pair<std::string, std::string>{"loss", Loss::name}})
      if (meta_or(meta, key) != mine)
        throw io_error(path + ": the checkpoint's " + key + " is " + meta_or(meta, key, "(none)") + ", this trainer's " +
                       mine);
    const double epoch = meta_number(path, meta, "epoch"), step = meta_number(path, meta, "step");
    if (epoch < 0 || step < 0 || epoch != std::floor(epoch) || step != std::floor(step) || epoch > 1e9 || step > 1e18)
      throw io_error(path + ": metadata epoch " + meta_or(meta, "epoch") + " / step " + meta_or(meta, "step") +
                     " are not counts");
    std::vector<float> p(BufferPlan<Net>::param_floats, 0.f), s(BufferPlan<Net>::state_floats, 0.f),
        o(Opt::state_slots * BufferPlan<Net>::param_floats, 0.f);
    read(file, model_tensors<Net>(), p, s, nullptr);
    read(file, optimizer_tensors<Net, Opt>(), p, s, &o);
    self().set_normalization(float(meta_number(path, meta, "mean")), float(meta_number(path, meta, "std")));
    self().set_parameters(p);
    self().set_layer_state(s);
    self().set_optimizer_state(o);
    self().set_progress(int(epoch), std::int64_t(step));
  }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
  Derived& self() { return static_cast<Derived&>(*this); }

  std::map<std::string, std::string> model_metadata() const {
    std::map<std::string, std::string> meta;
    meta["ctnn_version"] = version_string();
    meta["network"] = io::network_description<Net>();
    meta["mean"] = float_text(self().mean());
    meta["std"] = float_text(self().stddev());
    return meta;
  }
  // Enough digits that the float reads back exactly.
  static std::string float_text(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", double(v));
    return buf;
  }

  std::vector<io::Tensor> files(const std::vector<FileTensor>& tensors) const {
    const std::vector<float> p = self().parameters(), s = self().layer_state();
    std::vector<float> o;
    std::vector<io::Tensor> out;
    for (const FileTensor& t : tensors) {
      if (t.source == FileTensor::optimizer && o.empty()) o = self().optimizer_state();
      out.push_back(to_file(t, t.source == FileTensor::params ? p : t.source == FileTensor::state ? s : o));
    }
    return out;
  }
  static void read(const io::SafetensorsFile& file, const std::vector<FileTensor>& tensors, std::vector<float>& p,
                   std::vector<float>& s, std::vector<float>* o) {
    for (const FileTensor& t : tensors)
      from_file(file, t, t.source == FileTensor::params ? p : t.source == FileTensor::state ? s : *o);
  }
};

}  // namespace detail

// The metadata of a safetensors weight file or checkpoint (the file's structure is validated; no
// tensor is read). Throws io_error for a missing or malformed file.
inline std::map<std::string, std::string> weight_file_metadata(const std::string& path) {
  return io::SafetensorsFile(path).metadata();
}

// {"class_names": JSON array of the names}, for save_weights' extra metadata.
inline std::map<std::string, std::string> class_names_metadata(const std::vector<std::string>& names) {
  std::string text = "[";
  for (std::size_t i = 0; i < names.size(); ++i) text += (i ? ", " : "") + io::json::quote(names[i]);
  return {{"class_names", text + "]"}};
}

// The class names stored by class_names_metadata; empty when the metadata has none. Throws io_error
// when "class_names" is not a JSON array of strings.
inline std::vector<std::string> class_names_of(const std::map<std::string, std::string>& meta) {
  const auto it = meta.find("class_names");
  if (it == meta.end()) return {};
  std::vector<std::string> names;
  try {
    const io::json::Value v = io::json::parse(it->second);
    if (v.kind != io::json::Value::Kind::array) throw io::json::syntax_error(0, "not an array");
    for (const io::json::Value& e : v.array) {
      if (e.kind != io::json::Value::Kind::string) throw io::json::syntax_error(e.offset, "not a string");
      names.push_back(e.string);
    }
  } catch (const io::json::syntax_error& e) {
    throw io_error("metadata \"class_names\" is not a JSON array of strings (byte " + std::to_string(e.offset) +
                   ": " + e.what() + ")");
  }
  return names;
}

}  // namespace ctnn
