// A validated, read-only view of a .safetensors file: the header parsed and checked against the reference
// parser's rules, every tensor's bytes located in the data section. Natively the file is memory-mapped (never
// copied); the browser page hands over the bytes it read instead.
//
// Layout: u64 little-endian N, N bytes of JSON header, then the data section. The header maps each tensor
// name to {dtype, shape, data_offsets: [begin, end)} (offsets relative to the data section) and may hold a
// "__metadata__" object of strings. Only F32, F16 and BF16 tensors are accepted. The data section is not
// aligned in general (gpt2's starts at byte 14,291): read elements with load_element / widen, never through a
// cast pointer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/status.hpp"

namespace attnviz {

struct SafeTensor {
  std::string name;
  Dtype dtype = Dtype::f32;
  std::vector<std::uint64_t> shape;
  std::size_t numel = 0;
  std::size_t begin = 0, end = 0;       // data_offsets, relative to the data section
  const unsigned char* data = nullptr;  // the first byte, inside the file's storage (any alignment)

  std::size_t bytes() const { return end - begin; }
  int rank() const { return static_cast<int>(shape.size()); }
};

// "[768, 2304]"; past 8 dimensions "[1, 1, 1, 1, 1, 1, 1, 1, ... (2000000 dims)]"
std::string shape_string(const std::vector<std::uint64_t>& shape);
// nlohmann's parse error without its "[json.exception.parse_error.101] " prefix.
std::string json_error_text(const std::exception& e);

// The most shards a sharded model's model.safetensors.index.json may name: the loader maps them all at once,
// and the hub's downloader (CLI and page) refuses more before anything is downloaded. The largest models on
// the hub have a few hundred.
inline constexpr std::size_t kMaxWeightShards = 1000;

class SafetensorsFile {
 public:
  // Most files mapped at once in one process: every shard of the largest model read, and room beside it.
  static constexpr std::size_t kMaxMappedFiles = kMaxWeightShards + 24;
  // Largest header the reference parser accepts.
  static constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
  // Most entries (tensors and __metadata__) a header may hold. Files hold a few thousand tensors at most
  // (gpt2-xl: 580; a large shard of a sharded model: about 1,000; an unsharded mixture of experts: several
  // thousand). The cap keeps the largest accepted header's parse, checks and index near a tenth of a second;
  // a 100,000-entry header (minutes, when the parse was quadratic) is refused before it is parsed.
  static constexpr std::size_t kMaxEntries = 50'000;
  // Most members and array elements the header may hold in all: 50,000 tensors of rank 6 fit (each is 6
  // values plus its rank), a 100 MB header of one-digit numbers (50 million values, 15 s to parse) does not.
  static constexpr std::size_t kMaxValues = 600'000;

  // Maps `path` (a regular file) read-only and validates it. Messages start with `path`.
  static Status open(const std::string& path, SafetensorsFile& out);
  // Validates bytes already in memory (the page's uploaded file); `name` starts the messages.
  static Status from_memory(std::shared_ptr<const std::vector<unsigned char>> bytes, std::string name,
                            SafetensorsFile& out);

  const std::string& name() const { return name_; }
  const std::vector<SafeTensor>& tensors() const { return tensors_; }  // in data order
  const SafeTensor* find(std::string_view tensor_name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::size_t file_size() const { return size_; }
  std::size_t data_start() const { return data_start_; }  // 8 + header length
  bool mapped() const;

  // Whether every byte read from the file so far was the file's. A mapped file that another program
  // truncates reads as zeros past its new end (a SIGBUS guard maps zero pages there instead of letting the
  // process die): this then fails, "PATH: the file shrank to N of its M bytes while it was being read", as it
  // does when the file is now shorter than when it was opened. Loaders call it after each tensor and before
  // handing out what they read. Always OK for bytes in memory.
  Status intact() const;

  // Gives the pages that lie wholly inside `t`'s bytes back to the kernel (madvise MADV_DONTNEED on a
  // read-only private mapping: they are read from the file again if touched). Call once a tensor has been
  // packed, so the mapped file does not stay resident beside the packed copy. A no-op for bytes in memory.
  void release(const SafeTensor& t) const;

 private:
  struct Storage;
  Status parse();

  std::shared_ptr<const Storage> storage_;
  const unsigned char* bytes_ = nullptr;
  std::size_t size_ = 0;
  std::size_t data_start_ = 0;
  std::string name_;
  std::vector<SafeTensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

}  // namespace attnviz
