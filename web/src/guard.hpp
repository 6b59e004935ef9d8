// The last resort around everything the page script calls into the module (the exports in api.cpp, the
// animation-frame loop): a C++ exception becomes a message, and the view stays. The checks before computing
// are the mechanism; this is the net.
#pragma once

#include <exception>
#include <new>
#include <string>

namespace attnviz::web {

// Written once, while there is memory (set_out_of_memory_text): out of memory, the answer must not need any.
extern char out_of_memory[128];
void set_out_of_memory_text();
std::string failure_text(const char* what);  // "something went wrong (...): the last good view stays"
void note_failure(const char* why);          // shows it as the page's message

// Runs f (which returns a std::string) and returns its text, or why it failed. The text lives in a static
// string of its own per call site (each lambda is its own F), valid until that site runs again.
template <class F>
const char* guarded(F&& f) {
  static std::string out;
  try {
    out = f();
  } catch (const std::bad_alloc&) {
    note_failure(out_of_memory);
    return out_of_memory;
  } catch (const std::exception& e) {
    out = failure_text(e.what());
    note_failure(out.c_str());
  } catch (...) {
    out = failure_text("an unknown C++ exception");
    note_failure(out.c_str());
  }
  return out.c_str();
}

// Runs f (which returns nothing); a failure is the page's message.
template <class F>
void guarded_void(F&& f) {
  guarded([&] {
    f();
    return std::string();
  });
}

// Runs f (which returns a T); on a failure, the message and `failed`.
template <class T, class F>
T guarded_value(T failed, F&& f) {
  T value = failed;
  guarded([&] {
    value = f();
    return std::string();
  });
  return value;
}

// A string argument from the page script: a null pointer is "".
inline const char* text_arg(const char* s) {
  return s ? s : "";
}

}  // namespace attnviz::web
