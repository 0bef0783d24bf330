// Weight-file and checkpoint metadata as the trainer reads it (train/checkpoint.hpp): the structure,
// then the class names stored as a JSON array in the metadata. (The Trainer itself needs float
// template parameters, which clang 14 lacks; its tensors go through SafetensorsFile, fuzzed in
// fuzz_safetensors.)
#include <ctnn/train/checkpoint.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = ctnn_fuzz::scratch_file(data, size);
  try {
    (void)ctnn::class_names_of(ctnn::weight_file_metadata(path));
  } catch (const ctnn::io_error&) {
  }
  return 0;
}
