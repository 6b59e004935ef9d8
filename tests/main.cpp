// The suite's runner: doctest's, in a temporary directory of the process's own (private_tmp.hpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "private_tmp.hpp"

int main(int argc, char** argv) {
  const attnviz::test::PrivateTmp tmp;
  return doctest::Context(argc, argv).run();
}
