// attnviz-cli's causal tools (--lens, --attribute, --ablate, --patch; docs/lens.md): the JSON keys the CLI
// contract names, with PyTorch's numbers (tests/fixtures/lens), and each bad request refused in one line.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "attnviz/io/gpt_file.hpp"
#include "attnviz/io/model_source.hpp"
#include "attnviz/lens.hpp"
#include "cli_run.hpp"

using namespace attnviz;
using attnviz::test::check_refused;
using attnviz::test::cli;
using attnviz::test::Run;
using nlohmann::json;

namespace {

const std::filesystem::path kFixtures = std::filesystem::path(ATTNVIZ_FIXTURES_DIR);

json read_json(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return json::parse(s.str());
}

std::string id_list(const json& ids) {
  std::string s;
  for (const json& id : ids) s += (s.empty() ? "" : ",") + std::to_string(id.get<int>());
  return s;
}

// The fixture's case on the command line: its model, ids, target, versus and position.
std::vector<std::string> case_args(const json& f) {
  std::vector<std::string> args = {"--model",
                                   (kFixtures / f.at("model").get<std::string>()).string(),
                                   "--ids",
                                   id_list(f.at("ids")),
                                   "--json",
                                   "--layers",
                                   "none",
                                   "--position",
                                   std::to_string(f.at("position").get<int>()),
                                   "--target",
                                   "#" + std::to_string(f.at("target").get<int>())};
  if (!f.at("versus").is_null()) {
    args.push_back("--versus");
    args.push_back("#" + std::to_string(f.at("versus").get<int>()));
  }
  return args;
}

void check_near(const json& got, const json& want, double tol, const std::string& what) {
  INFO(what);
  if (want.is_array()) {
    REQUIRE(got.is_array());
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
      check_near(got[i], want[i], tol, what + "[" + std::to_string(i) + "]");
    return;
  }
  CHECK(std::fabs(got.get<double>() - want.get<double>()) <= tol);
}

}  // namespace

TEST_CASE("attnviz-cli --lens --attribute --ablate --patch: the contract's keys with PyTorch's numbers") {
  for (const char* name : {"gemma3", "pythia", "qwen2"}) {
    CAPTURE(name);
    const json f = read_json(kFixtures / "lens" / (std::string(name) + ".json"));
    const int L = f.at("n_layers"), H = f.at("n_heads"), T = static_cast<int>(f.at("ids").size());
    std::vector<std::string> args = case_args(f);
    for (const char* flag : {"--lens", "--attribute"}) args.push_back(flag);
    args.insert(args.end(), {"--top-k", "2", "--patch-ids", id_list(f.at("patch_ids"))});
    const Run r = cli(args);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const json j = json::parse(r.out);

    // lens: L + 1 points, a position each, the top k, and the target's probability (a target was given)
    const json& lens = j.at("lens");
    REQUIRE(lens.size() == static_cast<std::size_t>(L + 1));
    CHECK(lens[0].at("after") == "embeddings");
    CHECK(lens[1].at("after") == "block 0");
    for (const json& point : lens) {
      REQUIRE(point.at("positions").size() == static_cast<std::size_t>(T));
      for (const json& pos : point.at("positions")) {
        REQUIRE(pos.at("top").size() == 2u);
        CHECK(pos.at("top")[0].contains("piece"));
        CHECK(pos.at("top")[0].at("probability").get<double>() >=
              pos.at("top")[1].at("probability").get<double>());
        CHECK(pos.at("target_probability").get<double>() >= 0.0);
      }
    }
    // the lens's last point at the last position is the pass's own next-token list
    CHECK(lens.back().at("positions").back().at("top")[0].at("id") == j.at("next")[0].at("id"));

    const json& a = j.at("attribution");
    const json& want = f.at("attribution");
    const double tol = 1e-4 * std::max(1.0, std::fabs(want.at("value").get<double>()));
    CHECK(a.at("position") == f.at("position"));
    CHECK(a.at("target").at("id") == f.at("target"));
    CHECK(a.at("target").at("label") == "#" + std::to_string(f.at("target").get<int>()));
    if (f.at("versus").is_null())
      CHECK(a.at("versus").is_null());
    else
      CHECK(a.at("versus").at("id") == f.at("versus"));
    check_near(a.at("value"), want.at("value"), tol, "value");
    check_near(a.at("sum"), want.at("value"), tol, "sum");
    for (const char* key : {"embeddings", "heads", "attention_bias", "mlp", "final_bias"})
      check_near(a.at("components").at(key), want.at("components").at(key), tol, key);
    REQUIRE(a.at("components").at("heads").size() == static_cast<std::size_t>(L));
    CHECK(a.at("components").at("heads")[0].size() == static_cast<std::size_t>(H));

    const json& p = j.at("patching");
    CHECK(p.at("metric") == f.at("patching").at("metric"));
    CHECK(p.at("position") == f.at("position"));
    check_near(p.at("clean"), f.at("patching").at("clean"), tol, "clean");
    check_near(p.at("corrupted"), f.at("patching").at("corrupted"), tol, "corrupted");
    check_near(p.at("residual"), f.at("patching").at("residual"), 1e-3, "residual");
    check_near(p.at("heads"), f.at("patching").at("heads"), 1e-3, "heads");
    CHECK_FALSE(j.contains("ablated"));

    // --ablate: the pass and every key with the heads ablated
    for (const char* kind : {"zero", "mean"}) {
      std::string heads;
      for (const json& h : f.at("ablate"))
        heads += (heads.empty() ? "" : ",") + std::to_string(h[0].get<int>()) + "." +
                 std::to_string(h[1].get<int>());
      std::vector<std::string> ab = case_args(f);
      ab.insert(ab.end(), {"--attribute", "--ablate", heads, "--ablation", kind, "--keep", "logits"});
      const Run ra = cli(ab);
      CAPTURE(ra.err);
      REQUIRE(ra.status == 0);
      const json ja = json::parse(ra.out);
      REQUIRE(ja.at("ablated").size() == f.at("ablate").size());
      CHECK(ja.at("ablated")[0].at("layer") == f.at("ablate")[0][0]);
      CHECK(ja.at("ablated")[0].at("head") == f.at("ablate")[0][1]);
      CHECK(ja.at("ablation") == kind);
      const json& wa = f.at("ablated").at(kind);
      for (const char* key : {"embeddings", "heads", "attention_bias", "mlp", "final_bias"})
        check_near(ja.at("attribution").at("components").at(key),
                   wa.at("attribution").at("components").at(key), tol, std::string(kind) + " " + key);
      // the ablated pass's logits, every position's
      const std::vector<double> want_logits = wa.at("logits");
      const json& got = ja.at("logits");
      REQUIRE(got.size() == static_cast<std::size_t>(T));
      const std::size_t V = got[0].size();
      for (std::size_t t = 0; t < got.size(); ++t)
        for (std::size_t v = 0; v < V; ++v)
          CHECK(got[t][v].get<double>() == doctest::Approx(want_logits[t * V + v]).epsilon(1e-5).scale(1.0));
    }
  }
}

TEST_CASE("attnviz-cli --lens and friends: the text view, and defaults") {
  const json f = read_json(kFixtures / "lens" / "llama.json");
  const std::string model = (kFixtures / f.at("model").get<std::string>()).string();
  const std::string ids = id_list(f.at("ids"));
  // Without --target, the target is the top next token at the last position.
  const Run r = cli(
      {"--model", model, "--ids", ids, "--attribute", "--lens", "--patch-ids", id_list(f.at("patch_ids"))});
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("logit lens: the top token after each point") != std::string::npos);
  CHECK(r.out.find("\nembeddings ") != std::string::npos);
  CHECK(r.out.find("attribution of the logit of #" + std::to_string(f.at("target").get<int>()) +
                   " at position " + std::to_string(f.at("position").get<int>())) != std::string::npos);
  CHECK(r.out.find("the components sum to") != std::string::npos);
  CHECK(r.out.find("each head's context vectors, the largest entries:") != std::string::npos);
  const Run j = cli({"--model", model, "--ids", ids, "--attribute", "--json", "--layers", "none"});
  REQUIRE(j.status == 0);
  const json out = json::parse(j.out);
  CHECK(out.at("attribution").at("target").at("id") == out.at("next")[0].at("id"));
  CHECK(out.at("attribution").at("position") == f.at("ids").size() - 1);
  CHECK(out.at("attribution").at("versus").is_null());
  CHECK_FALSE(out.contains("lens"));
  CHECK_FALSE(out.contains("patching"));
  // no target given: the lens has no target_probability
  const Run jl = cli({"--model", model, "--ids", ids, "--lens", "--json", "--layers", "none"});
  REQUIRE(jl.status == 0);
  CHECK_FALSE(json::parse(jl.out).at("lens")[0].at("positions")[0].contains("target_probability"));
}

TEST_CASE("attnviz-cli --lens and friends: bad requests are refused in one line") {
  const std::string model = (kFixtures / "arch" / "llama").string();
  const std::vector<std::string> base = {"--model", model, "--ids", "1,2,3,4"};
  const auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = base;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  check_refused(with({"--attribute", "--position", "4"}), "--position 4 is past the text's 4 tokens");
  check_refused(with({"--attribute", "--target", "#96"}), "--target: '#96' is outside the vocabulary");
  check_refused(with({"--attribute", "--target", "#x"}), "is not a token id");
  check_refused(with({"--attribute", "--target", "hello"}),
                "the model has no tokenizer here (--ids): give the token as #ID");
  check_refused(with({"--attribute", "--target", "#5", "--versus", "#5"}),
                "the versus token is the target itself");
  check_refused(with({"--ablate", "2.0"}),
                "--ablate: head 2.0 is not in the model (layers 0..1, heads 0..5)");
  check_refused(with({"--ablate", "0.1,0.1"}), "--ablate: head 0.1 is named twice");
  check_refused(with({"--ablate", "1"}), "--ablate: \"1\" is not a head");
  check_refused(with({"--ablate", "0.1", "--ablation", "half"}), "--ablation: 'half' is not zero or mean");
  check_refused(with({"--patch-ids", "1,2,3"}), "the corrupted text is 3 tokens and the clean one 4");
  check_refused(with({"--patch-ids", "1,2,3,4", "--target", "#7"}), "there is nothing to patch");
  check_refused(with({"--patch-ids", "1,2,3,999"}), "--patch-ids: 999 is outside the vocabulary");
  check_refused(with({"--patch-ids", "1,x"}), "--patch-ids: 'x' is not a token id");
  check_refused(with({"--patch", "1 2 3 4"}),
                "--patch takes text, and the tokens came as --ids: give the corrupted ids with --patch-ids");
  check_refused(with({"--patch-ids", "1"}), "the corrupted text is 1 token and the clean one 4");
  check_refused(with({"--target", "#5"}), "--target needs --lens, --attribute, --ablate or --patch");
  check_refused(with({"--lens", "--generate", "2"}), "leave --generate out");
  // A piece of text that is not exactly one token names how it tokenizes.
  const std::string folder = (kFixtures / "gpt" / "hf-folder").string();
  check_refused({"--model", folder, "--text", "A rose is a rose", "--attribute", "--target", " rose is"},
                "--target: ' rose is' is 4 tokens here, not one: ' ' (#220) 'ro' (#305)");
  // The seeded book model runs in train mode: the tools need --eval; a loaded one asked for --train, without
  // it.
  check_refused({"--model", "gpt2-small", "--ids", "1,2", "--lens"},
                "need eval mode, without dropout: give --eval");
  check_refused({"--model", folder, "--ids", "1,2", "--train", "--lens"},
                "need eval mode, without dropout: leave --train out");
}
