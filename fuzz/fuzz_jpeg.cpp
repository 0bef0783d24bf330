// jpeg decoding (limits at their defaults), then MNIST's preprocessing of whatever decoded.
#include <ctnn/io/image.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const ctnn::io::GrayImage g = ctnn::io::decode_jpeg(ctnn_fuzz::bytes(data, size), "fuzz");
    (void)ctnn::io::mnist_digit(g, "fuzz");
  } catch (const ctnn::io_error&) {
  }
  return 0;
}
