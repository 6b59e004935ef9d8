// The page's WebGPU backend, seen from C++: the session's Offload, over the page's hand-written JS layer
// (web/gpu/attnviz-gpu.js, the WGSL kernels embedded). It decides which forward passes go to the GPU (the
// user's choice, or by size from a calibration measured on this machine), hands them over and takes the
// results back into the session's Result.
#pragma once

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

class GpuOffload : public viz::Offload {
 public:
  explicit GpuOffload(viz::Session& session) : session_(session) {}

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

  void draw_controls();  // the controls' "Compute" section
  nlohmann::json status() const;

 private:
  enum class State { starting, ready, unavailable };
  void submit(int ticket, const Config& c, const Params& p, int params_id, Result& r);
  void calibrate();

  viz::Session& session_;
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
};

}  // namespace attnviz::web
