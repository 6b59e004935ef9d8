// A success-or-message result. The engine reports bad input through this instead of exceptions, so the same
// code behaves identically natively and in WebAssembly (where Emscripten disables exception catching).
#pragma once

#include <string>
#include <utility>

namespace attnviz {

struct Status {
  std::string error;  // empty on success: one human-readable line otherwise

  static Status ok() { return {}; }
  static Status fail(std::string message) { return Status{std::move(message)}; }
  bool is_ok() const { return error.empty(); }
};

}  // namespace attnviz
