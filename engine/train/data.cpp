// The book's data pipeline: reading and splitting the text, GPTDatasetV1's windows, and DataLoader's batches
// with the draws PyTorch 1.13 makes from the global generator (docs/torch-rng.md, "Training").
#include <cstdint>
#include <string>

#include "attnviz/text.hpp"
#include "attnviz/train.hpp"

namespace attnviz {

Status read_text_universal(std::string_view bytes, std::string& out) {
  // Python's strict decoder and check_utf8 refuse the same bytes: overlong forms, surrogates, past U+10FFFF
  if (Status st = check_utf8(bytes); !st.is_ok()) return st;
  std::string text;
  text.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != '\r') {
      text += bytes[i];
    } else {
      text += '\n';  // "\r\n" and a lone "\r" (an ASCII byte, never inside a longer sequence)
      if (i + 1 < bytes.size() && bytes[i + 1] == '\n') ++i;
    }
  }
  out = std::move(text);
  return Status::ok();
}

void split_text(std::string_view utf8, double ratio, std::string& first, std::string& second) {
  const auto continuation = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; };
  std::size_t chars = 0;
  for (char c : utf8) chars += continuation(c) ? 0 : 1;
  const std::size_t split = static_cast<std::size_t>(ratio * static_cast<double>(chars));  // int(ratio * len)
  std::size_t at = 0, seen = 0;
  for (; at < utf8.size(); ++at) {
    if (continuation(utf8[at])) continue;
    if (seen == split) break;
    ++seen;
  }
  first = std::string(utf8.substr(0, at));
  second = std::string(utf8.substr(at));
}

Windows make_windows(const std::vector<int>& ids, int max_length, int stride) {
  Windows w;
  w.max_length = max_length;
  w.ids = &ids;
  // for i in range(0, len(token_ids) - max_length, stride)
  const std::int64_t end = static_cast<std::int64_t>(ids.size()) - max_length;
  if (max_length >= 1 && stride >= 1)
    for (std::int64_t i = 0; i < end; i += stride) w.starts.push_back(static_cast<int>(i));
  return w;
}

std::vector<int> torch_randperm(TorchGenerator& g, int n) {
  std::vector<int> r(static_cast<std::size_t>(n > 0 ? n : 0));
  for (int i = 0; i < n; ++i) r[static_cast<std::size_t>(i)] = i;
  for (int i = 0; i + 1 < n; ++i) {
    const int z = static_cast<int>(g.random() % static_cast<std::uint32_t>(n - i));
    std::swap(r[static_cast<std::size_t>(i)], r[static_cast<std::size_t>(i + z)]);
  }
  return r;
}

Loader::Loader(int windows, int batch_size, bool shuffle, bool drop_last)
    : windows_(windows),
      batch_size_(batch_size < 1 ? 1 : batch_size),
      shuffle_(shuffle),
      drop_last_(drop_last) {}

int Loader::batches() const {
  return drop_last_ ? windows_ / batch_size_ : (windows_ + batch_size_ - 1) / batch_size_;
}

void Loader::begin(TorchGenerator& g) {
  // _BaseDataLoaderIter.__init__: the base seed, one int64 random_() (two 32-bit draws), for every loader
  (void)g.random64();
  if (!shuffle_) return resume(0);
  // RandomSampler.__iter__ (at the first batch): a seed from the global generator, modulo 2^63, seeding a
  // generator of its own for torch.randperm
  resume(g.random64() % (std::uint64_t{1} << 63));
}

void Loader::resume(std::uint64_t sampler_seed) {
  sampler_seed_ = shuffle_ ? sampler_seed : 0;
  order_.clear();
  if (!shuffle_) {
    for (int i = 0; i < windows_; ++i) order_.push_back(i);
    return;
  }
  TorchGenerator own(sampler_seed);
  order_ = torch_randperm(own, windows_);
}

std::vector<int> Loader::batch(int i) const {
  const std::size_t from = static_cast<std::size_t>(i) * static_cast<std::size_t>(batch_size_);
  const std::size_t to = std::min(order_.size(), from + static_cast<std::size_t>(batch_size_));
  return std::vector<int>(order_.begin() + static_cast<std::ptrdiff_t>(from),
                          order_.begin() + static_cast<std::ptrdiff_t>(to));
}

void gather_batch(const Windows& w, const std::vector<int>& indices, std::vector<int>& inputs,
                  std::vector<int>& targets) {
  inputs.clear(), targets.clear();
  for (int index : indices) {
    const auto start = w.ids->begin() + w.starts[static_cast<std::size_t>(index)];
    inputs.insert(inputs.end(), start, start + w.max_length);
    targets.insert(targets.end(), start + 1, start + 1 + w.max_length);
  }
}

}  // namespace attnviz
