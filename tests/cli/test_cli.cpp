// attnviz-cli in-process: the JSON format, the terminal view, and one clear line for every bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnviz/engine.hpp"
#include "attnviz/io/json_io.hpp"
#include "cli_run.hpp"
#include "config_args.hpp"

using attnviz::test::check_refused;
using attnviz::test::cli;
using attnviz::test::Run;
using nlohmann::json;

namespace {

std::string temp_file(const std::string& name, const std::string& body) {
  const std::string path = (std::filesystem::temp_directory_path() / ("attnviz_test_" + name)).string();
  std::ofstream(path, std::ios::binary) << body;
  return path;
}

}  // namespace

TEST_CASE("--json: the documented keys, shapes and the book's numbers") {
  const Run r = cli({"--json", "--variant", "wrapper", "--text", "Dream big and work for it", "--heads", "4",
                     "--seed", "0"});
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  for (const char* key : {"tokens", "inputs", "params", "heads", "output", "config"}) CHECK(j.contains(key));
  CHECK(j["tokens"].size() == 6);
  CHECK(j["inputs"][0] == json::array({0.72, 0.45, 0.31}));
  CHECK(j["params"].contains("heads.3.W_value.weight"));
  CHECK(j["params"]["heads.0.W_query.weight"].size() == 2);  // (out, in)
  CHECK(j["params"]["heads.0.W_query.weight"][0].size() == 3);
  REQUIRE(j["heads"].size() == 4);
  CHECK(j["heads"][0]["scores"].size() == 6);
  CHECK(j["heads"][0]["weights"][0][5] == 0);  // masked
  CHECK(j["heads"][0]["context"][0].size() == 2);
  CHECK(j["output"][0].size() == 8);
  CHECK(j["output"][0][0].get<double>() == doctest::Approx(-0.6430).epsilon(1e-3));
}

TEST_CASE("--json parameter names and layouts follow state_dict()") {
  json j = json::parse(cli({"--json", "--variant", "self_v1", "--d-in", "3", "--d-out", "2"}).out);
  CHECK(j["params"]["W_query"].size() == 3);  // (d_in, d_out)
  CHECK(j["params"]["W_query"][0].size() == 2);
  j = json::parse(cli({"--json", "--variant", "mha", "--qkv-bias", "--d-out", "4"}).out);
  for (const char* k :
       {"W_query.weight", "W_query.bias", "W_key.bias", "W_value.weight", "out_proj.weight", "out_proj.bias"})
    CHECK(j["params"].contains(k));
  j = json::parse(cli({"--json", "--variant", "simplified"}).out);
  CHECK(j["params"].empty());
  CHECK(j["output"][0].size() == 3);
}

TEST_CASE("the terminal view labels the weights with tokens and shows the output") {
  const Run r = cli({"--text", "Your journey starts with one step", "--dropout", "0.5"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("head 0 attention weights") != std::string::npos);
  CHECK(r.out.find("head 1 after dropout") != std::string::npos);
  CHECK(r.out.find("journey") != std::string::npos);
  CHECK(r.out.find("output (6 x 2, after out_proj)") != std::string::npos);
  const Run big =
      cli({"--preset", "gpt2-small", "--text", std::string(40, 'a') + " b c d e f g h i j k l m n o p q r"});
  REQUIRE(big.status == 0);
  CHECK(big.out.find("showing 16 of 18 tokens") != std::string::npos);
}

TEST_CASE("--inputs takes a JSON matrix and sets d_in from it") {
  const std::string path = temp_file("cli_inputs.json", "[[0.43, 0.15, 0.89, 1], [0.55, 0.87, 0.66, -1]]");
  const Run r = cli({"--json", "--inputs", path, "--variant", "causal"});
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j["tokens"] == json::array({"x1", "x2"}));
  CHECK(j["config"]["d_in"] == 4);
}

TEST_CASE("bad input: one clear line on stderr and exit status 1") {
  check_refused({"--text", ""}, "the text is empty");
  check_refused({"--text", "   "}, "the text is empty");
  check_refused({"--text", "a b c d e", "--context-length", "4"}, "more than the context length 4");
  check_refused({"--d-out", "7", "--heads", "2"}, "d_out (7) must be divisible by num_heads (2)");
  check_refused({"--dropout", "1"}, "dropout must be in [0, 1)");
  check_refused({"--dropout", "-0.5"}, "dropout must be in [0, 1)");
  check_refused({"--dropout", "nan"}, "dropout must be in [0, 1)");
  check_refused({"--variant", "transformer"}, "unknown variant 'transformer'");
  check_refused({"--preset", "gpt5"}, "unknown preset 'gpt5'");
  check_refused({"--dropout-rng", "cuda"}, "unknown dropout rng 'cuda'");
  check_refused({"--text", "bad \xC3\x28 byte"}, "not valid UTF-8");
  check_refused({"--heads", "many"}, "--heads");
  check_refused({"--bogus"}, "bogus");
  check_refused({"--text", "a", "--inputs", "x.json"}, "excludes");
  check_refused({"--inputs", "/nonexistent/in.json"},
                "cannot read '/nonexistent/in.json': No such file or directory");
  // --inputs is untrusted: only a regular file, its size checked before reading
  const std::string dir = (std::filesystem::temp_directory_path() / "attnviz_test_inputs_dir").string();
  std::filesystem::create_directories(dir);
  check_refused({"--inputs", dir}, "cannot read '" + dir + "': is a directory");
  const std::string huge = temp_file("huge.json", "[");
  std::filesystem::resize_file(huge, std::uintmax_t{100} << 20);  // sparse: no disk used
  check_refused({"--inputs", huge}, "104.9 MB, more than the 67.1 MB limit");
  std::filesystem::remove(huge);
#if !defined(__EMSCRIPTEN__)  // devices and /proc exist natively only
  check_refused({"--inputs", "/dev/zero"}, "cannot read '/dev/zero': is a character device");
  check_refused({"--inputs", "/proc/self/mem"}, "cannot read '/proc/self/mem': Input/output error");
#endif
  check_refused({"--inputs", temp_file("bad1.json", "[[1, 2], [3")}, "not valid JSON");
  check_refused({"--inputs", temp_file("bad2.json", "[[1, 2], [3]]")}, "input row 2 has 1 numbers");
  check_refused({"--inputs", temp_file("bad3.json", "[[1, \"x\"]]")}, "not a number");
  check_refused({"--inputs", temp_file("bad4.json", "[[1, 1e999]]")},
                "input row 1, column 2 is not a finite float (1e999 is out of range)");
  check_refused({"--inputs", temp_file("bad5.json", "[[1, 1e300]]")}, "not a finite float");
  check_refused({"--inputs", temp_file("bad6.json", "[]")}, "non-empty array");
  check_refused({"--inputs", temp_file("bad7.json", "[[3e38, 3e38]]"), "--variant", "simplified"},
                "not finite");
  check_refused({"--inputs", temp_file("bad8.json", "[[1, 2]]"), "--d-in", "3"}, "does not match");
  check_refused({"--isa", "sve"}, "unknown isa 'sve'");
  check_refused({"--threads", "-2"}, "--threads must be between 0 (every hardware thread) and 256 (got -2)");
  check_refused({"--threads", "100000"},
                "--threads must be between 0 (every hardware thread) and 256 (got 100000)");
  check_refused({"--model", "gpt2-small", "--threads", "257"}, "(got 257)");
}

TEST_CASE("--isa scalar and the fast kernels print the same numbers") {
  const Run ref = cli({"--json", "--isa", "scalar"});
  const Run fast = cli({"--json", "--threads", "2"});
  REQUIRE(ref.status == 0);
  REQUIRE(fast.status == 0);
  const json a = json::parse(ref.out), b = json::parse(fast.out);
  CHECK(a["engine"]["isa"] == "scalar");
  CHECK(b["engine"]["isa"] != "scalar");
  for (std::size_t i = 0; i < a["output"].size(); ++i)
    for (std::size_t j = 0; j < a["output"][i].size(); ++j)
      CHECK(b["output"][i][j].get<double>() ==
            doctest::Approx(a["output"][i][j].get<double>()).epsilon(1e-5));
}

TEST_CASE("--help prints usage and succeeds") {
  const Run r = cli({"--help"});
  CHECK(r.status == 0);
  CHECK(r.out.find("--dropout-rng") != std::string::npos);
}

TEST_CASE("--tokenize prints GPT-2's ids of --text as a JSON array") {
  const Run r = cli({"--tokenize", "--text", "Hello, I am", "--vocab", ATTNVIZ_GPT2_DIR});
  CHECK(r.status == 0);
  CHECK(r.out == "[15496,11,314,716]\n");
  CHECK(r.err.empty());
  CHECK(cli({"--tokenize", "--text", "", "--vocab", ATTNVIZ_GPT2_DIR}).out == "[]\n");
  check_refused({"--tokenize", "--text", "bad \xff", "--vocab", ATTNVIZ_GPT2_DIR}, "not valid UTF-8");
  check_refused({"--tokenize", "--vocab", "/nonexistent/vocab"}, "no vocabulary in '/nonexistent/vocab'");
  // A tokenizer.json that would grow "a" 2^40 times: one line naming the step that passed the cap.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "attnviz_test_growing";
  std::filesystem::create_directories(dir);
  nlohmann::json steps = nlohmann::json::array();
  for (int i = 0; i < 40; ++i)
    steps.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}});
  std::ofstream(dir / "tokenizer.json") << nlohmann::json{
      {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}}}, {"merges", nlohmann::json::array()}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers", steps}}}}.dump();
  check_refused({"--tokenize", "--text", "a", "--vocab", dir.string()},
                "normalizer.normalizers[10] (Replace) makes the text longer than 1040 bytes");
  CHECK(cli({"--tokenize", "--text", "bb", "--vocab", dir.string()}).out == "[1,1]\n");
}

TEST_CASE("numbers are decimal and seeds are torch.manual_seed's") {
  const auto config = [](const std::vector<std::string>& args) {
    std::vector<std::string> all = args;
    all.push_back("--json");
    const Run r = cli(all);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    return json::parse(r.out)["config"];
  };
  // A leading zero is decimal, not octal (CLI11 alone read "010" as 8).
  CHECK(config({"--d-out", "010"})["d_out"] == 10);
  CHECK(config({"--seed", "010"})["seed"] == 10);
  CHECK(config({"--seed", "+7"})["seed"] == 7);
  // Negative seeds as torch.manual_seed takes them: their 64-bit two's complement.
  CHECK(config({"--seed", "-1"})["seed"] == 18446744073709551615ull);
  CHECK(config({"--seed", "-9223372036854775808"})["seed"] == 9223372036854775808ull);
  CHECK(config({"--seed", "18446744073709551615"})["seed"] == 18446744073709551615ull);
  // ... and the numbers themselves: seed -1 is seed 2^64 - 1.
  const json a = json::parse(cli({"--json", "--seed", "-1"}).out);
  const json b = json::parse(cli({"--json", "--seed", "18446744073709551615"}).out);
  CHECK(a["params"] == b["params"]);
  CHECK(a["output"] == b["output"]);

  const std::string range =
      "outside torch.manual_seed's range (-9223372036854775808 to 18446744073709551615)";
  check_refused({"--seed", "18446744073709551616"}, "--seed: '18446744073709551616' is " + range);
  check_refused({"--seed", "99999999999999999999999"}, range);
  check_refused({"--seed", "-9223372036854775809"}, range);
  check_refused({"--seed", "0x10"}, "--seed: '0x10' is not a decimal integer");
  check_refused({"--d-out", "0x10"}, "--d-out: '0x10' is not a decimal integer");
  check_refused({"--heads", "2.5"}, "--heads: '2.5' is not a decimal integer");
  check_refused({"--d-in", "99999999999"},
                "--d-in: '99999999999' is out of range (-2147483648 to 2147483647)");
  check_refused({"--threads", "1e3"}, "--threads: '1e3' is not a decimal integer");
  check_refused({"--dropout", "0x1p-1"}, "--dropout: '0x1p-1' is not a decimal number");
  check_refused({"--dropout", "0.5x"}, "--dropout: '0.5x' is not a decimal number");
  CHECK(config({"--dropout", ".5e-1", "--variant", "causal"})["dropout"] == 0.05);
}

TEST_CASE("a flag given an empty value is refused, not taken as its default") {
  for (const char* flag :
       {"--seed", "--inputs", "--heads", "--d-in", "--d-out", "--context-length", "--dropout", "--variant",
        "--preset", "--dropout-rng", "--isa", "--threads", "--memory-budget", "--vocab", "--model",
        "--layers", "--keep", "--top-k", "--generate"}) {
    CAPTURE(flag);
    check_refused({flag, ""}, std::string(flag) + " needs a value");
  }
  check_refused({"--text", ""}, "the text is empty");  // the engine's words for an empty sentence
}

TEST_CASE("arguments not expected are named in the order given") {
  check_refused({"one", "two", "three"}, "not expected: 'one' 'two' 'three'");
  check_refused({"--json", "x", "--bogus"}, "not expected: 'x' '--bogus'");
  check_refused({"a\nb"}, "not expected: 'a\\x0Ab'");  // still one line
}

TEST_CASE("a value echoed in a message keeps it one line (fuzz/config_args found it)") {
  // The fuzzer's input: the variant "c--\ne6" was quoted as it came, and the message took two lines.
  check_refused({"--text",
                 "a\x01"
                 "b \x1b[31mred",
                 "--dropout", ".04999999", "--variant", "c--\ne6"},
                "unknown variant 'c--\\x0Ae6' (simplified, self_v1, self_v2, causal, wrapper, mha)");
  check_refused({"--preset", "\x1b[2J"}, "unknown preset '\\x1B[2J'");
  // A 10-minute run found CLI11's own messages quoting a value as it came: a switch given a value.
  check_refused({"--no-mask=of\xff\nf"}, "Could not convert: --no-mask = of\\xFF\\x0Af (see --help)");
  check_refused({"--isa", "a\rb"}, "unknown isa 'a\\x0Db'");
  check_refused({"--dropout-rng", "\n"}, "unknown dropout rng '\\x0A'");
  check_refused({"--model", "gpt2-small", "--keep", "a\nb"}, "--keep: unknown item 'a\\x0Ab'");
  check_refused({"--inputs", "/nonexistent/a\nb.json"},
                "cannot read '/nonexistent/a\\x0Ab.json': No such file");
  check_refused({"--variant", std::string(119, 'x') + "\xc3\xa9" + "yz"},
                "unknown variant '" + std::string(119, 'x') +
                    "...'");  // cut at kQuoteCap (120) bytes, never inside a character
}

TEST_CASE("the terminal view: cells apart, enough digits, -0 as 0, control characters escaped") {
  // Values of any size keep a space between cells (%9.4f ran "-1000.0000" into "10000.0000").
  const std::string big = temp_file("big_cells.json", "[[-1000, 10000], [300, -200]]");
  Run r = cli({"--inputs", big, "--variant", "simplified", "--isa", "scalar"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("x1         -1000.0000 10000.0000\n") != std::string::npos);
  // A value that rounds to -0 prints as 0.
  r = cli({"--inputs", temp_file("neg_zero.json", "[[-0.00001, 1]]"), "--variant", "simplified"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("-0.0000") == std::string::npos);
  CHECK(r.out.find("x1           0.0000   1.0000\n") != std::string::npos);
  // Dropout that would print as 1 in six digits, and its scale.
  r = cli({"--dropout", "0.9999999"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("dropout 0.9999999 (cpu)") != std::string::npos);
  CHECK(r.out.find("after dropout (p = 0.9999999, kept weights x 10000000)") != std::string::npos);
  r = cli({"--dropout", "-0", "--variant", "causal"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("dropout 0,") != std::string::npos);
  CHECK(cli({"--json", "--dropout", "-0"}).out.find("\"dropout\":0,") != std::string::npos);
  // Escape sequences never reach the terminal: control characters are written as the tokenizer's labels
  // write them.
  r = cli({"--text",
           "a\x01"
           "b \x1b[31mred \x7f"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find('\x01') == std::string::npos);
  CHECK(r.out.find('\x7f') == std::string::npos);
  CHECK(r.out.find("tokens (3): a\\x01b \\x1B[31mred \\x7F\n") != std::string::npos);
  // JSON keeps the token itself (escaped the JSON way).
  CHECK(json::parse(cli({"--json", "--text",
                         "a\x01"
                         "b"})
                        .out)["tokens"][0] ==
        "a\x01"
        "b");
}

TEST_CASE("--inputs: messages that name the problem, float32's whole range, nothing after a NUL") {
  std::string rows = "[";
  for (int i = 0; i < 1025; ++i) rows += std::string(i ? "," : "") + "[1]";
  rows += "]";
  check_refused({"--inputs", temp_file("rows1025.json", rows)},
                "the inputs have 1025 rows, more than the context length 1024");
  check_refused({"--inputs", temp_file("rows1025.json", rows), "--context-length", "1000"},
                "the inputs have 1025 rows, more than the context length 1000");
  check_refused({"--inputs", temp_file("overflow.json", "[[1e400, 1, 2]]")},
                "input row 1, column 1 is not a finite float (1e400 is out of range)");
  check_refused({"--inputs", temp_file("past_float.json", "[[1, 2, 3.4028236e38]]")},
                "input row 1, column 3 is not a finite float (3.40282e+38)");
  check_refused({"--inputs", temp_file("nul.json", std::string("[[1,2,3]]\0garbage", 17))},
                "the inputs are not valid JSON: a NUL byte at offset 9");
  check_refused({"--inputs", temp_file("object_row.json", "[[1, 2], {\"a\": 1}]")},
                "input row 2 is not an array of numbers");
  check_refused({"--inputs", temp_file("nested.json", "[[1, [2]]]")},
                "input row 1, column 2 is not a number");
  check_refused({"--inputs", temp_file("scalar.json", "5")}, "the inputs must be a non-empty array of rows");
  check_refused({"--inputs", temp_file("trailing.json", "[[1, 2]] [")}, "the inputs are not valid JSON");
  // FLT_MAX as attnviz's own --json writes it (3.4028235e38 is a little above FLT_MAX and rounds to it) is
  // an input; here its products overflow, which the engine explains.
  const std::string flt_max = temp_file("flt_max.json", "[[3.4028235e38, 1, 2], [-3.4028235e38, 0, 0]]");
  check_refused({"--inputs", flt_max, "--variant", "simplified"}, "the result is not finite");
  const Run r = cli({"--json", "--inputs", temp_file("flt_max_small.json", "[[3.4028235e38]]"), "--variant",
                     "self_v1", "--d-out", "1", "--seed", "0"});
  CAPTURE(r.err);
  CHECK(r.err.find("input row") == std::string::npos);
}

TEST_CASE("--json never writes a number JSON cannot hold") {
  // Two finite rows whose raw score q0 . k1 overflows float32 in the masked cell only (seed 123's W_query
  // (-0.288, 0.023) and W_key (-0.351, 0.267)): the weights are exact, but JSON has no -inf. Before, stdout
  // held -inf, which Python and JSON.parse reject.
  const std::string inputs = temp_file("masked_overflow.json", "[[4.9e19, 0], [0, 1.47e20]]");
  check_refused({"--json", "--inputs", inputs, "--variant", "causal", "--d-out", "1"},
                "the result is not finite (raw scores)");
  // The terminal view does not keep the raw scores, and shows the exact weights.
  const Run text = cli({"--inputs", inputs, "--variant", "causal", "--d-out", "1"});
  CHECK(text.status == 0);
  CHECK(text.out.find("x2           0.0000   1.0000") != std::string::npos);
}

TEST_CASE("memory: every configuration is costed before anything is allocated") {
  // Within the size limits, but the parameters alone (and their packed copy) pass the engine's 4 GB: refused
  // at once, naming the memory, for every variant with weights (a bad_alloc abort after 45 s before).
  check_refused({"--d-in", "16384", "--d-out", "16384"},
                "this configuration needs 8.6 GB of memory (parameters 8.6 GB");
  check_refused({"--d-in", "16384", "--d-out", "16384", "--variant", "self_v1"}, "parameters 6.4 GB");
  check_refused({"--d-in", "16384", "--d-out", "16384", "--variant", "wrapper", "--heads", "1"},
                "more than the engine's 4.0 GB limit");
  // The budget: the memory available, or --memory-budget.
  // The tensors' scratch counts one row buffer per worker thread, so their size depends on the machine.
  check_refused({"--preset", "gpt2-small", "--memory-budget", "10MB"},
                " MB of memory (parameters 18.9 MB, tensors ");
  check_refused(
      {"--preset", "gpt2-small", "--memory-budget", "10MB"},
      " kB), more than the 10.0 MB of --memory-budget: use smaller sizes, fewer heads or fewer tokens");
  CHECK(cli({"--preset", "gpt2-small", "--memory-budget", "20MB"}).status == 0);
  check_refused({"--memory-budget", "0"}, "--memory-budget: '0' is out of range");
  check_refused({"--memory-budget", "2TB"}, "--memory-budget: '2TB' is not a size");
  check_refused({"--memory-budget", "18446744073709551616"}, "is not a size");
  // --json counts its text too: the same run fits without it and not with it.
  std::string words;
  for (int i = 0; i < 200; ++i) words += "w" + std::to_string(i) + " ";
  CHECK(cli({"--preset", "gpt2-small", "--text", words, "--memory-budget", "60MB"}).status == 0);
  check_refused({"--preset", "gpt2-small", "--text", words, "--memory-budget", "60MB", "--json"}, ", JSON ");
  // The case: gpt2-xl at 2780 tokens under 8 GB, whose JSON text alone is 8.6 GB (a bad_alloc
  // abort before): refused at once.
  std::string long_text;
  for (int i = 0; i < 2780; ++i) long_text += "w" + std::to_string(i) + " ";
  check_refused({"--preset", "gpt2-xl", "--context-length", "4096", "--text", long_text, "--json",
                 "--memory-budget", "8GB"},
                "JSON 9.");
  // The whole-model path takes the same budget.
  check_refused({"--model", "gpt2-small", "--memory-budget", "100MB"}, "more than the 100.0 MB available");
}

TEST_CASE("result_json_bound is never below the JSON text, and not far above it") {
  using namespace attnviz;
  for (Variant v : all_variants())
    for (int T : {1, 3, 17}) {
      Config c;
      c.variant = v;
      c.d_in = 5, c.d_out = 4, c.num_heads = v == Variant::wrapper || v == Variant::mha ? 2 : 1;
      c.qkv_bias = true, c.dropout = 0.5;
      c.stages = kStageScores | kStageDropped;
      // Inputs whose shortest forms are as long as a float's get (15 characters with the sign).
      std::vector<std::vector<double>> rows(static_cast<std::size_t>(T),
                                            {-1.17549435e-38, -1.2345679e-30, 1, 0, -3.4028235e38 / 1e30});
      Input in;
      REQUIRE(input_from_rows(rows, in).is_ok());
      in.tokens[0] = "\x01\x02\x03";  // written as \u0001 ...: six bytes each
      std::uint64_t token_bytes = 0;
      for (const std::string& t : in.tokens) token_bytes += t.size();
      Result r;
      Params p;
      REQUIRE(run(c, in, r, &p).is_ok());
      const std::string text = result_to_json(r, state_dict(c, p));
      const std::uint64_t bound = result_json_bound(c, T, token_bytes);
      CAPTURE(std::string(to_string(v)));
      CAPTURE(T);
      CHECK(text.size() <= bound);
      CHECK(bound <= 3 * text.size() + 2048);
    }
}

TEST_CASE("parse_decimal_int: the int a decimal flag holds, nothing that wraps") {
  using attnviz::parse_decimal_int;
  CHECK(parse_decimal_int("0") == 0);
  CHECK(parse_decimal_int("-0") == 0);
  CHECK(parse_decimal_int("007") == 7);
  CHECK(parse_decimal_int("+12") == 12);
  CHECK(parse_decimal_int("2147483647") == INT_MAX);
  CHECK(parse_decimal_int("-2147483648") == INT_MIN);
  for (const char* s : {"2147483648", "-2147483649", "4294967297", "4294967296", "18446744073709551617",
                        "99999999999999999999999999", "", "-", "+", " 1", "1 ", "0x10", "1e3", "1.0", "--1"})
    CHECK_MESSAGE(!parse_decimal_int(s), s);
}
