// The steps of a tokenizer.json pipeline, as Hugging Face's `tokenizers` runs them (see tokenizer_json.hpp):
// patterns, normalizers, pre-tokenizers, added-token matching, the BPE merges and the decoders.
#include <utf8proc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <queue>

#include "attnviz/text.hpp"
#include "io/tokenizer_json.hpp"

namespace attnviz::hf {
namespace {

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};
struct ContextDeleter {
  void operator()(pcre2_match_context* c) const { pcre2_match_context_free(c); }
};

std::size_t char_len(std::string_view s, std::size_t i) {
  std::size_t n = 1;
  while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
  return n;
}

bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Rust's regex \w: alphabetic, marks, decimal digits, connector punctuation, join controls.
bool is_word_char(char32_t c) {
  if (c == 0x200C || c == 0x200D) return true;
  const utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  switch (cat) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

char32_t last_char(std::string_view s) {
  std::size_t i = s.size();
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i;
  char32_t cp = 0;
  return i > 0 && decode_utf8(s, i - 1, cp) ? cp : 0;
}

// Applies a split behaviour to find_matches' spans (tokenizers' NormalizedString::split), dropping empties.
void apply_behavior(const std::vector<Span>& spans, Behavior b,
                    std::vector<std::pair<std::size_t, std::size_t>>& out) {
  out.clear();
  bool previous = false;
  switch (b) {
    case Behavior::Removed:
      for (const Span& s : spans)
        if (!s.match) out.emplace_back(s.begin, s.end);
      break;
    case Behavior::Isolated:
      for (const Span& s : spans) out.emplace_back(s.begin, s.end);
      break;
    case Behavior::Contiguous:
      for (const Span& s : spans) {
        if (s.match == previous && !out.empty())
          out.back().second = s.end;
        else
          out.emplace_back(s.begin, s.end);
        previous = s.match;
      }
      break;
    case Behavior::MergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !previous && !out.empty())
          out.back().second = s.end;
        else
          out.emplace_back(s.begin, s.end);
        previous = s.match;
      }
      break;
    case Behavior::MergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous && !out.empty())
          out.back().first = it->begin;
        else
          out.emplace_back(it->begin, it->end);
        previous = it->match;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  out.erase(std::remove_if(out.begin(), out.end(), [](const auto& r) { return r.first == r.second; }),
            out.end());
}

Status split_pieces(const Pattern& p, Behavior b, bool invert, std::vector<Piece>& pieces,
                    RegexBudget& budget) {
  std::vector<Piece> out;
  std::vector<Span> spans;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (Piece& piece : pieces) {
    if (Status st = find_matches(p, piece.text, spans, budget); !st.is_ok()) return st;
    if (invert)
      for (Span& s : spans) s.match = !s.match;
    apply_behavior(spans, b, ranges);
    for (const auto& [begin, end] : ranges)
      out.push_back({piece.text.substr(begin, end - begin), piece.first && begin == 0});
  }
  pieces = std::move(out);
  return Status::ok();
}

// `s` with every match of `p` replaced by `content`; fails naming `where` once the result would pass `cap`.
Status replace_all(const Pattern& p, std::string_view s, std::string_view content, std::size_t cap,
                   const std::string& where, const std::string& cap_is, RegexBudget& budget,
                   std::string& out) {
  std::vector<Span> spans;
  if (Status st = find_matches(p, s, spans, budget); !st.is_ok()) return st;
  out.clear();
  for (const Span& sp : spans) {
    const std::string_view piece = sp.match ? content : s.substr(sp.begin, sp.end - sp.begin);
    if (piece.size() > cap - std::min(cap, out.size()))
      return Status::fail(where + " makes the text longer than " + std::to_string(cap) + " bytes, " + cap_is);
    out.append(piece);
  }
  return Status::ok();
}

std::string replace_literal(std::string_view s, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(s);
  std::string out;
  for (std::size_t pos = 0;;) {
    const std::size_t at = s.find(from, pos);
    if (at == std::string_view::npos) {
      out.append(s.substr(pos));
      return out;
    }
    out.append(s.substr(pos, at - pos));
    out += to;
    pos = at + from.size();
  }
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// "<0xAB>" -> 0xAB, else -1 (tokenizers' ByteFallback accepts either case of hex digits).
int fallback_byte(std::string_view t) {
  if (t.size() != 6 || !starts_with(t, "<0x") || t[5] != '>') return -1;
  int v = 0;
  for (char c : t.substr(3, 2)) {
    v *= 16;
    if (c >= '0' && c <= '9')
      v += c - '0';
    else if (c >= 'A' && c <= 'F')
      v += c - 'A' + 10;
    else if (c >= 'a' && c <= 'f')
      v += c - 'a' + 10;
    else
      return -1;
  }
  return v;
}

}  // namespace

Status compile_regex(std::string_view pattern, const std::string& where, Pattern& out) {
  if (pattern.size() > kMaxPatternBytes)
    return Status::fail(where + ": the regex is longer than " + std::to_string(kMaxPatternBytes) + " bytes");
  const auto refuse = [&](const char* why) {
    return Status::fail(where + ": the regex " + quote(pattern) + " " + why);
  };
  // Oniguruma's \s is Unicode's White_Space; PCRE2's also matches U+180E.
  std::string p;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char c = pattern[++i];
      if (c == 's')
        p += "\\p{White_Space}";
      else if (c == 'S')
        p += "\\P{White_Space}";
      else if (c == 'C')
        return refuse("uses \\C, which matches one byte and can cut a UTF-8 character apart");
      else if (c == 'G')
        return refuse("uses \\G, which the tokenizer does not support");
      else
        (p += '\\') += c;
    } else if (pattern[i] == '(' && i + 1 < pattern.size() && pattern[i + 1] == '*') {
      // Also inside a character class, where it would be harmless: refused all the same, to keep this simple.
      return refuse(
          "uses a PCRE2 verb or option \"(*\", which Oniguruma (Hugging Face's regex engine) does not have");
    } else {
      p += pattern[i];
    }
  }
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, &error, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[160];
    pcre2_get_error_message(error, message, sizeof message);
    return Status::fail(where + ": the regex " + quote(pattern) + " does not compile (" +
                        reinterpret_cast<const char*>(message) + ")");
  }
  out.literal.clear();
  out.re = std::shared_ptr<pcre2_code>(code, pcre2_code_free);
  out.where = where;
  out.first_bytes = nullptr;
  const std::uint8_t* bitmap = nullptr;
  if (pcre2_pattern_info(code, PCRE2_INFO_FIRSTBITMAP, &bitmap) == 0) out.first_bytes = bitmap;
  return Status::ok();
}

namespace {

// Regex searches, bounded in total. PCRE2's match limit bounds the backtracking steps at one start position,
// not a search: a pattern that scans ahead from every position ("\p{L}+(?=\d)" over a long word) is quadratic
// within it, and what one step reads (a single-character repeat running on, a back reference compared) is
// not counted at all. So a search here tries one start position at a time (anchored), shows PCRE2 only a
// window of the text that doubles when a match attempt runs into its end (PCRE2_PARTIAL_HARD: the same result
// as on the whole text, once the window holds what the match reads), and gives it a step limit that doubles
// when it is hit. An attempt's work is at most its steps times what one step can read, about the window: it
// is charged that product, (window bytes + 1) x step limit, to the text's RegexBudget. A start position whose
// first byte PCRE2 knows cannot start a match is skipped without an attempt. (The real files' patterns need
// at most 16 steps for most attempts and 32 for the rest, for pieces of a few bytes: most attempts cost 272.)
class RegexSearch {
 public:
  static constexpr std::size_t kFirstWindow = 16;
  static constexpr std::uint32_t kFirstSteps = 16, kMostSteps = 1000000;  // PCRE2's default limit

  RegexSearch(const Pattern& p, std::string_view s, RegexBudget& budget) : p_(p), s_(s), budget_(budget) {}

  Status init() {
    md_.reset(pcre2_match_data_create_from_pattern(p_.re.get(), nullptr));
    ctx_.reset(pcre2_match_context_create(nullptr));
    if (!md_ || !ctx_) return Status::fail("out of memory for a regex");
    pcre2_set_depth_limit(ctx_.get(), 10000);
    pcre2_set_heap_limit(ctx_.get(), 16384);  // KiB
    return Status::ok();
  }

  // The match anchored at `at`: true and [b, e) when there is one.
  Status match_at(std::size_t at, bool& found, std::size_t& b, std::size_t& e) {
    found = false;
    if (at < s_.size() && p_.first_bytes) {
      const auto c = static_cast<unsigned char>(s_[at]);
      if (!(p_.first_bytes[c / 8] & (1u << (c % 8)))) return Status::ok();
    }
    std::size_t window = kFirstWindow;
    std::uint32_t steps = kFirstSteps;
    for (;;) {
      std::size_t end = s_.size() - at <= window ? s_.size() : at + window;
      while (end < s_.size() && (static_cast<unsigned char>(s_[end]) & 0xC0) == 0x80) ++end;
      const std::uint64_t cost = static_cast<std::uint64_t>(end - at + 1) * steps;
      if (cost > budget_.left)
        return Status::fail(
            p_.where + ": the tokenizer's regexes need more than " + std::to_string(budget_.cap()) +
            " steps on a text of " + std::to_string(budget_.bytes) + " bytes (the cap is " +
            std::to_string(kRegexCostPerByte) + " a byte, plus " + std::to_string(kRegexCostBase) + ")");
      budget_.left -= cost;
      pcre2_set_match_limit(ctx_.get(), steps);
      const std::uint32_t options =
          PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK | (end < s_.size() ? PCRE2_PARTIAL_HARD : 0);
      const int rc = pcre2_match(p_.re.get(), reinterpret_cast<PCRE2_SPTR>(s_.data()), end, at, options,
                                 md_.get(), ctx_.get());
      if (rc == PCRE2_ERROR_PARTIAL) {
        window *= 2;
        continue;
      }
      if (rc == PCRE2_ERROR_MATCHLIMIT && steps < kMostSteps) {
        steps = std::min(2 * steps, kMostSteps);
        continue;
      }
      if (rc == PCRE2_ERROR_NOMATCH) return Status::ok();
      if (rc < 0) {
        PCRE2_UCHAR message[160];
        pcre2_get_error_message(rc, message, sizeof message);
        return Status::fail("a tokenizer regex failed (" + p_.where +
                            "): " + reinterpret_cast<const char*>(message));
      }
      const PCRE2_SIZE* v = pcre2_get_ovector_pointer(md_.get());
      b = v[0], e = v[1];
      // \K can report a start past `at`, or (in a lookahead) an end before the start.
      if (b > e || e > s_.size() || !boundary(b) || !boundary(e))
        return Status::fail(p_.where + ": the regex matched part of a UTF-8 character or backwards");
      found = true;
      return Status::ok();
    }
  }

 private:
  bool boundary(std::size_t i) const {
    return i >= s_.size() || (static_cast<unsigned char>(s_[i]) & 0xC0) != 0x80;
  }
  const Pattern& p_;
  std::string_view s_;
  RegexBudget& budget_;
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md_;
  std::unique_ptr<pcre2_match_context, ContextDeleter> ctx_;
};

}  // namespace

Status find_matches(const Pattern& p, std::string_view s, std::vector<Span>& out, RegexBudget& budget) {
  out.clear();
  if (s.empty()) {
    out.push_back({0, 0, false});
    return Status::ok();
  }
  std::size_t prev = 0;
  const auto add = [&](std::size_t b, std::size_t e) {
    if (prev != b) out.push_back({prev, b, false});
    out.push_back({b, e, true});
    prev = e;
  };
  if (!p.re) {
    if (p.literal.empty()) {
      out.push_back({0, s.size(), false});
      return Status::ok();
    }
    for (std::size_t at = s.find(p.literal); at != std::string_view::npos; at = s.find(p.literal, prev))
      add(at, at + p.literal.size());
  } else {
    RegexSearch search(p, s, budget);
    if (Status st = search.init(); !st.is_ok()) return st;
    // Oniguruma's find_iter: the leftmost match from where the last one ended; an empty match right where the
    // last match ended is skipped.
    std::size_t last_match_end = SIZE_MAX;
    for (std::size_t at = 0; at <= s.size();) {
      bool found = false;
      std::size_t b = 0, e = 0;
      if (Status st = search.match_at(at, found, b, e); !st.is_ok()) return st;
      if (!found || (e == b && last_match_end == e) || b < prev) {
        if (at >= s.size()) break;
        at += char_len(s, at);
        continue;
      }
      add(b, e);
      at = last_match_end = e;
    }
  }
  if (prev != s.size()) out.push_back({prev, s.size(), false});
  return Status::ok();
}

Status normalize(const std::vector<Normalizer>& steps, std::string& s, std::size_t cap,
                 const std::string& cap_is, RegexBudget& budget) {
  const auto too_long = [&](const Normalizer& n) {
    return Status::fail(n.where + " makes the text longer than " + std::to_string(cap) + " bytes, " + cap_is);
  };
  if (s.size() > cap)
    return Status::fail("the text is longer than " + std::to_string(cap) + " bytes, " + cap_is);
  std::string out;
  for (const Normalizer& n : steps) {
    switch (n.kind) {
      case NormKind::NFC:
      case NormKind::NFD:
      case NormKind::NFKC:
      case NormKind::NFKD: {
        bool ascii = true;
        for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
        if (ascii) break;  // every normal form leaves ASCII as it is
        int options = UTF8PROC_STABLE;
        if (n.kind == NormKind::NFC || n.kind == NormKind::NFKC)
          options |= UTF8PROC_COMPOSE;
        else
          options |= UTF8PROC_DECOMPOSE;
        if (n.kind == NormKind::NFKC || n.kind == NormKind::NFKD) options |= UTF8PROC_COMPAT;
        // (A normal form grows a text by a bounded factor: at most 18 code points for one, U+FDFA.)
        utf8proc_uint8_t* result = nullptr;
        const utf8proc_ssize_t len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                                  static_cast<utf8proc_ssize_t>(s.size()), &result,
                                                  static_cast<utf8proc_option_t>(options));
        if (len < 0) {
          std::free(result);
          return Status::fail(std::string("Unicode normalization failed: ") + utf8proc_errmsg(len));
        }
        if (static_cast<std::size_t>(len) > cap) {
          std::free(result);
          return too_long(n);
        }
        s.assign(reinterpret_cast<const char*>(result), static_cast<std::size_t>(len));
        std::free(result);
        break;
      }
      case NormKind::Prepend:
        if (s.empty()) break;
        if (n.content.size() > cap - s.size()) return too_long(n);
        s.insert(0, n.content);
        break;
      case NormKind::Replace:
        if (Status st = replace_all(n.pattern, s, n.content, cap, n.where, cap_is, budget, out); !st.is_ok())
          return st;
        s.swap(out);
        break;
    }
  }
  return Status::ok();
}

Status normalize(const std::vector<Normalizer>& steps, std::string& s) {
  RegexBudget budget(s.size());
  return normalize(steps, s, kNormalizedGrowth * s.size() + kNormalizedSlack,
                   "the cap for a text of " + std::to_string(s.size()) + " bytes (" +
                       std::to_string(kNormalizedGrowth) + " a byte, plus " +
                       std::to_string(kNormalizedSlack) + ")",
                   budget);
}

Status pre_tokenize(const std::vector<PreTokenizer>& steps, std::vector<Piece>& pieces) {
  std::size_t bytes = 0;
  for (const Piece& p : pieces) bytes += p.text.size();
  RegexBudget budget(bytes);
  return pre_tokenize(steps, pieces, budget);
}

Status pre_tokenize(const std::vector<PreTokenizer>& steps, std::vector<Piece>& pieces, RegexBudget& budget) {
  for (const PreTokenizer& p : steps) {
    switch (p.kind) {
      case PreKind::Split:
        if (Status st = split_pieces(p.pattern, p.behavior, p.invert, pieces, budget); !st.is_ok()) return st;
        break;
      case PreKind::ByteLevel:
        if (p.add_prefix_space)
          for (Piece& piece : pieces)
            if (!starts_with(piece.text, " ")) piece.text.insert(0, " ");
        if (p.pattern.re)
          if (Status st = split_pieces(p.pattern, Behavior::Isolated, false, pieces, budget); !st.is_ok())
            return st;
        break;
      case PreKind::Metaspace: {
        for (Piece& piece : pieces) {
          piece.text = replace_literal(piece.text, " ", p.replacement);
          if (!starts_with(piece.text, p.replacement) &&
              (p.scheme == PrependScheme::Always || (p.scheme == PrependScheme::First && piece.first)))
            piece.text.insert(0, p.replacement);
        }
        if (p.split) {
          Pattern lit;
          lit.literal = p.replacement;
          if (Status st = split_pieces(lit, Behavior::MergedWithNext, false, pieces, budget); !st.is_ok())
            return st;
        }
        break;
      }
    }
  }
  return Status::ok();
}

void decode_tokens(const std::vector<Decoder>& steps, std::vector<std::string>& tokens, bool labels) {
  for (const Decoder& d : steps) {
    switch (d.kind) {
      case DecKind::ByteLevel:  // tokens are raw bytes already (read back at load)
        break;
      case DecKind::Replace:
        for (std::string& t : tokens)  // a literal pattern: read_decoder refuses a regex
          t = replace_literal(t, d.pattern.literal, d.content);
        break;
      case DecKind::ByteFallback:  // raw bytes, never U+FFFD: callers make text valid where they need it
        for (std::string& t : tokens)
          if (const int b = fallback_byte(t); b >= 0) t.assign(1, static_cast<char>(b));
        break;
      case DecKind::Fuse: {
        if (labels || tokens.size() < 2) break;
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case DecKind::Strip:
        if (labels) break;
        for (std::string& t : tokens) {  // one erase: a fused text can be long, and start up to 2^20
          const std::size_t n = d.content.size();
          std::size_t front = 0;
          for (int i = 0; i < d.start && t.compare(front, n, d.content) == 0; ++i) front += n;
          t.erase(0, front);
          for (int i = 0; i < d.stop && t.size() >= n && t.compare(t.size() - n, n, d.content) == 0; ++i)
            t.resize(t.size() - n);
        }
        break;
      case DecKind::Metaspace:
        for (std::size_t i = 0; i < tokens.size(); ++i)
          tokens[i] = replace_literal(tokens[i], d.content, i == 0 && d.strip_first && !labels ? "" : " ");
        break;
    }
  }
}

void AddedMatcher::build() {
  nodes.assign(1, Node{});
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    int at = 0;
    for (unsigned char c : tokens[k].content) {
      int next = -1;
      for (const auto& [byte, child] : nodes[static_cast<std::size_t>(at)].next)
        if (byte == c) next = child;
      if (next < 0) {
        next = static_cast<int>(nodes.size());
        nodes[static_cast<std::size_t>(at)].next.emplace_back(c, next);
        nodes.emplace_back();
      }
      at = next;
    }
    Node& end = nodes[static_cast<std::size_t>(at)];
    if (end.token < 0) end.token = static_cast<int>(k);
  }
  for (Node& n : nodes) std::sort(n.next.begin(), n.next.end());  // matching looks children up by bisection
}

// tokenizers' AddedVocabulary::find_matches: leftmost-longest matches, single_word, lstrip and rstrip. Each
// start position walks the trie as far as the text follows a token (up to kMaxTokenBytes steps): linear in
// practice, and capped at kAddedStepsPerByte a byte against files made to walk far at every position.
Status split_added(const AddedMatcher& m, std::string_view s, std::vector<Segment>& out) {
  out.clear();
  std::size_t start_offset = 0;
  if (!m.empty()) {
    int root_next[256];
    std::fill(std::begin(root_next), std::end(root_next), -1);
    for (const auto& [byte, child] : m.nodes[0].next) root_next[byte] = child;
    const std::uint64_t cap = kAddedStepsPerByte * s.size() + kAddedStepsBase;
    std::uint64_t steps = 0;
    for (std::size_t i = 0; i < s.size();) {
      int best = -1;
      std::size_t best_end = 0;
      for (int at = root_next[static_cast<unsigned char>(s[i])], j = static_cast<int>(i) + 1; at >= 0;) {
        const AddedMatcher::Node& node = m.nodes[static_cast<std::size_t>(at)];
        if (node.token >= 0) best = node.token, best_end = static_cast<std::size_t>(j);
        if (static_cast<std::size_t>(j) >= s.size() || node.next.empty()) break;
        if (++steps > cap)
          return Status::fail("added_tokens: matching them needs more than " + std::to_string(cap) +
                              " steps on a text of " + std::to_string(s.size()) + " bytes (the cap is " +
                              std::to_string(kAddedStepsPerByte) + " a byte, plus " +
                              std::to_string(kAddedStepsBase) + ")");
        const auto c = static_cast<unsigned char>(s[static_cast<std::size_t>(j)]);
        const auto it = std::lower_bound(node.next.begin(), node.next.end(), std::make_pair(c, -1));
        at = it != node.next.end() && it->first == c ? it->second : -1;
        ++j;
      }
      if (best < 0) {
        ++i;
        continue;
      }
      const AddedToken& t = m.tokens[static_cast<std::size_t>(best)];
      std::size_t b = i, e = best_end;
      // Leftmost-longest matching continues after this match whether or not it is kept.
      i = best_end;
      if (t.single_word) {
        char32_t next = 0;
        const bool before_ok = b == 0 || !is_word_char(last_char(s.substr(0, b)));
        const bool after_ok = e == s.size() || !(decode_utf8(s, e, next) && is_word_char(next));
        if (!before_ok || !after_ok) continue;
      }
      if (t.lstrip) {  // the white space before it, back to the end of the last match (never further)
        std::size_t nb = b;
        while (nb > start_offset) {
          std::size_t k = nb - 1;
          while (k > start_offset && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
          char32_t cp = 0;
          if (!decode_utf8(s, k, cp) || !is_white_space(cp)) break;
          nb = k;
        }
        b = nb;
      }
      if (t.rstrip) {
        char32_t cp = 0;
        std::size_t n = 0;
        while (e < s.size() && (n = decode_utf8(s, e, cp)) && is_white_space(cp)) e += n;
        i = std::max(i, e);
      }
      if (start_offset < b) out.push_back({start_offset, b, -1});
      out.push_back({b, e, t.id});
      start_offset = e;
    }
  }
  if (start_offset != s.size() || s.empty()) out.push_back({start_offset, s.size(), -1});
  return Status::ok();
}

std::size_t MergeMap::slot(std::uint64_t key) const {
  const std::size_t mask = keys_.size() - 1;
  std::size_t i = static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
  while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask;
  return i;
}

const MergeRule* MergeMap::find(std::uint64_t key) const {
  if (keys_.empty()) return nullptr;
  const std::size_t i = slot(key);
  return keys_[i] == key ? &rules_[i] : nullptr;
}

void MergeMap::reserve(std::size_t n) {
  std::size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  if (cap <= keys_.size()) return;
  std::vector<std::uint64_t> keys(cap, kEmpty);
  std::vector<MergeRule> rules(cap);
  keys.swap(keys_);
  rules.swap(rules_);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == kEmpty) continue;
    const std::size_t j = slot(keys[i]);
    keys_[j] = keys[i];
    rules_[j] = rules[i];
  }
}

std::pair<MergeRule*, bool> MergeMap::emplace(std::uint64_t key, MergeRule rule) {
  if (2 * (size_ + 1) > keys_.size()) reserve(size_ + 1 > 8 ? 2 * (size_ + 1) : 16);
  const std::size_t i = slot(key);
  if (keys_[i] == key) return {&rules_[i], false};
  keys_[i] = key;
  rules_[i] = rule;
  ++size_;
  return {&rules_[i], true};
}

std::size_t IdMap::slot(std::string_view key, std::size_t hash) const {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = hash & mask;
  while (slots_[i] != 0) {
    const std::size_t e = slots_[i] - 1;
    if (hash_[e] == hash && key_of(e) == key) break;
    i = (i + 1) & mask;
  }
  return i;
}

int IdMap::find(std::string_view key) const {
  if (slots_.empty()) return -1;
  const std::size_t i = slot(key, std::hash<std::string_view>{}(key));
  return slots_[i] ? ids_[slots_[i] - 1] : -1;
}

void IdMap::reserve(std::size_t n) {
  std::size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  if (cap <= slots_.size()) return;
  slots_.assign(cap, 0);
  for (std::size_t e = 0; e < ids_.size(); ++e) {
    std::size_t i = hash_[e] & (cap - 1);
    while (slots_[i] != 0) i = (i + 1) & (cap - 1);
    slots_[i] = static_cast<std::uint32_t>(e + 1);
  }
}

bool IdMap::emplace(std::string_view key, int id) {
  if (2 * (ids_.size() + 1) > slots_.size()) reserve(2 * (ids_.size() + 1));
  const std::size_t hash = std::hash<std::string_view>{}(key);
  const std::size_t i = slot(key, hash);
  if (slots_[i]) return false;
  begin_.push_back(static_cast<std::uint32_t>(chars_.size()));
  len_.push_back(static_cast<std::uint32_t>(key.size()));
  chars_.append(key);
  ids_.push_back(id);
  hash_.push_back(hash);
  slots_[i] = static_cast<std::uint32_t>(ids_.size());
  return true;
}

// Hugging Face's Word::merge_all through a priority queue keyed by (rank, position): stale entries (a side
// merged away, or a pair whose merge no longer applies) are skipped when popped.
void merge_symbols(const MergeMap& merges, std::vector<int>& ids) {
  const int n = static_cast<int>(ids.size());
  if (n < 2) return;
  std::vector<int> next(ids.size()), prev(ids.size());
  for (int i = 0; i < n; ++i) {
    next[static_cast<std::size_t>(i)] = i + 1 < n ? i + 1 : -1;
    prev[static_cast<std::size_t>(i)] = i - 1;
  }
  struct Candidate {
    int rank, left, right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto find = [&](int left, int right) { return merges.find(pair_key(left, right)); };
  const auto consider = [&](int left, int right) {
    if (const MergeRule* m = find(ids[static_cast<std::size_t>(left)], ids[static_cast<std::size_t>(right)]))
      queue.push({m->rank, left, right});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    const auto l = static_cast<std::size_t>(c.left), r = static_cast<std::size_t>(c.right);
    if (ids[l] < 0 || next[l] != c.right || ids[r] < 0) continue;
    const MergeRule* m = find(ids[l], ids[r]);
    if (!m || m->rank != c.rank) continue;
    ids[l] = m->result;
    ids[r] = -1;
    next[l] = next[r];
    if (next[l] >= 0) prev[static_cast<std::size_t>(next[l])] = c.left;
    if (prev[l] >= 0) consider(prev[l], c.left);
    if (next[l] >= 0) consider(c.left, next[l]);
  }
  std::size_t w = 0;
  for (int i = 0; i >= 0; i = next[static_cast<std::size_t>(i)]) ids[w++] = ids[static_cast<std::size_t>(i)];
  ids.resize(w);
}

}  // namespace attnviz::hf
