// tokenizer.json (engine/io/tokenizer_json.hpp behind Bpe::from_tokenizer_json): each normalizer,
// pre-tokenizer, decoder and added-token rule on small hand-made files, with the values Hugging Face's
// tokenizers documents or that follow by hand; then hostile files, each refused with one line. The real
// files are compared with Hugging Face's own tokenizers by the tokenizer.hf.* tests.
#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnviz/io/bpe.hpp"
#include "attnviz/io/train_text.hpp"
#include "attnviz/text.hpp"
#include "io/tokenizer_json.hpp"

using attnviz::Bpe;
using attnviz::Status;
using nlohmann::json;
namespace hf = attnviz::hf;

namespace {

const char* const kMeta = "\xe2\x96\x81";  // U+2581, SentencePiece's space

// A SentencePiece-style BPE (Llama 2's layout) on a tiny vocabulary.
json sp_file() {
  const std::string m = kMeta;
  return json{
      {"version", "1.0"},
      {"added_tokens",
       json::array({{{"id", 0}, {"content", "<unk>"}, {"special", true}, {"normalized", false}},
                    {{"id", 1}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
                    {{"id", 2}, {"content", "</s>"}, {"special", true}, {"normalized", false}}})},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         json::array({{{"type", "Prepend"}, {"prepend", m}},
                      {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", m}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", m}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}},
                                  {{"type", "Fuse"}},
                                  {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model",
       {{"type", "BPE"},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"vocab",
         {{"<unk>", 0},
          {"<s>", 1},
          {"</s>", 2},
          {m, 3},
          {"a", 4},
          {"b", 5},
          {m + "a", 6},
          {"ab", 7},
          {m + "ab", 8},
          {"<0x0A>", 9},
          {"<0xC3>", 10},
          {"<0xA9>", 11}}},
        {"merges", json::array({m + " a", "a b", m + "a b"})}}}};
}

Bpe load(const json& j) {
  Bpe b;
  const Status st = Bpe::from_tokenizer_json(j.dump(), b);
  REQUIRE_MESSAGE(st.is_ok(), st.error);
  return b;
}

std::vector<int> ids(const Bpe& b, const std::string& text, bool special = true) {
  std::vector<int> out;
  const Status st = b.encode(text, out, special);
  REQUIRE_MESSAGE(st.is_ok(), st.error);
  return out;
}

void check_refused(const std::string& text, const std::string& needle) {
  Bpe b;
  const Status st = Bpe::from_tokenizer_json(text, b);
  REQUIRE_FALSE(st.is_ok());
  CHECK_MESSAGE(st.error.find(needle) != std::string::npos, st.error);
  CHECK(st.error.find('\n') == std::string::npos);
  CHECK(b.size() == 0);
}

void check_refused_json(const json& j, const std::string& needle) {
  check_refused(j.dump(), needle);
}

// A tokenizer.json around one pre-tokenizer (or normalizer, or decoder), read into hf's description.
void read(const json& j, hf::Tokenizer& t) {
  const Status st = hf::read_tokenizer_json(j.dump(), "t", t);
  REQUIRE_MESSAGE(st.is_ok(), st.error);
}

std::vector<std::string> pre(const json& step, const std::string& text, bool first = true) {
  json j = sp_file();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = step;
  hf::Tokenizer t;
  read(j, t);
  std::vector<hf::Piece> pieces{{text, first}};
  REQUIRE(hf::pre_tokenize(t.pre_tokenizers, pieces).is_ok());
  std::vector<std::string> out;
  for (const hf::Piece& p : pieces) out.push_back(p.text);
  return out;
}

std::string norm(const json& step, std::string text) {
  json j = sp_file();
  j["normalizer"] = step;
  hf::Tokenizer t;
  read(j, t);
  REQUIRE(hf::normalize(t.normalizers, text).is_ok());
  return text;
}

}  // namespace

TEST_CASE("tokenizer.json: a SentencePiece-style BPE with byte fallback, unknown tokens and a BOS") {
  const Bpe b = load(sp_file());
  CHECK(b.size() == 12);
  CHECK(b.bos() == 1);
  CHECK(b.eos() == -1);
  CHECK(b.is_special(1));
  CHECK_FALSE(b.is_special(8));
  // "ab" -> "▁ab": (▁, a) merges first (rank 0), then (▁a, b) (rank 2).
  CHECK(ids(b, "ab") == std::vector<int>{1, 8});
  CHECK(ids(b, "ab", false) == std::vector<int>{8});
  CHECK(ids(b, "ab ab") == std::vector<int>{1, 8, 8});
  CHECK(ids(b, "") == std::vector<int>{1});
  CHECK(ids(b, "\n") == std::vector<int>{1, 3, 9});             // byte fallback
  CHECK(ids(b, "\xc3\xa9") == std::vector<int>{1, 3, 10, 11});  // é as two bytes
  CHECK(ids(b, "xy") == std::vector<int>{1, 3, 0});             // one fused unknown token
  // Added tokens written in the text are theirs, and each piece between is normalized on its own.
  CHECK(ids(b, "a<s>b") == std::vector<int>{1, 6, 1, 3, 5});
  CHECK(b.decode({8, 8}) == "ab ab");  // Strip drops the first space
  CHECK(b.decode({3, 10, 11}) == "\xc3\xa9");
  CHECK(b.bytes(8) == " ab");
  CHECK(b.label(8) == "\u00B7ab");
  CHECK(b.bytes(9) == "\n");
  CHECK(b.label(1) == "<s>");

  json unfused = sp_file();
  unfused["model"]["fuse_unk"] = false;
  CHECK(ids(load(unfused), "xy") == std::vector<int>{1, 3, 0, 0});
  json no_fallback = sp_file();
  no_fallback["model"]["byte_fallback"] = false;
  CHECK(ids(load(no_fallback), "\n") == std::vector<int>{1, 3, 0});
}

TEST_CASE("tokenizer.json: training text gets no BOS, with or without <|endoftext|> in the vocabulary") {
  // The text to train on is encoded as tiktoken encodes it for the book: no post-processor's tokens, so the
  // training and validation parts (each encoded on its own) do not each start with a BOS.
  const Bpe plain = load(sp_file());
  std::vector<int> out;
  REQUIRE(attnviz::encode_training_text(plain, "ab ab", out).is_ok());
  CHECK(out == std::vector<int>{8, 8});
  CHECK(attnviz::endoftext_id(plain) == -1);
  json with_eot = sp_file();
  with_eot["added_tokens"].push_back(
      {{"id", 12}, {"content", "<|endoftext|>"}, {"special", true}, {"normalized", false}});
  with_eot["model"]["vocab"]["<|endoftext|>"] = 12;
  const Bpe eot = load(with_eot);
  CHECK(attnviz::endoftext_id(eot) == 12);
  REQUIRE(attnviz::encode_training_text(eot, "ab<|endoftext|>ab", out).is_ok());
  CHECK(out == std::vector<int>{8, 12, 8});
  REQUIRE(attnviz::encode_training_text(eot, "ab ab", out).is_ok());
  CHECK(out == std::vector<int>{8, 8});
}

TEST_CASE("tokenizer.json: ignore_merges takes a word that is in the vocabulary whole") {
  json j = sp_file();
  j["normalizer"] = nullptr;
  j["model"]["vocab"]["bab"] = 12;
  CHECK(ids(load(j), "bab", false) == std::vector<int>{5, 7});  // merges make "b" "ab", never "bab"
  j["model"]["ignore_merges"] = true;
  CHECK(ids(load(j), "bab", false) == std::vector<int>{12});
}

TEST_CASE("tokenizer.json: Split's behaviours, as Hugging Face documents them") {
  const auto split = [](const char* behavior, bool invert = false) {
    return pre(
        {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}},
        "the-final--countdown");
  };
  using V = std::vector<std::string>;
  CHECK(split("Removed") == V{"the", "final", "countdown"});
  CHECK(split("Isolated") == V{"the", "-", "final", "-", "-", "countdown"});
  CHECK(split("MergedWithPrevious") == V{"the-", "final-", "-", "countdown"});
  CHECK(split("MergedWithNext") == V{"the", "-final", "-", "-countdown"});
  CHECK(split("Contiguous") == V{"the", "-", "final", "--", "countdown"});
  CHECK(split("Removed", true) == V{"-", "-", "-"});  // each "-" is a match of its own
  // A regex, with \s as Unicode's White_Space (U+180E is not one).
  CHECK(pre({{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Removed"}},
            "a \t b\xe1\xa0\x8e"
            "c\xe3\x80\x80"
            "d") == V{"a",
                      "b\xe1\xa0\x8e"
                      "c",
                      "d"});
}

TEST_CASE("tokenizer.json: Metaspace, Digits, ByteLevel and Sequence pre-tokenizers") {
  using V = std::vector<std::string>;
  const std::string m = kMeta;
  const auto meta = [](const char* scheme, bool split) {
    return json{{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", scheme}, {"split", split}};
  };
  CHECK(pre(meta("always", true), "Hey friend") == V{m + "Hey", m + "friend"});
  CHECK(pre(meta("first", true), "Hey friend", false) == V{"Hey", m + "friend"});
  CHECK(pre(meta("first", true), "Hey friend", true) == V{m + "Hey", m + "friend"});
  CHECK(pre(meta("never", true), "Hey friend") == V{"Hey", m + "friend"});
  CHECK(pre(meta("always", false), "Hey friend") == V{m + "Hey" + m + "friend"});
  CHECK(pre({{"type", "Digits"}, {"individual_digits", true}}, "Call 123 please") ==
        V{"Call ", "1", "2", "3", " please"});
  CHECK(pre({{"type", "Digits"}, {"individual_digits", false}}, "Call 123 please") ==
        V{"Call ", "123", " please"});
  CHECK(pre({{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}, "Hello world!  x") ==
        V{" Hello", " world", "!", " ", " x"});
  CHECK(pre({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}, "Hello world") ==
        V{"Hello world"});
  CHECK(pre({{"type", "Sequence"},
             {"pretokenizers",
              json::array({{{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}},
                           {{"type", "Digits"}, {"individual_digits", true}}})}},
            "ab 12") == V{"ab", "1", "2"});
}

TEST_CASE("tokenizer.json: NFC, NFD, NFKC, Prepend, Replace and Sequence normalizers") {
  CHECK(norm({{"type", "NFC"}}, "e\xcc\x81") == "\xc3\xa9");
  CHECK(norm({{"type", "NFD"}}, "\xc3\xa9") == "e\xcc\x81");
  CHECK(norm({{"type", "NFKC"}}, "\xef\xac\x81") == "fi");
  CHECK(norm({{"type", "Prepend"}, {"prepend", "_"}}, "") == "");
  CHECK(norm({{"type", "Prepend"}, {"prepend", "_"}}, "x") == "_x");
  CHECK(norm({{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", "_"}}, "a  b c") == "a_b_c");
  CHECK(norm({{"type", "Sequence"},
              {"normalizers", json::array({{{"type", "NFC"}}, {{"type", "Prepend"}, {"prepend", "<"}}})}},
             "e\xcc\x81") == "<\xc3\xa9");
}

TEST_CASE("tokenizer.json: decoders, whole and one token at a time") {
  json j = sp_file();
  hf::Tokenizer t;
  read(j, t);
  const std::string m = kMeta;
  std::vector<std::string> tokens{m + "Hello", m + "w", "or", "<0x21>"};
  hf::decode_tokens(t.decoders, tokens, false);
  REQUIRE(tokens.size() == 1);
  CHECK(tokens[0] == "Hello wor!");
  tokens = {m + "Hello"};
  hf::decode_tokens(t.decoders, tokens, true);  // a label keeps its space
  CHECK(tokens == std::vector<std::string>{" Hello"});

  j["decoder"] = {{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "always"}};
  hf::Tokenizer meta;
  read(j, meta);
  tokens = {m + "Hey", m + "friend"};
  hf::decode_tokens(meta.decoders, tokens, false);
  CHECK(tokens == std::vector<std::string>{"Hey", " friend"});
}

TEST_CASE("tokenizer.json: added tokens honour lstrip, rstrip, single_word and normalized") {
  const auto with = [](json token) {
    json j = sp_file();
    token["id"] = 12;
    token["content"] = "<m>";
    j["added_tokens"].push_back(token);
    return load(j);
  };
  // Plain: the spaces around stay text (each piece normalized on its own: "a " -> "▁a▁", " b" -> "▁▁b").
  CHECK(ids(with({}), "a <m> b", false) == std::vector<int>{6, 3, 12, 3, 3, 5});
  CHECK(ids(with({{"lstrip", true}}), "a <m> b", false) == std::vector<int>{6, 12, 3, 3, 5});
  CHECK(ids(with({{"rstrip", true}}), "a <m> b", false) == std::vector<int>{6, 3, 12, 3, 5});
  CHECK(ids(with({{"lstrip", true}, {"rstrip", true}}), "a <m> b", false) == std::vector<int>{6, 12, 3, 5});
  // single_word: not inside a word.
  CHECK(ids(with({{"single_word", true}}), "a<m>", false).back() != 12);
  CHECK(ids(with({{"single_word", true}}), "a <m>", false).back() == 12);
  // normalized: matched in the normalized text ("<m>" becomes "▁<m>" there, so "x<m>" has no match).
  const Bpe n = with({{"normalized", true}});
  CHECK(ids(n, "<m>", false) == std::vector<int>{12});
  CHECK(ids(n, "b <m>", false) == std::vector<int>{3, 5, 12});
}

TEST_CASE("tokenizer.json: post-processors add their tokens around the text") {
  json j = sp_file();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", "<s> $A </s>"},
                         {"special_tokens", {{"<s>", {{"ids", {1}}}}, {"</s>", {{"ids", {2}}}}}}};
  const Bpe b = load(j);
  CHECK(ids(b, "ab") == std::vector<int>{1, 8, 2});
  CHECK(b.bos() == 1);
  CHECK(b.eos() == 2);
  j["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       json::array({{{"type", "ByteLevel"}},
                    {{"type", "RobertaProcessing"}, {"cls", {"<s>", 1}}, {"sep", {"</s>", 2}}}})}};
  CHECK(ids(load(j), "ab") == std::vector<int>{1, 8, 2});
}

TEST_CASE("tokenizer.json: hostile files are refused with one line naming the problem") {
  check_refused("", "not valid JSON");
  check_refused("{\"model\": ", "not valid JSON");
  check_refused("[]", "expected a JSON object");
  check_refused(std::string(100000, '[') + std::string(100000, ']'), "nested deeper than 64");
  check_refused(std::string(65 << 20, ' '), "is 68.2 MB, more than the 67.1 MB limit");  // said "64 MB"
  check_refused(std::string((64 << 20) + 1, ' '), "is 67.108865 MB, more than the 67.108864 MB limit");
  // 10^7 merges claimed: refused at the cap, after reading a fifth of them.
  {
    std::string text = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [)";
    text.reserve(text.size() + 60000000);
    for (int i = 0; i < 10000000; ++i) text += i ? ",\"a b\"" : "\"a b\"";
    text += "]}}";
    check_refused(text, "model.merges has more than 2097152 merges");
  }
  // A vocabulary of more than 2^20 tokens.
  {
    std::string text = R"({"model": {"type": "BPE", "merges": [], "vocab": {)";
    for (int i = 0; i <= (1 << 20); ++i)
      text += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":" + std::to_string(i);
    text += "}}}";
    check_refused(text, "model.vocab has more than 1048576 tokens");
  }
  json j = sp_file();
  j["model"]["vocab"]["z"] = 1 << 21;
  check_refused_json(j, "the id 2097152 of 'z' is outside");
  j = sp_file();
  j["model"]["vocab"]["z"] = 4;
  check_refused_json(j, "the id 4 is given to both");
  j = sp_file();
  j["model"]["merges"].push_back("a q");
  check_refused_json(j, "model.merges entry 4: 'q' is not in model.vocab");
  j = sp_file();
  j["model"]["merges"].push_back("b b");
  check_refused_json(j, "the result 'bb' is not in model.vocab");
  j = sp_file();
  j["model"]["merges"].push_back(json::array({"a"}));
  check_refused_json(j, "expected [\"left\", \"right\"]");
  j = sp_file();
  j["model"]["vocab"]["q"] = "7";
  check_refused_json(j, "the id of 'q' is not an integer");
  j = sp_file();
  j["model"]["unk_token"] = "<nope>";
  check_refused_json(j, "model.unk_token '<nope>' is not in model.vocab");
  j = sp_file();
  j["model"]["dropout"] = 0.1;
  check_refused_json(j, "model.dropout is not supported");
  j = sp_file();
  j["model"].erase("merges");
  check_refused_json(j, "model.merges is missing");
  j = sp_file();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(ab"}}}, {"behavior", "Isolated"}};
  check_refused_json(j,
                     "pre_tokenizer.pattern: the regex '(ab' does not compile (missing closing parenthesis)");
  j = sp_file();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Sideways"}};
  check_refused_json(j, "behavior 'Sideways' is not one of");
  // Unknown types, by name.
  j = sp_file();
  j["model"]["type"] = "WordPiece";
  check_refused_json(j, "the model type 'WordPiece' is not supported (only BPE)");
  j = sp_file();
  j["normalizer"] = {{"type", "Lowercase"}};
  check_refused_json(j, "normalizer: the normalizer 'Lowercase' is not supported");
  j = sp_file();
  j["normalizer"]["normalizers"].push_back({{"type", "BertNormalizer"}});
  check_refused_json(j, "normalizer.normalizers[2]: the normalizer 'BertNormalizer' is not supported");
  j = sp_file();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  check_refused_json(j, "the pre-tokenizer 'Whitespace' is not supported");
  j = sp_file();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", json::array({{{"type", "ByteLevel"}}, {{"type", "Digits"}}})}};
  check_refused_json(j, "ByteLevel must be last");
  j = sp_file();
  j["decoder"] = {{"type", "WordPiece"}};
  check_refused_json(j, "the decoder 'WordPiece' is not supported");
  j = sp_file();
  j["post_processor"] = {{"type", "Mystery"}};
  check_refused_json(j, "the post-processor 'Mystery' is not supported");
  j = sp_file();
  j["post_processor"]["special_tokens"] = json::object();
  check_refused_json(j, "the special token '<s>' is not in special_tokens");
  j = sp_file();
  j["added_tokens"].push_back({{"id", 40}, {"content", "<s>"}});
  check_refused_json(j, "the content '<s>' is already an added token");
  // A Sequence nested deeper than the pipeline allows.
  json deep = {{"type", "NFC"}};
  for (int i = 0; i < 20; ++i) deep = {{"type", "Sequence"}, {"normalizers", json::array({deep})}};
  j = sp_file();
  j["normalizer"] = deep;
  check_refused_json(j, "too many normalizers");
}

TEST_CASE("tokenizer.json: a regex that backtracks without end fails encode with one line") {
  json j = sp_file();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a|a?)+$"}}}, {"behavior", "Isolated"}};
  const Bpe b = load(j);
  std::vector<int> out;
  const Status st = b.encode(std::string(40, 'a') + "b", out);
  REQUIRE_FALSE(st.is_ok());
  INFO(st.error);
  // The search's cost cap comes before PCRE2's own limit at one position.
  CHECK(st.error.find(
            "pre_tokenizer.pattern: the tokenizer's regexes need more than 1216512 steps on a text of "
            "41 bytes") != std::string::npos);
  CHECK(out.empty());
}

namespace {

// Encoding `text` fails with one line that holds `needle`.
void check_encode_refused(const Bpe& b, const std::string& text, const std::string& needle) {
  std::vector<int> out;
  const Status st = b.encode(text, out, false);
  REQUIRE_FALSE(st.is_ok());
  INFO(st.error);
  CHECK(st.error.find(needle) != std::string::npos);
  CHECK(st.error.find('\n') == std::string::npos);
  CHECK(out.empty());
}

// The old search (PCRE2 left to find the leftmost match from each position itself): what find_matches must
// still give wherever its cost cap is not reached.
std::vector<hf::Span> unbounded_matches(const hf::Pattern& p, const std::string& s) {
  std::vector<hf::Span> out;
  if (s.empty()) return {{0, 0, false}};
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(p.re.get(), nullptr);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  std::size_t pos = 0, prev = 0, last_end = SIZE_MAX;
  while (pos <= s.size()) {
    if (pcre2_match(p.re.get(), subject, s.size(), pos, 0, md, nullptr) < 0) break;
    const PCRE2_SIZE* v = pcre2_get_ovector_pointer(md);
    const std::size_t b = v[0], e = v[1];
    if (e == b && last_end == e) {
      if (pos >= s.size()) break;
      ++pos;
      while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (prev != b) out.push_back({prev, b, false});
    out.push_back({b, e, true});
    prev = pos = last_end = e;
  }
  pcre2_match_data_free(md);
  if (prev != s.size()) out.push_back({prev, s.size(), false});
  return out;
}

}  // namespace

TEST_CASE("tokenizer.json: a regex search gives PCRE2's own matches, one position and window at a time") {
  // GPT-2's, Llama 3's and Qwen 2's pre-tokenizer patterns, and patterns that look behind, look ahead, match
  // empty, restart the match (\K), are lazy or anchor at the end, over texts with long runs (past the first
  // windows). (A pattern whose matches each read to the end of the text, such as "[^a]+?a" with no "a" near
  // the end, is quadratic, and is refused a text of a few hundred bytes: see the next test.)
  const char* const patterns[] = {
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      R"((?<=a)b+|x*|\b|$|a\Kb|(?=c)|\p{N})",
      R"(\s*)",
      R"([^a]{1,5}?a|1{1,3}(?=\s))",
      R"(é+|\X)"};
  const std::string pieces[] = {"a", "b", "c", " ", "  ", "\n", "1", "é", "中", "x", "'s", "!", "\t"};
  std::uint32_t state = 12345;
  const auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
  for (const char* pattern : patterns) {
    hf::Pattern p;
    REQUIRE(hf::compile_regex(pattern, "p", p).is_ok());
    for (int trial = 0; trial < 60; ++trial) {
      std::string text;
      const std::size_t parts = next() % 40;
      for (std::size_t k = 0; k < parts; ++k) {
        const std::string& piece = pieces[next() % std::size(pieces)];
        const std::size_t repeat = next() % 5 == 0 ? next() % 300 : 1;  // runs longer than a window
        for (std::size_t r = 0; r < repeat; ++r) text += piece;
      }
      std::vector<hf::Span> got;
      hf::RegexBudget budget(text.size());
      const Status st = hf::find_matches(p, text, got, budget);
      CAPTURE(pattern);
      CAPTURE(text);
      REQUIRE_MESSAGE(st.is_ok(), st.error);
      const std::vector<hf::Span> want = unbounded_matches(p, text);
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        CHECK(got[i].begin == want[i].begin);
        CHECK(got[i].end == want[i].end);
        CHECK(got[i].match == want[i].match);
      }
    }
  }
}

TEST_CASE("tokenizer.json: a file cannot make tokenizing unbounded") {
  SUBCASE("normalizers that each grow the text stop at the cap, naming the step") {
    json j = sp_file();
    json steps = json::array();
    for (int i = 0; i < 40; ++i)  // each doubles the text: 2^40 times, unbounded
      steps.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}});
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", steps}};
    const Bpe b = load(j);
    // "a": the cap is 16 + 1024 bytes, which the 11th step (2048 bytes) passes.
    check_encode_refused(
        b, "a",
        "normalizer.normalizers[10] (Replace) makes the text longer than 1040 bytes, the cap "
        "for a text of 1 bytes (16 a byte, plus 1024)");
    // Every segment between raw added tokens counts toward one cap for the whole text.
    check_encode_refused(b, std::string(20, 'b') + "</s>a</s>a", "makes the text longer than");
    // The file's other uses go on: text without the growing character, added tokens, decoding.
    CHECK(ids(b, "b</s>b", false) == std::vector<int>{5, 2, 5});
    CHECK(b.decode({5, 2}) == "b</s>");
    // A regex Replace and a Prepend grow the same way, and stop the same way.
    json r = sp_file();
    json grow = json::array();
    for (int i = 0; i < 20; ++i) grow.push_back({{"type", "Prepend"}, {"prepend", std::string(100, 'b')}});
    grow.push_back({{"type", "Replace"}, {"pattern", {{"Regex", "b"}}}, {"content", std::string(64, 'b')}});
    r["normalizer"] = {{"type", "Sequence"}, {"normalizers", grow}};
    const Bpe p = load(r);
    check_encode_refused(p, "a",
                         "normalizer.normalizers[10] (Prepend) makes the text longer than 1040 bytes");
    // A later segment between raw added tokens gets what the earlier ones left, and the line says so.
    check_encode_refused(
        b, std::string(30, 'b') + "</s>a",
        "normalizer.normalizers[10] (Replace) makes the text longer than 1554 bytes, what is left "
        "of the cap for a text of 35 bytes (16 a byte, plus 1024), 1584");
    check_encode_refused(p, std::string(100, 'a'), "normalizer.normalizers[20] (Replace) makes the text");
  }
  SUBCASE("an added token that is normalized when the file is read is bounded as a text is") {
    json j = sp_file();
    json steps = json::array();
    for (int i = 0; i < 40; ++i)
      steps.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}});
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", steps}};
    j["added_tokens"].push_back({{"id", 12}, {"content", "a"}, {"normalized", true}});
    check_refused_json(j,
                       "added_tokens[3]: normalizer.normalizers[14] (Replace) makes the text longer than "
                       "16384 bytes, an added token's cap of 16384 bytes");
  }
  SUBCASE("lstrip looks back only to the last match: linear in the text") {
    json j = sp_file();
    j["normalizer"] = nullptr;
    j["added_tokens"].push_back({{"id", 12}, {"content", "\n"}, {"lstrip", true}, {"normalized", false}});
    const Bpe b = load(j);
    // Each newline is the token, its white space before it taken by the previous match (quadratic before:
    // every match scanned back over the whole run).
    const std::vector<int> got = ids(b, std::string(300000, '\n'), false);
    CHECK(got.size() == 300000);
    CHECK(std::all_of(got.begin(), got.end(), [](int id) { return id == 12; }));
    CHECK(ids(b, "a \n\n", false) == std::vector<int>{4, 12, 12});
  }
  SUBCASE("added tokens that make the matcher walk far at every position are capped") {
    json j = sp_file();
    j["added_tokens"].push_back(
        {{"id", 12}, {"content", std::string(4095, 'a') + "b"}, {"normalized", false}, {"special", true}});
    const Bpe b = load(j);
    check_encode_refused(
        b, std::string(100000, 'a'),
        "added_tokens: matching them needs more than 6465536 steps on a text of 100000 bytes "
        "(the cap is 64 a byte, plus 65536)");
    CHECK(ids(b, std::string(4095, 'a') + "b", false) == std::vector<int>{12});
  }
  SUBCASE("a Split regex that scans ahead from every position is capped in total, not per match") {
    json j = sp_file();
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {
        {"type", "Split"}, {"pattern", {{"Regex", "\\p{L}+(?=\\d)"}}}, {"behavior", "Isolated"}};
    const Bpe b = load(j);
    // 120 kB of letters: every position's match reads to the end (16 s over the text before, each match
    // within PCRE2's limit).
    check_encode_refused(
        b, std::string(120000, 'a'),
        "pre_tokenizer.pattern: the tokenizer's regexes need more than 492568576 steps on a text of 120000 "
        "bytes (the cap is 4096 a byte, plus 1048576)");
    // Where it matches, it matches (a long run is read through growing windows).
    CHECK(pre(j["pre_tokenizer"], std::string(5000, 'b') + "1") ==
          std::vector<std::string>{std::string(5000, 'b'), "1"});
  }
  SUBCASE("what one step reads counts: a back reference compared over a long capture is capped too") {
    json j = sp_file();
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a+)\\1b"}}}, {"behavior", "Isolated"}};
    const Bpe b = load(j);
    // Each step of the back reference compares up to the whole run: charged window x steps, it is refused
    // (it took 18 s over 270 kB when an attempt was charged window + steps).
    check_encode_refused(
        b, std::string(300000, 'a'),
        "pre_tokenizer.pattern: the tokenizer's regexes need more than 1229848576 steps on a "
        "text of 300000 bytes");
    CHECK(pre(j["pre_tokenizer"], "aaab") == std::vector<std::string>{"a", "aab"});
  }
  SUBCASE(
      "every regex step of one text shares one cap: 64 steps each under it do not get 64 times the work") {
    json j = sp_file();
    j["normalizer"] = nullptr;
    json steps = json::array();
    for (int i = 0; i < 64; ++i)
      steps.push_back(
          {{"type", "Split"}, {"pattern", {{"Regex", "(a{1,20})\\1{1,5}b"}}}, {"behavior", "Isolated"}});
    j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", steps}};
    const Bpe b = load(j);
    check_encode_refused(b, std::string(130000, 'a'),
                         "the tokenizer's regexes need more than 533528576 steps");
    // The same steps as normalizers (Replace), after a normalizer that grows the text within its cap.
    json r = sp_file();
    json grow = json::array(
        {{{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", std::string(15, 'a')}}});
    for (int i = 0; i < 63; ++i)
      grow.push_back({{"type", "Replace"}, {"pattern", {{"Regex", "(a{1,20})\\1{1,5}b"}}}, {"content", "b"}});
    r["normalizer"] = {{"type", "Sequence"}, {"normalizers", grow}};
    check_encode_refused(load(r), std::string(20000, 'a'),
                         "the tokenizer's regexes need more than 82968576 steps");
  }
  SUBCASE("a pattern that could cut a UTF-8 character apart, or that Oniguruma would not read, is refused") {
    for (const auto& [pattern, needle] :
         {std::pair<std::string, std::string>{"\\C", "uses \\C, which matches one byte"},
          {"a(?<=\\C)", "uses \\C"},
          {"\\G\\w", "uses \\G"},
          {"(*SKIP)a", "uses a PCRE2 verb or option"},
          {"(*UTF)(*NO_START_OPT)a", "uses a PCRE2 verb or option"}}) {
      json j = sp_file();
      j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}};
      check_refused_json(j, "pre_tokenizer.pattern: the regex " + attnviz::quote(pattern) + " " + needle);
    }
  }
  SUBCASE("decoders: literal replacements that cannot grow a text past 16 times, and Strip is linear") {
    json j = sp_file();
    j["decoder"] = {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "xxxxx"}};
    check_refused_json(j, "decoder.content is longer than 4 bytes");
    // A regex would insert its replacement at every empty match, and its work would be a decode's.
    j["decoder"] = {{"type", "Replace"}, {"pattern", {{"Regex", ""}}}, {"content", "abcd"}};
    check_refused_json(j, "decoder.pattern: a Replace decoder's regex is not supported (a String is)");
    // Each "a" -> "aaaa" grows a text 4 times: two of them 16 times (taken), three 64 times (refused).
    const json grow = {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aaaa"}};
    j["decoder"] = {{"type", "Sequence"}, {"decoders", json::array({grow, grow})}};
    CHECK(load(j).decode({4}) == std::string(16, 'a'));
    j["decoder"] = {{"type", "Sequence"}, {"decoders", json::array({grow, grow, grow})}};
    check_refused_json(j, "decoder: its Replace steps could make a decoded text more than 16 times as long");
    j["decoder"] = {{"type", "Sequence"},
                    {"decoders", json::array({{{"type", "Fuse"}},
                                              {{"type", "Strip"}, {"content", "b"}, {"start", 1 << 20}}})}};
    const Bpe b = load(j);
    const std::vector<int> many(1 << 21, 5);  // "b" 2^21 times, fused, then 2^20 taken off the front
    CHECK(b.decode(many) == std::string(1 << 20, 'b'));
  }
}
