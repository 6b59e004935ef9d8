#include "attnviz/io/bpe.hpp"
#include "attnviz/io/files.hpp"

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>
#include <utility>

#include "attnviz/engine.hpp"
#include "attnviz/text.hpp"
#include "io/tokenizer_json.hpp"

namespace attnviz {
namespace {

// GPT-2's pre-tokenizer (openai/gpt-2 encoder.py), for PCRE2_UTF | PCRE2_UCP:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with \s spelled out as Unicode's White_Space property, which is what \s means in Python's `regex` module
// that GPT-2 uses. (PCRE2's own \s also matches U+180E, which Unicode no longer counts as a space.)
std::string gpt2_pattern() {
  const std::string ws =
      R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
  return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^)" + ws + R"(\p{L}\p{N}]+|[)" + ws + "]+(?![^" +
         ws + "])|[" + ws + "]+";
}

// Pieces up to this many bytes are remembered per vocabulary (most words repeat); the memory is dropped
// when it holds this many pieces.
constexpr std::size_t kCachedPieceBytes = 64;
constexpr std::size_t kCachedPieces = std::size_t{1} << 16;

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

// Compiled once for the whole program; matching needs only per-call match data, so it is thread-safe.
const pcre2_code* pretokenizer() {
  static const std::unique_ptr<pcre2_code, CodeDeleter> code = [] {
    const std::string pattern = gpt2_pattern();
    int error = 0;
    PCRE2_SIZE offset = 0;
    return std::unique_ptr<pcre2_code, CodeDeleter>(
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                      &error, &offset, nullptr));
  }();
  return code.get();
}

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes for U+0100 on,
// in byte order. Vocabulary files write every token in this alphabet.
struct Alphabet {
  char32_t of_byte[256];
  int byte_of[0x144];  // code point -> byte, -1 where none

  Alphabet() {
    for (int& b : byte_of) b = -1;
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      of_byte[b] = printable ? static_cast<char32_t>(b) : next++;
      byte_of[of_byte[b]] = b;
    }
  }
};
const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

// A token as written in a vocabulary file -> its raw bytes; false for a character outside the alphabet.
bool from_alphabet(std::string_view s, std::string& raw) {
  raw.clear();
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = decode_utf8(s, i, cp);
    if (n == 0 || cp >= 0x144 || alphabet().byte_of[cp] < 0) return false;
    raw += static_cast<char>(alphabet().byte_of[cp]);
    i += n;
  }
  return true;
}

std::string to_alphabet(std::string_view raw) {
  std::string s;
  for (char c : raw) {
    const char32_t cp = alphabet().of_byte[static_cast<unsigned char>(c)];
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return s;
}

// Appends `s` as a token label, with nothing invisible: spaces, newlines and tabs as symbols, other control
// characters as \xNN, broken UTF-8 as <0xNN>.
void append_label(std::string& out, std::string_view s) {
  char buf[8];
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = decode_utf8(s, i, cp);
    if (n == 0) {
      std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned>(static_cast<unsigned char>(s[i])));
      out += buf;
      ++i;
      continue;
    }
    if (cp == ' ') {
      out += "\u00B7";
    } else if (cp == '\n') {
      out += "\u21B5";
    } else if (cp == '\t') {
      out += "\u2192";
    } else if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
      std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
}

bool holds_vocab(const std::filesystem::path& dir, const char* a, const char* b) {
  std::error_code ec;
  return std::filesystem::is_regular_file(dir / a, ec) && std::filesystem::is_regular_file(dir / b, ec);
}

}  // namespace

bool hf::from_byte_alphabet(std::string_view s, std::string& raw) {
  return from_alphabet(s, raw);
}

struct Bpe::Impl {
  std::vector<std::string> bytes;  // id -> raw bytes ("" where no token has the id)
  int byte_id[256] = {};           // byte -> its single-byte token
  hf::MergeMap merges;             // pair_key(left, right) -> rank and result
  // A tokenizer.json's pipeline; null for GPT-2's vocab.json + merges.txt.
  std::shared_ptr<const hf::Tokenizer> hf;

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int>> cache;  // piece bytes -> ids

  void encode_piece(std::string_view piece, std::vector<int>& ids) const;
  void merge_piece(std::string_view piece, std::vector<int>& ids) const;
};

// GPT-2's bpe() on one pre-token: repeatedly merge the adjacent pair of lowest rank, all of its occurrences
// left to right. merge_symbols does the same merges through a priority queue keyed by (rank, position), so a
// piece of n bytes costs O(n log n) rather than O(n^2).
void Bpe::Impl::merge_piece(std::string_view piece, std::vector<int>& ids) const {
  std::vector<int> id(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) id[i] = byte_id[static_cast<unsigned char>(piece[i])];
  hf::merge_symbols(merges, id);
  ids.insert(ids.end(), id.begin(), id.end());
}

void Bpe::Impl::encode_piece(std::string_view piece, std::vector<int>& ids) const {
  if (piece.size() > kCachedPieceBytes) return merge_piece(piece, ids);
  const std::string key(piece);
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t start = ids.size();
  merge_piece(piece, ids);
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache.size() >= kCachedPieces) cache.clear();
  cache.emplace(key, std::vector<int>(ids.begin() + static_cast<std::ptrdiff_t>(start), ids.end()));
}

Status Bpe::encode(std::string_view utf8, std::vector<int>& ids, bool add_special_tokens) const {
  ids.clear();
  if (!impl_) return Status::fail("no vocabulary is loaded");
  if (impl_->hf) return hf::encode_hf(*impl_->hf, utf8, add_special_tokens, ids);
  if (Status st = check_utf8(utf8); !st.is_ok()) return st;
  const pcre2_code* re = pretokenizer();
  if (!re) return Status::fail("GPT-2's pre-tokenizer pattern does not compile (PCRE2 without Unicode?)");
  const std::unique_ptr<pcre2_match_data, MatchDeleter> match(
      pcre2_match_data_create_from_pattern(re, nullptr));
  if (!match) return Status::fail("out of memory for the pre-tokenizer");
  const auto subject = reinterpret_cast<PCRE2_SPTR>(utf8.data());
  std::uint32_t options = 0;  // PCRE2 checks the UTF-8 on the first call only (each check reads it all)
  for (std::size_t pos = 0; pos < utf8.size();) {
    const int rc = pcre2_match(re, subject, utf8.size(), pos, options, match.get(), nullptr);
    options = PCRE2_NO_UTF_CHECK;
    if (rc == PCRE2_ERROR_NOMATCH) break;  // like Python's findall: unmatched text has no tokens
    if (rc < 0) {
      PCRE2_UCHAR message[160];
      pcre2_get_error_message(rc, message, sizeof message);
      ids.clear();
      return Status::fail(std::string("the pre-tokenizer failed: ") + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    if (span[1] <= span[0]) {  // never happens with this pattern (no alternative is empty), but keep moving
      pos = span[0] + 1;
      while (pos < utf8.size() && (static_cast<unsigned char>(utf8[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    impl_->encode_piece(utf8.substr(span[0], span[1] - span[0]), ids);
    pos = span[1];
  }
  return Status::ok();
}

std::string Bpe::decode(const std::vector<int>& ids) const {
  if (impl_ && impl_->hf) return hf::decode_hf(*impl_->hf, ids);
  std::string out;
  for (int id : ids) out += bytes(id);
  return out;
}

const std::string& Bpe::bytes(int id) const {
  static const std::string none;
  if (!impl_ || id < 0 || id >= size()) return none;
  return impl_->bytes[static_cast<std::size_t>(id)];
}

std::string Bpe::label(int id) const {
  return token_label(bytes(id));
}

int Bpe::size() const {
  return impl_ ? static_cast<int>(impl_->bytes.size()) : 0;
}

int Bpe::bos() const {
  return impl_ && impl_->hf && !impl_->hf->prefix.empty() ? impl_->hf->prefix.front() : -1;
}

int Bpe::eos() const {
  return impl_ && impl_->hf && !impl_->hf->suffix.empty() ? impl_->hf->suffix.back() : -1;
}

bool Bpe::is_special(int id) const {
  return impl_ && impl_->hf && id >= 0 && id < size() && impl_->hf->special[static_cast<std::size_t>(id)];
}

std::string token_label(std::string_view bytes) {
  std::string out;
  append_label(out, bytes);
  return out;
}

namespace {

// One merge as read from the file: its two parts in the vocabulary's alphabet, and where it was.
struct MergeText {
  std::string left, right;
  std::string where;  // "merges line 7", "merges entry 7"
};

Status split_merge(std::string_view line, const std::string& where, MergeText& m) {
  const std::size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
      line.find(' ', space + 1) != std::string_view::npos) {
    return Status::fail(where + ": expected two tokens separated by one space, got " + quote(line));
  }
  m.left = std::string(line.substr(0, space));
  m.right = std::string(line.substr(space + 1));
  m.where = where;
  return Status::ok();
}

// merges.txt / vocab.bpe lines, or a JSON array of "a b" strings or ["a", "b"] pairs.
Status read_merges(std::string_view text, const std::string& name, std::vector<MergeText>& merges) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '[') {
    const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded() || !j.is_array()) return Status::fail(name + " is not a valid JSON array of merges");
    for (std::size_t i = 0; i < j.size(); ++i) {
      const std::string where = name + " entry " + std::to_string(i + 1);
      MergeText m;
      if (j[i].is_string()) {
        if (Status st = split_merge(j[i].get_ref<const std::string&>(), where, m); !st.is_ok()) return st;
      } else if (j[i].is_array() && j[i].size() == 2 && j[i][0].is_string() && j[i][1].is_string()) {
        m = {j[i][0].get<std::string>(), j[i][1].get<std::string>(), where};
      } else {
        return Status::fail(where + ": expected \"left right\" or [\"left\", \"right\"]");
      }
      merges.push_back(std::move(m));
    }
    return Status::ok();
  }
  std::size_t line_no = 0, blank = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_no == 1 && line.substr(0, 8) == "#version") continue;
    if (line.empty()) {
      if (!blank) blank = line_no;
      continue;
    }
    if (blank) return Status::fail(name + " line " + std::to_string(blank) + " is empty");
    MergeText m;
    if (Status st = split_merge(line, name + " line " + std::to_string(line_no), m); !st.is_ok()) return st;
    merges.push_back(std::move(m));
  }
  return Status::ok();
}

}  // namespace

Status Bpe::load(std::string_view vocab_json, std::string_view merges_text, const std::string& vocab_file,
                 const std::string& merges_file, Bpe& out) {
  // The files' paths begin its messages: escaped and capped, so that a message stays one line.
  const std::string vocab_name = quote(vocab_file, kQuoteCap, '\0');
  const std::string merges_name = quote(merges_file, kQuoteCap, '\0');
  for (const auto& [name, size] :
       {std::pair{&vocab_name, vocab_json.size()}, {&merges_name, merges_text.size()}})
    if (size > kMaxVocabFileBytes) {
      const BytesApart b = format_bytes_apart(size, kMaxVocabFileBytes);
      return Status::fail(*name + " is " + b.first + ", more than the " + b.second + " limit");
    }

  // The vocabulary: {token: id}.
  const nlohmann::json j = nlohmann::json::parse(vocab_json.begin(), vocab_json.end(), nullptr, false);
  if (j.is_discarded()) return Status::fail(vocab_name + " is not valid JSON");
  if (!j.is_object() || j.empty())
    return Status::fail(vocab_name + ": expected a JSON object of tokens and ids, {\"token\": id, ...}");
  auto impl = std::make_shared<Impl>();
  std::unordered_map<std::string, int> id_of;  // raw bytes -> id
  std::vector<const std::string*> key_of;      // id -> the token as written, for messages
  std::string raw;
  for (auto entry = j.begin(); entry != j.end(); ++entry) {
    const std::string& key = entry.key();
    const nlohmann::json& value = entry.value();
    if (!value.is_number_integer())
      return Status::fail(vocab_name + ": the id of " + quote(key) + " is not an integer");
    const std::int64_t id = value.get<std::int64_t>();
    if (id < 0 || id >= kMaxTokenId) {
      return Status::fail(vocab_name + ": the id " + std::to_string(id) + " of " + quote(key) +
                          " is outside [0, " + std::to_string(kMaxTokenId) + ")");
    }
    if (key.empty()) return Status::fail(vocab_name + ": a token is empty");
    if (!from_alphabet(key, raw))
      return Status::fail(vocab_name + ": the token " + quote(key) +
                          " has a character outside GPT-2's byte alphabet");
    const auto index = static_cast<std::size_t>(id);
    if (index >= key_of.size()) key_of.resize(index + 1, nullptr);
    if (key_of[index]) {
      return Status::fail(vocab_name + ": the id " + std::to_string(id) + " is given to both " +
                          quote(*key_of[index]) + " and " + quote(key));
    }
    key_of[index] = &key;
    id_of.emplace(raw, static_cast<int>(id));
  }
  impl->bytes.resize(key_of.size());
  for (const auto& [bytes, id] : id_of) impl->bytes[static_cast<std::size_t>(id)] = bytes;
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of.find(std::string(1, static_cast<char>(b)));
    if (it == id_of.end()) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0x%02X", static_cast<unsigned>(b));
      return Status::fail(vocab_name + ": the byte token " +
                          quote(to_alphabet(std::string(1, static_cast<char>(b)))) + " (byte " + buf +
                          ") is missing");
    }
    impl->byte_id[b] = it->second;
  }

  // The merges, rank = order.
  std::vector<MergeText> texts;
  if (Status st = read_merges(merges_text, merges_name, texts); !st.is_ok()) return st;
  std::vector<int> first_use(key_of.size(), -1);  // id -> the first merge that has it as a part
  std::string left, right;
  for (std::size_t rank = 0; rank < texts.size(); ++rank) {
    const MergeText& m = texts[rank];
    for (const std::string* part : {&m.left, &m.right}) {
      if (!from_alphabet(*part, part == &m.left ? left : right))
        return Status::fail(m.where + ": " + quote(*part) + " has a character outside GPT-2's byte alphabet");
      if (!id_of.count(part == &m.left ? left : right))
        return Status::fail(m.where + ": " + quote(*part) + " is not in the vocabulary");
    }
    const auto result = id_of.find(left + right);
    if (result == id_of.end())
      return Status::fail(m.where + ": the result " + quote(m.left + m.right) + " is not in the vocabulary");
    const int l = id_of[left], r = id_of[right];
    const auto [it, fresh] =
        impl->merges.emplace(hf::pair_key(l, r), hf::MergeRule{static_cast<int>(rank), result->second});
    if (!fresh) return Status::fail(m.where + " repeats " + texts[static_cast<std::size_t>(it->rank)].where);
    const int made = first_use[static_cast<std::size_t>(result->second)];
    if (made >= 0) {
      return Status::fail(m.where + " makes " + quote(m.left + m.right) + ", which the earlier " +
                          texts[static_cast<std::size_t>(made)].where +
                          " already uses as a part (a part must be made by an earlier merge)");
    }
    for (int part : {l, r}) {
      int& use = first_use[static_cast<std::size_t>(part)];
      if (use < 0) use = static_cast<int>(rank);
    }
  }
  out.impl_ = std::move(impl);
  return Status::ok();
}

Status Bpe::from_memory(std::string_view vocab_json, std::string_view merges_text, Bpe& out) {
  return load(vocab_json, merges_text, "vocab", "merges", out);
}

Status Bpe::from_tokenizer_json(std::string_view json, Bpe& out) {
  return load_tokenizer_json(json, "tokenizer.json", out);
}

Status Bpe::load_tokenizer_json(std::string_view json, const std::string& name, Bpe& out) {
  auto t = std::make_shared<hf::Tokenizer>();
  if (Status st = hf::read_tokenizer_json(json, quote(name, kQuoteCap, '\0'), *t); !st.is_ok()) return st;
  auto impl = std::make_shared<Impl>();
  impl->bytes.resize(t->token.size());
  std::vector<std::string> one(1);
  for (std::size_t id = 0; id < t->token.size(); ++id) {  // labels: each token decoded on its own
    if (t->token[id].empty()) continue;
    one.assign(1, t->token[id]);
    hf::decode_tokens(t->decoders, one, true);
    impl->bytes[id] = one.empty() ? std::string() : std::move(one[0]);
  }
  impl->hf = std::move(t);
  out.impl_ = std::move(impl);
  return Status::ok();
}

Status Bpe::load_files(const std::string& vocab_path, const std::string& merges_path, Bpe& out) {
  std::string vocab, merges;
  if (Status st = read_untrusted_file(vocab_path, kMaxVocabFileBytes, vocab); !st.is_ok()) return st;
  if (Status st = read_untrusted_file(merges_path, kMaxVocabFileBytes, merges); !st.is_ok()) return st;
  return load(vocab, merges, vocab_path, merges_path, out);
}

bool holds_vocabulary(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(std::filesystem::path(dir) / "tokenizer.json", ec) ||
         holds_vocab(dir, "vocab.json", "merges.txt") || holds_vocab(dir, "encoder.json", "vocab.bpe");
}

Status Bpe::load_dir(const std::string& dir, Bpe& out) {
  if (dir.empty())
    return Status::fail(
        "no vocabulary folder (see ATTNVIZ_VOCAB_DIR; scripts/install-deps installs GPT-2's)");
  const std::filesystem::path d(dir);
  std::error_code ec;
  if (std::filesystem::is_regular_file(d / "tokenizer.json", ec)) {
    const std::string path = (d / "tokenizer.json").string();
    std::string json;
    if (Status st = read_untrusted_file(path, kMaxVocabFileBytes, json); !st.is_ok()) return st;
    return load_tokenizer_json(json, path, out);
  }
  if (holds_vocab(d, "vocab.json", "merges.txt"))
    return load_files((d / "vocab.json").string(), (d / "merges.txt").string(), out);
  if (holds_vocab(d, "encoder.json", "vocab.bpe"))
    return load_files((d / "encoder.json").string(), (d / "vocab.bpe").string(), out);
  return Status::fail("no vocabulary in " + quote(dir) +
                      " (expected tokenizer.json, vocab.json + merges.txt, or encoder.json + vocab.bpe)");
}

std::string default_vocab_dir() {
  if (const char* env = std::getenv("ATTNVIZ_VOCAB_DIR"); env && *env) return env;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return "";
  for (const char* rel : {"../share/attnviz/gpt2", "share/attnviz/gpt2"}) {
    const std::filesystem::path dir = (exe.parent_path() / rel).lexically_normal();
    if (holds_vocabulary(dir.string())) return dir.string();
  }
  return "";
}

}  // namespace attnviz
