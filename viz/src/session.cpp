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
  const long request = ++request_;
  const auto fail = [this](Status st) {
    error_ = st.error;
    return st;
  };
  if (Status st = validate(config); !st.is_ok()) return fail(st);
  Input in;
  if (Status st = input_from_text(text, config, in); !st.is_ok()) return fail(st);

  const Config key = effective(config);
  const bool new_params = !params_valid_ || !same_params(key, params_key_);
  if (admit)
    if (Status st = admit(config, in, new_params); !st.is_ok()) return fail(st);
  params_ms_ = 0.0;
  if (new_params) {
    const auto p0 = std::chrono::steady_clock::now();
    TorchGenerator g;
    g.manual_seed(config.seed);
    Params p;
    if (Status st = build_params(config, g, p); !st.is_ok()) return fail(st);
    pack(p, exec);
    params_ = std::move(p);
    ++params_id_;
    after_build_ = g;
    params_key_ = key;
    params_valid_ = true;
    params_ms_ = ms_since(p0);
  }
  Config c = config;
  c.stages = kStageAll;
  if (offload && !cpu_only_ && offload->wants(c, in.x.shape[0])) {
    error_.clear();
    if (computing()) return Status::ok();  // computed when the job in flight lands
    auto job = std::make_unique<Result>();
    TorchGenerator g = after_build_;
    if (Status st = begin_forward(c, params_, in, g, *job); !st.is_ok()) return fail(st);
    const int ticket = job_.hold(std::move(job), request, t0);
    offload->start(ticket, c, params_, params_id_, job_.job());
    return Status::ok();
  }
  TorchGenerator g = after_build_;
  if (Status st = forward(c, params_, in, g, result_, exec); !st.is_ok()) return fail(st);
  if (!cpu_only_) note_.clear();  // computed here by choice, not as a fallback
  result_request_ = request;
  has_result_ = true;
  error_.clear();
  ++generation_;
  last_ms_ = ms_since(t0);
  return Status::ok();
}

void Session::deliver(int ticket, Status outcome, double ms) {
  std::unique_ptr<Result> r = job_.take(ticket);
  if (!r) return;
  if (outcome.is_ok()) outcome = end_forward(*r);
  if (outcome.is_ok()) {
    note_.clear();
    if (job_.request() > result_request_) {  // else a newer result is on screen already
      r->seconds = ms / 1e3;
      result_ = std::move(*r);
      result_request_ = job_.request();
      has_result_ = true;
      ++generation_;
      last_ms_ = ms_since(job_.requested());
    }
    // Edits made while the job was in flight; a failure stays in error() for the view to show.
    if (request_ > result_request_) (void)recompute();
    return;
  }
  note_ = outcome.error + ": this view was computed by the CPU engine instead";
  cpu_only_ = true;
  (void)recompute();  // a failure stays in error() for the view to show
  cpu_only_ = false;
}

}  // namespace attnviz::viz
