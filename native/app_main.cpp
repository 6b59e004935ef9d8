#include <iostream>

#include "app.hpp"

int main(int argc, char** argv) {
  return attnviz::run_app(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
