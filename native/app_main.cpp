#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "app.hpp"

int main(int argc, char** argv) {
  // A last resort: every bad input is refused before it costs anything (run_app), but nothing may end the
  // program with an abort and a stack of lines instead of one line and exit status 1.
  try {
    return attnviz::run_app(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
  } catch (const std::bad_alloc&) {
    std::cerr << "attnviz: out of memory\n";
  } catch (const std::exception& e) {
    std::string what = e.what();
    for (char& ch : what)
      if (ch == '\n') ch = ' ';
    std::cerr << "attnviz: internal error: " << what << "\n";
  }
  return 1;
}
