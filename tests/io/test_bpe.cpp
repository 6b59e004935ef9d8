// GPT-2's tokenizer (engine/include/attnviz/io/bpe.hpp): known ids, labels, a truncated vocabulary against a
// plain port of GPT-2's bpe(), every refusal of a malformed vocabulary, and round trips. The full corpus is
// compared with npm gpt-3-encoder by the tokenizer.oracle test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "attnviz/io/bpe.hpp"
#include "attnviz/text.hpp"

using attnviz::Bpe;
using attnviz::Status;

namespace {

const std::string kGpt2Dir = ATTNVIZ_GPT2_DIR;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Loaded once for the whole suite (the first test to use it reports a failure to load).
const Bpe& gpt2() {
  static const Bpe bpe = [] {
    Bpe b;
    const Status st = Bpe::load_dir(kGpt2Dir, b);
    REQUIRE_MESSAGE(st.is_ok(), st.error);
    return b;
  }();
  return bpe;
}

std::vector<int> ids_of(const Bpe& bpe, const std::string& text) {
  std::vector<int> ids;
  const Status st = bpe.encode(text, ids);
  CHECK_MESSAGE(st.is_ok(), st.error);
  return ids;
}

// GPT-2's own vocabulary cut to its first 256 + m tokens and first m merges.
struct Files {
  std::string vocab, merges;
};
Files truncated(int m) {
  const nlohmann::json full = nlohmann::json::parse(slurp(kGpt2Dir + "/encoder.json"));
  nlohmann::json vocab = nlohmann::json::object();
  for (auto it = full.begin(); it != full.end(); ++it)
    if (it.value().get<int>() < 256 + m) vocab[it.key()] = it.value();
  const std::string all = slurp(kGpt2Dir + "/vocab.bpe");
  std::size_t end = 0;
  for (int line = 0; line <= m; ++line) end = all.find('\n', end) + 1;  // the #version line, then m merges
  return {vocab.dump(), all.substr(0, end)};
}

// GPT-2's bytes_to_unicode(), written out again here so the test does not trust the code under test.
std::string to_alphabet(unsigned char b) {
  int n = 0;
  for (int x = 0; x < 256; ++x) {
    const bool printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255);
    const int cp = printable ? x : 256 + n++;
    if (x == b) {
      std::string s;
      if (cp < 0x80) return s += static_cast<char>(cp);
      s += static_cast<char>(0xC0 | (cp >> 6));
      return s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return "";
}

// A plain port of GPT-2's bpe() (openai/gpt-2 encoder.py) over strings in the byte alphabet: the reference
// for one pre-token. Merges every occurrence of the lowest-ranked pair, left to right, until none applies.
std::vector<std::string> reference_bpe(const std::string& piece, const std::string& merges_text) {
  std::map<std::pair<std::string, std::string>, int> ranks;
  std::size_t pos = merges_text.find('\n') + 1;  // after #version
  for (int rank = 0; pos < merges_text.size(); ++rank) {
    const std::size_t end = merges_text.find('\n', pos), space = merges_text.find(' ', pos);
    ranks[{merges_text.substr(pos, space - pos), merges_text.substr(space + 1, end - space - 1)}] = rank;
    pos = end + 1;
  }
  std::vector<std::string> word;
  for (char c : piece) word.push_back(to_alphabet(static_cast<unsigned char>(c)));
  while (word.size() > 1) {
    int best = -1;
    std::pair<std::string, std::string> bigram;
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = ranks.find({word[i], word[i + 1]});
      if (it != ranks.end() && (best < 0 || it->second < best)) best = it->second, bigram = it->first;
    }
    if (best < 0) break;
    std::vector<std::string> merged;
    for (std::size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == bigram.first && word[i + 1] == bigram.second) {
        merged.push_back(word[i] + word[i + 1]);
        i += 2;
      } else {
        merged.push_back(word[i++]);
      }
    }
    word = std::move(merged);
  }
  return word;
}

// A refusal: fails, one line, and the line says what it must.
void check_refused(const Status& st, const std::string& needle) {
  CAPTURE(st.error);
  CHECK_FALSE(st.is_ok());
  CHECK(st.error.find('\n') == std::string::npos);
  CHECK(st.error.find(needle) != std::string::npos);
}

Status load(const std::string& vocab, const std::string& merges) {
  Bpe b;
  return Bpe::from_memory(vocab, merges, b);
}

}  // namespace

TEST_CASE("bpe: the book's sentences and other known GPT-2 ids") {
  const Bpe& bpe = gpt2();
  CHECK(bpe.size() == 50257);
  CHECK(ids_of(bpe, "Every effort moves you") == std::vector<int>{6109, 3626, 6100, 345});
  CHECK(ids_of(bpe, "Hello, I am") == std::vector<int>{15496, 11, 314, 716});
  CHECK(ids_of(bpe, " Hello world") == std::vector<int>{18435, 995});
  CHECK(ids_of(bpe, " the") == std::vector<int>{262});
  CHECK(ids_of(bpe, "\t\n") == std::vector<int>{197, 198});
  CHECK(ids_of(bpe, "naïve") == std::vector<int>{2616, 38776});
  CHECK(ids_of(bpe, "中") == std::vector<int>{40792});
  CHECK(ids_of(bpe, "😀") == std::vector<int>{47249, 222});
  CHECK(ids_of(bpe, "").empty());
  // Plain text, as npm gpt-3-encoder has it: never the special id 50256.
  CHECK(ids_of(bpe, "<|endoftext|>") == std::vector<int>{27, 91, 437, 1659, 5239, 91, 29});
  CHECK(bpe.bytes(50256) == "<|endoftext|>");
  CHECK(bpe.bytes(262) == " the");
  CHECK(bpe.bytes(-1).empty());
  CHECK(bpe.bytes(50257).empty());
  CHECK(bpe.decode({15496, 11, 314, 716}) == "Hello, I am");
  CHECK(bpe.decode({15496, -3, 99999999, 11}) == "Hello,");  // unknown ids add nothing
}

TEST_CASE("bpe: labels show spaces, line breaks, controls and partial characters") {
  const Bpe& bpe = gpt2();
  CHECK(bpe.label(262) == "\u00B7the");  // " the"
  CHECK(bpe.label(220) == "\u00B7");     // " "
  CHECK(bpe.label(198) == "\u21B5");     // "\n"
  CHECK(bpe.label(197) == "\u2192");     // "\t"
  CHECK(bpe.label(189) == "\\x01");
  CHECK(bpe.label(47249) == "<0xF0><0x9F><0x98>");  // the first three bytes of 😀
  CHECK(bpe.label(222) == "<0x80>");                // and its last
  CHECK(bpe.label(40792) == "中");
  CHECK(bpe.label(40670) == ".\uFFFD");  // a real U+FFFD stays itself
  CHECK(bpe.label(50256) == "<|endoftext|>");
  CHECK(attnviz::token_label("a\x7f\xc2\x85 \r") == "a\\x7F\\x85\u00B7\\x0D");
  CHECK(attnviz::token_label("\xe4\xb8") == "<0xE4><0xB8>");
  CHECK(attnviz::token_label("") == "");
}

TEST_CASE("bpe: a truncated vocabulary gives what GPT-2's bpe() gives with the same merges") {
  const int m = 50;
  const Files f = truncated(m);
  Bpe bpe;
  const Status st = Bpe::from_memory(f.vocab, f.merges, bpe);
  REQUIRE_MESSAGE(st.is_ok(), st.error);
  CHECK(bpe.size() == 256 + m);
  // By hand from the first merges: "Ġ t" (0), "h e" (2), "Ġt he" (6) make " the" = 256 + 6; "Ġ s" (8) makes
  // "Ġs" = 264, "i n" (3) and "in g" (22) make "ing" = 278; 't' and 'r' are byte tokens 83 and 81.
  CHECK(ids_of(bpe, " the") == std::vector<int>{262});
  CHECK(ids_of(bpe, " string") == std::vector<int>{264, 83, 81, 278});
  // Every single pre-token against the plain port of bpe().
  for (const std::string piece : {" the", "ing", " string", " interesting", "Hello", " ordered", " reentered",
                                  " nation", " onion", "aaaaaaa", " hehehe", " \xc3\xa9t\xc3\xa9"}) {
    CAPTURE(piece);
    std::vector<int> expected;
    for (const std::string& token : reference_bpe(piece, f.merges)) {
      const nlohmann::json vocab = nlohmann::json::parse(f.vocab);
      REQUIRE(vocab.contains(token));
      expected.push_back(vocab[token].get<int>());
    }
    const std::vector<int> ids = ids_of(bpe, piece);
    CHECK(ids == expected);
    CHECK(std::all_of(ids.begin(), ids.end(), [&](int id) { return id < 256 + m; }));
    CHECK(bpe.decode(ids) == piece);
  }
  // The same merges in the newer JSON forms give the same tokenizer.
  nlohmann::json pairs = nlohmann::json::array(), strings = nlohmann::json::array();
  std::size_t pos = f.merges.find('\n') + 1;
  while (pos < f.merges.size()) {
    const std::size_t end = f.merges.find('\n', pos), space = f.merges.find(' ', pos);
    pairs.push_back({f.merges.substr(pos, space - pos), f.merges.substr(space + 1, end - space - 1)});
    strings.push_back(f.merges.substr(pos, end - pos));
    pos = end + 1;
  }
  for (const nlohmann::json& form : {pairs, strings}) {
    Bpe other;
    REQUIRE(Bpe::from_memory(f.vocab, form.dump(), other).is_ok());
    CHECK(ids_of(other, " the interesting string") == ids_of(bpe, " the interesting string"));
  }
}

TEST_CASE("bpe: every malformed vocabulary is refused with one line naming the problem") {
  const Files f = truncated(2);  // merges "Ġ t" -> "Ġt" (256) and "Ġ a" -> "Ġa" (257)
  REQUIRE(load(f.vocab, f.merges).is_ok());
  nlohmann::json v = nlohmann::json::parse(f.vocab);
  const auto with = [&](const std::string& key, const nlohmann::json& value) {
    nlohmann::json copy = v;
    copy[key] = value;
    return copy.dump();
  };
  const auto without = [&](const std::string& key) {
    nlohmann::json copy = v;
    copy.erase(key);
    return copy.dump();
  };
  const std::string header = "#version: 0.2\n";

  SUBCASE("vocab") {
    check_refused(load("{\"a\": 1", f.merges), "vocab is not valid JSON");
    check_refused(load("[1, 2]", f.merges), "vocab: expected a JSON object");
    check_refused(load("{}", f.merges), "vocab: expected a JSON object");
    check_refused(load(with("xy", "7"), f.merges), "the id of 'xy' is not an integer");
    check_refused(load(with("xy", 7.5), f.merges), "the id of 'xy' is not an integer");
    check_refused(load(with("xy", -1), f.merges), "the id -1 of 'xy' is outside [0, 1048576)");
    check_refused(load(with("xy", 1 << 20), f.merges), "the id 1048576 of 'xy' is outside");
    check_refused(load(with("xy", 256), f.merges), "the id 256 is given to both");
    check_refused(load(with("a b", 300), f.merges), "the token 'a b' has a character outside GPT-2's byte");
    check_refused(load(with("a\nb", 300), f.merges), "the token 'a\\x0Ab' has a character outside");
    check_refused(load(with("\xe4\xb8\xad", 300), f.merges), "has a character outside GPT-2's byte alphabet");
    check_refused(load(with("", 300), f.merges), "vocab: a token is empty");
    check_refused(load(without("!"), f.merges), "the byte token '!' (byte 0x21) is missing");
    check_refused(load(without("\xc4\x80"), f.merges), "the byte token '\xc4\x80' (byte 0x00) is missing");
  }
  SUBCASE("merges") {
    check_refused(load(f.vocab, header + "\xc4\xa0t\n"),
                  "merges line 2: expected two tokens separated by one space");
    check_refused(load(f.vocab, header + "\xc4\xa0 t x\n"), "merges line 2: expected two tokens");
    check_refused(load(f.vocab, header + "\xc4\xa0  t\n"), "merges line 2: expected two tokens");
    check_refused(load(f.vocab, header + " \xc4\xa0t\n"), "merges line 2: expected two tokens");
    check_refused(load(f.vocab, header + "\xc4\xa0 t\n\n\xc4\xa0 a\n"), "merges line 3 is empty");
    check_refused(load(f.vocab, header + "\xc4\xa0 t\nx\xe4\xb8\xad y\n"),
                  "merges line 3: 'x\xe4\xb8\xad' has a character outside GPT-2's byte alphabet");
    check_refused(load(f.vocab, header + "\xc4\xa0 t\nab c\n"),
                  "merges line 3: 'ab' is not in the vocabulary");
    check_refused(load(f.vocab, header + "\xc4\xa0 t\na b\n"),
                  "merges line 3: the result 'ab' is not in the");
    check_refused(load(f.vocab, header + "\xc4\xa0 t\n\xc4\xa0 t\n"), "merges line 3 repeats merges line 2");
    // "Ġt" is used as a part (line 2) before a merge makes it (line 3).
    check_refused(load(with("\xc4\xa0tt", 300), header + "\xc4\xa0t t\n\xc4\xa0 t\n"),
                  "merges line 3 makes '\xc4\xa0t', which the earlier merges line 2 already uses as a part");
    check_refused(load(f.vocab, "[\"\xc4\xa0 t\", 5]"), "merges entry 2: expected \"left right\" or");
    check_refused(load(f.vocab, "[[\"\xc4\xa0\", \"t\", \"x\"]]"), "merges entry 1: expected");
    check_refused(load(f.vocab, "[\"\xc4\xa0 t\""), "merges is not a valid JSON array of merges");
    // Accepted variants: no header, CRLF line ends, no final newline, trailing blank lines.
    CHECK(load(f.vocab, "\xc4\xa0 t\r\n\xc4\xa0 a").is_ok());
    CHECK(load(f.vocab, header + "\xc4\xa0 t\n\n\n").is_ok());
    CHECK(load(f.vocab, "").is_ok());
  }
  SUBCASE("encode") {
    Bpe empty, bpe;
    std::vector<int> ids{1, 2};
    check_refused(empty.encode("x", ids), "no vocabulary is loaded");
    CHECK(ids.empty());
    CHECK(empty.size() == 0);
    CHECK(empty.label(3).empty());
    REQUIRE(Bpe::from_memory(f.vocab, f.merges, bpe).is_ok());
    check_refused(bpe.encode("ok \xff", ids), "not valid UTF-8");
    check_refused(bpe.encode("\xed\xa0\x80", ids), "not valid UTF-8");  // a surrogate
  }
}

TEST_CASE("bpe: files and folders") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "attnviz_test_bpe";
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  const Files f = truncated(5);
  std::ofstream(dir / "vocab.json", std::ios::binary) << f.vocab;
  std::ofstream(dir / "merges.txt", std::ios::binary) << f.merges;
  Bpe bpe;
  REQUIRE(Bpe::load_dir(dir.string(), bpe).is_ok());
  CHECK(bpe.size() == 261);
  REQUIRE(Bpe::load_files((dir / "vocab.json").string(), (dir / "merges.txt").string(), bpe).is_ok());
  CHECK(bpe.size() == 261);
  check_refused(Bpe::load_files((dir / "nope.json").string(), (dir / "merges.txt").string(), bpe),
                "nope.json': No such file or directory");
  check_refused(Bpe::load_files((dir / "sub").string(), (dir / "merges.txt").string(), bpe),
                "sub': is a directory");
  check_refused(Bpe::load_dir((dir / "sub").string(), bpe), "no vocabulary in");
  check_refused(Bpe::load_dir("", bpe), "no vocabulary folder");
  // Errors name the file; a file over the cap is refused before it is read (a sparse file: no disk used).
  std::ofstream(dir / "bad.json", std::ios::binary) << "{\"a\": true}";
  check_refused(Bpe::load_files((dir / "bad.json").string(), (dir / "merges.txt").string(), bpe),
                "bad.json: the id of 'a' is not an integer");
  std::ofstream(dir / "huge.json", std::ios::binary) << "{";
  fs::resize_file(dir / "huge.json", attnviz::kMaxVocabFileBytes + 1);
  check_refused(Bpe::load_files((dir / "huge.json").string(), (dir / "merges.txt").string(), bpe),
                "huge.json': 67.108865 MB, more than the 67.108864 MB limit");  // read "67.1 MB" twice
  CHECK(bpe.size() == 261);  // a failed load leaves the tokenizer as it was
  fs::remove_all(dir);
}

TEST_CASE("bpe: the vocabulary folder beside the executable, and ATTNVIZ_VOCAB_DIR") {
  const char* before = std::getenv("ATTNVIZ_VOCAB_DIR");
  const std::string saved = before ? before : "";
  setenv("ATTNVIZ_VOCAB_DIR", "/some/where", 1);
  CHECK(attnviz::default_vocab_dir() == "/some/where");
  unsetenv("ATTNVIZ_VOCAB_DIR");
#ifndef __EMSCRIPTEN__  // under node the executable is node itself
  namespace fs = std::filesystem;
  CHECK(fs::equivalent(attnviz::default_vocab_dir(), kGpt2Dir));
#endif
  if (before) setenv("ATTNVIZ_VOCAB_DIR", saved.c_str(), 1);
}

TEST_CASE("bpe: decode(encode(s)) == s for random text, long runs and odd whitespace") {
  const Bpe& bpe = gpt2();
  std::mt19937 rng(2026);
  // Code points from every range that matters: ASCII, Latin-1, combining marks, CJK, emoji, controls.
  const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x00, 0x7F}, {0x80, 0xFF}, {0x300, 0x36F}, {0x4E00, 0x4E80}, {0x1F600, 0x1F64F}, {0x2000, 0x206F}};
  for (int round = 0; round < 300; ++round) {
    std::string s;
    const int length = static_cast<int>(rng() % 40);
    for (int i = 0; i < length; ++i) {
      const auto& r = ranges[rng() % ranges.size()];
      const char32_t cp = r.first + static_cast<char32_t>(rng() % (r.second - r.first + 1));
      if (cp < 0x80) {
        s += static_cast<char>(cp);
      } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        s += static_cast<char>(0xE0 | (cp >> 12)), s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        s += static_cast<char>(0xF0 | (cp >> 18)), s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), s += static_cast<char>(0x80 | (cp & 0x3F));
      }
    }
    REQUIRE(attnviz::check_utf8(s).is_ok());
    CAPTURE(s);
    const std::vector<int> ids = ids_of(bpe, s);
    CHECK(bpe.decode(ids) == s);
    CHECK(std::all_of(ids.begin(), ids.end(), [](int id) { return id >= 0 && id < 50256; }));
  }
  // Long runs of one character take O(n log n), and still round-trip (tokenizer.oracle checks their ids).
  for (const std::string unit : {"a", " ", "\n", "!", "7", "\xe4\xb8\xad", "\xf0\x9f\x98\x80"}) {
    std::string s;
    for (int i = 0; i < 20000; ++i) s += unit;
    CAPTURE(unit);
    const std::vector<int> ids = ids_of(bpe, s);
    CHECK(bpe.decode(ids) == s);
  }
}

#ifndef __EMSCRIPTEN__  // no threads in the WebAssembly build
TEST_CASE("bpe: encode from several threads at once gives the same ids") {
  // A fresh instance, so the threads fill its piece memory together.
  Bpe bpe;
  REQUIRE(Bpe::load_dir(kGpt2Dir, bpe).is_ok());
  const auto text = [](int i) {
    return "Every effort moves you " + std::to_string(i) + " times, naive café 中文 😀 word" +
           std::to_string(i % 13);
  };
  const Bpe& reference = gpt2();
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int& bad : mismatches) {
    threads.emplace_back([&bpe, &reference, &text, &bad] {
      std::vector<int> ids, expected;
      for (int i = 0; i < 300; ++i) {
        const bool ok = bpe.encode(text(i), ids).is_ok() && reference.encode(text(i), expected).is_ok();
        if (!ok || ids != expected) ++bad;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}
#endif
