#include "attnviz/viz/session.hpp"

#include <chrono>

namespace attnviz::viz {
namespace {

// The parameters depend only on these (dropout, train, mask and context length draw nothing at construction).
bool same_params(const Config& a, const Config& b) {
  return a.variant == b.variant && a.d_in == b.d_in && a.d_out == b.d_out && a.num_heads == b.num_heads &&
         a.qkv_bias == b.qkv_bias && a.seed == b.seed;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Session::Session() {
  apply(*find_preset("book"), config);
  text = kDefaultText;
}

Status Session::recompute() {
  const auto t0 = std::chrono::steady_clock::now();
  const auto fail = [this](Status st) {
    error_ = st.error;
    return st;
  };
  if (Status st = validate(config); !st.is_ok()) return fail(st);
  Input in;
  if (Status st = input_from_text(text, config, in); !st.is_ok()) return fail(st);

  const Config key = effective(config);
  params_ms_ = 0.0;
  if (!params_valid_ || !same_params(key, params_key_)) {
    const auto p0 = std::chrono::steady_clock::now();
    TorchGenerator g;
    g.manual_seed(config.seed);
    Params p;
    if (Status st = build_params(config, g, p); !st.is_ok()) return fail(st);
    pack(p, exec);
    params_ = std::move(p);
    after_build_ = g;
    params_key_ = key;
    params_valid_ = true;
    params_ms_ = ms_since(p0);
  }
  TorchGenerator g = after_build_;
  Config c = config;
  c.stages = kStageAll;
  if (Status st = forward(c, params_, in, g, result_, exec); !st.is_ok()) return fail(st);
  has_result_ = true;
  error_.clear();
  ++generation_;
  last_ms_ = ms_since(t0);
  return Status::ok();
}

}  // namespace attnviz::viz
