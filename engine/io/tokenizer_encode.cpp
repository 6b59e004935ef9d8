// Encoding and decoding with a tokenizer.json (see tokenizer_json.hpp): the order of Hugging Face's
// Tokenizer::encode, then its BPE model on each pre-token.
#include <cstdio>

#include "attnviz/text.hpp"
#include "io/tokenizer_json.hpp"

namespace attnviz::hf {
namespace {

// Words up to this many bytes are remembered (most words repeat); the memory is dropped when it holds this
// many words.
constexpr std::size_t kCachedWordBytes = 64;
constexpr std::size_t kCachedWords = std::size_t{1} << 16;

// tokenizers' BPE::merge_word: one symbol per character (per byte for byte-level models), "<0xXX>" tokens for
// a character outside the vocabulary when byte_fallback is on, else the unknown token (runs of them fused
// when fuse_unk), else nothing; then the merges.
void tokenize_word(const Tokenizer& t, std::string_view w, std::vector<int>& ids) {
  if (t.ignore_merges) {
    if (const int id = t.id_of.find(w); id >= 0) {
      ids.push_back(id);
      return;
    }
  }
  std::vector<int> syms;
  syms.reserve(w.size());
  bool unk_pending = false;
  for (std::size_t i = 0; i < w.size();) {
    std::size_t n = 1;
    int id = -1;
    if (t.byte_level) {
      id = t.byte_token[static_cast<unsigned char>(w[i])];
    } else {
      while (i + n < w.size() && (static_cast<unsigned char>(w[i + n]) & 0xC0) == 0x80) ++n;
      id = t.id_of.find(w.substr(i, n));
    }
    const std::string_view ch = w.substr(i, n);
    i += n;
    if (id >= 0) {
      if (unk_pending) syms.push_back(t.unk), unk_pending = false;
      syms.push_back(id);
      continue;
    }
    if (t.byte_fallback) {
      bool all = true;
      for (char c : ch) all = all && t.fallback_token[static_cast<unsigned char>(c)] >= 0;
      if (all) {  // (tokenizers leaves a pending unknown token after these bytes)
        for (char c : ch) syms.push_back(t.fallback_token[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (t.unk >= 0) {
      if (unk_pending && !t.fuse_unk) syms.push_back(t.unk);
      unk_pending = true;
    }
  }
  if (unk_pending) syms.push_back(t.unk);
  merge_symbols(t.merges, syms);
  ids.insert(ids.end(), syms.begin(), syms.end());
}

void tokenize_cached(const Tokenizer& t, std::string_view w, std::vector<int>& ids) {
  if (w.size() > kCachedWordBytes) return tokenize_word(t, w, ids);
  const std::string key(w);
  {
    std::lock_guard<std::mutex> lock(t.cache_mutex);
    if (const auto it = t.cache.find(key); it != t.cache.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t start = ids.size();
  tokenize_word(t, w, ids);
  std::lock_guard<std::mutex> lock(t.cache_mutex);
  if (t.cache.size() >= kCachedWords) t.cache.clear();
  t.cache.emplace(key, std::vector<int>(ids.begin() + static_cast<std::ptrdiff_t>(start), ids.end()));
}

}  // namespace

Status encode_hf(const Tokenizer& t, std::string_view utf8, bool add_special, std::vector<int>& ids) {
  ids.clear();
  if (Status st = check_utf8(utf8); !st.is_ok()) return st;
  const auto failed = [&](const Status& st) {  // a bound of the file's steps: the message names the file
    ids.clear();
    return Status::fail(t.name + ": " + st.error);
  };
  if (add_special) ids = t.prefix;
  std::vector<Segment> raw, normalized;
  std::vector<Piece> pieces;
  if (Status st = split_added(t.raw_added, utf8, raw); !st.is_ok()) return failed(st);
  // The normalized text, every segment together, is capped by the length of the whole input, and so is
  // every regex step's work together.
  const std::size_t cap = kNormalizedGrowth * utf8.size() + kNormalizedSlack;
  const std::string cap_is = "the cap for a text of " + std::to_string(utf8.size()) + " bytes (" +
                             std::to_string(kNormalizedGrowth) + " a byte, plus " +
                             std::to_string(kNormalizedSlack) + ")";
  std::size_t normalized_bytes = 0;
  RegexBudget budget(utf8.size());
  for (const Segment& r : raw) {
    if (r.id >= 0) {
      ids.push_back(r.id);
      continue;
    }
    if (r.end == r.begin) continue;
    std::string text(utf8.substr(r.begin, r.end - r.begin));
    // (a later segment gets what the earlier ones left of the cap, and the message says so)
    const std::size_t left = cap - normalized_bytes;
    if (Status st = normalize(t.normalizers, text, left,
                              left == cap ? cap_is : "what is left of " + cap_is + ", " + std::to_string(cap),
                              budget);
        !st.is_ok())
      return failed(st);
    normalized_bytes += text.size();
    if (Status st = split_added(t.normalized_added, text, normalized); !st.is_ok()) return failed(st);
    for (const Segment& n : normalized) {
      if (n.id >= 0) {
        ids.push_back(n.id);
        continue;
      }
      if (n.end == n.begin) continue;
      pieces.assign(1, Piece{text.substr(n.begin, n.end - n.begin), r.begin == 0 && n.begin == 0});
      if (Status st = pre_tokenize(t.pre_tokenizers, pieces, budget); !st.is_ok()) return failed(st);
      for (const Piece& p : pieces) tokenize_cached(t, p.text, ids);
    }
  }
  if (add_special) ids.insert(ids.end(), t.suffix.begin(), t.suffix.end());
  return Status::ok();
}

std::string decode_hf(const Tokenizer& t, const std::vector<int>& ids) {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int id : ids)
    if (id >= 0 && static_cast<std::size_t>(id) < t.token.size())
      tokens.push_back(t.token[static_cast<std::size_t>(id)]);
  decode_tokens(t.decoders, tokens, false);
  std::string out;
  for (const std::string& s : tokens) out += s;
  return out;
}

}  // namespace attnviz::hf
