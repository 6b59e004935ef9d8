// attnviz-cli --model in-process: the JSON against the engine and PyTorch's fixture, generation, the terminal
// view, and one line for every bad file, text or flag.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnviz/gpt.hpp"
#include "cli_run.hpp"
#include "gpt_file.hpp"
#include "model_source.hpp"

using attnviz::test::check_refused;
using attnviz::test::cli;
using attnviz::test::Run;
using nlohmann::json;

namespace {

const std::string kGpt = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt";

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
  CHECK(r.out.find("hf-folder/model.safetensors: 2 layers, 4 heads of dim 16") != std::string::npos);
  CHECK(r.out.find("train (dropout 0.1, cpu)") != std::string::npos);
  CHECK(r.out.find("layer 1 head 3 attention weights") != std::string::npos);
  CHECK(r.out.find("layer 0 head") == std::string::npos);
  CHECK(r.out.find("\nnext token:\n   1. ") != std::string::npos);
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

TEST_CASE("pass_bytes: what a whole-model pass holds, from the README's table") {
  attnviz::GptConfig c;  // gpt2-small
  attnviz::GptRequest every;
  const std::uint64_t weights = 12ull * 12 * 1024 * 1024 * 4, cache = 2ull * 12 * 1024 * 768 * 4;
  const std::uint64_t base = attnviz::pass_bytes(c, 1024, every);
  CHECK(base > weights + cache);
  CHECK(base < weights + cache + 90'000'000);  // working buffers, one layer's scratch, the last logits
  attnviz::GptRequest detail = every;
  detail.detail_layer = 3;  // + scores, scaled, dropped (3 x 50 MB) and q, k, v, context, output, inputs
  CHECK(attnviz::pass_bytes(c, 1024, detail) - base == 3ull * 12 * 1024 * 1024 * 4 + 6ull * 1024 * 768 * 4);
  attnviz::GptRequest logits = every;
  logits.all_logits = true;
  CHECK(attnviz::pass_bytes(c, 1024, logits) - base == 1023ull * 50257 * 4);
  attnviz::GptRequest none;
  none.all_layers = false;
  CHECK(attnviz::pass_bytes(c, 1024, none) < base - weights + 51'000'000);
  c.n_layers = 1 << 30;  // saturates instead of wrapping
  CHECK(attnviz::pass_bytes(c, 1 << 30, every) == UINT64_MAX);
}
