// safetensors: the structure is validated, then every tensor is read as its dtype when ctnn reads
// it (F32, I64), and the file is tried as a small network's parameters.
// Only the layers it uses: clang 14 cannot compile the whole library (float template parameters).
#include <ctnn/layers/activation.hpp>
#include <ctnn/layers/conv.hpp>
#include <ctnn/layers/dense.hpp>
#include <ctnn/layers/softmax.hpp>
#include <ctnn/network/network.hpp>
#include <ctnn/io/safetensors.hpp>

#include "fuzz_common.hpp"

namespace {
using Tiny =
    ctnn::Network<ctnn::Seq<ctnn::Conv<2, 3>, ctnn::ReLU, ctnn::Dense<3>, ctnn::Softmax>, ctnn::Input<1, 5, 5>>;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = ctnn_fuzz::scratch_file(data, size);
  try {
    const ctnn::io::SafetensorsFile f(path);
    for (const auto& name : f.names()) {
      try {
        if (f.dtype(name) == "F32") (void)f.floats(name, f.shape(name));
        if (f.dtype(name) == "I64") (void)f.int64s(name, f.shape(name));
      } catch (const ctnn::io_error&) {
      }
    }
  } catch (const ctnn::io_error&) {
  }
  try {
    std::map<std::string, std::string> meta;
    (void)ctnn::io::load_safetensors<Tiny>(path, &meta);
  } catch (const ctnn::io_error&) {
  }
  return 0;
}
