// One sentence and configuration, and the engine result the UI shows for it. Recomputes on every edit and
// keeps the last good result when an edit is invalid, so the view never goes blank.
#pragma once

#include <string>

#include "attnviz/engine.hpp"

namespace attnviz::viz {

class Session {
 public:
  Session();

  std::string text;
  Config config;
  Exec exec;

  // Recomputes from text and config. On failure the previous result stays and error() says why.
  Status recompute();

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
  TorchGenerator after_build_;  // the generator right after the parameter draw: forward draws dropout from it
  Config params_key_;
  bool params_valid_ = false, has_result_ = false;
  std::string error_;
  int generation_ = 0;
  double last_ms_ = 0.0, params_ms_ = 0.0;
};

}  // namespace attnviz::viz
