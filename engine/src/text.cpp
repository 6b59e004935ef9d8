#include "attnviz/text.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace attnviz {
namespace {

bool is_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// The book's 3-d embeddings (its chapter-3 examples 004 and 001, listed in docs/testing.md).
struct Builtin {
  const char* word;
  float v[3];
};
constexpr Builtin kBuiltins[] = {
    {"your", {0.43f, 0.15f, 0.89f}},  {"journey", {0.55f, 0.87f, 0.66f}}, {"starts", {0.57f, 0.85f, 0.64f}},
    {"with", {0.22f, 0.58f, 0.33f}},  {"one", {0.77f, 0.25f, 0.10f}},     {"step", {0.05f, 0.80f, 0.55f}},
    {"dream", {0.72f, 0.45f, 0.31f}}, {"big", {0.75f, 0.20f, 0.55f}},     {"and", {0.30f, 0.80f, 0.40f}},
    {"work", {0.85f, 0.35f, 0.60f}},  {"for", {0.55f, 0.15f, 0.75f}},     {"it", {0.25f, 0.20f, 0.85f}},
};

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::size_t decode_utf8(std::string_view s, std::size_t i, char32_t& cp) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  std::size_t len;
  char32_t min;
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

std::string quote(std::string_view s, std::size_t cap, char mark) {
  std::string out;
  if (mark) out += mark;
  const auto hex = [&out](unsigned char c) {
    static const char digits[] = "0123456789ABCDEF";
    out += "\\x";
    out += digits[c >> 4];
    out += digits[c & 15];
  };
  std::size_t i = 0;
  while (i < s.size()) {
    char32_t cp = 0;
    const std::size_t n = decode_utf8(s, i, cp);
    if (i + std::max<std::size_t>(n, 1) > cap) break;  // whole characters only
    if (n == 0) {
      hex(static_cast<unsigned char>(s[i++]));
    } else if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
      for (std::size_t k = 0; k < n; ++k) hex(static_cast<unsigned char>(s[i + k]));
    } else if (cp == '\\' || (mark && cp == static_cast<unsigned char>(mark))) {
      out += '\\';
      out += static_cast<char>(cp);
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  if (i < s.size()) out += "...";
  if (mark) out += mark;
  return out;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    if (const std::size_t n = decode_utf8(s, i, cp)) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    // The maximal subpart (Unicode 3.9, U+FFFD substitution): the lead byte and the continuation bytes that
    // can still follow it in a well-formed sequence (Table 3-7), one U+FFFD for all of them. A byte that
    // cannot start a sequence is a subpart of its own.
    const auto b0 = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    }
    std::size_t k = 1;
    for (; k < len && i + k < s.size(); ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) break;
    }
    out += "\xEF\xBF\xBD";
    i += k;
  }
  return out;
}

Status check_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = decode_utf8(s, i, cp);
    if (n == 0) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "the text is not valid UTF-8 (bad byte 0x%02X at offset %zu)",
                    static_cast<unsigned>(static_cast<unsigned char>(s[i])), i);
      return Status::fail(buf);
    }
    i += n;
  }
  return Status::ok();
}

Status split_words(std::string_view text, std::vector<std::string>& words) {
  words.clear();
  if (Status st = check_utf8(text); !st.is_ok()) return st;
  std::size_t start = std::string_view::npos;
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const std::size_t n = decode_utf8(text, i, cp);
    if (is_space(cp)) {
      if (start != std::string_view::npos) words.emplace_back(text.substr(start, i - start));
      start = std::string_view::npos;
    } else if (start == std::string_view::npos) {
      start = i;
    }
    i += n;
  }
  if (start != std::string_view::npos) words.emplace_back(text.substr(start));
  return Status::ok();
}

bool builtin_embedding(std::string_view word, float out[3]) {
  while (!word.empty() && std::ispunct(static_cast<unsigned char>(word.back()))) word.remove_suffix(1);
  for (const Builtin& b : kBuiltins) {
    const std::size_t n = std::strlen(b.word);
    if (word.size() != n) continue;
    bool same = true;
    for (std::size_t i = 0; i < n && same; ++i)
      same = std::tolower(static_cast<unsigned char>(word[i])) == b.word[i];
    if (same) {
      std::memcpy(out, b.v, sizeof b.v);
      return true;
    }
  }
  return false;
}

std::vector<float> embed_word(std::string_view word, int d_in, std::uint64_t seed) {
  std::vector<float> v(static_cast<std::size_t>(d_in));
  if (d_in == 3 && builtin_embedding(word, v.data())) return v;
  // FNV-1a over the bytes, mixed with d_in and the seed, then a splitmix64 stream.
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : word) h = (h ^ c) * 0x100000001B3ull;
  std::uint64_t state = h ^ (seed * 0x9E3779B97F4A7C15ull) ^ (static_cast<std::uint64_t>(d_in) << 32);
  for (float& x : v) {
    const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1p-53;  // [0, 1)
    x = static_cast<float>(std::floor((u * 2.0 - 1.0) * 100.0) / 100.0);      // [-1, 1) in steps of 0.01
  }
  return v;
}

Status input_from_text(std::string_view text, const Config& c, Input& out) {
  std::vector<std::string> words;
  if (Status st = split_words(text, words); !st.is_ok()) return st;
  if (words.empty()) return Status::fail("the text is empty: type at least one word");
  if (Status st = validate(c, static_cast<int>(words.size())); !st.is_ok()) return st;
  Input in;
  in.x = Tensor(static_cast<int>(words.size()), c.d_in);
  for (int t = 0; t < in.x.shape[0]; ++t) {
    const std::vector<float> e = embed_word(words[static_cast<std::size_t>(t)], c.d_in, c.seed);
    std::memcpy(&in.x.at(t, 0), e.data(), e.size() * sizeof(float));
  }
  in.tokens = std::move(words);
  out = std::move(in);
  return Status::ok();
}

Status input_from_rows(const std::vector<std::vector<double>>& rows, Input& out) {
  if (rows.empty()) return Status::fail("the inputs are empty: give at least one row");
  const std::size_t width = rows[0].size();
  if (width == 0) return Status::fail("the inputs' rows are empty: give at least one number per row");
  if (rows.size() > INT_MAX || width > INT_MAX)
    return Status::fail("the inputs have too many rows or columns");
  Input in;
  in.x = Tensor(static_cast<int>(rows.size()), static_cast<int>(width));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    char buf[128];
    if (rows[r].size() != width) {
      std::snprintf(buf, sizeof buf, "input row %zu has %zu numbers, row 1 has %zu", r + 1, rows[r].size(),
                    width);
      return Status::fail(buf);
    }
    for (std::size_t c = 0; c < width; ++c) {
      const double x = rows[r][c];
      // Finite once rounded to float32: below FLT_MAX plus half its last place (3.4028235e38, which
      // attnviz's own --json writes for FLT_MAX, rounds back to it).
      if (!(std::fabs(x) < 0x1.ffffffp+127)) {
        std::snprintf(buf, sizeof buf, "input row %zu, column %zu is not a finite float (%g)", r + 1, c + 1,
                      x);
        return Status::fail(buf);
      }
      in.x.at(static_cast<int>(r), static_cast<int>(c)) = static_cast<float>(x);
    }
    in.tokens.push_back("x" + std::to_string(r + 1));
  }
  out = std::move(in);
  return Status::ok();
}

std::string shortest_decimal(double x) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

}  // namespace attnviz
