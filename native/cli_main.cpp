#include <iostream>

#include "cli.hpp"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  return attnviz::run_cli(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
