// BPE tokenizers, exact: text -> token ids -> bytes, and a display label for each token. Two sources:
// GPT-2's vocab.json + merges.txt (below), and Hugging Face's tokenizer.json (Llama 3, Qwen, SmolLM2, Gemma
// 3, Llama 2, TinyLlama, Pythia, GPT-2 itself: see docs/tokenizers.md for what is supported and refused).
//
// Encoding is GPT-2's: the text is split by GPT-2's pre-tokenizer regex (PCRE2 with Unicode properties), each
// piece's UTF-8 bytes become byte tokens, and the merges are applied lowest rank first. "<|endoftext|>" in
// the text is plain text (as npm gpt-3-encoder treats it), never the special id 50256.
//
// Vocabulary files (untrusted: size-capped, validated, never a crash):
//   vocab.json + merges.txt (Hugging Face), or encoder.json + vocab.bpe (OpenAI): the same formats.
//   vocab.json: a JSON object {token: id} whose keys are written in GPT-2's byte-to-unicode alphabet; ids are
//   unique integers in [0, 2^20) and every one of the 256 byte tokens is present. A prefix of GPT-2's
//   vocabulary (ids < 256 + M with the first M merges) is a valid vocabulary.
//   merges.txt: an optional "#version" first line, then one merge a line, "left right" (one space), rank =
//   line order; or a JSON array of "left right" strings or ["left", "right"] pairs (newer tokenizer files).
//   Both parts and their concatenation must be in the vocabulary, no pair may repeat, and a part that is made
//   by a merge must be made by an earlier one (as BPE training writes them).
//
// tokenizer.json (untrusted the same way): a BPE model, byte-level or SentencePiece-style with byte fallback,
// with its normalizers, pre-tokenizers, added tokens, post-processor and decoder, run as Hugging Face's
// `tokenizers` runs them. Added tokens written in the text ("<|begin_of_text|>", "<s>") are their ids, and
// encode() adds the post-processor's special tokens (a BOS) as transformers does unless told not to.
// A token's bytes are the decoder's output for that token alone ("▁Hello" -> " Hello", "<0x0A>" -> "\n").
//
// Labels (`label(id)`) show a token's bytes so that nothing is invisible: a space is '·' (U+00B7), a newline
// '↵' (U+21B5), a tab '→' (U+2192), any other control character (U+0000..U+001F, U+007F..U+009F) is written
// \xNN, and bytes that are not a complete UTF-8 character (a token that holds part of a multi-byte character)
// are written <0xNN>, one per byte. Everything else is shown as itself.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/status.hpp"

namespace attnviz {

// Files larger than this are refused before they are read.
inline constexpr std::size_t kMaxVocabFileBytes = std::size_t{64} << 20;
// Token ids must be below this.
inline constexpr int kMaxTokenId = 1 << 20;

class Bpe {
 public:
  // From the two files' contents (the page reads them into memory). Errors name "vocab" and "merges".
  static Status from_memory(std::string_view vocab_json, std::string_view merges_text, Bpe& out);
  // From two regular files; errors name the file.
  static Status load_files(const std::string& vocab_path, const std::string& merges_path, Bpe& out);
  // From a tokenizer.json's contents. Errors name "tokenizer.json".
  static Status from_tokenizer_json(std::string_view json, Bpe& out);
  // From a folder holding tokenizer.json (preferred when there), vocab.json + merges.txt or encoder.json +
  // vocab.bpe.
  static Status load_dir(const std::string& dir, Bpe& out);

  // The ids of `utf8`; refuses invalid UTF-8. Safe to call from several threads at once. With a
  // tokenizer.json, `add_special_tokens` adds its post-processor's tokens (a BOS first for Llama 2 and Gemma
  // 3).
  Status encode(std::string_view utf8, std::vector<int>& ids, bool add_special_tokens = true) const;
  // The text of `ids` as raw bytes: GPT-2's tokens concatenated, or a tokenizer.json's decoder run on them
  // (which may drop the leading space SentencePiece adds). Ids outside the vocabulary contribute nothing.
  std::string decode(const std::vector<int>& ids) const;
  // One token's raw bytes (empty for an id outside the vocabulary).
  const std::string& bytes(int id) const;
  // One token's display label (see the top of this file).
  std::string label(int id) const;
  // One more than the largest id (0 before loading).
  int size() const;
  // The tokenizer.json post-processor's first token before the text and last after it, -1 where none.
  int bos() const;
  int eos() const;
  // True for a tokenizer.json added token marked special ("<|begin_of_text|>", "<s>").
  bool is_special(int id) const;

 private:
  struct Impl;
  static Status load(std::string_view vocab_json, std::string_view merges_text, const std::string& vocab_name,
                     const std::string& merges_name, Bpe& out);
  static Status load_tokenizer_json(std::string_view json, const std::string& name, Bpe& out);
  std::shared_ptr<const Impl> impl_;
};

// The display label of raw bytes, as Bpe::label writes it.
std::string token_label(std::string_view bytes);

// True when `dir` holds tokenizer.json, vocab.json + merges.txt or encoder.json + vocab.bpe (what
// Bpe::load_dir reads).
bool holds_vocabulary(const std::string& dir);

// Where the hosts find GPT-2's vocabulary offline: $ATTNVIZ_VOCAB_DIR when set; otherwise
// <exe dir>/../share/attnviz/gpt2 or <exe dir>/share/attnviz/gpt2, the first that holds a vocabulary;
// otherwise "" (and under WebAssembly, where there is no executable path, "" unless the variable is set).
std::string default_vocab_dir();

}  // namespace attnviz
