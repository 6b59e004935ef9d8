// The page's WebGPU backend, seen from C++: the session's Offload and the model session's ModelOffload, over
// the page's hand-written JS layer (web/gpu/attnviz-gpu.js, the WGSL kernels embedded). It decides which
// forward passes go to the GPU (the user's choice, or from a calibration measured on this machine), hands
// them over and takes the results back into the session's Result or the model's GptResult. The layer's
// side is gpu.cpp, the whole model's gpu_model.cpp.
#pragma once

#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/viz/model.hpp"
#include "attnviz/viz/session.hpp"

namespace attnviz::web {

enum class Backend {
  automatic,  // WebGPU for layers the calibration says it computes faster, WASM for the rest
  wasm,       // always the WASM SIMD128 engine
  webgpu,     // always WebGPU (falling back, with a note, when it fails)
};
const char* to_string(Backend b);
std::optional<Backend> parse_backend(std::string_view s);

// The automatic choice's figures: the gpt2-small layer (mha, dropout 0.1) measured on both backends once
// WebGPU is up, then every WebGPU job. Time is modelled as overhead + work / rate on the GPU (least squares)
// and work / rate on the CPU; WebGPU wins from the crossover up.
struct Calibration {
  struct Point {
    int tokens = 0;
    double gflop = 0, ms = 0;
  };
  std::vector<Point> cpu, gpu;
  double cpu_ms_per_gflop = 0, gpu_ms_per_gflop = 0, gpu_overhead_ms = 0;
  double threshold_gflop = std::numeric_limits<double>::infinity();  // infinity: WebGPU never wins
  bool done = false;
};

// The crossover of the two models from the measured points (at least one CPU point and two GPU points of
// different sizes; else the threshold stays infinite).
void fit(Calibration& cal);

// The calibration's probes on the GPU, one at a time: `first` tokens twice (the first run builds buffers and
// pipelines, and is no point), 2 x first, then, while the fitted crossover lies past the largest size
// measured, a probe toward it, each sized to take about 400 ms on this GPU. Records probe number `round` (0:
// the warm-up) of `tokens` tokens that took `ms`, and returns the next probe's size (at most `max_tokens`),
// or 0 when the fit is settled.
int next_probe_size(Calibration& cal, int round, int tokens, double ms, int first, int max_tokens,
                    const std::function<double(int)>& gflop_of);

class GpuOffload : public viz::Offload, public viz::ModelOffload {
 public:
  GpuOffload(viz::Session& session, viz::ModelSession& model) : session_(session), model_(model) {}

  Backend choice() const { return choice_; }
  // Switches the backend and recomputes the view with it (when it changes).
  void choose(Backend b);

  // Asks the JS layer for a device; ready() or unavailable() follows.
  void init();
  void ready(std::string adapter);
  void unavailable(std::string why);
  // A job's end (the JS layer has written its tensors): session jobs go to the session, calibration jobs
  // (negative tickets) to the calibration.
  void done(int ticket, bool ok, std::string error, double ms);

  bool wants(const Config& c, int tokens) override;
  void start(int ticket, const Config& c, const Params& p, int params_id, Result& r) override;

  // Whole models (gpu_model.cpp).
  bool wants(const GptWeights& w, const GptOptions& options, int tokens, int reused) override;
  void start(int ticket, std::shared_ptr<const GptWeights> w, const GptOptions& options,
             const GptRequest& request, GptResult& r) override;
  // A model job's end: session jobs go to the model session, calibration jobs (negative tickets) to the
  // model's calibration.
  void model_done(int ticket, bool ok, std::string error, double ms);
  // Rows [row0, row0 + rows) of weight matrix `matrix` (the JS layer's numbering) of the model a job in
  // flight names by `weights_id`, unpacked row-major; valid until the next call. Null when there is none.
  const float* model_rows(int weights_id, int matrix, int row0, int rows);

  void draw_controls();  // the controls' "Compute" section
  nlohmann::json status() const;

 private:
  enum class State { starting, ready, unavailable };
  void submit(int ticket, const Config& c, const Params& p, int params_id, Result& r);
  void calibrate();
  // Whole models: the calibration (a one-block model of gpt2-small's width, measured once a model is
  // open), the jobs in flight and the weights they name.
  void submit_model(int ticket, std::shared_ptr<const GptWeights> w, GptResult& r);
  void calibrate_model();
  void next_model_probe(int tokens);
  void finish_model_calibration();
  int weights_id(const std::shared_ptr<const GptWeights>& w);
  void draw_model_calibration() const;

  viz::Session& session_;
  viz::ModelSession& model_;
  Backend choice_ = Backend::automatic;
  State state_ = State::starting;
  std::string adapter_, why_;
  // The calibration's probes: one at a time on the GPU (negative tickets), their job kept here meanwhile.
  bool probe_input(int tokens, Input& in) const;
  void next_probe(int tokens);
  void finish_calibration();
  Config probe_config_;
  Params probe_params_;
  TorchGenerator probe_generator_;  // right after the parameter draw
  Result probe_result_;
  int probe_round_ = 0, probe_tokens_ = 0;
  Calibration cal_;
  struct Job {
    int ticket = 0;
    Config config;
    int tokens = 0;
  } job_;  // the session's job in flight

  Calibration model_cal_;
  bool model_cal_started_ = false;
  std::string model_why_;  // why the model's calibration ended early
  std::shared_ptr<const GptWeights> probe_weights_;
  GptResult probe_pass_;
  int model_probe_round_ = 0, model_probe_tokens_ = 0;
  struct ModelJob {
    int ticket = 0;  // negative: a calibration probe
    int weights_id = 0;
    std::shared_ptr<const GptWeights> weights;  // alive while the JS layer may ask for rows
  };
  std::vector<ModelJob> model_jobs_;
  struct {
    int ticket = 0;
    double gflop = 0;
    int tokens = 0;
  } model_job_;  // the model session's job in flight, for its calibration point
  std::vector<std::pair<std::weak_ptr<const GptWeights>, int>> known_weights_;
  int next_weights_id_ = 1;
  std::vector<float> rows_;  // model_rows' answer
};

}  // namespace attnviz::web
