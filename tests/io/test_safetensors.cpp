// The safetensors reader: valid files read back exactly (every dtype, any alignment, in memory and mapped),
// and every rule of the reference parser refused with one message that names the tensor and the problem.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#if !defined(__EMSCRIPTEN__)
#include <sys/stat.h>
#include <unistd.h>
#endif

#include "attnviz/io/safetensors.hpp"
#include "safetensors_writer.hpp"

namespace attnviz {
namespace {

using test::Bytes;
using test::SafetensorsWriter;

Status parse(const Bytes& b, SafetensorsFile& f) {
  return SafetensorsFile::from_memory(test::shared(b), "model.safetensors", f);
}

// The message for a file made of `header` and `data_bytes` zero bytes of data.
std::string error_of(const std::string& header, std::size_t data_bytes = 0) {
  SafetensorsFile f;
  const Status s = parse(SafetensorsWriter::file(header, Bytes(data_bytes, 0)), f);
  CHECK_FALSE(s.is_ok());
  CHECK(s.error.find('\n') == std::string::npos);
  return s.error;
}

bool contains(const std::string& s, const std::string& part) {
  INFO("message: " << s << "\nexpected to contain: " << part);
  return s.find(part) != std::string::npos;
}

Bytes le16(std::initializer_list<unsigned> words) {
  Bytes b;
  for (unsigned w : words) {
    b.push_back(static_cast<unsigned char>(w & 0xff));
    b.push_back(static_cast<unsigned char>(w >> 8));
  }
  return b;
}

// Every element of `t` read back is `want`.
void check_values(const SafeTensor& t, const std::vector<float>& want) {
  REQUIRE(t.numel == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(t.name << " element " << i);
    CHECK(load_element(t.data, t.dtype, i) == want[i]);
  }
  std::vector<float> all(want.size());
  widen(t.data, t.dtype, 0, all.size(), all.data());
  CHECK(all == want);
}

}  // namespace

TEST_CASE("safetensors: a valid file reads back exactly in every dtype") {
  SafetensorsWriter w;
  const auto a = test::known_values(6, 1), b = test::known_values(12, 2), c = test::known_values(5, 3);
  w.add("a", Dtype::f32, {2, 3}, a);
  w.add("b.weight", Dtype::f16, {3, 4}, b);
  w.add("c", Dtype::bf16, {5}, c);
  w.add("empty", Dtype::f32, {0, 7}, {});
  w.add("scalar", Dtype::f16, {}, {1.5f});
  w.metadata = {{"format", "pt"}, {"note", "tiny"}};

  SafetensorsFile f;
  REQUIRE(parse(w.bytes(), f).is_ok());
  CHECK(f.name() == "model.safetensors");
  CHECK_FALSE(f.mapped());
  REQUIRE(f.tensors().size() == 5);
  CHECK(f.metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"note", "tiny"}});
  CHECK(f.find("__metadata__") == nullptr);
  CHECK(f.find("nope") == nullptr);

  const SafeTensor* ta = f.find("a");
  REQUIRE(ta);
  CHECK(ta->dtype == Dtype::f32);
  CHECK(ta->shape == std::vector<std::uint64_t>{2, 3});
  CHECK(ta->begin == 0);
  CHECK(ta->end == 24);
  CHECK(ta->data == f.find("a")->data);
  check_values(*ta, a);

  const SafeTensor* tb = f.find("b.weight");
  REQUIRE(tb);
  CHECK(tb->dtype == Dtype::f16);
  CHECK(tb->begin == 24);
  CHECK(tb->bytes() == 24);
  check_values(*tb, b);

  const SafeTensor* tc = f.find("c");
  REQUIRE(tc);
  CHECK(tc->dtype == Dtype::bf16);
  CHECK(tc->shape == std::vector<std::uint64_t>{5});
  check_values(*tc, c);

  CHECK(f.find("empty")->numel == 0);
  CHECK(f.find("empty")->bytes() == 0);
  CHECK(f.find("scalar")->rank() == 0);
  check_values(*f.find("scalar"), {1.5f});

  // tensors() is in data order; the data section starts right after the header.
  CHECK(f.tensors()[0].name == "a");
  CHECK(f.data_start() == 8 + w.header().dump().size());
  CHECK(f.file_size() == f.data_start() + 24 + 24 + 10 + 2);
}

TEST_CASE("safetensors: an unaligned data section (gpt2's starts at byte 14,291) reads the same") {
  bool unaligned = false;
  for (std::size_t pad = 0; pad < 4; ++pad) {
    SafetensorsWriter w;
    const auto v = test::known_values(9, 7);
    w.add("x", Dtype::f32, {9}, v);
    w.add("y", Dtype::bf16, {9}, v);
    w.header_pad = pad;  // trailing spaces after the JSON are allowed
    SafetensorsFile f;
    REQUIRE(parse(w.bytes(), f).is_ok());
    CHECK(f.data_start() == 8 + w.header().dump().size() + pad);
    check_values(*f.find("x"), v);
    check_values(*f.find("y"), v);
    unaligned = unaligned || reinterpret_cast<std::uintptr_t>(f.find("x")->data) % 4 != 0;
  }
  CHECK(unaligned);  // some of the four paddings put the floats off a 4-byte boundary
}

TEST_CASE("safetensors: F16 and BF16 widen exactly, subnormals, infinities and NaN included") {
  SafetensorsWriter w;
  // 2^-24 (smallest subnormal), largest subnormal, smallest normal, 65504, inf, -inf, NaN, -0, 1, 1/3 rounded
  w.add_raw("h", "F16", {10},
            le16({0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x8000, 0x3c00, 0x3555}));
  // 2^-133 (an f32 subnormal), inf, -inf, NaN, 1, -3.140625
  w.add_raw("b", "BF16", {6}, le16({0x0001, 0x7f80, 0xff80, 0x7fc0, 0x3f80, 0xc049}));
  // the smallest f32 subnormal, -inf
  w.add_raw("f", "F32", {2}, Bytes{0x01, 0, 0, 0, 0, 0, 0x80, 0xff});
  w.header_pad = 1;  // and unaligned
  SafetensorsFile f;
  REQUIRE(parse(w.bytes(), f).is_ok());

  const SafeTensor& h = *f.find("h");
  CHECK(load_element(h.data, h.dtype, 0) == std::ldexp(1.0f, -24));
  CHECK(load_element(h.data, h.dtype, 1) == std::ldexp(1023.0f, -24));
  CHECK(load_element(h.data, h.dtype, 2) == std::ldexp(1.0f, -14));
  CHECK(load_element(h.data, h.dtype, 3) == 65504.0f);
  CHECK(load_element(h.data, h.dtype, 4) == std::numeric_limits<float>::infinity());
  CHECK(load_element(h.data, h.dtype, 5) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(load_element(h.data, h.dtype, 6)));
  CHECK(load_element(h.data, h.dtype, 7) == 0.0f);
  CHECK(std::signbit(load_element(h.data, h.dtype, 7)));
  CHECK(load_element(h.data, h.dtype, 8) == 1.0f);
  CHECK(load_element(h.data, h.dtype, 9) == 0.333251953125f);

  const SafeTensor& b = *f.find("b");
  CHECK(load_element(b.data, b.dtype, 0) == std::ldexp(1.0f, -133));
  CHECK(load_element(b.data, b.dtype, 1) == std::numeric_limits<float>::infinity());
  CHECK(load_element(b.data, b.dtype, 2) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(load_element(b.data, b.dtype, 3)));
  CHECK(load_element(b.data, b.dtype, 4) == 1.0f);
  CHECK(load_element(b.data, b.dtype, 5) == -3.140625f);

  const SafeTensor& g = *f.find("f");
  CHECK(load_element(g.data, g.dtype, 0) == std::ldexp(1.0f, -149));
  CHECK(load_element(g.data, g.dtype, 1) == -std::numeric_limits<float>::infinity());

  // widen from an offset agrees with load_element element by element
  float out[7];
  widen(h.data, h.dtype, 3, 7, out);
  for (int i = 0; i < 7; ++i) {
    const float e = load_element(h.data, h.dtype, static_cast<std::size_t>(3 + i));
    CHECK(((std::isnan(e) && std::isnan(out[i])) || e == out[i]));
  }
}

TEST_CASE("safetensors: a file on disk is mapped, and released pages read back the same") {
  test::TempDir dir("mapped");
  SafetensorsWriter w;
  // Big enough to span whole pages, so release() really drops some.
  const auto v = test::known_values(50000, 3);
  w.add("small", Dtype::f16, {3}, {1.0f, -2.0f, 0.5f});
  w.add("big", Dtype::f32, {50000}, v);
  w.header_pad = 3;
  const std::string path = dir.write("m.safetensors", w.bytes());

  SafetensorsFile f;
  REQUIRE(SafetensorsFile::open(path, f).is_ok());
#if defined(__EMSCRIPTEN__)
  CHECK_FALSE(f.mapped());
#else
  CHECK(f.mapped());
#endif
  CHECK(f.name() == path);
  check_values(*f.find("big"), v);
  f.release(*f.find("big"));
  f.release(*f.find("small"));
  check_values(*f.find("big"), v);
  check_values(*f.find("small"), {1.0f, -2.0f, 0.5f});

  // A copy shares the mapping: it stays valid after the original is gone.
  SafetensorsFile copy = f;
  f = SafetensorsFile();
  check_values(*copy.find("big"), v);
}

#if !defined(__EMSCRIPTEN__)
TEST_CASE("safetensors: a mapped file that shrinks reads as zeros past its new end, and says so") {
  // Another program truncating the file (a download restarting) would end the process with SIGBUS.
  test::TempDir dir("shrink");
  SafetensorsWriter w;
  const auto v = test::known_values(50000, 5);  // 200 kB: dozens of pages
  w.add("big", Dtype::f32, {50000}, v);
  const std::string path = dir.write("m.safetensors", w.bytes());
  SafetensorsFile f;
  REQUIRE(SafetensorsFile::open(path, f).is_ok());
  REQUIRE(f.mapped());
  CHECK(f.intact().is_ok());
  const SafeTensor& big = *f.find("big");
  CHECK(load_element(big.data, big.dtype, 10) == v[10]);  // this page is read before the file shrinks

  const std::size_t kept = f.data_start() + 4 * 1000;  // element 1000 on: gone, whole pages past the end
  REQUIRE(truncate(path.c_str(), static_cast<off_t>(kept)) == 0);
  CHECK(load_element(big.data, big.dtype, 49999) == 0.0f);  // not a SIGBUS
  CHECK(load_element(big.data, big.dtype, 30000) == 0.0f);
  CHECK(f.intact().error == path + ": the file shrank to " + std::to_string(kept) + " of its " +
                                std::to_string(f.file_size()) + " bytes while it was being read");

  // A file cut inside its last page raises no SIGBUS (the page reads as zeros past the end): its size says.
  SafetensorsFile g;
  const std::string other = dir.write("n.safetensors", w.bytes());
  REQUIRE(SafetensorsFile::open(other, g).is_ok());
  REQUIRE(truncate(other.c_str(), static_cast<off_t>(g.file_size() - 1)) == 0);
  CHECK(g.intact().error == other + ": the file shrank to " + std::to_string(g.file_size() - 1) + " of its " +
                                std::to_string(g.file_size()) + " bytes while it was being read");
  // Cut, read past the cut, then written again to its old size (a download restarting): the size is back,
  // but what was read in between was zeros.
  SafetensorsFile h;
  const std::string third = dir.write("o.safetensors", w.bytes());
  REQUIRE(SafetensorsFile::open(third, h).is_ok());
  REQUIRE(truncate(third.c_str(), static_cast<off_t>(kept)) == 0);
  CHECK(load_element(h.find("big")->data, Dtype::f32, 49999) == 0.0f);
  dir.write("o.safetensors", w.bytes());
  CHECK(h.intact().error == third +
                                ": part of the file could not be read while it was being read (it was "
                                "truncated and written again, or the disk failed)");
  // A file in memory cannot change.
  SafetensorsFile m;
  REQUIRE(parse(w.bytes(), m).is_ok());
  CHECK(m.intact().is_ok());
}
#endif

TEST_CASE("safetensors: an empty header is a valid file with no tensors") {
  SafetensorsFile f;
  REQUIRE(parse(SafetensorsWriter::file("{}  ", {}), f).is_ok());
  CHECK(f.tensors().empty());
  CHECK(f.metadata().empty());
}

TEST_CASE("safetensors: the header length") {
  SUBCASE("shorter than the length field") {
    SafetensorsFile f;
    const Status s = parse(Bytes{1, 0, 0}, f);
    CHECK(s.error == "model.safetensors: is 3 bytes, shorter than the 8-byte header length");
  }
  SUBCASE("over 100,000,000 bytes") {
    Bytes b = SafetensorsWriter::file("{}", {});
    const std::uint64_t n = 100'000'001;
    for (int i = 0; i < 8; ++i) b[static_cast<std::size_t>(i)] = static_cast<unsigned char>(n >> (8 * i));
    SafetensorsFile f;
    CHECK(parse(b, f).error ==
          "model.safetensors: header length 100000001 is over the limit of 100000000 bytes");
  }
  SUBCASE("past the end of the file") {
    Bytes b = SafetensorsWriter::file("{}", {});
    b[0] = 3;
    SafetensorsFile f;
    CHECK(parse(b, f).error == "model.safetensors: header length 3 runs past the end of the file (10 bytes)");
    b[0] = 0xff;
    b[7] = 0xff;  // 2^64 - 1: no overflow in 8 + N
    CHECK(contains(parse(b, f).error, "is over the limit"));
  }
}

TEST_CASE("safetensors: the header must be a JSON object") {
  CHECK(contains(error_of("{not json"), "model.safetensors: header is not JSON (parse error"));
  CHECK(contains(error_of(""), "header is not JSON"));
  CHECK(contains(error_of("{} x"), "header is not JSON"));
  CHECK(contains(error_of("{\"a\": \"\xff\"}"), "header is not JSON"));  // invalid UTF-8
  CHECK(error_of("[1, 2]") == "model.safetensors: header is not a JSON object");
  CHECK(error_of("7") == "model.safetensors: header is not a JSON object");
  CHECK(error_of(R"({"a": {"dtype": "F32", "shape": [[1]], "data_offsets": [0, 4]}})", 4) ==
        "model.safetensors: header nests deeper than a safetensors header can");
  CHECK(contains(error_of(std::string(5000, '[') + std::string(5000, ']')), "nests deeper"));
  CHECK(error_of(R"({"__metadata__": {"format": 1}})") ==
        "model.safetensors: __metadata__ entry 'format' is not a string");
  CHECK(error_of(R"({"__metadata__": ["pt"]})") == "model.safetensors: __metadata__ is not an object");
  CHECK(error_of(R"({"a": 5})") == "model.safetensors: tensor 'a': entry is not an object");
}

namespace {

// n empty tensors "t0", "t1", ... (all at data offset 0, so the data section is empty).
std::string empty_tensors_header(std::size_t n) {
  std::string h = "{";
  for (std::size_t i = 0; i < n; ++i)
    h += (i ? ",\"t" : "\"t") + std::to_string(i) + R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  return h + "}";
}

}  // namespace

TEST_CASE("safetensors: the header's entries and values are capped before it is parsed") {
  // nlohmann's parser callback once made the parse quadratic: 25,000 entries took 9 s, 100,000 never ended.
  // Now one pass counts the entries and values and refuses a header over the caps before parsing it, so no
  // accepted header is slow (the largest parses in about a tenth of a second: a figure, not a test).
  const std::size_t cap = SafetensorsFile::kMaxEntries;
  {
    SafetensorsFile f;
    REQUIRE(parse(SafetensorsWriter::file(empty_tensors_header(5000), {}), f).is_ok());
    CHECK(f.tensors().size() == 5000);
    REQUIRE(f.find("t4999") != nullptr);
    CHECK(f.find("t4999")->shape == std::vector<std::uint64_t>{0});
  }
  CHECK(error_of(empty_tensors_header(100'000)) ==
        "model.safetensors: header has 100000 entries, more than the limit of " + std::to_string(cap) +
            " (models hold a few thousand tensors per file)");
  CHECK(contains(error_of(empty_tensors_header(cap + 1)),
                 "header has " + std::to_string(cap + 1) + " entries"));
  // __metadata__ is an entry too.
  CHECK(contains(error_of(R"({"__metadata__":{},)" + empty_tensors_header(cap).substr(1)),
                 "header has " + std::to_string(cap + 1) + " entries"));

  // Values: one shape of 2,000,000 dimensions of 1 (4 bytes of data) is 4 MB of header, refused before it
  // is parsed; 1 member + 3 members + the dimensions + 2 offsets.
  std::string dims = "1";
  for (int i = 1; i < 2'000'000; ++i) dims += ",1";
  CHECK(
      error_of(R"({"a":{"dtype":"F32","shape":[)" + dims + R"(],"data_offsets":[0,4]}})", 4) ==
      "model.safetensors: header holds 2000006 values (keys, numbers and strings), more than the limit of " +
          std::to_string(SafetensorsFile::kMaxValues));

  // Brackets, colons, commas and quotes inside a name are not structure, and an escaped backslash before
  // the closing quote ends the name.
  std::string json_name = "x", name = "x";
  for (int i = 0; i < 12; ++i) json_name += R"({[:,\")", name += R"({[:,")";
  json_name += R"(\\)", name += R"(\)";
  SafetensorsFile f;
  const std::string h = R"({")" + json_name + R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  REQUIRE(parse(SafetensorsWriter::file(h, Bytes(4, 0)), f).is_ok());
  REQUIRE(f.tensors().size() == 1);
  CHECK(f.tensors()[0].name == name);
}

TEST_CASE("safetensors: dtypes other than F32, F16 and BF16 are refused by name") {
  for (const char* dt : {"F64", "I64", "I32", "U8", "I8", "BOOL", "F8_E4M3", "F8_E5M2", "U64"}) {
    const std::string h =
        std::string(R"({"w": {"dtype": ")") + dt + R"(", "shape": [1], "data_offsets": [0, 1]}})";
    CHECK(error_of(h, 1) == std::string("model.safetensors: tensor 'w': dtype ") + dt +
                                " is not supported (only F32, F16 and BF16 are)");
  }
  CHECK(error_of(R"({"w": {"dtype": "F17", "shape": [1], "data_offsets": [0, 4]}})", 4) ==
        "model.safetensors: tensor 'w': unknown dtype 'F17'");
  CHECK(error_of(R"({"w": {"dtype": 32, "shape": [1], "data_offsets": [0, 4]}})", 4) ==
        "model.safetensors: tensor 'w': no dtype string");
}

TEST_CASE("safetensors: shapes") {
  const auto with_shape = [](const std::string& shape, std::size_t end = 4) {
    return error_of(R"({"t.w": {"dtype": "F32", "shape": )" + shape + R"(, "data_offsets": [0, )" +
                        std::to_string(end) + "]}}",
                    end);
  };
  CHECK(with_shape("[-1, 2]") == "model.safetensors: tensor 't.w': shape has a negative dimension -1");
  CHECK(with_shape("[2, 1.5]") ==
        "model.safetensors: tensor 't.w': shape is not a list of non-negative integers");
  CHECK(with_shape("[\"2\"]") ==
        "model.safetensors: tensor 't.w': shape is not a list of non-negative integers");
  CHECK(with_shape("[18446744073709551616]") ==  // 2^64: JSON reads it as a float
        "model.safetensors: tensor 't.w': shape is not a list of non-negative integers");
  CHECK(with_shape("4") == "model.safetensors: tensor 't.w': no shape array");
  CHECK(with_shape("[4294967296, 4294967296]") ==
        "model.safetensors: tensor 't.w': shape [4294967296, 4294967296] has over 2^64 elements");
  CHECK(with_shape("[4611686018427387904]") ==  // 2^62 elements of 4 bytes
        "model.safetensors: tensor 't.w': shape [4611686018427387904] needs over 2^64 bytes in F32");
  CHECK(with_shape("[1000000, 1000000]") ==
        "model.safetensors: tensor 't.w': data_offsets [0, 4) hold 4 bytes but shape [1000000, 1000000] in "
        "F32 needs 4000000000000");
}

TEST_CASE("safetensors: data_offsets") {
  // The message the brief asks for, word for word.
  CHECK(error_of(
            R"({"h.0.attn.c_attn.weight": {"dtype": "F32", "shape": [768, 2304], "data_offsets": [0, 100]}})",
            100) ==
        "model.safetensors: tensor 'h.0.attn.c_attn.weight': data_offsets [0, 100) hold 100 bytes but shape "
        "[768, 2304] in F32 needs 7077888");
  CHECK(error_of(R"({"w": {"dtype": "F16", "shape": [2], "data_offsets": [8, 4]}})", 8) ==
        "model.safetensors: tensor 'w': data_offsets [8, 4) end before they begin");
  CHECK(error_of(R"({"w": {"dtype": "F16", "shape": [2], "data_offsets": [4, 8]}})", 6) ==
        "model.safetensors: tensor 'w': data_offsets [4, 8) run past the end of the 6-byte data section");
  CHECK(error_of(R"({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 18446744073709551615]}})", 4) ==
        "model.safetensors: tensor 'w': data_offsets [0, 18446744073709551615) run past the end of the "
        "4-byte data section");
  CHECK(error_of(R"({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0]}})", 4) ==
        "model.safetensors: tensor 'w': no data_offsets [begin, end] of two non-negative integers");
  CHECK(error_of(R"({"w": {"dtype": "F16", "shape": [2], "data_offsets": [-4, 0]}})", 4) ==
        "model.safetensors: tensor 'w': no data_offsets [begin, end] of two non-negative integers");
  CHECK(error_of(R"({"w": {"dtype": "F16", "shape": [2]}})", 4) ==
        "model.safetensors: tensor 'w': no data_offsets [begin, end] of two non-negative integers");
}

TEST_CASE("safetensors: the tensors tile the data section") {
  SUBCASE("overlap") {
    CHECK(error_of(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                   12) == "model.safetensors: tensors 'a' [0, 8) and 'b' [4, 12) overlap");
    // a zero-size tensor inside another one also overlaps it
    CHECK(error_of(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "z": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
                   8) == "model.safetensors: tensors 'a' [0, 8) and 'z' [4, 4) overlap");
    // the same bytes twice
    CHECK(error_of(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "b": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}})",
                   8) == "model.safetensors: tensors 'a' [0, 8) and 'b' [0, 8) overlap");
  }
  SUBCASE("hole") {
    CHECK(error_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                       "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                   12) ==
          "model.safetensors: bytes [4, 8) of the data section belong to no tensor (between tensors 'a' and "
          "'b')");
    CHECK(error_of(R"({"b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8) ==
          "model.safetensors: bytes [0, 4) of the data section belong to no tensor (before tensor 'b')");
  }
  SUBCASE("trailing bytes") {
    SafetensorsWriter w;
    w.add("a", Dtype::f32, {2}, {1.0f, 2.0f});
    Bytes b = w.bytes();
    b.insert(b.end(), {1, 2, 3});
    SafetensorsFile f;
    CHECK(parse(b, f).error ==
          "model.safetensors: the tensors end at byte 8 of the data section, but the file has 3 more bytes");
    CHECK(error_of("{}", 1) ==
          "model.safetensors: the tensors end at byte 0 of the data section, but the file has 1 more byte");
  }
  SUBCASE("zero-size tensors may sit at any boundary") {
    SafetensorsFile f;
    CHECK(parse(SafetensorsWriter::file(R"({"z0": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
                       "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                       "z4": {"dtype": "F16", "shape": [3, 0], "data_offsets": [4, 4]}})",
                                        Bytes(4, 0)),
                f)
              .is_ok());
    CHECK(f.tensors().size() == 3);
  }
}

TEST_CASE("safetensors: names in messages are quoted on one line") {
  CHECK(error_of("{\"a\\nb'\": {\"dtype\": \"F64\", \"shape\": [1], \"data_offsets\": [0, 8]}}", 8) ==
        "model.safetensors: tensor 'a\\x0Ab\\'': dtype F64 is not supported (only F32, F16 and BF16 are)");
  const std::string longname(300, 'n');
  const std::string e = error_of("{\"" + longname + "\": 1}");
  CHECK(e == "model.safetensors: tensor '" + std::string(120, 'n') + "...': entry is not an object");
}

TEST_CASE("safetensors: a shape of 500,000 dimensions gives a short message") {
  // Under the header's cap on values (2,000,000 dimensions are refused by the count alone), and still one
  // short line: a shape shows its first 8 dimensions and the count.
  std::string shape = "[2";
  for (int i = 1; i < 500'000; ++i) shape += ",1";
  shape += "]";
  const std::string e =
      error_of(R"({"a": {"dtype": "F32", "shape": )" + shape + R"(, "data_offsets": [0, 4]}})", 4);
  CHECK(e ==
        "model.safetensors: tensor 'a': data_offsets [0, 4) hold 4 bytes but shape [2, 1, 1, 1, 1, 1, 1, 1, "
        "... (500000 dims)] in F32 needs 8");
  CHECK(shape_string({1, 2, 3}) == "[1, 2, 3]");
  CHECK(shape_string(std::vector<std::uint64_t>(9, 7)) == "[7, 7, 7, 7, 7, 7, 7, 7, ... (9 dims)]");
}

TEST_CASE("safetensors: only regular files are opened") {
  test::TempDir dir("kinds");
  SafetensorsFile f;
  SUBCASE("a directory") {
    const Status s = SafetensorsFile::open(dir.path.string(), f);
    CHECK(s.error == dir.path.string() + ": is a directory, not a .safetensors file");
  }
  SUBCASE("a missing file") {
    const std::string p = (dir.path / "absent.safetensors").string();
    CHECK(SafetensorsFile::open(p, f).error == p + ": cannot open (No such file or directory)");
  }
  SUBCASE("an empty file and a short one") {
    const std::string p = dir.write("empty.safetensors", Bytes{});
    CHECK(contains(SafetensorsFile::open(p, f).error, p + ": is empty (0 bytes"));
    const std::string q = dir.write("short.safetensors", Bytes{1, 2, 3, 4, 5});
    CHECK(SafetensorsFile::open(q, f).error == q + ": is 5 bytes, shorter than the 8-byte header length");
  }
  SUBCASE("a broken file on disk gives the same message as in memory") {
    const std::string p = dir.write("bad.safetensors", SafetensorsWriter::file("[]", {}));
    CHECK(SafetensorsFile::open(p, f).error == p + ": header is not a JSON object");
  }
#if !defined(__EMSCRIPTEN__)
  SUBCASE("a FIFO (refused without waiting for a writer)") {
    const std::string p = (dir.path / "fifo").string();
    REQUIRE(mkfifo(p.c_str(), 0600) == 0);
    CHECK(SafetensorsFile::open(p, f).error == p + ": is a FIFO, not a .safetensors file");
  }
  SUBCASE("/dev/zero") {
    CHECK(SafetensorsFile::open("/dev/zero", f).error ==
          "/dev/zero: is a character device, not a .safetensors file");
  }
  SUBCASE("a /proc entry (a regular file that reports no size)") {
    CHECK(contains(SafetensorsFile::open("/proc/self/status", f).error,
                   "/proc/self/status: is empty (0 bytes"));
  }
#endif
  CHECK(f.tensors().empty());
}

}  // namespace attnviz
