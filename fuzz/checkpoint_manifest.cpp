// Fuzzes a checkpoint folder's manifests (checkpoint.hpp's check_checkpoint_folder, which --resume, the Train
// panel's Continue and --model DIR run first): the input, split at the first NUL byte, is written as the
// folder's checkpoint.json and, after the NUL, its checkpoint.pending.json (a commit cut short, which the
// check finishes or refuses). The folder also holds a small config.json, model.safetensors and
// model.safetensors.tmp, so that manifests naming them reach the size and hash checks and the renames.
// Invariants: no exception, crash or hang; a refusal is one non-empty line.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "attnviz/io/checkpoint.hpp"

namespace {

namespace fs = std::filesystem;

void put(const fs::path& p, std::string_view bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path dir =
      fs::temp_directory_path() / ("attnviz_fuzz_checkpoint_" + std::to_string(::getpid()));
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  put(dir / "config.json", "{\"vocab_size\": 8}\n");
  put(dir / "model.safetensors", "0123456789abcdef");
  put(dir / "model.safetensors.tmp", "fedcba9876543210");
  put(dir / "checkpoint.json", input.substr(0, nul));
  if (nul != std::string_view::npos) put(dir / "checkpoint.pending.json", input.substr(nul + 1));
  const attnviz::Status st = attnviz::check_checkpoint_folder(dir.string());
  if (!st.is_ok() && (st.error.empty() || st.error.find('\n') != std::string::npos)) std::abort();
  return 0;
}
