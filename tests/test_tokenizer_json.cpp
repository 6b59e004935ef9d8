// tokenizer.json (engine/io/tokenizer_json.hpp behind Bpe::from_tokenizer_json): each normalizer,
// pre-tokenizer, decoder and added-token rule on small hand-made files, with the values Hugging Face's
// tokenizers documents or that follow by hand; then hostile files, each refused with one line. The real
// files are compared with Hugging Face's own tokenizers by the tokenizer.hf.* tests.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnviz/io/bpe.hpp"
#include "attnviz/io/train_text.hpp"
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
  CHECK(st.error.find("a tokenizer regex failed") == 0);
  CHECK(out.empty());
}
