// The whole-model view without a window: the model session against the PyTorch fixtures (weights, logits, the
// top 10), typing through the incremental path, refusals that keep the view, the grid of thumbnails and
// opening a layer through ImGui's own mouse, and the model's place in the state flags (the page's URL).
#include <doctest/doctest.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attnviz/io/model_source.hpp"
#include "attnviz/viz/app.hpp"
#include "attnviz/viz/model.hpp"
#include "ui_harness.hpp"
#include "view_args.hpp"

using namespace attnviz;
using namespace attnviz::viz;
using namespace attnviz::viz::test;

namespace {

const std::string kFolder = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt/hf-folder";

nlohmann::json fixture(const char* name) {
  std::ifstream f(std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt/" + name);
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

ModelChoice folder_choice() {
  ModelChoice c;
  c.kind = ModelKind::file;
  c.path = kFolder;
  return c;
}

}  // namespace

TEST_CASE("model session: the HF folder's weights, logits and top 10 are PyTorch's") {
  const nlohmann::json fx = fixture("14_folder_hf_d64_h4_l2_p10_bias_f16.json");
  ModelSession ms;
  REQUIRE(ms.open(folder_choice()).is_ok());
  REQUIRE(ms.recompute(fx["text"].get<std::string>()).is_ok());
  CHECK(ms.ids() == fx["ids"].get<std::vector<int>>());
  REQUIRE(ms.result().layers.size() == 2);
  double worst = 0.0;
  for (int l = 0; l < 2; ++l) {
    const Result& a = *ms.layer(l);
    const auto& want = fx["attention"][static_cast<std::size_t>(l)];
    const int T = static_cast<int>(ms.ids().size());
    for (int h = 0; h < a.shape.heads; ++h)
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j)
          worst = std::max(
              worst,
              std::fabs(
                  static_cast<double>(a.weights.at(h, i, j)) -
                  want[static_cast<std::size_t>(h)][static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]
                      .get<double>()));
    CHECK(a.tokens == ms.pieces());  // the heatmaps are labelled with the BPE pieces
  }
  CHECK(worst < 1e-5);
  // The top 10 of the last position, from PyTorch's logits: softmax in double, ids most probable first.
  const std::vector<double> logits = fx["logits"].back().get<std::vector<double>>();
  std::vector<int> order(logits.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  const double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (double x : logits) sum += std::exp(x - mx);
  REQUIRE(ms.result().next.size() == 10);
  for (std::size_t k = 0; k < 10; ++k) {
    CHECK(ms.result().next[k].id == order[k]);
    CHECK(ms.result().next[k].probability ==
          doctest::Approx(std::exp(logits[order[k]] - mx) / sum).epsilon(1e-5));
  }
  // What each head does is scored on every pass, one score set per layer and head.
  REQUIRE(ms.kinds().size() == 2);
  CHECK(ms.kinds()[0].size() == 4);
  CHECK(ms.describe().find("2 layers x 4 heads, d 64") != std::string::npos);
  // a loaded model opens in eval mode (from_pretrained's), and the description says so, and the config.json
  // it was read with
  CHECK(ms.describe().find(", eval mode; config: hf-folder/config.json") != std::string::npos);
}

TEST_CASE("model session: typing reuses the prefix and gives the full pass's numbers") {
  ModelSession typed, fresh;
  REQUIRE(typed.open(folder_choice()).is_ok());
  REQUIRE(fresh.open(folder_choice()).is_ok());
  typed.set_detail_layer(1);
  fresh.set_detail_layer(1);
  REQUIRE(typed.recompute("In the heart of the").is_ok());
  REQUIRE(typed.recompute("In the heart of the city").is_ok());
  CHECK(typed.result().reused > 0);
  REQUIRE(fresh.recompute("In the heart of the city").is_ok());
  CHECK(fresh.result().reused == 0);
  REQUIRE(typed.result().layers.size() == fresh.result().layers.size());
  for (std::size_t l = 0; l < typed.result().layers.size(); ++l)
    CHECK(typed.result().layers[l].attention.weights == fresh.result().layers[l].attention.weights);
  // The head kinds continue their sums over the new rows and give the full pass's scores, bit for bit.
  REQUIRE(typed.kinds().size() == fresh.kinds().size());
  for (std::size_t l = 0; l < typed.kinds().size(); ++l) {
    REQUIRE(typed.kinds()[l].size() == fresh.kinds()[l].size());
    for (std::size_t h = 0; h < typed.kinds()[l].size(); ++h) {
      const HeadScores &x = typed.kinds()[l][h], &y = fresh.kinds()[l][h];
      CHECK(x.previous == y.previous);
      CHECK(x.first == y.first);
      CHECK(x.self == y.self);
      CHECK(x.broad == y.broad);
      CHECK(x.induction == y.induction);
      CHECK(x.kind == y.kind);
    }
  }
  // The detail layer keeps every stage; the others their weights.
  CHECK_FALSE(typed.layer(1)->scores.empty());
  CHECK_FALSE(typed.layer(1)->q.empty());
  CHECK(typed.layer(0)->scores.empty());
}

TEST_CASE("model session: the memory check is the CLI's estimate, to the token") {
  ModelSession ms;
  REQUIRE(ms.open(folder_choice()).is_ok());
  const GptConfig& c = ms.config();
  const std::uint64_t budget = 150'000;
  ms.free_memory = [budget] { return budget; };
  const int fit = tokens_that_fit(c, ms.request(), false, budget, c.context_length);
  REQUIRE(fit > 1);
  REQUIRE(fit < c.context_length);
  const auto words = [](int n) {  // n tokens (" the" is one in this vocabulary)
    std::string s;
    for (int i = 0; i < n; ++i) s += " the";
    return s;
  };
  REQUIRE(ms.recompute(words(fit)).is_ok());
  REQUIRE(ms.ids().size() == static_cast<std::size_t>(fit));
  // The pass just made holds its storage: one more token allocates anew beside it, so it must fit in what
  // is free (counting the held storage as free let 3,200 tokens start and run out of memory).
  const Status st = ms.recompute(words(fit + 1));
  CHECK(st.error == check_pass_memory(c, fit + 1, ms.request(), false, budget, false).error);
  CHECK(st.error.find("more than the " + format_bytes(budget) + " available: about " + std::to_string(fit) +
                      " tokens fit") != std::string::npos);
  CHECK(ms.ids().size() == static_cast<std::size_t>(fit));
  // A pass no larger than the one held reuses its storage.
  ms.free_memory = [] { return std::uint64_t{1000}; };
  CHECK(ms.recompute(words(fit - 1)).is_ok());
}

TEST_CASE("model session: a refused edit keeps the last good pass, with one line") {
  ModelSession ms;
  REQUIRE(ms.open(folder_choice()).is_ok());
  REQUIRE(ms.recompute("In the heart").is_ok());
  const int generation = ms.generation();
  const std::vector<int> ids = ms.ids();
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += " the city";
  CHECK_FALSE(ms.recompute(long_text).is_ok());
  CHECK(ms.error().find("more than the context length 64") != std::string::npos);
  CHECK(ms.generation() == generation);
  CHECK(ms.ids() == ids);
  CHECK(ms.has_result());
  // Memory for a short pass but not for every head's weights over many tokens (the kept squares counted at
  // the padded stride an appended token can grow them to, 16 floats at least, and the cache's keys and
  // values in panels of up to 32 floats: 102 kB for 2 tokens, 268 kB for 20).
  ModelSession small;
  REQUIRE(small.open(folder_choice()).is_ok());
  small.free_memory = [] { return std::uint64_t{150000}; };
  REQUIRE(small.recompute("In the").is_ok());
  const std::vector<int> short_ids = small.ids();
  std::string longer;
  for (int i = 0; i < 20; ++i) longer += " the";
  const Status st = small.recompute(longer);
  REQUIRE_FALSE(st.is_ok());
  CHECK(st.error.find("tokens need") != std::string::npos);
  CHECK(st.error.find("tokens fit") != std::string::npos);
  CHECK(small.ids() == short_ids);
  // Opening what does not exist keeps the open model.
  ModelChoice bad = folder_choice();
  bad.path = kFolder + "/missing.safetensors";
  CHECK_FALSE(ms.open(bad).is_ok());
  CHECK(ms.is_open());
  CHECK(ms.choice().path == kFolder);
  ModelChoice huge;
  huge.kind = ModelKind::seeded;
  huge.size = "gpt2-xl";
  ModelSession tight;
  tight.free_memory = [] { return std::uint64_t{100} << 20; };
  const Status refused = tight.open(huge);
  CHECK(refused.error.find("gpt2-xl needs") != std::string::npos);
  CHECK_FALSE(tight.is_open());
}

TEST_CASE("model session: Generate appends the greedy tokens of generate_text_simple") {
  const nlohmann::json fx = fixture("14_folder_hf_d64_h4_l2_p10_bias_f16.json");
  ModelSession ms;
  REQUIRE(ms.open(folder_choice()).is_ok());
  std::string text = fx["text"].get<std::string>();
  REQUIRE(ms.generate(text, 3).is_ok());
  const std::vector<int> want = fx["generate"]["ids"].get<std::vector<int>>();
  const std::vector<int> prompt = fx["ids"].get<std::vector<int>>();
  REQUIRE(ms.ids().size() == prompt.size() + 3);
  CHECK(std::equal(ms.ids().begin(), ms.ids().end(), want.begin()));
  CHECK(text.size() > fx["text"].get<std::string>().size());
}

TEST_CASE("model view: a thumbnail per layer and head, hover previews, a click opens the layer") {
  Ui ui;
  App app;
  REQUIRE(open_model(app, folder_choice()).is_ok());
  app.session.text = "A rose is a rose is a rose is a rose.";
  REQUIRE(start(app).is_ok());
  ui.frame(app);
  ui.frame(app);
  REQUIRE(app.model_view.thumbs.size() == 8u);  // 2 layers x 4 heads
  CHECK(app.model_view.thumb_px >= 28);
  CHECK(app.layout.empty());                 // no full view yet
  const auto& t = app.model_view.thumbs[5];  // layer 1, head 1
  CHECK(t.layer == 1);
  CHECK(t.head == 1);
  ImGui::GetIO().MousePos = ImVec2((t.x0 + t.x1) * 0.5f, (t.y0 + t.y1) * 0.5f);
  ui.frame(app);
  ui.frame(app);
  CHECK(app.model_view.hovered_layer == 1);
  CHECK(app.model_view.hovered_head == 1);
  CHECK(ui.textures.last_width == app.model.ids().size());  // the preview, at full size below 512
  ui.click(app);
  CHECK(app.model_view.layer == 1);
  CHECK(app.view.enlarged == 1);
  CHECK(app.model.detail_layer() == 1);
  ui.frame(app);
  REQUIRE(app.layout.size() == 1u);  // head 1 of layer 1 alone, in the chapter-3 view
  CHECK(app.layout[0].rows == static_cast<int>(app.model.ids().size()));
  // Every stage of the opened layer is there: the stepper's scores are this layer's q k^T.
  app.view.stage = StageId::scores;
  ui.frame(app);
  REQUIRE(app.layout.size() == 1u);
  CHECK(shown_result(app) == app.model.layer(1));
  // Typing recomputes the model, not the chapter-3 layer.
  const int session_generation = app.session.generation();
  app.session.text += " a rose";
  REQUIRE(start(app).is_ok());
  CHECK(app.session.generation() == session_generation);
  CHECK(app.model.ids().size() > 12u);
}

TEST_CASE("model view: the head-kind filter hides the other heads, and the top 10 sums below 1") {
  Ui ui;
  App app;
  REQUIRE(open_model(app, folder_choice()).is_ok());
  ui.frame(app);
  const std::size_t all = app.model_view.thumbs.size();
  REQUIRE(all == 8u);
  std::size_t first = 0;
  for (const auto& layer : app.model.kinds())
    for (const HeadScores& s : layer) first += s.kind == HeadKind::first;
  app.model_view.filter = HeadKind::first;
  ui.frame(app);
  CHECK(app.model_view.thumbs.size() == first);
  double p = 0.0;
  for (const TopToken& t : app.model.result().next) p += t.probability;
  CHECK(p > 0.0);
  CHECK(p <= 1.0 + 1e-9);
}

TEST_CASE("state flags: the model, its layer and the head filter go into a link and come back") {
  App app;
  ViewArgs v;
  v.model = kFolder;
  v.layer = 1;
  v.head_kind = "first-token";
  REQUIRE(apply_view(v, app).is_ok());
  REQUIRE(open_model(app, app.model_view.choice).is_ok());
  app.model.set_detail_layer(1);
  REQUIRE(start(app).is_ok());
  app.view.enlarged = 2;
  const std::vector<StateArg> args = state_args(app);
  const auto has = [&](const char* k, const std::string& value) {
    return std::find(args.begin(), args.end(), StateArg{k, value}) != args.end();
  };
  CHECK(has("model", "file:hf-folder"));  // the name, never the path
  CHECK(has("layer", "1"));
  CHECK(has("head", "2"));
  CHECK(has("head-kind", "first-token"));
  // The same link in a host that holds the file (the page's folder of chosen files) opens it.
  App other;
  other.model_view.files_dir = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt";
  REQUIRE(apply_state_args(args, other).is_ok());
  REQUIRE(other.model.is_open());
  CHECK(other.model_view.layer == 1);
  CHECK(other.view.enlarged == 2);
  CHECK(other.model_view.filter == HeadKind::first);
  CHECK(state_args(other) == args);
  // A host without the file asks for it and keeps its view.
  App asking;
  asking.model_view.files_dir = "/nonexistent";
  REQUIRE(apply_state_args(args, asking).is_ok());
  CHECK_FALSE(asking.model.is_open());
  CHECK(asking.model_view.wanted_file == "hf-folder");
  // A seeded size and a layer past the last one.
  App seeded_view;
  const Status st = apply_state_args({{"model", "file:hf-folder"}, {"layer", "7"}}, other);
  CHECK(st.error == "layer 7 does not exist: the model has layers 0..1");
  CHECK_FALSE(apply_state_args({{"head-kind", "sideways"}}, seeded_view).is_ok());
}

TEST_CASE("model view: compare a second layer, a second sentence, a second seed of the opened layer") {
  Ui ui;
  App app;
  app.session.text = "A rose is a rose is a rose";
  REQUIRE(open_model(app, folder_choice()).is_ok());
  app.model_view.layer = 1;
  app.model.set_detail_layer(1);
  app.view.enlarged = 2;
  app.compare.mode = CompareMode::layer;
  app.compare.layer = 0;
  REQUIRE(start(app).is_ok());
  ui.frame(app);
  REQUIRE(app.layout.size() == 3u);  // A, B, A - B
  const Result* b = compare_result(app);
  REQUIRE(b != nullptr);
  // B is layer 0 of the same pass: the same numbers as A's own layer 0.
  CHECK(b->weights == app.model.layer(0)->weights);
  CHECK(app.compare.model_b.shares(app.model));
  // Every stage of layer B is there too (its own detail layer).
  CHECK_FALSE(b->scores.empty());
  // A second sentence: B is the same layer over another text.
  app.compare.mode = CompareMode::text;
  app.compare.text = "In the heart of the city";
  ui.frame(app);
  ui.frame(app);
  b = compare_result(app);
  REQUIRE(b != nullptr);
  ModelSession direct;
  REQUIRE(direct.open(folder_choice()).is_ok());
  direct.set_detail_layer(1);
  REQUIRE(direct.recompute("In the heart of the city").is_ok());
  CHECK(b->weights == direct.layer(1)->weights);
  REQUIRE(app.layout.size() == 3u);
  // A file's weights have no second seed; GPT-2 has no unmasked attention.
  CHECK_FALSE(compare_available(app, CompareMode::seed));
  CHECK_FALSE(compare_available(app, CompareMode::mask));
  app.compare.mode = CompareMode::seed;
  ui.frame(app);
  CHECK(compare_result(app) == nullptr);
  REQUIRE(app.layout.size() == 1u);  // the layer alone
  // The chapter-3 layer has no second layer.
  App plain;
  CHECK_FALSE(compare_available(plain, CompareMode::layer));
  CHECK(std::string(why_not_compare(plain, CompareMode::layer)).find("whole model") != std::string::npos);
}

TEST_CASE(
    "state args: a name or value with control bytes is refused in one line, and what is written reads back") {
  // The state fuzzer's first find: a name holding a line break came back in CLI11's two-line message.
  App app;
  Status st = apply_state_args({{"te&t\xff\n", "one step"}, {"variant", "mha"}}, app);
  CHECK(st.error == "unknown setting 'te&t\\xFF\\x0A'");
  st = apply_state_args({{"heads", "2"}, {"bogus", "x"}}, app);
  CHECK(st.error == "unknown setting 'bogus'");
  st = apply_state_args({{"text=hello", ""}}, app);  // a name can't smuggle a value in
  CHECK(st.error == "unknown setting 'text=hello'");
  st = apply_state_args({{"head-kind", "previous-token\nmodel-seed"}}, app);  // its second find
  CHECK(st.error ==
        "unknown head kind 'previous-token\\x0Amodel-seed' (previous-token, first-token, self, "
        "broad, induction, none)");
  st = apply_state_args({{"qkv-bias", "y\ny"}}, app);
  CHECK(st.error == "'qkv-bias' is on or off (1 or 0), not 'y\\x0Ay'");
  // Values that start with a dash or hold '=' are values, and the state written reads back the same.
  REQUIRE(apply_state_args({{"text", "-5 is = -x"}, {"compare", "text"}, {"compare-text", "--heads 4"}}, app)
              .is_ok());
  CHECK(app.session.text == "-5 is = -x");
  CHECK(app.compare.text == "--heads 4");
  const std::vector<StateArg> written = state_args(app);
  App other;
  REQUIRE(apply_state_args(written, other).is_ok());
  CHECK(state_args(other) == written);
  CHECK(other.session.text == "-5 is = -x");
  // An empty value is a value too (a link to an empty sentence box opens on it, and the view says why it is
  // empty).
  CHECK(apply_state_args({{"text", ""}}, other).error == "the text is empty: type at least one word");
  CHECK(other.session.text.empty());
  CHECK(state_args(other) == std::vector<StateArg>{{"text", ""}});
}

TEST_CASE(
    "state args: beside a model the layer's flags are refused, and heads or layers it lacks are named") {
  App app;
  app.model_view.files_dir = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt";
  // Refused before anything changes (the page then keeps its view and shows the line).
  Status st = apply_state_args({{"model", "file:hf-folder"}, {"variant", "causal"}}, app);
  CHECK(st.error == "--variant does not apply to --model: a model's sizes come from its preset or file");
  CHECK_FALSE(app.model.is_open());
  st = apply_state_args({{"heads", "2"}, {"model", "file:hf-folder"}}, app);
  CHECK(st.error == "--heads does not apply to --model: a model's head count comes from its preset or file");
  st = apply_state_args({{"model", "gpt2-small"}, {"no-mask", "1"}}, app);
  CHECK(st.error == "--no-mask does not apply to --model: a model's sizes come from its preset or file");
  CHECK_FALSE(app.model.is_open());
  // A head the model lacks survives its opening, for check_head_and_cell to name (the page then puts the
  // previous state back).
  REQUIRE(apply_state_args({{"model", "file:hf-folder"}, {"layer", "0"}, {"head", "99"}}, app).is_ok());
  REQUIRE(app.model.is_open());
  CHECK(check_head_and_cell(app).error ==
        "--head 99 is past the last head: the model has 4 heads (0 to 3), and -1 shows them all");
  REQUIRE(
      apply_state_args(
          {{"model", "file:hf-folder"}, {"layer", "1"}, {"compare", "layer"}, {"compare-layer", "99"}}, app)
          .is_ok());
  CHECK(check_head_and_cell(app).error == "--compare-layer 99 does not exist: the model has layers 0..1");
  REQUIRE(apply_state_args({{"model", "file:hf-folder"},
                            {"layer", "1"},
                            {"head", "3"},
                            {"compare", "layer"},
                            {"compare-layer", "1"}},
                           app)
              .is_ok());
  CHECK(check_head_and_cell(app).is_ok());
  // A state with a model open leaves the layer's sizes out, so the link it writes reads back.
  app.session.config.variant = Variant::causal;
  app.session.config.num_heads = 1;
  const std::vector<StateArg> written = state_args(app);
  for (const auto& [name, value] : written) CHECK((name != "variant" && name != "heads"));
  App other;
  other.model_view.files_dir = app.model_view.files_dir;
  REQUIRE(apply_state_args(written, other).is_ok());
  CHECK(state_args(other) == written);
}

TEST_CASE("model view: Generate appends one token a frame, stops when asked, and at the context length") {
  // The sentence box has the keyboard from the first frame: each step's longer text must survive it.
  Ui ui;
  App app;
  app.session.text = "the cat";
  REQUIRE(open_model(app, folder_choice()).is_ok());
  ui.frame(app);
  const std::size_t start = app.model.ids().size();
  app.model_view.generating = 5;
  ui.frame(app);
  CHECK(app.model_view.generating == 4);
  CHECK(app.model.ids().size() == start + 1);
  ui.frame(app);
  CHECK(app.model.ids().size() == start + 2);
  app.model_view.generating = 0;  // what the Stop button does
  ui.frame(app);
  ui.frame(app);
  CHECK(app.model.ids().size() == start + 2);
  // The steps field holds at most 200, and a run ends at the context length (64 here) with the reason.
  app.model_view.generate_steps = 100000;
  ui.frame(app);
  CHECK(app.model_view.generate_steps == 200);
  app.model_view.generating = 200;
  for (int f = 0; f < 80 && app.model_view.generating > 0; ++f) ui.frame(app);
  CHECK(app.model_view.generating == 0);
  CHECK(app.model.ids().size() == 64u);
  CHECK(app.model.error() == "the text fills the context length 64");
}
