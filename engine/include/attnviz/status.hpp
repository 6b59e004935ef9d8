// A success-or-message result. The engine reports bad input through this instead of exceptions, so the same
// code behaves identically natively and in WebAssembly (where Emscripten disables exception catching).
#pragma once

#include <string>
#include <utility>

namespace attnviz {

// [[nodiscard]]: a Status dropped is an error never reported. A caller that means to drop one (the error is
// kept and shown elsewhere) says so with (void) and a comment.
struct [[nodiscard]] Status {
  std::string error;  // empty on success: one human-readable line otherwise

  static Status ok() { return {}; }
  static Status fail(std::string message) { return Status{std::move(message)}; }
  bool is_ok() const { return error.empty(); }
};

}  // namespace attnviz
