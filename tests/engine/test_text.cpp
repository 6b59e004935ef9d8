// Text to inputs: UTF-8 checks, whitespace tokens, the book's embeddings and derived ones.
#include <doctest/doctest.h>

#include "attnviz/text.hpp"

using namespace attnviz;

TEST_CASE("words split on Unicode whitespace and keep UTF-8 intact") {
  std::vector<std::string> w;
  REQUIRE(split_words("  Your\tjourney\nstarts  ", w).is_ok());
  CHECK(w == std::vector<std::string>{"Your", "journey", "starts"});
  REQUIRE(split_words("naïve\xC2\xA0"
                      "café\xE3\x80\x80日本語 🙂",
                      w)
              .is_ok());  // NBSP, ideographic space
  CHECK(w == std::vector<std::string>{"naïve", "café", "日本語", "🙂"});
  REQUIRE(split_words("", w).is_ok());
  CHECK(w.empty());
  REQUIRE(split_words(" \t\n", w).is_ok());
  CHECK(w.empty());
}

TEST_CASE("invalid UTF-8 is refused with the offending byte") {
  std::vector<std::string> w;
  CHECK(split_words("ok \xFF", w).error == "the text is not valid UTF-8 (bad byte 0xFF at offset 3)");
  CHECK_FALSE(check_utf8("\xC0\xAF").is_ok());          // overlong '/'
  CHECK_FALSE(check_utf8("\xED\xA0\x80").is_ok());      // UTF-16 surrogate
  CHECK_FALSE(check_utf8("\xF4\x90\x80\x80").is_ok());  // past U+10FFFF
  CHECK_FALSE(check_utf8("\xE6\x97").is_ok());          // truncated
  CHECK(check_utf8("\xF0\x9F\x99\x82").is_ok());
}

TEST_CASE("the book's words get the book's vectors, other words a stable derived vector") {
  const std::vector<float> journey = embed_word("journey", 3, 123);
  CHECK(journey == std::vector<float>{0.55f, 0.87f, 0.66f});
  CHECK(embed_word("Journey,", 3, 5) ==
        journey);  // case and trailing punctuation ignored for the book's words
  CHECK(embed_word("Dream", 3, 0) == std::vector<float>{0.72f, 0.45f, 0.31f});

  const std::vector<float> a = embed_word("attention", 8, 123);
  CHECK(a == embed_word("attention", 8, 123));
  CHECK(a != embed_word("attention", 8, 124));
  CHECK(a != embed_word("Attention", 8, 123));
  CHECK(embed_word("journey", 4, 123).size() == 4);  // no table outside d_in 3
  for (float x : embed_word("x", 500, 1)) {
    CHECK(x >= -1.0f);
    CHECK(x < 1.0f);
  }
}

TEST_CASE("input_from_text: tokens, rows, and the messages for empty and overlong text") {
  Config c;
  Input in;
  REQUIRE(input_from_text(kDefaultText, c, in).is_ok());
  CHECK(in.tokens.size() == 6);
  CHECK(in.x.shape[0] == 6);
  CHECK(in.x.at(5, 1) == 0.80f);
  CHECK(input_from_text("   ", c, in).error == "the text is empty: type at least one word");
  c.context_length = 4;
  CHECK(input_from_text(kDefaultText, c, in).error ==
        "the text has 6 tokens, more than the context length 4");
  CHECK(in.tokens.size() == 6);  // unchanged by the failed calls
}

TEST_CASE("to_valid_utf8: one U+FFFD per maximal subpart, as bytes.decode('utf-8', errors='replace')") {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  struct Case {
    std::string bytes, text;
  };
  // The expected text follows Unicode's substitution of maximal subparts (what Python gives).
  const Case cases[] = {
      {"", ""},
      {"plain ascii", "plain ascii"},
      {"caf\xC3\xA9 \xF0\x9F\x98\x80", "caf\xC3\xA9 \xF0\x9F\x98\x80"},  // valid text passes unchanged
      {"\xF0\x9F", r},                                                   // a 4-byte character cut after 2
      {"\xF0\x9F\x98", r},                                               // ... and after 3
      {" \xF0\x9F\x98", " " + r},
      {"a\xC3", "a" + r},
      {"\x80", r},                                        // a lone continuation byte
      {"\x80\xF0\x9F\x98", r + r},                        // then a cut character
      {"\xF0\x9F\x98 \xC3\xA9", r + " \xC3\xA9"},         // the character cut, the rest kept
      {"\xC0\xAF", r + r},                                // overlong: C0 can never start a sequence
      {"\xE0\x80\xAF", r + r + r},                        // overlong: E0 takes A0..BF next
      {"\xED\xA0\x80", r + r + r},                        // a surrogate: ED takes 80..9F next
      {"\xF4\x90\x80\x80", r + r + r + r},                // past U+10FFFF: F4 takes 80..8F next
      {"\xF5\x80", r + r},                                // F5..FF never start a sequence
      {"\xE2\x82\xAC\xE2\x82", "\xE2\x82\xAC" + r},       // a euro sign, then one cut
      {"\xE2\x82x", r + "x"},                             // cut by an ASCII byte, which is kept
      {"\xF1\x80\x80\xE1\x80\xC0", r + r + r},            // two cut characters, then C0
      {std::string("a\0b", 3), std::string("a\0b", 3)}};  // NUL is valid UTF-8
  for (const Case& c : cases) {
    CAPTURE(quote(c.bytes));
    CHECK(to_valid_utf8(c.bytes) == c.text);
    CHECK(check_utf8(to_valid_utf8(c.bytes)).is_ok());
  }
}

TEST_CASE("quote: one line, nothing a terminal acts on, cut at a whole character") {
  CHECK(quote("gpt2-small") == "'gpt2-small'");
  // C0 controls, DEL and the bytes of C1 controls as \xNN, uppercase.
  CHECK(quote("a\nb\x1b[2J\x7f") == "'a\\x0Ab\\x1B[2J\\x7F'");
  CHECK(quote("csi \xc2\x9b"
              "31m") == "'csi \\xC2\\x9B31m'");
  // Broken UTF-8 byte by byte; whole characters kept.
  CHECK(quote("caf\xc3\xa9 \xff\xc3") == "'caf\xc3\xa9 \\xFF\\xC3'");
  // A backslash and the mark are escaped, so \x0A in the output is always an escape.
  CHECK(quote("a\\x0A 'b'") == "'a\\\\x0A \\'b\\''");
  // No marks: for a path that begins a message.
  CHECK(quote("/tmp/a\nb", kQuoteCap, '\0') == "/tmp/a\\x0Ab");
  // The cap counts the piece's bytes and never splits a character.
  CHECK(quote(std::string(200, 'x')) == "'" + std::string(kQuoteCap, 'x') + "...'");
  CHECK(quote("ab\xc3\xa9", 3) == "'ab...'");
  CHECK(quote("ab\xc3\xa9", 4) == "'ab\xc3\xa9'");
  CHECK(quote("\n\n\n", 2, '\0') == "\\x0A\\x0A...");
  CHECK(quote("") == "''");
  // A piece of any size gives a message of bounded size.
  CHECK(quote(std::string(1 << 20, '\x1b')).size() <= 4 * kQuoteCap + 5);
}
