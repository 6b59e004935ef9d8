#include "gpu.hpp"

#include <emscripten/emscripten.h>
#include <imgui.h>

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "attnviz/enum_names.hpp"
#include "threads.hpp"

namespace attnviz::web {
namespace {

// One job as the JS layer reads it (HEAP32 / HEAPF32 at these word offsets: keep the two in step).
struct JobDesc {
  std::int32_t T, d_in, heads, head_dim, width, out_width, flags, params_id;
  float scale, keep_scale;
  // Where the inputs are (wasm32 addresses; 0 for none) ...
  std::int32_t x, wq, bq, wk, bk, wv, bv, wo, bo, keep, keep_words;
  // ... and where the results go.
  std::int32_t q, k, v, scores, scaled, weights, dropped, context, output;
};
static_assert(sizeof(JobDesc) == 30 * 4, "JobDesc is read by word offset in gpu_start");

enum JobFlags : std::int32_t {
  kHasWeights = 1,
  kCausal = 2,
  kOutProj = 4,
  kDropout = 8,
  kWantScores = 16,
  kWantScaled = 32,
  kWantDropped = 64,
};

std::int32_t address(const void* p) {
  return static_cast<std::int32_t>(reinterpret_cast<std::intptr_t>(p));
}
std::int32_t address(const Tensor& t) {
  return t.empty() ? 0 : address(t.ptr());
}
std::int32_t address(const HeadSquares& t) {  // dense here: the shader writes (H, T, T)
  return t.empty() ? 0 : address(t.ptr());
}

constexpr int kProbeParamsId = -1;      // the calibration's parameters (the session's count from 1)
constexpr std::size_t kMaxPoints = 16;  // the GPU points the automatic choice fits (the latest)
constexpr int kMaxProbes = 6;           // calibration runs on the GPU, warm-up included
constexpr double kProbeMs = 400.0;      // about the longest a calibration run may take

}  // namespace
}  // namespace attnviz::web

// The JS side of a job: copies the inputs out of the heap at once (the caller may change them afterwards),
// runs it on the page's AttnvizGpu, writes the results into the Result's tensors (which the session keeps
// alive until done) and reports through attnviz_gpu_done. (JavaScript: clang-format stays out.)
// clang-format off
EM_JS(void, gpu_start, (int ticket, const attnviz::web::JobDesc* desc), {
  const w = desc >> 2;
  const I = (i) => HEAP32[w + i];
  const F = (i) => HEAPF32[w + i];
  const f32 = (ptr, n) => (ptr ? HEAPF32.slice(ptr >> 2, (ptr >> 2) + n) : null);
  const T = I(0), dIn = I(1), H = I(2), hd = I(3), W = I(4), OW = I(5), flags = I(6), paramsId = I(7);
  const done = (ok, message, ms) => _attnviz_gpu_done(ticket, ok, message, ms);
  const gpu = Module.attnvizGpu;
  if (!gpu) {
    attnvizReport(done, "WebGPU: the page has no WebGPU layer (attnviz-gpu.js)");
    return;
  }
  const job = {
    T, dIn, heads: H, headDim: hd, width: W, outWidth: OW, scale: F(8), keepScale: F(9),
    hasWeights: (flags & 1) != 0, causal: (flags & 2) != 0, outProj: (flags & 4) != 0, dropout: (flags & 8) != 0,
    want: {scores: (flags & 16) != 0, scaled: (flags & 32) != 0, dropped: (flags & 64) != 0},
    x: f32(I(10), T * dIn), paramsId, weights: null, keep: null,
  };
  if (job.hasWeights && gpu.hostWeightsId() !== paramsId)
    job.weights = {wq: f32(I(11), W * dIn), bq: f32(I(12), W), wk: f32(I(13), W * dIn), bk: f32(I(14), W),
                   wv: f32(I(15), W * dIn), bv: f32(I(16), W), wo: f32(I(17), OW * W), bo: f32(I(18), OW)};
  if (job.dropout) job.keep = HEAPU32.slice(I(19) >> 2, (I(19) >> 2) + I(20));
  const dest = {q: I(21), k: I(22), v: I(23), scores: I(24), scaled: I(25), weights: I(26), dropped: I(27),
                context: I(28), output: I(29)};
  const sink = (name, data, offset) => {
    if (dest[name]) HEAPF32.set(data, (dest[name] >> 2) + offset);
  };
  attnvizReport(done, gpu.run(job, sink));
});

EM_JS(void, gpu_init, (), {
  const gpu = Module.attnvizGpu;
  const say = (f, s) => attnvizWithString(s, f);
  if (!gpu) {
    setTimeout(() => say(_attnviz_gpu_unavailable, "the page has no WebGPU layer (attnviz-gpu.js)"));
    return;
  }
  gpu.init().then((info) => say(_attnviz_gpu_ready, info),
                  (e) => say(_attnviz_gpu_unavailable, String(e && e.message || e)));
});
// clang-format on

namespace attnviz::web {

namespace {

constexpr EnumName<Backend> kBackendNames[] = {
    {Backend::automatic, "auto"}, {Backend::wasm, "wasm"}, {Backend::webgpu, "webgpu"}};

}  // namespace

const char* to_string(Backend b) {
  return name_in(kBackendNames, b);
}

std::optional<Backend> parse_backend(std::string_view s) {
  return value_in(kBackendNames, s);
}

void fit(Calibration& cal) {
  cal.threshold_gflop = std::numeric_limits<double>::infinity();
  if (cal.cpu.empty() || cal.gpu.size() < 2) return;
  double cpu_ms = 0, cpu_gflop = 0;
  for (const Calibration::Point& p : cal.cpu) cpu_ms += p.ms, cpu_gflop += p.gflop;
  cal.cpu_ms_per_gflop = cpu_ms / cpu_gflop;
  // The GPU's line by least squares: overhead (submission, read-back latency) + work / rate.
  double mf = 0, mt = 0;
  for (const Calibration::Point& p : cal.gpu) mf += p.gflop, mt += p.ms;
  mf /= static_cast<double>(cal.gpu.size()), mt /= static_cast<double>(cal.gpu.size());
  double cov = 0, var = 0;
  for (const Calibration::Point& p : cal.gpu)
    cov += (p.gflop - mf) * (p.ms - mt), var += (p.gflop - mf) * (p.gflop - mf);
  if (var <= 0) return;
  cal.gpu_ms_per_gflop = std::max(0.0, cov / var);
  cal.gpu_overhead_ms = std::max(0.0, mt - cal.gpu_ms_per_gflop * mf);
  if (cal.gpu_ms_per_gflop < cal.cpu_ms_per_gflop)
    cal.threshold_gflop = cal.gpu_overhead_ms / (cal.cpu_ms_per_gflop - cal.gpu_ms_per_gflop);
}

void GpuOffload::choose(Backend b) {
  if (b == choice_) return;
  choice_ = b;
  // A failure stays in the session's error(), which the view shows.
  if (model_.is_open())
    (void)model_.recompute(session_.text);  // the model view's sentence is the session's
  else
    (void)session_.recompute();
}

void GpuOffload::init() {
  state_ = State::starting;
  gpu_init();
}

void GpuOffload::ready(std::string adapter) {
  state_ = State::ready;
  adapter_ = std::move(adapter);
  calibrate();
  if (model_.is_open()) calibrate_model();  // else once a model opens
}

void GpuOffload::unavailable(std::string why) {
  state_ = State::unavailable;
  why_ = std::move(why);
}

// The gpt2-small layer in training mode (dropout 0.1, every stage kept): on the CPU at 128 tokens (~20 ms of
// the page's time, once), then on the GPU one probe at a time: 32 tokens twice (the first run builds buffers
// and pipelines), 64, and then, while the fitted crossover lies past the largest size measured, a probe
// toward it. Each probe is sized to take about kProbeMs on this GPU, so a slow (software) GPU does not hold
// the user's first WebGPU job for seconds. Every WebGPU job after that adds its own point.
void GpuOffload::calibrate() {
  probe_config_ = Config();
  apply(*find_preset("gpt2-small"), probe_config_);
  probe_config_.variant = Variant::mha;
  probe_config_.dropout = 0.1;
  probe_config_.stages = kStageAll;
  probe_generator_ = TorchGenerator(probe_config_.seed);
  cal_ = Calibration();
  if (!build_params(probe_config_, probe_generator_, probe_params_).is_ok()) return;
  Input in;
  Result r;
  TorchGenerator g = probe_generator_;
  if (!probe_input(128, in) || !forward(probe_config_, probe_params_, in, g, r).is_ok()) return;
  cal_.cpu.push_back({128, forward_flops(probe_config_, 128) / 1e9, r.seconds * 1e3});
  probe_round_ = 0;
  next_probe(32);
}

bool GpuOffload::probe_input(int tokens, Input& in) const {
  std::string text;
  for (int i = 0; i < tokens; ++i) text += "w" + std::to_string(i) + " ";
  return input_from_text(text, probe_config_, in).is_ok();
}

void GpuOffload::next_probe(int tokens) {
  Input in;
  TorchGenerator g = probe_generator_;
  probe_tokens_ = tokens;
  if (!probe_input(tokens, in) ||
      !begin_forward(probe_config_, probe_params_, in, g, probe_result_).is_ok()) {
    finish_calibration();
    return;
  }
  submit(-1 - probe_round_, probe_config_, probe_params_, kProbeParamsId, probe_result_);
}

void GpuOffload::finish_calibration() {
  fit(cal_);
  cal_.done = true;
  probe_params_ = Params();
  probe_result_ = Result();
  if (choice_ == Backend::automatic && session_.has_result() &&
      wants(session_.result().config, session_.result().tokens_count()))
    (void)session_.recompute();  // a failure stays in error(), which the view shows
}

void GpuOffload::done(int ticket, bool ok, std::string error, double ms) {
  if (ticket > 0) {
    if (ok && cal_.done && ticket == job_.ticket) {
      cal_.gpu.push_back({job_.tokens, forward_flops(job_.config, job_.tokens) / 1e9, ms});
      if (cal_.gpu.size() > kMaxPoints) cal_.gpu.erase(cal_.gpu.begin());
      fit(cal_);
    }
    session_.deliver(ticket, ok ? Status::ok() : Status::fail(error), ms);
    return;
  }
  if (ticket != -1 - probe_round_ || cal_.done) return;
  if (!ok) {
    why_ = "calibration failed: " + error;
    finish_calibration();  // too few points: the threshold stays infinite and auto keeps to WASM
    return;
  }
  const auto gflop_of = [this](int tokens) { return forward_flops(probe_config_, tokens) / 1e9; };
  const int tokens =
      next_probe_size(cal_, probe_round_++, probe_tokens_, ms, 32, probe_config_.context_length, gflop_of);
  if (tokens > 0)
    next_probe(tokens);
  else
    finish_calibration();
}

int next_probe_size(Calibration& cal, int round, int tokens, double ms, int first, int max_tokens,
                    const std::function<double(int)>& gflop_of) {
  const double gflop = gflop_of(tokens);
  if (round > 0) cal.gpu.push_back({tokens, gflop, ms});
  if (round == 0) return first;
  if (round == 1) return 2 * first;
  fit(cal);
  // The crossover, if any, is an extrapolation until a probe near it agrees.
  const double reach = 1.5 * gflop;
  if (round + 1 >= kMaxProbes || std::isinf(cal.threshold_gflop) || cal.threshold_gflop <= reach) return 0;
  const double affordable = kProbeMs * gflop / ms;  // at this GPU's slowest rate yet, overhead included
  const double target = std::min(cal.threshold_gflop, affordable);
  if (target <= reach || tokens >= max_tokens) return 0;
  int next = tokens;
  while (next < max_tokens && gflop_of(next) < target) next = std::min(max_tokens, next + first);
  return next;
}

bool GpuOffload::wants(const Config& c, int tokens) {
  switch (choice_) {
    case Backend::wasm:
      return false;
    case Backend::webgpu:
      return true;  // a GPU that cannot run it says why, and the CPU computes it
    case Backend::automatic:
      break;
  }
  return state_ == State::ready && cal_.done && forward_flops(c, tokens) / 1e9 >= cal_.threshold_gflop;
}

void GpuOffload::start(int ticket, const Config& c, const Params& p, int params_id, Result& r) {
  job_ = {ticket, c, r.tokens_count()};
  submit(ticket, c, p, params_id, r);
}

void GpuOffload::submit(int ticket, const Config& c, const Params& p, int params_id, Result& r) {
  const Shape& s = r.shape;
  const int T = r.tokens_count(), H = s.heads;
  if (s.has_weights) r.q = Tensor(T, s.width), r.k = Tensor(T, s.width), r.v = Tensor(T, s.width);
  if (c.stages & kStageScores) r.scores = HeadSquares(H, T, 0.0f);
  if (c.stages & kStageScaled) r.scaled = HeadSquares(H, T, 0.0f);
  r.weights = HeadSquares(H, T, 0.0f);
  if (s.dropout && (c.stages & kStageDropped)) r.dropped = HeadSquares(H, T, 0.0f);
  r.context = Tensor(T, s.width);
  if (s.out_proj) r.output = Tensor(T, s.out_width);
  r.backend = "webgpu";
  r.threads = 1;

  std::vector<std::uint32_t> bits;  // the keep mask, one bit per cell (JS copies it before returning)
  if (s.dropout) {
    bits.assign((r.keep.size() + 31) / 32, 0u);
    for (std::size_t i = 0; i < r.keep.size(); ++i)
      if (r.keep[i]) bits[i >> 5] |= 1u << (i & 31);
  }
  JobDesc d{};
  d.T = T, d.d_in = r.config.d_in, d.heads = H, d.head_dim = s.head_dim, d.width = s.width;
  d.out_width = s.out_width, d.params_id = params_id, d.scale = s.scale;
  d.keep_scale = s.dropout ? dropout_scale(r.config.dropout) : 1.0f;
  d.flags = (s.has_weights ? kHasWeights : 0) | (s.causal ? kCausal : 0) | (s.out_proj ? kOutProj : 0) |
            (s.dropout ? kDropout : 0) | (!r.scores.empty() ? kWantScores : 0) |
            (!r.scaled.empty() ? kWantScaled : 0) | (!r.dropped.empty() ? kWantDropped : 0);
  d.x = address(r.inputs);
  if (s.has_weights) {
    d.wq = address(p.query.weight), d.bq = address(p.query.bias);
    d.wk = address(p.key.weight), d.bk = address(p.key.bias);
    d.wv = address(p.value.weight), d.bv = address(p.value.bias);
  }
  if (s.out_proj) d.wo = address(p.out_proj.weight), d.bo = address(p.out_proj.bias);
  d.keep = bits.empty() ? 0 : address(bits.data());
  d.keep_words = static_cast<std::int32_t>(bits.size());
  d.q = address(r.q), d.k = address(r.k), d.v = address(r.v);
  d.scores = address(r.scores), d.scaled = address(r.scaled), d.weights = address(r.weights);
  d.dropped = address(r.dropped), d.context = address(r.context), d.output = address(r.output);
  gpu_start(ticket, &d);
}

void GpuOffload::draw_controls() {
  if (!ImGui::CollapsingHeader("Compute", ImGuiTreeNodeFlags_DefaultOpen)) return;
  int c = static_cast<int>(choice_);
  ImGui::RadioButton("auto", &c, static_cast<int>(Backend::automatic));
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("WebGPU for layers it computes faster than WASM on this machine (measured at start)");
  ImGui::SameLine();
  ImGui::RadioButton("WASM", &c, static_cast<int>(Backend::wasm));
  ImGui::SameLine();
  ImGui::RadioButton("WebGPU", &c, static_cast<int>(Backend::webgpu));
  choose(static_cast<Backend>(c));

  const ImVec4 dim{0.6f, 0.6f, 0.65f, 1.0f};
  ImGui::PushTextWrapPos(0.0f);
  draw_threads_line();
  switch (state_) {
    case State::starting:
      ImGui::TextColored(dim, "WebGPU: starting...");
      break;
    case State::unavailable:
      ImGui::TextColored(dim, "WebGPU: not available (%s). Everything runs on WASM SIMD128.", why_.c_str());
      break;
    case State::ready:
      ImGui::TextColored(dim, "WebGPU: %s", adapter_.c_str());
      if (model_.is_open()) {
        draw_model_calibration();
        break;
      }
      if (!cal_.done)
        ImGui::TextColored(dim, "auto: measuring both backends...");
      else if (std::isinf(cal_.threshold_gflop))
        ImGui::TextColored(dim, "auto: WASM for every size (WebGPU was not faster here%s%s)",
                           why_.empty() ? "" : ": ", why_.c_str());
      else
        ImGui::TextColored(dim, "auto: WebGPU from %.2f GFLOP (this layer: %.3f GFLOP)", cal_.threshold_gflop,
                           forward_flops(session_.result().config, session_.result().tokens_count()) / 1e9);
      if (cal_.done && !cal_.cpu.empty() && cal_.gpu.size() >= 2 && ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "gpt2-small layer: WASM %.1f ms at %d tokens; WebGPU %.1f ms at %d, %.1f ms at %d tokens\n"
            "model: WASM %.1f ms/GFLOP; WebGPU %.1f ms + %.1f ms/GFLOP",
            cal_.cpu[0].ms, cal_.cpu[0].tokens, cal_.gpu[0].ms, cal_.gpu[0].tokens, cal_.gpu[1].ms,
            cal_.gpu[1].tokens, cal_.cpu_ms_per_gflop, cal_.gpu_overhead_ms, cal_.gpu_ms_per_gflop);
      break;
  }
  ImGui::PopTextWrapPos();
}

namespace {

nlohmann::json points_json(const Calibration& cal) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto* list : {&cal.cpu, &cal.gpu})
    for (const Calibration::Point& p : *list)
      points.push_back({{"backend", list == &cal.cpu ? "wasm" : "webgpu"},
                        {"tokens", p.tokens},
                        {"gflop", p.gflop},
                        {"ms", p.ms}});
  return points;
}

nlohmann::json threshold_json(const Calibration& cal) {
  return std::isinf(cal.threshold_gflop) ? nlohmann::json(nullptr) : nlohmann::json(cal.threshold_gflop);
}

}  // namespace

// The view's backend, job and note: the model's when a model is open, else the chapter-3 session's.
nlohmann::json GpuOffload::status() const {
  const char* state = state_ == State::ready      ? "ready"
                      : state_ == State::starting ? "starting"
                                                  : "unavailable";
  const bool whole = model_.is_open();
  const std::string& backend = whole ? model_.result().backend : session_.result().backend;
  return {{"choice", to_string(choice_)},
          {"backend", backend.empty() ? "wasm" : backend},
          {"computing", whole ? model_.computing() : session_.computing()},
          {"note", whole ? model_.note() : session_.note()},
          {"webgpu", state},
          {"adapter", adapter_},
          {"why", why_},
          {"calibrated", cal_.done},
          {"threshold_gflop", threshold_json(cal_)},
          {"calibration", points_json(cal_)},
          {"model",
           {{"calibrated", model_cal_.done},
            {"threshold_gflop", threshold_json(model_cal_)},
            {"cpu_ms_per_gflop", model_cal_.cpu_ms_per_gflop},
            {"gpu_ms_per_gflop", model_cal_.gpu_ms_per_gflop},
            {"gpu_overhead_ms", model_cal_.gpu_overhead_ms},
            {"calibration", points_json(model_cal_)}}}};
}

}  // namespace attnviz::web
