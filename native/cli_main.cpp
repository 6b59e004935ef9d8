#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "cli.hpp"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  // A last resort: every bad input is refused before it costs anything (run_cli), but nothing may end the
  // program with an abort and a stack of lines instead of one line and exit status 1.
  try {
    return attnviz::run_cli(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
  } catch (const std::bad_alloc&) {
    std::cerr << "attnviz-cli: out of memory\n";
  } catch (const std::exception& e) {
    std::string what = e.what();
    for (char& ch : what)
      if (ch == '\n') ch = ' ';
    std::cerr << "attnviz-cli: internal error: " << what << "\n";
  }
  return 1;
}
