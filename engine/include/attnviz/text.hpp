// Turning a sentence into the (T, d_in) input matrix: UTF-8 checked whitespace tokens and their embeddings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/config.hpp"
#include "attnviz/status.hpp"
#include "attnviz/tensor.hpp"

namespace attnviz {

// The sentence the app opens with: the book's running example.
inline constexpr const char* kDefaultText = "Your journey starts with one step";

// Decodes the code point at s[i] (i < s.size()); returns its length in bytes, or 0 where the bytes there are
// not well-formed UTF-8 (also for a truncated sequence).
std::size_t decode_utf8(std::string_view s, std::size_t i, char32_t& cp);

// How many bytes of a piece a message quotes: a long path stays whole, a 1 MB argument does not make a 1 MB
// line.
inline constexpr std::size_t kQuoteCap = 120;

// A piece of outside text (a flag's value, a path, a tensor name, a parser's message) as a message shows it,
// always one line and nothing a terminal acts on: between `mark`s ('\0': no marks, for a path that starts
// a message), control bytes (C0, DEL, and the bytes of C1 controls U+0080..U+009F) and bytes that are not
// well-formed UTF-8 as \xNN (uppercase hex), a backslash and the mark behind a backslash so that the piece
// reads back unambiguously, and cut after `cap` bytes of the piece, at a whole character, with "...". Every
// message of the engine and of both hosts quotes through this one function.
std::string quote(std::string_view piece, std::size_t cap = kQuoteCap, char mark = '\'');

// The shortest decimal that reads back to the same double ("0.1", "0.002", not 0.10000000000000001), for
// messages and flags that name a value.
std::string shortest_decimal(double x);

// Checks that `s` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
Status check_utf8(std::string_view s);

// `s` with each ill-formed part replaced by U+FFFD, one for each maximal subpart, as Python's
// bytes.decode("utf-8", errors="replace") and so GPT-2's tokenizer decoder do: b"a\xf0\x9f" gives "a\ufffd".
std::string to_valid_utf8(std::string_view s);

// Splits on Unicode whitespace (ASCII spaces, tabs, newlines, NBSP, U+2000..U+200A, U+3000, ...).
// Fails on invalid UTF-8; an empty or all-space text gives zero tokens (not an error here).
Status split_words(std::string_view text, std::vector<std::string>& words);

// The embedding of one word. With d_in == 3 the words of the book's sentences ("Your journey starts with one
// step", "Dream big and work for it") get the vectors the book prints (ASCII case and trailing punctuation
// are ignored for that look-up); every other word gets a vector derived from the word, d_in and the seed
// only, with components in [-1, 1) rounded to two decimals, so the same word always gets the same vector.
std::vector<float> embed_word(std::string_view word, int d_in, std::uint64_t seed);

// The book's vector for a word, when it has one (d_in 3 only).
bool builtin_embedding(std::string_view word, float out[3]);

// A run's input: the tokens and their (T, d_in) rows.
struct Input {
  std::vector<std::string> tokens;
  Tensor x;  // (T, d_in)
};

// Tokenizes and embeds `text` for `c` (d_in and seed). Fails on invalid UTF-8 or empty text.
Status input_from_text(std::string_view text, const Config& c, Input& out);

// Takes explicit rows (all of the same width, finite, within float range); tokens are "x1".."xT".
Status input_from_rows(const std::vector<std::vector<double>>& rows, Input& out);

}  // namespace attnviz
