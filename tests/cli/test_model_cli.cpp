// attnviz-cli --model in-process: the JSON against the engine and PyTorch's fixture, generation, the terminal
// view, and one line for every bad file, text or flag.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnviz/exec.hpp"
#include "attnviz/gpt.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "attnviz/io/gpt_json.hpp"
#include "attnviz/io/model_source.hpp"
#include "cli_run.hpp"
#include "config_args.hpp"
#include "model_cli.hpp"
#include "safetensors_writer.hpp"

using attnviz::test::check_refused;
using attnviz::test::cli;
using attnviz::test::Run;
using nlohmann::json;

namespace {

const std::string kGpt = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt";

// A one-layer GPT-2 (d 64, one head, the fixtures' 512-token vocabulary) whose raw score (0, 1), a masked
// cell, overflows float32 while the visible cells stay finite. Positions 0 and 1 embed as e and -e
// (e = 32 ones, then 32 minus ones; every token embeds as 0), so that after ln_1 the query of position 0 and
// the key of position 1 are 2B along one direction and the other two are 0 (B = 1.2e19; (2B)^2 = 5.8e38, past
// FLT_MAX = 3.4e38). In train mode dropout on the embeddings moves them by some 5% of B: the visible cells
// stay near 0.1 B^2, the masked one past 3.6 B^2. Nothing else is on, so the logits are 0.
// With `everywhere`, q = k = 2B at every position (the biases alone): every raw score overflows, the visible
// ones too.
std::string overflowing_scores_model(const attnviz::test::TempDir& dir, bool everywhere = false) {
  attnviz::test::TinyGpt g;
  g.vocab = 512, g.context = 5, g.d = 64, g.layers = 1, g.mask_buffers = false;
  g.build();
  for (auto& entry : g.tensors) std::fill(entry.second.values.begin(), entry.second.values.end(), 0.0f);
  for (const char* n : {"h.0.ln_1.weight", "h.0.ln_2.weight", "ln_f.weight"})
    std::fill(g.tensors[n].values.begin(), g.tensors[n].values.end(), 1.0f);
  const float B = 1.2e19f;
  std::vector<float>& pos = g.tensors["wpe.weight"].values;            // (context, d)
  std::vector<float>& w = g.tensors["h.0.attn.c_attn.weight"].values;  // (d, 3d): x W + b, q | k | v
  std::vector<float>& b = g.tensors["h.0.attn.c_attn.bias"].values;
  for (std::size_t i = 0; i < 64; ++i) {
    const float e = i < 32 ? 1.0f : -1.0f;
    pos[i] = e, pos[64 + i] = -e;
    w[i * 192] = B / 64 * e;        // q[0] = B + B (e . h) / 64: 2B at position 0, 0 at position 1
    w[i * 192 + 64] = -B / 64 * e;  // k[0] = B - B (e . h) / 64: 0 at position 0, 2B at position 1
  }
  b[0] = B, b[64] = B;
  if (everywhere) {
    std::fill(w.begin(), w.end(), 0.0f);
    b[0] = b[64] = 2 * B;
  }
  return dir.write(everywhere ? "overflow_all.safetensors" : "overflow.safetensors", g.bytes());
}

json fixture(const std::string& name) {
  std::ifstream f(kGpt + "/" + name, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return json::parse(s.str());
}

}  // namespace

TEST_CASE(
    "attnviz-cli --model FOLDER --json: tokens, every layer's heads, logits and next tokens as PyTorch") {
  const json f = fixture("14_folder_hf_d64_h4_l2_p10_bias_f16.json");
  const Run r =
      cli({"--model", kGpt + "/hf-folder", "--eval", "--text", f.at("text"), "--json", "--top-k", "5"});
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j.at("model").at("n_layers") == 2);
  CHECK(j.at("model").at("n_heads") == 4);  // from the folder's config.json
  CHECK(j.at("model").at("config") == "hf-folder/config.json");
  CHECK_FALSE(j.at("model").contains("note"));  // config.json's n_layer confirmed the layers
  CHECK(r.err.find("note") == std::string::npos);
  CHECK(j.at("model").at("tied_head") == true);
  CHECK(j.at("options").at("train") == false);
  const std::vector<int> ids = f.at("ids");
  REQUIRE(j.at("tokens").size() == ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    CHECK(j.at("tokens")[i].at("id") == ids[i]);
    CHECK(j.at("tokens")[i].at("piece").get<std::string>().size() >= 1);
  }
  CHECK(j.at("tokens")[2].at("label") == "\xc2\xb7the");  // " the": the leading space shown as a middle dot
  REQUIRE(j.at("layers").size() == 2);
  const std::size_t T = ids.size();
  for (std::size_t l = 0; l < 2; ++l)
    for (std::size_t h = 0; h < 4; ++h)
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t k = 0; k < T; ++k) {
          const double want = f.at("attention")[l][h][i][k],
                       got = j.at("layers")[l].at("heads")[h].at("weights")[i][k];
          CHECK(got == doctest::Approx(want).epsilon(1e-5).scale(0.1));
        }
  // the last position's logits, and the top 5 of them
  const json& want_last = f.at("logits").back();
  const json& logits = j.at("logits");
  REQUIRE(logits.size() == 512);
  std::vector<std::pair<double, int>> order;
  for (std::size_t v = 0; v < 512; ++v) {
    CHECK(logits[v].get<double>() == doctest::Approx(want_last[v].get<double>()).epsilon(1e-5).scale(1.0));
    order.push_back({-want_last[v].get<double>(), static_cast<int>(v)});
  }
  std::sort(order.begin(), order.end());
  REQUIRE(j.at("next").size() == 5);
  double p_prev = 1.0;
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(j.at("next")[i].at("id") == order[i].second);
    const double p = j.at("next")[i].at("probability");
    CHECK(p <= p_prev);
    p_prev = p;
  }
  CHECK(j.at("engine").at("reused") == 0);
}

TEST_CASE("attnviz-cli --model --generate: the book's greedy generate_text_simple") {
  const json f = fixture("11_file_hf_d64_h4_l2_p10_bias_f16.json");
  const Run r = cli({"--model", kGpt + "/" + f.at("source").at("path").get<std::string>(), "--heads", "4",
                     "--vocab", kGpt + "/vocab", "--eval", "--text", f.at("text"), "--generate", "8",
                     "--layers", "none", "--json"});
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  // A bare file: the output says which configuration was used, and that nothing checked the layer count.
  CHECK(j.at("model").at("config") == "none (sizes from the tensors, heads from the heads option, --heads)");
  CHECK(j.at("model").at("note") == "2 layers found in the file; no config.json to check the count against");
  CHECK(r.err ==
        "attnviz-cli: note: 2 layers found in the file; no config.json to check the count against\n");
  const std::vector<int> want = f.at("generate").at("ids");
  std::vector<int> got;
  for (const json& t : j.at("tokens")) got.push_back(t.at("id"));
  CHECK(got == want);
  REQUIRE(j.at("generated").size() == 8);
  CHECK(j.at("layers").empty());
}

TEST_CASE("attnviz-cli --model: the terminal view names the model, the tokens and the next tokens") {
  const Run r = cli({"--model", kGpt + "/hf-folder", "--text", "the cat", "--layers", "1", "--top-k", "3"});
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("hf-folder/model.safetensors: 2 layers, 4 heads of dim 16, d_model 64, context 64, "
                   "vocabulary 512, eval\n") != std::string::npos);
  CHECK(r.out.find("\nconfig: hf-folder/config.json\n") != std::string::npos);
  CHECK(r.out.find("layer 1 head 3 attention weights") != std::string::npos);
  CHECK(r.out.find("layer 0 head") == std::string::npos);
  CHECK(r.out.find("\nnext token:\n   1. ") != std::string::npos);
  const Run train =
      cli({"--model", kGpt + "/hf-folder", "--text", "the cat", "--layers", "1", "--top-k", "3", "--train"});
  REQUIRE(train.status == 0);
  CHECK(train.out.find("vocabulary 512, train (dropout 0.1, cpu)\n") != std::string::npos);
}

TEST_CASE("attnviz-cli --model: loaded weights run in eval mode, as from_pretrained, unless --train") {
  const json f = fixture("14_folder_hf_d64_h4_l2_p10_bias_f16.json");
  const std::vector<std::string> base = {
      "--model", kGpt + "/hf-folder", "--text", f.at("text"), "--json", "--layers", "0", "--top-k", "0"};
  const auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    const Run r = cli(args);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  };
  const json plain = run({}), eval = run({"--eval"}), train = run({"--train"});
  CHECK(plain.at("options").at("train") == false);
  CHECK(train.at("options").at("train") == true);
  // the default is PyTorch's eval() pass: the fixture's weights, and exactly --eval's numbers
  CHECK(plain.at("layers") == eval.at("layers"));
  CHECK(plain.at("logits") == eval.at("logits"));
  const json& want = f.at("attention")[0][0];
  const json& got = plain.at("layers")[0].at("heads")[0].at("weights");
  for (std::size_t i = 0; i < want.size(); ++i)
    for (std::size_t k = 0; k < want.size(); ++k)
      CHECK(got[i][k].get<double>() == doctest::Approx(want[i][k].get<double>()).epsilon(1e-5).scale(0.1));
  // train mode drops weights (dropout 0.1 over the layer's 4 x T x T weights): some row is no longer
  // the eval row
  CHECK(train.at("layers") != plain.at("layers"));
  check_refused({"--model", kGpt + "/hf-folder", "--text", "a", "--train", "--eval"},
                "--train and --eval contradict each other");
  check_refused({"--text", "a", "--train"}, "--train needs --model");
}

TEST_CASE("attnviz-cli --model: a seeded book model is a fresh nn.Module, in train mode unless --eval") {
  // (one gpt2-small is drawn: a second costs seconds, and --eval is the flag the chapter-3 layer tests)
  // The fixtures' vocabulary: the WebAssembly build has no GPT-2 vocabulary beside it.
  const Run r = cli({"--model", "gpt2-small", "--vocab", kGpt + "/hf-folder", "--text", "a", "--layers",
                     "none", "--top-k", "0", "--json"});
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j.at("model").at("seed") == 123);
  CHECK(j.at("options").at("train") == true);
  check_refused({"--model", "gpt2-small", "--text", "a", "--train", "--eval"},
                "--train and --eval contradict each other");
}

TEST_CASE("attnviz-cli --model --keep scores: a raw score past float32 is refused on every ISA") {
  const attnviz::test::TempDir dir("overflow_scores");
  const std::string file = overflowing_scores_model(dir), vocab = kGpt + "/vocab";
  for (attnviz::Isa isa : attnviz::available_isas()) {
    const std::string name = attnviz::to_string(isa);
    for (const char* mode : {"--eval", "--train"}) {
      INFO(name << " " << std::string(mode));
      // "hi" is two tokens in the fixtures' vocabulary
      const std::vector<std::string> args = {"--model", file,    "--vocab", vocab, "--text",
                                             "hi",      "--isa", name,      mode};
      std::vector<std::string> scores = args;
      scores.insert(scores.end(), {"--keep", "scores", "--json"});
      check_refused(scores, "the result is not finite (raw scores): the inputs are too large for float32");
      // without the raw scores, the pass is valid JSON: the weights are exact (row 0 sees only itself)
      std::vector<std::string> weights = args;
      weights.push_back("--json");
      const Run r = cli(weights);
      CAPTURE(r.err);
      REQUIRE(r.status == 0);
      const json j = json::parse(r.out);
      const json& wt = j.at("layers")[0].at("heads")[0].at("weights");
      CHECK(wt[0][0] == 1.0);
      CHECK(wt[0][1] == 0.0);
      for (const json& x : j.at("logits")) CHECK(x == 0.0);
    }
  }
  // every score past float32: the same line on every ISA, naming the first stage kept that is not finite
  const std::string all = overflowing_scores_model(dir, true);
  for (attnviz::Isa isa : attnviz::available_isas()) {
    INFO(attnviz::to_string(isa));
    const std::vector<std::string> args = {
        "--model", all, "--vocab", vocab, "--text", "hi", "--isa", attnviz::to_string(isa), "--json"};
    check_refused(args, "the result is not finite (weights): the inputs are too large for float32");
    std::vector<std::string> scores = args;
    scores.insert(scores.end(), {"--keep", "scores"});
    check_refused(scores, "the result is not finite (raw scores): the inputs are too large for float32");
    std::vector<std::string> unseen = args;
    unseen.insert(unseen.end(), {"--layers", "none"});  // the weights are checked in a layer not shown too
    check_refused(unseen, "the result is not finite (weights): the inputs are too large for float32");
  }
  // the chapter-3 layer refuses such raw scores with the same line
  check_refused({"--inputs", dir.write("rows.json", std::string("[[1e20, 1e20], [1e20, 1e20]]")), "--d-out",
                 "2", "--heads", "1", "--json"},
                "the result is not finite (raw scores): the inputs are too large for float32");
}

TEST_CASE("an incremental pass refuses an earlier row's raw score against a new key that overflows") {
  const attnviz::test::TempDir dir("overflow_incremental");
  attnviz::ModelSpec spec;
  spec.model = overflowing_scores_model(dir);
  spec.vocab_dir = kGpt + "/vocab";
  spec.options.train = false;
  attnviz::GptRequest req;
  req.stages = attnviz::kStageScores;
  for (attnviz::Isa isa : attnviz::available_isas()) {
    if (isa == attnviz::Isa::scalar) continue;  // the reference computes every pass whole
    INFO(attnviz::to_string(isa));
    spec.options.exec.isa = isa;
    attnviz::OpenedModel m;
    REQUIRE(attnviz::open_model(spec, m).is_ok());
    attnviz::GptResult r;
    REQUIRE(m.model.forward({71}, req, r).is_ok());
    // position 1 brings the key whose score against row 0's query (a masked cell of a reused row) overflows
    REQUIRE(m.model.reusable({71, 72}, req, r) == 1);
    CHECK(m.model.forward({71, 72}, req, r).error ==
          "the result is not finite (raw scores): the inputs are too large for float32 arithmetic");
    CHECK(r.layers.empty());
  }
}

TEST_CASE("generated_text: complete characters kept, a cut one as U+FFFD, as the tokenizer decodes") {
  attnviz::ModelSpec spec;
  spec.model = kGpt + "/hf-folder";
  attnviz::OpenedModel m;
  REQUIRE(attnviz::open_model(spec, m).is_ok());
  attnviz::GptResult r;
  REQUIRE(m.model.forward({1, 2}, attnviz::GptRequest{}, r).is_ok());
  attnviz::Bpe gpt2;
  REQUIRE(attnviz::Bpe::load_dir(ATTNVIZ_GPT2_DIR, gpt2).is_ok());
  std::vector<int> emoji;
  REQUIRE(gpt2.encode(" \xF0\x9F\x98\x80 \xC3\xA9", emoji).is_ok());  // " 😀 é"
  REQUIRE(emoji.size() == 3);  // " \xF0\x9F\x98", "\x80", " \xC3\xA9": the emoji is cut between two tokens
  const std::string r_char = "\xEF\xBF\xBD";
  const std::pair<std::vector<int>, std::string> cases[] = {
      {{emoji[0]}, " " + r_char},                          // b" \xf0\x9f\x98": the cut tail
      {{emoji[0], emoji[1]}, " \xF0\x9F\x98\x80"},         // whole again
      {{emoji[1]}, r_char},                                // a lone continuation byte
      {{emoji[0], emoji[2]}, " " + r_char + " \xC3\xA9"},  // cut, then a whole character
      {{emoji[1], emoji[0]}, r_char + " " + r_char},       // b"\x80 \xf0\x9f\x98"
      {{emoji[0], emoji[1], emoji[2]}, " \xF0\x9F\x98\x80 \xC3\xA9"}};
  for (const auto& [ids, text] : cases) {
    const json j = json::parse(attnviz::gpt_result_to_json(r, m.model.weights(), {}, gpt2, &ids));
    CHECK(j.at("generated_text") == text);
    REQUIRE(j.at("generated").size() == ids.size());
  }
}

TEST_CASE("--layers: numbers past INT_MAX are out of range, never wrapped") {
  const std::string folder = kGpt + "/hf-folder";
  check_refused({"--model", folder, "--layers", "4294967297"},
                "'4294967297' is outside the model's layers 0..1");
  check_refused({"--model", folder, "--layers", "0-4294967297"},
                "'0-4294967297' is outside the model's layers 0..1");
  check_refused({"--model", folder, "--layers", "4294967296-1"}, "is outside the model's layers 0..1");
  check_refused({"--model", folder, "--layers", "2147483648"}, "is outside the model's layers 0..1");
  check_refused({"--model", folder, "--layers", "99999999999999999999999999"},
                "is outside the model's layers");
  check_refused({"--model", folder, "--layers", "-1"}, "'-1' is not a layer number");
  check_refused({"--model", folder, "--layers", "1-0"}, "'1-0' is an empty range");
  check_refused({"--model", folder, "--layers", "0-1-1"}, "'0-1-1' is not a layer number");
  check_refused({"--model", folder, "--layers", "0x1"}, "'0x1' is not a layer number");
  check_refused({"--model", folder, "--layers", "0,\n1"}, "'\\x0A1' is not a layer number");
  bool all = true;
  std::vector<int> layers;
  REQUIRE(attnviz::parse_layers("1,00-1,1", 2, all, layers).is_ok());
  CHECK_FALSE(all);
  CHECK(layers == std::vector<int>{0, 1});
  REQUIRE(attnviz::parse_layers("11,9-10,0", 12, all, layers).is_ok());
  CHECK(layers == std::vector<int>{0, 9, 10, 11});
  CHECK_FALSE(attnviz::parse_layers("1,", 2, all, layers).is_ok());
  CHECK_FALSE(attnviz::parse_layers("4294967296", 2, all, layers).is_ok());
}

TEST_CASE("attnviz-cli --model: bad files, text and flags get one line and exit 1") {
  const std::string folder = kGpt + "/hf-folder";
  check_refused({"--model", "/nonexistent/model.safetensors", "--text", "x"}, "cannot open");
  check_refused({"--model", folder, "--text", ""}, "the text is empty");
  check_refused({"--model", folder, "--text", "\xff"}, "UTF-8");
  check_refused({"--model", folder, "--text", std::string(200, 'x') + " " + std::string(300, ' ') + "y z"},
                "more than the context length 64");
  check_refused({"--model", folder, "--variant", "mha"}, "--variant does not apply to --model");
  check_refused({"--model", folder, "--layers", "2"}, "outside the model's layers 0..1");
  check_refused({"--model", folder, "--layers", "0,x"}, "'x' is not a layer number");
  check_refused({"--model", folder, "--keep", "everything"}, "unknown item 'everything'");
  check_refused({"--model", folder, "--top-k", "-1"}, "--top-k must be 0 or more");
  check_refused({"--model", kGpt + "/10_file_hf_d64_h4_l2_p10_bias_f32.safetensors", "--vocab",
                 ATTNVIZ_GPT2_DIR, "--text", "a"},
                "give the model's own vocabulary with --vocab DIR");
  check_refused({"--model", kGpt + "/vocab", "--text", "a"}, "model.safetensors");
  check_refused({"--generate", "3"}, "--generate needs --model");
  // a corrupt copy of a fixture: the header length past the end of the file
  const std::string bad = (std::filesystem::temp_directory_path() / "attnviz_bad.safetensors").string();
  std::ofstream(bad, std::ios::binary) << std::string("\xff\xff\xff\x00\x00\x00\x00\x00{}", 10);
  check_refused({"--model", bad, "--text", "a"}, "attnviz_bad.safetensors");
}

TEST_CASE("attnviz-cli --model: the pass and its JSON are costed before anything runs") {
  const std::string folder = kGpt + "/hf-folder";
  std::string text;
  for (int i = 0; i < 20; ++i) text += " the city";
  // The weights fit in 1 MB; every head's weights over ~60 tokens do, their JSON text does not.
  CHECK(cli({"--model", folder, "--text", text, "--memory-budget", "1MB"}).status == 0);
  check_refused({"--model", folder, "--text", text, "--json", "--memory-budget", "1MB"},
                "more than the 1.0 MB of --memory-budget");
  check_refused({"--model", folder, "--text", text, "--json", "--memory-budget", "1MB"}, "its JSON");
  // Generating is costed at its longest pass.
  check_refused({"--model", folder, "--text", "a", "--generate", "63", "--layers", "all", "--keep",
                 "scores,dropped,context", "--memory-budget", "700kB"},
                "the pass");
}

TEST_CASE("attnviz-cli --model: the pass is costed with the app's estimate, to the token") {
  const std::string folder = kGpt + "/hf-folder";
  attnviz::GptWeights w;
  REQUIRE(attnviz::load_gpt(folder, {}, w).is_ok());
  attnviz::GptRequest req;
  req.all_layers = true;  // what --json keeps by default: every layer's weights
  const std::uint64_t budget = 2'000'000;
  const int fit = attnviz::tokens_that_fit(w.config, req, true, budget, w.config.context_length);
  REQUIRE(fit > 1);
  REQUIRE(fit < w.config.context_length);
  const auto words = [](int n) {  // n tokens (" the" is one in this vocabulary)
    std::string s;
    for (int i = 0; i < n; ++i) s += " the";
    return s;
  };
  const Run ok = cli({"--model", folder, "--text", words(fit), "--json", "--memory-budget", "2MB"});
  CAPTURE(ok.err);
  REQUIRE(ok.status == 0);
  REQUIRE(json::parse(ok.out).at("tokens").size() == static_cast<std::size_t>(fit));
  const Run refused = cli({"--model", folder, "--text", words(fit + 1), "--json", "--memory-budget", "2MB"});
  CHECK(refused.status == 1);
  CHECK(refused.err ==
        "attnviz-cli: " + attnviz::check_pass_memory(w.config, fit + 1, req, true, budget, true).error +
            "\n");
  CHECK(refused.err.find(std::to_string(fit + 1) + " tokens need ") != std::string::npos);
  CHECK(refused.err.find("of --memory-budget: about " + std::to_string(fit) + " tokens fit") !=
        std::string::npos);
}

TEST_CASE("pass_bytes: what a whole-model pass holds, from the table of docs/models.md") {
  attnviz::GptConfig c;  // gpt2-small
  attnviz::GptRequest every;
  // the cache: keys and values of every layer, and the same packed for the attention's GEMMs
  const std::uint64_t weights = 12ull * 12 * 1024 * 1024 * 4, cache = 2ull * 2 * 12 * 1024 * 768 * 4;
  const std::uint64_t base = attnviz::pass_bytes(c, 1024, every);
  CHECK(base > weights + cache);
  CHECK(base < weights + cache + 90'000'000);  // working buffers, one layer's scratch, the last logits
  attnviz::GptRequest detail = every;
  detail.detail_layer = 3;  // + scores, scaled, dropped (3 x 50 MB) and q, k, v, context, output, inputs
  CHECK(attnviz::pass_bytes(c, 1024, detail) - base == 3ull * 12 * 1024 * 1024 * 4 + 6ull * 1024 * 768 * 4);
  // below the context, the squares are counted at the stride typing at the end can grow them to: 100 tokens
  // + an eighth, rounded up to 16 floats = 112
  CHECK(attnviz::pass_bytes(c, 100, detail) - attnviz::pass_bytes(c, 100, every) ==
        3ull * 12 * 112 * 112 * 4 + 6ull * 100 * 768 * 4);
  attnviz::GptRequest logits = every;
  logits.all_logits = true;
  CHECK(attnviz::pass_bytes(c, 1024, logits) - base == 1023ull * 50257 * 4);
  attnviz::GptRequest none;
  none.all_layers = false;
  CHECK(attnviz::pass_bytes(c, 1024, none) < base - weights + 51'000'000);
  c.n_layers = 1 << 30;  // saturates instead of wrapping
  CHECK(attnviz::pass_bytes(c, 1 << 30, every) == UINT64_MAX);
}
