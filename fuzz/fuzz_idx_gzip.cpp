// IDX, gzip: read as images (rank 3) and as labels (rank 1) from memory.
#include <ctnn/io/idx.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2 || data[0] != 0x1f || data[1] != 0x8b) return 0;  // raw: the other harness
  for (const std::uint8_t rank : {std::uint8_t(3), std::uint8_t(1)}) {
    try {
      ctnn::io::detail::IdxStream in(data, size, "fuzz");
      std::vector<std::uint8_t> payload;
      (void)ctnn::io::detail::read_idx(in, rank, "x", "data", payload);
    } catch (const ctnn::io_error&) {
    }
  }
  return 0;
}
