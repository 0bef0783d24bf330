// JSON reader: any text parses or throws json::syntax_error.
#include <ctnn/io/json.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto v = ctnn::io::json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
    (void)ctnn::io::json::quote(v.kind == ctnn::io::json::Value::Kind::string ? v.string : "x");
  } catch (const ctnn::io::json::syntax_error&) {
  }
  return 0;
}
