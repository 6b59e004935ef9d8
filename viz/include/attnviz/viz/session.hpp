// One sentence and configuration, and the engine result the UI shows for it. Recomputes on every edit and
// keeps the last good result when an edit is invalid, so the view never goes blank.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "attnviz/engine.hpp"
#include "attnviz/viz/offload_slot.hpp"

namespace attnviz::viz {

// A backend that computes forward passes elsewhere and later (the browser page's WebGPU). The session
// prepares each job (begin_forward: inputs, parameters, the dropout mask drawn on the CPU) and hands it over;
// the host calls Session::deliver with the outcome. One job at a time: edits made meanwhile are computed
// when it lands, and the view shows the last result until then.
class Offload {
 public:
  virtual ~Offload() = default;
  // Whether this forward pass should go to the backend (the user's choice, the size threshold, whether the
  // backend works).
  virtual bool wants(const Config& c, int tokens) = 0;
  // Starts the job. `r` is begun and stays untouched (and alive) until deliver(ticket): the backend fills
  // its tensors (see begin_forward), then the host calls deliver. `params_id` changes whenever `p` does.
  virtual void start(int ticket, const Config& c, const Params& p, int params_id, Result& r) = 0;
};

class Session {
 public:
  Session();

  std::string text;
  Config config;
  Exec exec;

  Offload* offload = nullptr;  // when set, asked first for every forward pass
  // Asked before a recompute allocates anything (the parameters when they change, the run's tensors), with
  // the configuration, the tokenized input and whether the parameters are drawn anew: the host's memory
  // budget (the page's module heap). A refusal becomes error() and the last good result stays. Null: none.
  std::function<Status(const Config& c, const Input& in, bool new_params)> admit;

  // Recomputes from text and config. On failure the previous result stays and error() says why. With an
  // offload that takes the job, the result lands later (deliver); computing() is true until then.
  Status recompute();
  // The offload's outcome for `ticket`: on success its result becomes the view; on failure the CPU engine
  // computes it instead and note() says why.
  void deliver(int ticket, Status outcome, double ms);
  bool computing() const { return job_.busy(); }
  // Why the last offloaded job was computed on the CPU instead; empty when it was not.
  const std::string& note() const { return note_; }

  const Result& result() const { return result_; }
  const Params& params() const { return params_; }
  bool has_result() const { return has_result_; }
  const std::string& error() const { return error_; }  // empty when the view matches text and config
  int generation() const { return generation_; }       // bumps whenever result() changes
  double last_ms() const { return last_ms_; }          // text and config to result, parameters included
  double params_ms() const { return params_ms_; }      // the last parameter draw (0 when cached)

 private:
  Result result_;
  Params params_;
  int params_id_ = 0;
  OffloadSlot<Result> job_;  // the offloaded job, its result filled elsewhere
  // Requests (recompute calls) are numbered, so a job that lands after a newer result was shown is dropped,
  // and an edit made while a job was in flight is computed when it lands.
  long request_ = 0, result_request_ = 0;
  bool cpu_only_ = false;  // recomputing after the offload failed
  std::string note_;
  TorchGenerator after_build_;  // the generator right after the parameter draw: forward draws dropout from it
  Config params_key_;
  bool params_valid_ = false, has_result_ = false;
  std::string error_;
  int generation_ = 0;
  double last_ms_ = 0.0, params_ms_ = 0.0;
};

}  // namespace attnviz::viz
