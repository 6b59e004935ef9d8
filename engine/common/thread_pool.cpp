#include "common/thread_pool.hpp"

#include "attnviz/exec.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <system_error>

namespace attnviz {

ThreadPool::ThreadPool(int threads) {
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  threads = 1;  // no threads in a single-threaded WebAssembly build
#endif
  for (int w = 1; w < threads; ++w) {
    try {
      workers_.emplace_back([this, w] { work(w); });
    } catch (const std::system_error&) {
      break;  // the system has no more threads to give: run on those started (size() says how many)
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

namespace {

// Calls `ready` until it is true or about 100 microseconds have passed; returns its last answer.
template <class F>
bool spin(F&& ready) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
  }
}

}  // namespace

void ThreadPool::drain(int worker) {
  for (int t = next_.fetch_add(1); t < tasks_; t = next_.fetch_add(1)) (*job_)(t, worker);
}

void ThreadPool::work(int worker) {
  unsigned seen = 0;
  for (;;) {
    const auto ready = [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; };
    if (!spin(ready)) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, ready);
    }
    if (stop_) return;
    seen = generation_.load(std::memory_order_acquire);
    drain(worker);
    if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);  // the caller may be asleep on done_
      done_.notify_one();
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
    busy_.store(static_cast<int>(workers_.size()));
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  drain(0);
  const auto done = [&] { return busy_.load(std::memory_order_acquire) == 0; };
  if (!spin(done)) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, done);
  }
  job_ = nullptr;
}

ThreadPool& ThreadPool::shared(int threads) {
  static std::unique_ptr<ThreadPool> pool;
  static int requested = 0;  // the pool may hold fewer threads when the system had no more
  if (!pool || requested != threads) {
    pool.reset();
    pool = std::make_unique<ThreadPool>(threads);
    requested = threads;
  }
  return *pool;
}

void run_tasks(int tasks, const std::function<void(int)>& fn, const Exec& how) {
  const int threads = resolve(how.isa) == Isa::scalar ? 1 : resolve_threads(how.threads);
  if (threads <= 1 || tasks <= 1) {
    for (int t = 0; t < tasks; ++t) fn(t);
    return;
  }
  ThreadPool::shared(threads).run(tasks, [&](int t, int) { fn(t); });
}

}  // namespace attnviz
