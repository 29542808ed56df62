// A large host-to-host copy split into chunks that a few threads copy at once, handed back to the
// caller in order as each chunk is done: the CUDA engine copies an unpinned input into its pinned
// staging buffer this way and enqueues each chunk's transfer to the device as soon as the chunk is
// there. One thread copying measured ~8 GB/s on the H100 host (4.8 ms of ResNet-50's 11.5 ms end
// to end at batch 64, a 38.5 MB input). No CUDA header: the CPU tests run it.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class ChunkedCopier {
 public:
  static constexpr size_t kChunk = size_t{2} << 20;

  // `threads` helpers besides the caller (0: the caller copies alone, in order).
  explicit ChunkedCopier(int threads) : helpers_(static_cast<size_t>(std::max(threads, 0))) {
    workers_.reserve(helpers_);
    for (size_t t = 0; t < helpers_; ++t) workers_.emplace_back([this, t] { work(t + 1); });
  }
  ChunkedCopier(const ChunkedCopier&) = delete;
  ChunkedCopier& operator=(const ChunkedCopier&) = delete;
  ~ChunkedCopier() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& w : workers_) w.join();
  }

  int helpers() const { return static_cast<int>(helpers_); }

  // Copies `bytes` from `from` to `to` (not overlapping), calling ready(offset, size) on this
  // thread for each chunk in order, once that chunk is fully copied. The caller copies chunks
  // too (every helpers()+1-th, starting with the first), so the first chunk is ready at once.
  template <typename Ready>
  void copy(void* to, const void* from, size_t bytes, Ready&& ready) {
    const size_t chunks = (bytes + kChunk - 1) / kChunk;
    if (helpers_ == 0 || chunks < 2) {
      for (size_t c = 0; c < chunks; ++c) {
        const size_t at = c * kChunk, n = std::min(kChunk, bytes - at);
        std::memcpy(static_cast<char*>(to) + at, static_cast<const char*>(from) + at, n);
        ready(at, n);
      }
      return;
    }
    done_ = std::make_unique<std::atomic<bool>[]>(chunks);
    for (size_t c = 0; c < chunks; ++c) done_[c].store(false, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = Job{static_cast<char*>(to), static_cast<const char*>(from), bytes, chunks};
      ++generation_;
      busy_ = static_cast<int>(helpers_);
    }
    wake_.notify_all();
    const size_t stride = helpers_ + 1;
    size_t next_own = 0;  // the caller's share: chunks 0, stride, 2 * stride, ...
    for (size_t c = 0; c < chunks; ++c) {
      // Copy own chunks up to c while waiting, so the caller never idles behind a helper.
      while (next_own < chunks && next_own <= c) {
        copy_chunk(job_, next_own);
        next_own += stride;
      }
      while (!done_[c].load(std::memory_order_acquire)) std::this_thread::yield();
      ready(c * kChunk, std::min(kChunk, bytes - c * kChunk));
    }
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return busy_ == 0; });  // no helper still reads `job_` after return
  }

 private:
  struct Job {
    char* to = nullptr;
    const char* from = nullptr;
    size_t bytes = 0, chunks = 0;
  };

  void copy_chunk(const Job& job, size_t c) {
    const size_t at = c * kChunk, n = std::min(kChunk, job.bytes - at);
    std::memcpy(job.to + at, job.from + at, n);
    done_[c].store(true, std::memory_order_release);
  }

  void work(size_t first) {
    uint64_t seen = 0;
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        job = job_;
      }
      for (size_t c = first; c < job.chunks; c += helpers_ + 1) copy_chunk(job, c);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --busy_;
      }
      idle_.notify_all();
    }
  }

  const size_t helpers_;  // set before any worker starts (they read it)
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  Job job_;
  uint64_t generation_ = 0;
  int busy_ = 0;
  bool stop_ = false;
  std::unique_ptr<std::atomic<bool>[]> done_;
};

}  // namespace kiln
