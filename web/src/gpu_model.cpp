// The page's WebGPU backend for whole models (GpuOffload's ModelOffload side; the layer's is gpu.cpp): which
// passes go to the GPU, the job handed to the JS layer (web/gpu/attnviz-gpu-model.js), the weights it asks
// for, row-major, while it uploads them, and the model's own calibration.
#include <emscripten/emscripten.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "gpu.hpp"

namespace attnviz::web {
namespace {

// The weights in the JS layer's numbering: 0 wte, 1 wpe, 2 and 3 the final norm, 4 an untied head, then 16
// per layer (norm1 scale and shift, query, key, value and out_proj each with its bias, norm2, fc, proj).
constexpr int kGlobals = 5, kPerLayer = 16;

struct WeightRef {
  const PackedMatrix* matrix = nullptr;  // an (out, in) weight in the engine's panels
  const Tensor* plain = nullptr;         // a row-major tensor: a vector is one row
  int rows() const {
    if (matrix) return matrix->out;
    return !plain || plain->empty() ? 0 : plain->rank == 2 ? plain->shape[0] : 1;
  }
  int cols() const {
    if (matrix) return matrix->in;
    return !plain || plain->empty() ? 0
           : plain->rank == 2       ? plain->shape[1]
                                    : static_cast<int>(plain->size());
  }
};

int weight_count(const GptWeights& w) {
  return kGlobals + kPerLayer * w.config.n_layers;
}

WeightRef weight_ref(const GptWeights& w, int index) {
  switch (index) {
    case 0:
      return {&w.tok_emb, nullptr};
    case 1:
      return {nullptr, &w.pos_emb};
    case 2:
      return {nullptr, &w.final_scale};
    case 3:
      return {nullptr, &w.final_shift};
    case 4:
      return w.tied() ? WeightRef{} : WeightRef{&w.out_head, nullptr};
    default:
      break;
  }
  const int l = (index - kGlobals) / kPerLayer, k = (index - kGlobals) % kPerLayer;
  if (index < kGlobals || l >= w.config.n_layers) return {};
  const GptBlock& b = w.blocks[static_cast<std::size_t>(l)];
  const PackedLinear* linears[] = {&b.query, &b.key, &b.value, &b.out_proj};
  if (k >= 2 && k < 10) {
    const PackedLinear& lin = *linears[(k - 2) / 2];
    return k % 2 == 0 ? WeightRef{&lin.weight, nullptr} : WeightRef{nullptr, &lin.bias};
  }
  switch (k) {
    case 0:
      return {nullptr, &b.norm1_scale};
    case 1:
      return {nullptr, &b.norm1_shift};
    case 10:
      return {nullptr, &b.norm2_scale};
    case 11:
      return {nullptr, &b.norm2_shift};
    case 12:
      return {&b.fc.weight, nullptr};
    case 13:
      return {nullptr, &b.fc.bias};
    case 14:
      return {&b.proj.weight, nullptr};
    default:
      return {nullptr, &b.proj.bias};
  }
}

std::int32_t address(const Tensor& t) {
  return t.empty() ? 0 : static_cast<std::int32_t>(reinterpret_cast<std::intptr_t>(t.ptr()));
}

// The calibration's model: gpt2-small's width and heads, one block, a small vocabulary (timing does not
// depend on the values, so they are a cheap pattern rather than PyTorch's draws).
std::shared_ptr<const GptWeights> probe_model() {
  auto w = std::make_shared<GptWeights>();
  w->config = GptConfig{2048, 1024, 768, 12, 1, 0.0, true};
  const int d = w->config.d_model;
  std::uint32_t state = 12345;
  const auto filled = [&state](int rows, int cols) {
    Tensor t(rows, cols);
    for (float& x : t.data) {
      state = state * 1664525u + 1013904223u;
      x = (static_cast<float>(state >> 8) * 0x1p-24f - 0.5f) * 0.1f;
    }
    return t;
  };
  const auto linear = [&](int out, int in) {
    return PackedLinear{pack_matrix(filled(out, in), Isa::automatic), Tensor::vector(out, 0.01f)};
  };
  w->tok_emb = pack_matrix(filled(w->config.vocab_size, d), Isa::automatic);
  w->pos_emb = filled(w->config.context_length, d);
  GptBlock b;
  b.norm1_scale = b.norm2_scale = Tensor::vector(d, 1.0f);
  b.norm1_shift = b.norm2_shift = Tensor::vector(d, 0.0f);
  b.query = linear(d, d), b.key = linear(d, d), b.value = linear(d, d), b.out_proj = linear(d, d);
  b.fc = linear(4 * d, d), b.proj = linear(d, 4 * d);
  w->blocks.push_back(std::move(b));
  w->final_scale = Tensor::vector(d, 1.0f), w->final_shift = Tensor::vector(d, 0.0f);
  w->isa = resolve(Isa::automatic);
  w->source = "calibration";
  return w;
}

// fit(), trusting a crossover only where a GPU pass was measured faster than WASM would have been: two
// small probes dominated by overhead can fit any slope (a noisy second one makes the GPU look free), and an
// extrapolated crossover would then send large passes to a GPU that was never seen winning.
void fit_measured(Calibration& cal) {
  fit(cal);
  const bool won = std::any_of(cal.gpu.begin(), cal.gpu.end(), [&cal](const Calibration::Point& p) {
    return p.ms < cal.cpu_ms_per_gflop * p.gflop;
  });
  if (!won) cal.threshold_gflop = std::numeric_limits<double>::infinity();
}

constexpr int kModelProbeFirst = 8;  // tokens of the first probes (one block of gpt2-small's width)
constexpr int kModelProbeCpu = 32;   // tokens of the WASM measurement (~30 ms)

}  // namespace
}  // namespace attnviz::web

// The JS side of a model job: reads the job (sizes, ids, where each kept tensor goes, the weights' shapes)
// out of the heap at once, runs it on the page's AttnvizGpu (which asks for weight rows through
// attnviz_gpu_model_rows while it uploads them), writes the results into the GptResult's tensors (alive until
// done) and reports through attnviz_gpu_model_done. Word layout: T, d, heads, layers, vocab, weights id, ids,
// logits, first logit row, logit rows, matrix count; 11 destinations per layer; rows and cols per matrix.
// (JavaScript: clang-format stays out.)
// clang-format off
EM_JS(void, gpu_model_start, (int ticket, const std::int32_t* desc), {
  const w = desc >> 2;
  const I = (i) => HEAP32[w + i];
  const T = I(0), d = I(1), H = I(2), L = I(3), V = I(4), weightsId = I(5), idsAt = I(6), logitsAt = I(7);
  const done = (ok, message, ms) => _attnviz_gpu_model_done(ticket, ok, message, ms);
  const gpu = Module.attnvizGpu;
  if (!gpu || !gpu.runModel) {
    attnvizReport(done, "WebGPU: the page has no WebGPU layer for models (attnviz-gpu.js)");
    return;
  }
  const names = ["weights", "scores", "scaled", "inputs", "q", "k", "v", "context", "output", "residIn", "residOut"];
  const dest = [], keep = [];
  let at = 11;
  for (let l = 0; l < L; ++l, at += names.length) {
    const row = names.map((n, i) => I(at + i));
    dest.push(row);
    keep.push(row.some(Boolean) ? Object.fromEntries(names.map((n, i) => [n, row[i] !== 0])) : null);
  }
  const mats = [];
  for (let i = 0; i < I(10); ++i) mats.push([I(at + 2 * i), I(at + 2 * i + 1)]);
  const job = { T, d, heads: H, layers: L, vocab: V, weightsId, ids: HEAP32.slice(idsAt >> 2, (idsAt >> 2) + T),
                eps: 1e-5, mats, keep, logits: { first: I(8), rows: I(9) } };
  const fetchRows = (index, row0, rows) => {
    const p = _attnviz_gpu_model_rows(weightsId, index, row0, rows);
    return p ? HEAPF32.subarray(p >> 2, (p >> 2) + rows * mats[index][1]) : null;
  };
  const sink = (name, layer, data, offset) => {
    const a = layer < 0 ? logitsAt : dest[layer][names.indexOf(name)];
    if (a) HEAPF32.set(data, (a >> 2) + offset);
  };
  attnvizReport(done, gpu.runModel(job, fetchRows, sink));
});
// clang-format on

namespace attnviz::web {

bool GpuOffload::wants(const GptWeights& w, const GptOptions& options, int tokens, int reused) {
  switch (choice_) {
    case Backend::wasm:
      return false;
    case Backend::webgpu:
      return true;  // a GPU that cannot run it says why, and the engine computes it
    case Backend::automatic:
      break;
  }
  // What the GPU kernels cannot run goes to the engine without a word each pass (begin_gpt_forward's check).
  if (!w.config.gpt2_blocks() || w.config.attention_only) return false;
  if (state_ != State::ready) return false;
  if (!model_cal_started_) calibrate_model();
  const Calibration& c = model_cal_;
  if (!c.done || std::isinf(c.threshold_gflop) || (options.train && w.config.drop_rate > 0.0)) return false;
  // The GPU computes every row; the engine only those after the prefix it reuses (typing at the end).
  const double gpu = c.gpu_overhead_ms + c.gpu_ms_per_gflop * forward_flops(w.config, tokens) / 1e9;
  const double cpu = c.cpu_ms_per_gflop * forward_flops(w.config, tokens, reused) / 1e9;
  return gpu < cpu;
}

void GpuOffload::start(int ticket, std::shared_ptr<const GptWeights> w, const GptOptions&, const GptRequest&,
                       GptResult& r) {
  const int T = static_cast<int>(r.ids.size());
  model_job_ = {ticket, forward_flops(w->config, T) / 1e9, T};
  submit_model(ticket, std::move(w), r);
}

int GpuOffload::weights_id(const std::shared_ptr<const GptWeights>& w) {
  known_weights_.erase(std::remove_if(known_weights_.begin(), known_weights_.end(),
                                      [](const auto& k) { return k.first.expired(); }),
                       known_weights_.end());
  for (const auto& [weak, id] : known_weights_)
    if (weak.lock() == w) return id;
  known_weights_.emplace_back(w, next_weights_id_);
  return next_weights_id_++;
}

void GpuOffload::submit_model(int ticket, std::shared_ptr<const GptWeights> w, GptResult& r) {
  r.backend = "webgpu";
  r.threads = 1;
  for (GptLayer& l : r.layers) l.attention.backend = "webgpu", l.attention.threads = 1;
  const GptConfig& c = w->config;
  const int T = static_cast<int>(r.ids.size()), id = weights_id(w);
  std::vector<std::int32_t> desc = {T,
                                    c.d_model,
                                    c.n_heads,
                                    c.n_layers,
                                    c.vocab_size,
                                    id,
                                    static_cast<std::int32_t>(reinterpret_cast<std::intptr_t>(r.ids.data())),
                                    address(r.logits),
                                    r.logits.shape[0] == 1 ? T - 1 : 0,
                                    r.logits.shape[0],
                                    weight_count(*w)};
  std::vector<const GptLayer*> kept(static_cast<std::size_t>(c.n_layers), nullptr);
  for (const GptLayer& l : r.layers) kept[static_cast<std::size_t>(l.index)] = &l;
  for (const GptLayer* l : kept) {
    if (!l) {
      desc.insert(desc.end(), 11, 0);
      continue;
    }
    const Result& a = l->attention;
    for (const HeadSquares* t : {&a.weights, &a.scores, &a.scaled})  // dense: begin_gpt_forward's
      desc.push_back(t->empty() ? 0 : static_cast<std::int32_t>(reinterpret_cast<std::intptr_t>(t->ptr())));
    for (const Tensor* t : {&a.inputs, &a.q, &a.k, &a.v, &a.context, &a.output, &l->resid_in, &l->resid_out})
      desc.push_back(address(*t));
  }
  for (int i = 0; i < weight_count(*w); ++i) {
    const WeightRef ref = weight_ref(*w, i);
    desc.push_back(ref.rows()), desc.push_back(ref.cols());
  }
  model_jobs_.push_back({ticket, id, std::move(w)});
  gpu_model_start(ticket, desc.data());
}

const float* GpuOffload::model_rows(int weights_id, int matrix, int row0, int rows) {
  const GptWeights* w = nullptr;
  for (const ModelJob& j : model_jobs_)
    if (j.weights_id == weights_id) w = j.weights.get();
  if (!w || matrix < 0 || matrix >= weight_count(*w)) return nullptr;
  const WeightRef ref = weight_ref(*w, matrix);
  if (row0 < 0 || rows < 0 || row0 + rows > ref.rows()) return nullptr;
  const int cols = ref.cols();
  if (ref.plain) return ref.plain->ptr() + static_cast<std::size_t>(row0) * static_cast<std::size_t>(cols);
  // Unpacked from the panels: element (o, i) of W^T's panel o / nr, column o % nr.
  const PackedMatrix& m = *ref.matrix;
  rows_.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  for (int o = row0; o < row0 + rows; ++o) {
    const float* panel = m.data.data() + static_cast<std::size_t>(o / m.nr) * cols * m.nr + o % m.nr;
    float* out = rows_.data() + static_cast<std::size_t>(o - row0) * cols;
    for (int i = 0; i < cols; ++i) out[i] = panel[static_cast<std::size_t>(i) * m.nr];
  }
  return rows_.data();
}

void GpuOffload::model_done(int ticket, bool ok, std::string error, double ms) {
  model_jobs_.erase(std::remove_if(model_jobs_.begin(), model_jobs_.end(),
                                   [ticket](const ModelJob& j) { return j.ticket == ticket; }),
                    model_jobs_.end());
  if (ticket > 0) {
    if (ok && model_cal_.done && ticket == model_job_.ticket) {
      model_cal_.gpu.push_back({model_job_.tokens, model_job_.gflop, ms});
      if (model_cal_.gpu.size() > 16) model_cal_.gpu.erase(model_cal_.gpu.begin());
      fit_measured(model_cal_);
    }
    model_.deliver(ticket, ok ? Status::ok() : Status::fail(error), ms);
    return;
  }
  if (ticket != -1 - model_probe_round_ || model_cal_.done) return;
  if (!ok) {
    model_why_ = "calibration failed: " + error;
    finish_model_calibration();  // too few points: auto keeps models on WASM
    return;
  }
  const GptConfig c = probe_weights_->config;
  const auto gflop_of = [&c](int tokens) { return forward_flops(c, tokens) / 1e9; };
  const int tokens = next_probe_size(model_cal_, model_probe_round_++, model_probe_tokens_, ms,
                                     kModelProbeFirst, c.context_length, gflop_of);
  if (tokens > 0)
    next_model_probe(tokens);
  else
    finish_model_calibration();
}

// A one-block model of gpt2-small's width (eval mode, every layer's weights read back, as the model view
// asks): on WASM at 32 tokens (~30 ms of the page's time, once), then on the GPU one probe at a time as the
// layer's calibration does (next_probe_size). It starts once WebGPU is up and a model is open. Every WebGPU
// model job adds its own point after that.
void GpuOffload::calibrate_model() {
  model_cal_started_ = true;
  model_cal_ = Calibration();
  probe_weights_ = probe_model();
  GptOptions o;
  o.train = false;
  GptModel cpu(probe_weights_, TorchGenerator(), o);
  std::vector<int> ids(kModelProbeCpu);
  for (int i = 0; i < kModelProbeCpu; ++i) ids[static_cast<std::size_t>(i)] = (i * 37) % 2048;
  GptResult r;
  if (!cpu.forward(ids, GptRequest{}, r).is_ok()) return finish_model_calibration();
  model_cal_.cpu.push_back(
      {kModelProbeCpu, forward_flops(probe_weights_->config, kModelProbeCpu) / 1e9, r.seconds * 1e3});
  model_probe_round_ = 0;
  next_model_probe(kModelProbeFirst);
}

void GpuOffload::next_model_probe(int tokens) {
  model_probe_tokens_ = tokens;
  std::vector<int> ids(static_cast<std::size_t>(tokens));
  for (int i = 0; i < tokens; ++i) ids[static_cast<std::size_t>(i)] = (i * 37) % 2048;
  GptOptions o;
  o.train = false;
  if (!begin_gpt_forward(*probe_weights_, o, ids, GptRequest{}, probe_pass_).is_ok())
    return finish_model_calibration();
  submit_model(-1 - model_probe_round_, probe_weights_, probe_pass_);
}

void GpuOffload::finish_model_calibration() {
  fit_measured(model_cal_);
  model_cal_.done = true;
  probe_weights_.reset();
  probe_pass_ = GptResult();
  if (choice_ == Backend::automatic && model_.is_open() && !std::isinf(model_cal_.threshold_gflop))
    (void)model_.recompute(session_.text);  // the view may go to the GPU now; a failure stays in error()
}

void GpuOffload::draw_model_calibration() const {
  const ImVec4 dim{0.6f, 0.6f, 0.65f, 1.0f};
  const Calibration& c = model_cal_;
  if (!c.done) {
    ImGui::TextColored(dim, "auto: measuring both backends on a model block...");
    return;
  }
  if (std::isinf(c.threshold_gflop)) {
    ImGui::TextColored(dim, "auto: WASM for every model pass (WebGPU was not faster here%s%s)",
                       model_why_.empty() ? "" : ": ", model_why_.c_str());
  } else {
    const GptResult& g = model_.result();
    ImGui::TextColored(
        dim, "auto: WebGPU for model passes it computes faster (full passes from %.2f GFLOP; this one: %.2f)",
        c.threshold_gflop, forward_flops(g.config, static_cast<int>(g.ids.size())) / 1e9);
  }
  if (!c.cpu.empty() && c.gpu.size() >= 2 && ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "one block of gpt2-small's width: WASM %.1f ms at %d tokens; WebGPU %.1f ms at %d, %.1f ms at %d\n"
        "model: WASM %.1f ms/GFLOP of the rows it computes (typing reuses the prefix); WebGPU %.1f ms + %.1f "
        "ms/GFLOP of the whole pass",
        c.cpu[0].ms, c.cpu[0].tokens, c.gpu[0].ms, c.gpu[0].tokens, c.gpu[1].ms, c.gpu[1].tokens,
        c.cpu_ms_per_gflop, c.gpu_overhead_ms, c.gpu_ms_per_gflop);
}

}  // namespace attnviz::web
