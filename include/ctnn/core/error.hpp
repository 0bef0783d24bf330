#pragma once
// Error types shared across ctnn.
#include <stdexcept>

namespace ctnn {

// A file could not be read or is not in the expected format. The message names the file and
// says what was expected and what was found (with a byte offset where one applies).
struct io_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

}  // namespace ctnn
