// Hugging Face's tokenizer.json for BPE models, inside the io library (Bpe is the public face: see bpe.hpp).
//
// read_tokenizer_json() turns the file into the plain description below; encode_hf() and decode_hf() run it
// as Hugging Face's `tokenizers` does: added tokens split out of the raw text, then the normalizers, the
// added tokens matched in the normalized text, the pre-tokenizers, the BPE model on each piece, and the
// post-processor's special tokens around the result. Byte-level models (a ByteLevel pre-tokenizer) run on raw
// bytes rather than on GPT-2's byte alphabet: the vocabulary is read back into bytes once, at load.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "attnviz/status.hpp"

namespace attnviz::hf {

// The caps on what a file may claim (each refused with a message naming it).
inline constexpr std::size_t kMaxMerges = std::size_t{1} << 21;
inline constexpr std::size_t kMaxAddedTokens = std::size_t{1} << 17;
inline constexpr std::size_t kMaxTokenBytes = 4096;
inline constexpr std::size_t kMaxPatternBytes = 4096;
inline constexpr int kMaxJsonDepth = 64;
inline constexpr std::size_t kMaxOtherValues = std::size_t{1} << 20;  // JSON values outside vocab and merges
inline constexpr int kMaxSteps = 64;                                  // normalizers, pre-tokenizers, decoders

// The bounds on the work a file can ask for, as functions of the text's length n (bytes). Each bound that is
// hit fails that text's encode (or the file's read, for its added tokens) with one line naming the step; the
// tokenizer stays usable for other texts.
//  - Normalizing: the normalized text (every raw segment of one encode together) is at most
//    kNormalizedGrowth n + kNormalizedSlack bytes, checked as each step writes, so that a sequence of growing
//    steps stops at the cap instead of multiplying the text; a normalized added token is at most
//    kMaxNormalizedToken bytes, and all of them together kMaxNormalizedAdded.
//  - Every regex search of one encode together (the normalizers', the pre-tokenizers') costs at most
//    kRegexCostPerByte n + kRegexCostBase (a RegexBudget; see find_matches for what a unit is); the added
//    tokens' normalizing when the file is read, the same over their contents' bytes.
//  - Matching the added tokens over n bytes takes at most kAddedStepsPerByte n + kAddedStepsBase trie steps.
//  - Decoding: a decoded text is at most kMaxDecoderGrowth times its tokens' bytes (checked when the file is
//    read, from its Replace decoders' patterns and replacements, which are literal strings).
inline constexpr std::size_t kNormalizedGrowth = 16, kNormalizedSlack = 1024;
inline constexpr std::size_t kMaxNormalizedToken = 4 * kMaxTokenBytes;
inline constexpr std::size_t kMaxNormalizedAdded = std::size_t{16} << 20;
inline constexpr std::uint64_t kRegexCostPerByte = 4096, kRegexCostBase = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kAddedStepsPerByte = 64, kAddedStepsBase = std::uint64_t{1} << 16;
inline constexpr std::size_t kMaxDecoderGrowth = 16;
inline constexpr std::size_t kMaxDecoderContent = 4;  // a Replace decoder's replacement: a character's worth

// A Split or Replace pattern: a literal string, or a regex (Oniguruma's syntax, compiled with PCRE2 in UTF
// and Unicode-property mode, \s and \S read as Unicode's White_Space as Oniguruma does).
struct Pattern {
  std::string literal;
  std::shared_ptr<pcre2_code> re;             // null for a literal
  std::string where;                          // the pattern's place in the file, for messages
  const std::uint8_t* first_bytes = nullptr;  // PCRE2's 256-bit table of the bytes a match can start with
};
// One piece of a text: [begin, end) and whether a pattern matched it.
struct Span {
  std::size_t begin, end;
  bool match;
};
// The regex work one text may cost, shared by every regex step that runs on it (and on what the steps make
// of it): kRegexCostPerByte for each byte allowed, plus kRegexCostBase.
struct RegexBudget {
  explicit RegexBudget(std::size_t text_bytes = 0) : left(kRegexCostBase) { allow(text_bytes); }
  void allow(std::size_t more_bytes) {
    bytes += more_bytes;
    left += kRegexCostPerByte * more_bytes;
  }
  std::uint64_t cap() const { return kRegexCostPerByte * bytes + kRegexCostBase; }
  std::size_t bytes = 0;
  std::uint64_t left;
};
// Hugging Face's find_matches: matches and the text between them, in order, covering all of `s`. A regex
// search charges `budget`; when it runs out the search fails naming the pattern.
Status find_matches(const Pattern& p, std::string_view s, std::vector<Span>& out, RegexBudget& budget);
// Compiles an Oniguruma-syntax regex with PCRE2. Refused: what could cut a UTF-8 character apart (\C), and
// what would make a search's result depend on where it started other than as Oniguruma's does (\G, PCRE2's
// backtracking verbs "(*...)", which Oniguruma does not have).
Status compile_regex(std::string_view pattern, const std::string& where, Pattern& out);

enum class NormKind { NFC, NFD, NFKC, NFKD, Prepend, Replace };
struct Normalizer {
  NormKind kind = NormKind::NFC;
  std::string where;    // "normalizer.normalizers[2] (Replace)", for messages
  Pattern pattern;      // Replace
  std::string content;  // Replace: the replacement; Prepend: the prefix
};

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
enum class PreKind { Split, ByteLevel, Metaspace };
enum class PrependScheme { Always, First, Never };
struct PreTokenizer {
  PreKind kind = PreKind::Split;
  Pattern pattern;  // Split (Digits and ByteLevel's regex become Splits)
  Behavior behavior = Behavior::Isolated;
  bool invert = false;
  bool add_prefix_space = false;  // ByteLevel
  std::string replacement;        // Metaspace
  PrependScheme scheme = PrependScheme::Always;
  bool split = true;
};
// A pre-token; `first` when it starts where the text starts (Metaspace's prepend_scheme "first").
struct Piece {
  std::string text;
  bool first;
};

enum class DecKind { ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace };
struct Decoder {
  DecKind kind = DecKind::Fuse;
  Pattern pattern;      // Replace
  std::string content;  // Replace: the replacement; Strip: the character; Metaspace: the replacement
  int start = 0, stop = 0;
  bool strip_first = true;  // Metaspace: the first token loses its replacement characters
};

struct AddedToken {
  int id;
  std::string content;  // as matched: normalized for normalized tokens
  bool single_word, lstrip, rstrip, normalized, special;
};
// The added tokens of one kind (normalized or not), as a byte trie for leftmost-longest matching.
struct AddedMatcher {
  struct Node {
    std::vector<std::pair<unsigned char, int>> next;
    int token = -1;  // index into `tokens`
  };
  std::vector<AddedToken> tokens;
  std::vector<Node> nodes;  // each node's `next` sorted by byte
  void build();
  bool empty() const { return tokens.empty(); }
};
// An added-token split: id >= 0 for an added token, -1 for the text between.
struct Segment {
  std::size_t begin, end;
  int id;
};
// Leftmost-longest matching, at most kAddedStepsPerByte s.size() + kAddedStepsBase trie steps.
Status split_added(const AddedMatcher& m, std::string_view s, std::vector<Segment>& out);

struct MergeRule {
  int rank, result;
};
// pair_key(left, right) -> the merge: open addressing in one array (a file has up to 500,000 merges, and
// encoding looks one up for every adjacent pair).
class MergeMap {
 public:
  const MergeRule* find(std::uint64_t key) const;
  // Inserts unless the key is there; returns the entry and whether it was inserted.
  std::pair<MergeRule*, bool> emplace(std::uint64_t key, MergeRule rule);
  void reserve(std::size_t n);
  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  std::size_t slot(std::uint64_t key) const;
  std::vector<std::uint64_t> keys_;
  std::vector<MergeRule> rules_;
  std::size_t size_ = 0;
};
inline std::uint64_t pair_key(int left, int right) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32 |
         static_cast<std::uint32_t>(right);
}
// BPE on one word: merges the adjacent pair of lowest rank (leftmost first) until none applies, as
// Hugging Face's Word::merge_all does. `ids` in: the word's symbols; out: its tokens.
void merge_symbols(const MergeMap& merges, std::vector<int>& ids);

// token -> id: open addressing over one arena of the tokens' bytes (looked up by string_view, no allocation).
class IdMap {
 public:
  int find(std::string_view key) const;        // -1 where absent
  bool emplace(std::string_view key, int id);  // false when the key is there already
  void reserve(std::size_t n);
  std::size_t size() const { return ids_.size(); }

 private:
  std::size_t slot(std::string_view key, std::size_t hash) const;
  std::string_view key_of(std::size_t entry) const {
    return std::string_view(chars_).substr(begin_[entry], len_[entry]);
  }
  std::string chars_;
  std::vector<std::uint32_t> begin_, len_;
  std::vector<int> ids_;
  std::vector<std::size_t> hash_;
  std::vector<std::uint32_t> slots_;  // entry + 1, 0 where empty
};

struct Tokenizer {
  std::string name;  // the file, quoted, as messages name it
  // The model.
  bool byte_level = false;  // symbols are bytes; tokens are kept as raw bytes
  bool ignore_merges = false, byte_fallback = false, fuse_unk = false;
  int unk = -1;
  IdMap id_of;                     // model token (raw bytes when byte-level) -> id
  std::vector<std::string> token;  // id -> the token as the decoders read it ("" where none)
  int byte_token[256];             // byte-level: byte -> its token, or -1
  int fallback_token[256];         // byte_fallback: byte -> "<0xXX>", or -1
  MergeMap merges;

  std::vector<Normalizer> normalizers;
  std::vector<PreTokenizer> pre_tokenizers;
  std::vector<Decoder> decoders;
  AddedMatcher raw_added, normalized_added;
  std::vector<bool> special;  // id -> an added token marked special
  std::vector<int> prefix, suffix;

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int>> cache;  // word -> ids
};

// GPT-2's byte alphabet -> raw bytes; false for a character outside it (bpe.cpp).
bool from_byte_alphabet(std::string_view s, std::string& raw);

// Parses and validates `json` (errors begin with `name`).
Status read_tokenizer_json(std::string_view json, const std::string& name, Tokenizer& out);

// Runs the normalizers on `s`; a step that would make it longer than `cap` bytes fails, naming the step and
// `cap_is` (what the cap is, for the message). Without a cap: kNormalizedGrowth s.size() + kNormalizedSlack.
Status normalize(const std::vector<Normalizer>& steps, std::string& s, std::size_t cap,
                 const std::string& cap_is, RegexBudget& budget);
Status normalize(const std::vector<Normalizer>& steps, std::string& s);
Status pre_tokenize(const std::vector<PreTokenizer>& steps, std::vector<Piece>& pieces, RegexBudget& budget);
Status pre_tokenize(const std::vector<PreTokenizer>& steps, std::vector<Piece>& pieces);
// Runs the decoders on token strings in place. `labels`: one token alone, shown whole (no Strip, and
// Metaspace keeps a first token's space).
void decode_tokens(const std::vector<Decoder>& steps, std::vector<std::string>& tokens, bool labels);

Status encode_hf(const Tokenizer& t, std::string_view utf8, bool add_special, std::vector<int>& ids);
std::string decode_hf(const Tokenizer& t, const std::vector<int>& ids);

}  // namespace attnviz::hf
