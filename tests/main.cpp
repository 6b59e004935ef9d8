// The runner of the engine and UI suites: doctest's, with a temporary directory of the process's own. ctest
// runs the cases in parallel, one process per case natively and two whole WebAssembly suites side by side
// under node; cases that name their files alike (a checkpoint folder, a written model) must not share them.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <stdlib.h>  // mkdtemp, setenv

#include <filesystem>
#include <string>
#include <system_error>

namespace {

// Points TMPDIR (which std::filesystem::temp_directory_path reads, as do the programs a case starts) at a
// fresh directory under the system's, and removes it with its contents when the runner returns.
class PrivateTmp {
 public:
  PrivateTmp() {
    std::error_code ec;  // under node (NODERAWFS), the same calls reach the real file system
    std::string pattern = (std::filesystem::temp_directory_path(ec) / "attnviz_case_XXXXXX").string();
    if (ec || ::mkdtemp(pattern.data()) == nullptr) return;  // the shared directory, as before
    dir_ = pattern;
    ::setenv("TMPDIR", dir_.c_str(), 1);
  }
  ~PrivateTmp() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  PrivateTmp(const PrivateTmp&) = delete;
  PrivateTmp& operator=(const PrivateTmp&) = delete;

 private:
  std::string dir_;
};

}  // namespace

int main(int argc, char** argv) {
  const PrivateTmp tmp;
  return doctest::Context(argc, argv).run();
}
