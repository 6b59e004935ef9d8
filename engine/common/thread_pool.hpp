// A small fixed pool: run(n, fn) calls fn(task, worker) for every task in [0, n) across the workers (the
// caller is worker 0) and returns when all are done. Each task writes its own outputs, so results never
// depend on which worker ran it or on the thread count.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace attnviz {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void run(int tasks, const std::function<void(int task, int worker)>& fn);

  // The process-wide pool with `threads` workers (rebuilt when the count changes; not reentrant).
  static ThreadPool& shared(int threads);

 private:
  void work(int worker);
  void drain(int worker);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int, int)>* job_ = nullptr;
  int tasks_ = 0;
  std::atomic<int> next_{0};
  std::atomic<int> busy_{0};
  // A new job is published by bumping the generation (release) after job_, tasks_ and next_ are set. Workers
  // and the caller spin on these atomics for a short while before sleeping on the condition variables: a
  // model pass runs a hundred small jobs back to back, and waking a sleeping thread costs tens of
  // microseconds each time.
  std::atomic<unsigned> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace attnviz
