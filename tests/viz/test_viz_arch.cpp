// The views of today's open decoders on the architecture fixtures (tests/fixtures/arch: Gemma 3 with grouped
// heads, sliding-window layers and q/k norms; Llama with grouped heads), against their config.json, PyTorch's
// weights in expected.json and arithmetic done here: head labels, the band mask, the explanations, the q/k
// steps of the stepper, the sink summary and the Model panel's line. GPT-2's labels stay as they were.
#include <doctest/doctest.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnviz/viz/app.hpp"
#include "attnviz/viz/arch.hpp"
#include "attnviz/viz/colorize.hpp"
#include "attnviz/viz/explain.hpp"
#include "attnviz/viz/model.hpp"
#include "ui_harness.hpp"

using namespace attnviz;
using namespace attnviz::viz;
using namespace attnviz::viz::test;
using json = nlohmann::json;

namespace {

const std::filesystem::path kArch = std::filesystem::path(ATTNVIZ_FIXTURES_DIR) / "arch";

json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  REQUIRE(f.good());
  return json::parse(f);
}

// The fixture's ids as the sentence of a model opened without a tokenizer ("62 40 17 ...").
std::string ids_text(const json& expected) {
  std::string s;
  for (const json& id : expected["ids"]) s += (s.empty() ? "" : " ") + std::to_string(id.get<int>());
  return s;
}

ModelChoice arch_choice(const char* name) {
  ModelChoice c;
  c.kind = ModelKind::file;
  c.path = (kArch / name).string();
  c.ids_only = true;
  return c;
}

// Opens a fixture with its expected.json ids, every stage kept for `detail`.
void open_fixture(ModelSession& ms, const char* name, int detail) {
  REQUIRE(ms.open(arch_choice(name)).is_ok());
  ms.set_detail_layer(detail);
  const Status st = ms.recompute(ids_text(read_json(kArch / name / "expected.json")));
  INFO(st.error);
  REQUIRE(st.is_ok());
}

// The parameters a safetensors file holds: the sum of its tensors' element counts, read from its header.
std::int64_t file_parameters(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE(f.good());
  unsigned char len[8];
  f.read(reinterpret_cast<char*>(len), 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
  std::string header(n, '\0');
  f.read(header.data(), static_cast<std::streamsize>(n));
  std::int64_t total = 0;
  const json tensors = json::parse(header);
  for (const auto& [name, t] : tensors.items()) {
    if (name == "__metadata__") continue;
    std::int64_t numel = 1;
    for (const json& d : t["shape"]) numel *= d.get<std::int64_t>();
    total += numel;
  }
  return total;
}

// RMSNorm of one head's row, scaled by w (the loaded weights hold Gemma's 1 + w), in double.
std::vector<double> rms_norm(const float* x, int n, const Tensor& w, double eps) {
  double ms = 0.0;
  for (int i = 0; i < n; ++i) ms += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ms / n + eps);
  std::vector<double> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    out[static_cast<std::size_t>(i)] = x[i] * inv * w.data[static_cast<std::size_t>(i)];
  return out;
}

// Hugging Face's rotate_half RoPE at position t with base theta over all n dims, in double (linear scaling
// divides the frequencies by its factor: the same as position t / factor).
std::vector<double> rope(const std::vector<double>& x, double t, double theta) {
  const int n = static_cast<int>(x.size()), half = n / 2;
  std::vector<double> out(x.size());
  for (int i = 0; i < half; ++i) {
    const double a = t / std::pow(theta, 2.0 * i / n);
    const auto lo = static_cast<std::size_t>(i), hi = static_cast<std::size_t>(i + half);
    out[lo] = x[lo] * std::cos(a) - x[hi] * std::sin(a);
    out[hi] = x[hi] * std::cos(a) + x[lo] * std::sin(a);
  }
  return out;
}

}  // namespace

TEST_CASE("arch views: grouped heads are labelled with the key/value head they read, GPT-2's as before") {
  for (const char* name : {"llama", "gemma3"}) {
    CAPTURE(name);
    const json cfg = read_json(kArch / name / "config.json");
    ModelSession ms;
    REQUIRE(ms.open(arch_choice(name)).is_ok());
    const GptConfig& c = ms.config();
    const int H = cfg["num_attention_heads"].get<int>(), KV = cfg["num_key_value_heads"].get<int>();
    REQUIRE(c.n_heads == H);
    CHECK(grouped_heads(c));
    // repeat_kv's layout: query heads [g * H / KV, (g + 1) * H / KV) read key/value head g.
    for (int g = 0; g < KV; ++g)
      for (int h = g * (H / KV); h < (g + 1) * (H / KV); ++h) {
        CHECK(kv_head_of(c, h) == g);
        CHECK(head_label(c, h) == "q" + std::to_string(h) + " \xC2\xB7 kv" + std::to_string(g));
        CHECK(head_sharing(c, h) == "query head " + std::to_string(h) + " shares key/value head " +
                                        std::to_string(g) + " with query heads " +
                                        std::to_string(g * (H / KV)) + " to " +
                                        std::to_string((g + 1) * (H / KV) - 1));
      }
  }
  ModelSession gpt2;
  ModelChoice c;
  c.kind = ModelKind::file;
  c.path = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt/hf-folder";
  REQUIRE(gpt2.open(c).is_ok());
  CHECK_FALSE(grouped_heads(gpt2.config()));
  CHECK(head_label(gpt2.config(), 3) == "h3");
  CHECK(head_sharing(gpt2.config(), 3).empty());
  CHECK(mask_label(gpt2.config(), 1) == "causal");
}

TEST_CASE("arch views: a sliding-window layer's mask is a band, where PyTorch's weights are exactly 0") {
  const json cfg = read_json(kArch / "gemma3" / "config.json");
  const json want = read_json(kArch / "gemma3" / "expected.json");
  const int window = cfg["sliding_window"].get<int>();
  ModelSession ms;
  open_fixture(ms, "gemma3", 0);
  const GptConfig& c = ms.config();
  const int T = static_cast<int>(ms.ids().size());
  REQUIRE(T > window + 2);  // some rows have keys before their window
  for (int l = 0; l < c.n_layers; ++l) {
    CAPTURE(l);
    const bool sliding = cfg["layer_types"][static_cast<std::size_t>(l)] == "sliding_attention";
    CHECK(mask_label(c, l) == (sliding ? "sliding window " + std::to_string(window) : "causal"));
    const Result& r = *ms.layer(l);
    CHECK(mask_label(r.shape) == mask_label(c, l));
    for (int h = 0; h < c.n_heads; ++h) {
      const MatrixDesc m = stage_matrix(r, StageId::weights, h);
      std::vector<std::uint32_t> texels;
      colorize(m, ColorOptions{}, Range{0.0f, 1.0f}, texels);
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          const double torch =
              want["weights"][static_cast<std::size_t>(l)][static_cast<std::size_t>((h * T + i) * T + j)]
                  .get<double>();
          // Masked exactly where PyTorch's softmax gave 0 (an unmasked weight of this model is never 0).
          CHECK(m.masked(i, j) == (torch == 0.0));
          CHECK(m.masked(i, j) == (j > i || (sliding && j <= i - window)));
          CHECK((texels[static_cast<std::size_t>(i * T + j)] == kMaskedColor) == m.masked(i, j));
        }
    }
    // Thumbnails keep the band: a pooled cell wholly before the window has nothing to show.
    const MatrixDesc t = thumbnail(stage_matrix(r, StageId::weights, 0), 7);  // 2 x 2 blocks
    REQUIRE(t.rows == 7);
    CHECK(std::isnan(t.at(0, 6)) == true);     // above the diagonal
    CHECK(std::isnan(t.at(6, 0)) == sliding);  // rows 12-13, keys 0-1: before a window of 5
    CHECK(std::isfinite(t.at(6, 6)));          // the diagonal
    // The mask stage's formula says what it removes.
    const StageInfo mask = stage_info(r, StageId::masked);
    CHECK(mask.formula.find(sliding ? "j > i or j <= i - " + std::to_string(window)
                                    : "masked_fill(j > i, -inf)") != std::string::npos);
  }
}

TEST_CASE("arch views: the hover explanation names the window, and the scale the model uses") {
  const json cfg = read_json(kArch / "gemma3" / "config.json");
  const int window = cfg["sliding_window"].get<int>();
  const double scalar = cfg["query_pre_attn_scalar"].get<double>();
  ModelSession ms;
  open_fixture(ms, "gemma3", 0);
  const Result& r = *ms.layer(0);  // a sliding-window layer, every stage kept
  const int hd = cfg["head_dim"].get<int>();
  // Gemma 3 scales by query_pre_attn_scalar^-1/2, not head_dim^-1/2: the formulas say the number used.
  CHECK(r.shape.scale == doctest::Approx(1.0 / std::sqrt(scalar)).epsilon(1e-6));
  REQUIRE(std::fabs(1.0 / std::sqrt(scalar) - 1.0 / std::sqrt(hd)) > 0.01);
  CHECK_FALSE(standard_scale(r));
  char scale[32];
  std::snprintf(scale, sizeof scale, "%g", 1.0 / std::sqrt(scalar));
  const std::string root = "sqrt(" + std::to_string(static_cast<int>(scalar)) + ")";
  const StageInfo scaled = stage_info(r, StageId::scaled);
  CHECK(scaled.formula.find(std::string("q k^T x ") + scale) == 0);
  CHECK(scaled.formula.find(root) != std::string::npos);
  CHECK(stage_info(r, StageId::weights).formula == std::string("softmax(mask(q k^T x ") + scale + "))");

  const int row = window + 4, before = 2, after = row + 1;  // keys before the window, and after the row
  const CellExplain out = explain(r, StageId::weights, 1, row, before);
  CHECK(out.masked);
  CHECK(out.weight == 0.0f);
  CHECK(out.text.find("masked: outside the sliding window of " + std::to_string(window) + " keys -> -inf") !=
        std::string::npos);
  CHECK(out.text.find("after the row's token") == std::string::npos);
  const CellExplain later = explain(r, StageId::weights, 1, row, after);
  CHECK(later.text.find("masked: column after the row's token") != std::string::npos);
  // A cell in the band: the scale line names the number, and the softmax over the band alone gives the
  // weight.
  const CellExplain in = explain(r, StageId::weights, 1, row, row - 1);
  CHECK_FALSE(in.masked);
  CHECK(in.text.find(std::string("x ") + scale + " (1/" + root + ", the model's scale)") !=
        std::string::npos);
  CHECK(in.weight == doctest::Approx(r.weights.at(1, row, row - 1)).epsilon(1e-5));
  const CellExplain ctx = explain(r, StageId::context, 1, row, 0);
  CHECK(ctx.text.find("sum over " + std::to_string(window) + " tokens") != std::string::npos);
}

TEST_CASE("arch views: the stepper's q/k steps are the projection, the q/k norm and the rotation") {
  const json cfg = read_json(kArch / "gemma3" / "config.json");
  for (int layer : {0, 2}) {  // a sliding-window layer (local base) and a global one (scaled frequencies)
    CAPTURE(layer);
    ModelSession ms;
    open_fixture(ms, "gemma3", layer);
    const GptConfig& c = ms.config();
    const Result& r = *ms.layer(layer);
    const LayerSteps steps = layer_steps(c, *ms.gpt_layer(layer));
    REQUIRE(steps.any());
    CHECK(qk_steps(steps) == std::vector<QkStep>{QkStep::projected, QkStep::normed, QkStep::rotated});
    const int T = r.tokens_count(), hd = c.head_dim(), H = c.n_heads;
    const double eps = cfg["rms_norm_eps"].get<double>();
    const bool local = layer == 0;
    const double theta = local ? cfg["rope_local_base_freq"].get<double>() : cfg["rope_theta"].get<double>();
    const double factor = local ? 1.0 : cfg["rope_scaling"]["factor"].get<double>();  // linear: positions / 8
    const GptBlock& b = ms.weights().blocks[static_cast<std::size_t>(layer)];
    double worst = 0.0;
    for (int h = 0; h < H; ++h)
      for (StageId s : {StageId::queries, StageId::keys}) {
        const MatrixDesc proj = qk_step_matrix(r, steps, s, QkStep::projected, h);
        const MatrixDesc normed = qk_step_matrix(r, steps, s, QkStep::normed, h);
        const MatrixDesc rotated = qk_step_matrix(r, steps, s, QkStep::rotated, h);
        REQUIRE(proj.rows == T);
        REQUIRE(proj.cols == hd);
        // keys: head h shows its key/value head's projection (one for all 4 query heads here).
        const Tensor& src = s == StageId::queries ? ms.gpt_layer(layer)->q_proj : ms.gpt_layer(layer)->k_proj;
        const int col = s == StageId::queries ? h : kv_head_of(c, h);
        for (int t = 0; t < T; ++t) {
          CHECK(proj.at(t, 0) == src.at(t, col * hd));
          std::vector<float> x(static_cast<std::size_t>(hd));
          for (int d = 0; d < hd; ++d) x[static_cast<std::size_t>(d)] = proj.at(t, d);
          const std::vector<double> n =
              rms_norm(x.data(), hd, s == StageId::queries ? b.q_norm : b.k_norm, eps);
          const std::vector<double> want = rope(n, t / factor, theta);
          for (int d = 0; d < hd; ++d) {
            worst = std::max(worst, std::fabs(normed.at(t, d) - n[static_cast<std::size_t>(d)]));
            worst = std::max(worst, std::fabs(rotated.at(t, d) - want[static_cast<std::size_t>(d)]));
          }
        }
      }
    CHECK(worst < 1e-4);
    // The formulas name the norm and the rotation the layer has; shapes are per key/value head before repeat.
    const StageInfo q_rot = qk_step_info(r, steps, StageId::queries, QkStep::rotated);
    CHECK(q_rot.formula.find("q = RoPE(q_norm(x W_query)): RoPE theta " +
                             std::to_string(static_cast<long long>(theta))) == 0);
    CHECK((q_rot.formula.find("linear x8") != std::string::npos) == !local);
    CHECK(qk_step_info(r, steps, StageId::keys, QkStep::projected).shape ==
          "(b, KV, T, hd) = (1, 1, " + std::to_string(T) + ", " + std::to_string(hd) + ")");
    CHECK(qk_step_info(r, steps, StageId::queries, QkStep::normed).formula ==
          "q_norm(q): RMSNorm over each head's 16 dims, scale (1 + w)");
    std::vector<std::string> labels;
    for (const ShapeStep& st : shape_strip(r, steps)) labels.push_back(st.label);
    CHECK(labels == std::vector<std::string>{"x", "x W_q", "x W_k, x W_v", "split heads: q", "k, v",
                                             "q/k norm", "RoPE", "repeat k, v", "q k^T", "scale + mask",
                                             "softmax", "weights v", "merge heads", "out_proj"});
  }
  // Llama has no q/k norms: two steps. GPT-2 has none, and its strip is chapter 3's.
  ModelSession llama;
  open_fixture(llama, "llama", 1);
  const LayerSteps ls = layer_steps(llama.config(), *llama.gpt_layer(1));
  CHECK(qk_steps(ls) == std::vector<QkStep>{QkStep::projected, QkStep::rotated});
  CHECK(qk_step_info(*llama.layer(1), ls, StageId::keys, QkStep::rotated)
            .formula.find("k = RoPE(x W_key): RoPE theta 10000 on all 8 dims") == 0);
  ModelSession gpt2;
  ModelChoice c;
  c.kind = ModelKind::file;
  c.path = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt/hf-folder";
  REQUIRE(gpt2.open(c).is_ok());
  gpt2.set_detail_layer(0);
  REQUIRE(gpt2.recompute("In the heart of the city").is_ok());
  const LayerSteps none = layer_steps(gpt2.config(), *gpt2.gpt_layer(0));
  CHECK_FALSE(none.any());
  CHECK(qk_steps(none).empty());
  CHECK(standard_scale(*gpt2.layer(0)));
  CHECK(shape_strip(*gpt2.layer(0), none).size() == shape_strip(*gpt2.layer(0)).size());
  CHECK(stage_info(*gpt2.layer(0), StageId::scaled).title == std::string("/ sqrt(d_k)"));
}

TEST_CASE("arch views: the Model panel's line and parameter count, from config.json and the file") {
  ModelSession llama;
  REQUIRE(llama.open(arch_choice("llama")).is_ok());
  const json lc = read_json(kArch / "llama" / "config.json");
  CHECK(arch_line(llama.config()) ==
        "llama \xC2\xB7 " + std::to_string(lc["num_hidden_layers"].get<int>()) +
            " layers \xC2\xB7 6 query heads on 2 key/value heads \xC2\xB7 RoPE theta "
            "10000 \xC2\xB7 SwiGLU \xC2\xB7 RMSNorm");
  ModelSession gemma;
  REQUIRE(gemma.open(arch_choice("gemma3")).is_ok());
  const std::string g = arch_line(gemma.config());
  for (const char* part :
       {"gemma3_text \xC2\xB7 3 layers \xC2\xB7 4 query heads on 1 key/value head", "head dim 16",
        "RoPE theta 1000000, linear x8 (local layers: theta 10000)", "sliding window 5 on 2 of 3 layers",
        "q/k norm", "scale 1/sqrt(24)", "GeGLU", "RMSNorm (1 + w)", "sandwich norms"}) {
    CAPTURE(part);
    CHECK(g.find(part) != std::string::npos);
  }
  // Both files tie the output head to the embeddings: every parameter is one of the file's tensors.
  for (ModelSession* ms : {&llama, &gemma}) {
    const std::int64_t n = file_parameters(std::filesystem::path(ms->choice().path) / "model.safetensors");
    CHECK(ms->describe().find(", " + format_parameters(n) + ", eval mode") != std::string::npos);
  }
  CHECK(format_parameters(36608) == "36,608 parameters");
  CHECK(format_parameters(1) == "1 parameter");
  CHECK(format_parameters(99'999) == "99,999 parameters");
  CHECK(format_parameters(136'960) == "0.1 M parameters");
  CHECK(format_parameters(124'439'808) == "124.4 M parameters");
}

TEST_CASE("arch views: the grid labels grouped heads, draws a sink bar per layer, and opens a band layer") {
  Ui ui;
  App app;
  app.session.text = ids_text(read_json(kArch / "gemma3" / "expected.json"));
  REQUIRE(open_model(app, arch_choice("gemma3")).is_ok());
  ui.frame(app);
  ui.frame(app);
  const ModelSession& ms = app.model;
  const int L = ms.config().n_layers, H = ms.config().n_heads;
  CHECK(app.model_view.thumbs.size() == static_cast<std::size_t>(L * H));
  // The sink column: one bar per layer, the mean over the layer's heads of the first-token share of rows i >=
  // 1, summed here from the weights themselves.
  REQUIRE(app.model_view.sinks.size() == static_cast<std::size_t>(L));
  const int T = static_cast<int>(ms.ids().size());
  for (const ModelView::Sink& s : app.model_view.sinks) {
    CAPTURE(s.layer);
    const Result& r = *ms.layer(s.layer);
    double sum = 0.0;
    for (int h = 0; h < H; ++h)
      for (int i = 1; i < T; ++i) sum += r.weights.at(h, i, 0);
    CHECK(s.value == doctest::Approx(sum / (H * (T - 1))).epsilon(1e-5));
    CHECK(s.x0 > app.model_view.thumbs.back().x1);  // beside the grid, right of the last head
    CHECK(s.y1 > s.y0);
  }
  const std::vector<float> sinks = sink_per_layer(ms.kinds());
  REQUIRE(sinks.size() == static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l)
    CHECK(sinks[static_cast<std::size_t>(l)] == app.model_view.sinks[static_cast<std::size_t>(l)].value);

  // Clicking layer 0's head 2 opens it; the keys stage before the rotation shows the key/value head's k.
  const ModelView::Thumb& th = app.model_view.thumbs[2];
  ImGui::GetIO().MousePos = ImVec2((th.x0 + th.x1) / 2, (th.y0 + th.y1) / 2);
  ui.frame(app);
  ui.click(app);
  REQUIRE(app.model_view.layer == 0);
  ui.frame(app);
  app.view.stage = StageId::keys;
  app.view.qk_step = QkStep::projected;
  const int uploads = app.uploads;
  ui.frame(app);
  ui.frame(app);
  CHECK(app.view.qk_step == QkStep::projected);  // the layer has the step: kept
  REQUIRE(app.layout.size() == 1u);              // head 2 alone
  CHECK(app.layout[0].cols == ms.config().head_dim());
  CHECK(app.uploads > uploads);
  // On the weights the band shows: a cell before the window is masked and hover explains it.
  app.view.stage = StageId::weights;
  ui.frame(app);
  ui.hover(app, 2, T - 1, 0);
  CHECK(app.view.hover == Cell{true, 2, T - 1, 0});
  // A narrow window: Llama's six "q5 · kv1" labels no longer fit one line over their thumbnails, so each
  // takes two ("q5" over "kv1"), and one line again when there is room.
  app.model_view.layer = -1;
  app.session.text = ids_text(read_json(kArch / "llama" / "expected.json"));
  REQUIRE(open_model(app, arch_choice("llama")).is_ok());
  ui.frame(app);
  ui.frame(app);
  CHECK_FALSE(app.model_view.header_two_lines);
  ImGui::GetIO().DisplaySize = ImVec2(700, 500);
  ui.frame(app);
  ui.frame(app);
  CHECK(app.model_view.header_two_lines);
  CHECK(app.model_view.thumbs.size() == 12u);
  CHECK(app.model_view.sinks.size() == 2u);
  ImGui::GetIO().DisplaySize = ImVec2(1280, 800);
  // GPT-2 has no q/k steps: a step asked for falls back to the rotated (the only) q and k.
  REQUIRE(app.view.qk_step == QkStep::projected);
  ModelChoice c;
  c.kind = ModelKind::file;
  c.path = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt/hf-folder";
  app.view.stage = StageId::queries;
  app.model_view.layer = 0;  // GPT-2's layer 0 opened
  REQUIRE(open_model(app, c).is_ok());
  ui.frame(app);
  ui.frame(app);
  CHECK(app.view.qk_step == QkStep::rotated);
}

TEST_CASE(
    "arch views: a model folder whose tokenizer.json would grow a text without end keeps its last view") {
  // The llama fixture with a tokenizer whose 40 normalizers each double every "a": the app's edit is refused
  // in one line naming the step, and the last good pass stays on screen.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "attnviz_viz_growing_tokenizer";
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(kArch / "llama" / f, dir / f,
                               std::filesystem::copy_options::overwrite_existing);
  json steps = json::array();
  for (int i = 0; i < 40; ++i)
    steps.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}});
  json vocab = json::object();
  for (int i = 0; i < 96; ++i)
    vocab[i < 26 ? std::string(1, static_cast<char>('a' + i)) : "t" + std::to_string(i)] = i;
  std::ofstream(dir / "tokenizer.json")
      << json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
              {"normalizer", {{"type", "Sequence"}, {"normalizers", steps}}}}
             .dump();
  ModelSession ms;
  ModelChoice c;
  c.kind = ModelKind::file;
  c.path = dir.string();
  const Status opened = ms.open(c);
  INFO(opened.error);
  REQUIRE(opened.is_ok());
  REQUIRE(ms.recompute("bcd").is_ok());
  const std::vector<int> good = ms.ids();
  CHECK(good == std::vector<int>{1, 2, 3});
  const Status st = ms.recompute("bad");
  REQUIRE_FALSE(st.is_ok());
  CHECK(st.error.find("tokenizer.json: normalizer.normalizers[10] (Replace) makes the text longer than 1072 "
                      "bytes") != std::string::npos);
  CHECK(st.error.find('\n') == std::string::npos);
  CHECK(ms.error() == st.error);
  CHECK(ms.ids() == good);  // the last good pass stays
}
