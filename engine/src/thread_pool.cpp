#include "thread_pool.hpp"

#include <memory>

namespace attnviz {

ThreadPool::ThreadPool(int threads) {
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  threads = 1;  // no threads in a single-threaded WebAssembly build
#endif
  for (int w = 1; w < threads; ++w) workers_.emplace_back([this, w] { work(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::drain(int worker) {
  for (int t = next_.fetch_add(1); t < tasks_; t = next_.fetch_add(1)) (*job_)(t, worker);
}

void ThreadPool::work(int worker) {
  unsigned seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    drain(worker);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::run(int tasks, const std::function<void(int, int)>& fn) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1) {
    for (int t = 0; t < tasks; ++t) fn(t, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    tasks_ = tasks;
    next_.store(0);
    busy_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  drain(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return busy_ == 0; });
  job_ = nullptr;
}

ThreadPool& ThreadPool::shared(int threads) {
  static std::unique_ptr<ThreadPool> pool;
  if (!pool || pool->size() != threads) {
    pool.reset();
    pool = std::make_unique<ThreadPool>(threads);
  }
  return *pool;
}

}  // namespace attnviz
