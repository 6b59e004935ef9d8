// The one job a session has handed to an offload (the page's WebGPU backend), for Session and ModelSession
// alike: the result the offload fills until it delivers the job's ticket, and which recompute call asked for
// it and when. Recompute calls are numbered, so a job that lands after a newer result was shown is dropped,
// and an edit made while it was in flight is computed when it lands.
#pragma once

#include <chrono>
#include <memory>
#include <utility>

namespace attnviz::viz {

template <class R>
class OffloadSlot {
 public:
  bool busy() const { return in_flight_ != 0; }

  // Holds `job` (begun, not yet filled) for recompute call `request`, made at `t0`; returns the ticket the
  // offload is started with. The job stays at the same address until taken or dropped.
  int hold(std::unique_ptr<R> job, long request, std::chrono::steady_clock::time_point t0) {
    job_ = std::move(job);
    request_ = request;
    requested_ = t0;
    in_flight_ = ++tickets_;
    return in_flight_;
  }
  R& job() { return *job_; }

  // The job `ticket` names, out of the slot; null when that is not the job in flight (one dropped or stale).
  std::unique_ptr<R> take(int ticket) {
    if (ticket != in_flight_ || !job_) return nullptr;
    in_flight_ = 0;
    return std::move(job_);
  }
  // Forgets the job in flight, handing it back with its ticket (its memory must outlive the offload's use;
  // the job is null when none was in flight).
  std::pair<int, std::unique_ptr<R>> drop() {
    std::pair<int, std::unique_ptr<R>> out{in_flight_, std::move(job_)};
    in_flight_ = 0;
    return out;
  }

  long request() const { return request_; }  // the recompute call the last job answers
  std::chrono::steady_clock::time_point requested() const { return requested_; }

 private:
  std::unique_ptr<R> job_;
  int tickets_ = 0, in_flight_ = 0;
  long request_ = 0;
  std::chrono::steady_clock::time_point requested_;
};

}  // namespace attnviz::viz
