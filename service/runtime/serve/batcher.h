// Dynamic batching in front of an engine compiled for a fixed batch B.
//
// Requests carry b >= 1 samples along dim 0. One worker thread takes samples from the front of a
// FIFO queue until it holds max_batch of them or max_delay has passed since the oldest waiting
// request arrived, concatenates them along dim 0, pads the rest of the B rows with zeros, runs
// the engine once and copies each request's rows of every output back (every output leads with
// B: model_signature.h only calls such models batchable). A request larger than max_batch is
// taken in chunks, possibly sharing a run with its neighbours; it completes when its last chunk
// has run. With batch = 0 (not batchable) every request runs alone with its tensors as given.
//
// The run function is called on the worker thread only, one call at a time, so it may own an
// engine that is not thread-safe. Callbacks run on the worker thread too: keep them short (post
// the work elsewhere). Back-pressure: at most max_queued requests wait; more are refused.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/core/status.h"
#include "kernels/core/tensor.h"

namespace kiln::serve {

using BatchRunFn = std::function<Result<std::vector<Tensor>>(const std::vector<Tensor>& inputs)>;
using BatchDoneFn = std::function<void(Result<std::vector<Tensor>> outputs)>;

struct BatcherOptions {
  int64_t batch = 0;      // B, the engine's fixed leading dim; 0: no batching (exact shapes)
  int64_t max_batch = 0;  // samples gathered per run, 1..B (0: B)
  std::chrono::microseconds max_delay{2000};
  size_t max_queued = 1024;  // requests waiting at most
};

struct BatcherStats {
  uint64_t requests = 0;          // completed requests, successful or not
  uint64_t failed = 0;            // of which failed
  uint64_t inference_count = 0;   // samples served successfully
  uint64_t execution_count = 0;   // engine runs
  uint64_t queue_ns = 0;          // sum over requests: arrival to its first chunk's run
  uint64_t compute_ns = 0;        // sum over engine runs
  uint64_t success_ns = 0;        // sum over successful requests: arrival to completion
  int64_t last_inference_ms = 0;  // Unix time of the last completed run, ms
};

enum class SubmitOutcome { accepted, invalid, queue_full, stopped };

struct SubmitResult {
  SubmitOutcome outcome = SubmitOutcome::accepted;
  std::string message;  // why, when not accepted
  bool accepted() const { return outcome == SubmitOutcome::accepted; }
};

class Batcher {
 public:
  // `shapes`/`dtypes`: the engine's input shapes (with B as dim 0 when batching) and dtypes.
  Batcher(BatcherOptions options, std::vector<DType> dtypes, std::vector<Shape> shapes, BatchRunFn run);
  ~Batcher();  // stop()
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues one request (inputs in engine order, every one with `samples` rows when batching,
  // the exact engine shapes otherwise). On acceptance `done` is called exactly once, later, on
  // the worker thread; otherwise never.
  SubmitResult submit(std::vector<Tensor> inputs, BatchDoneFn done);

  // Refuses new requests, runs every queued one, and joins the worker. Idempotent.
  void stop();

  BatcherStats stats() const;
  const BatcherOptions& options() const { return options_; }

 private:
  struct Request;
  struct Slice {
    std::shared_ptr<Request> request;
    int64_t offset = 0;
    int64_t count = 0;
  };

  void work();
  std::vector<Slice> take_locked();
  void run_batched(const std::vector<Slice>& slices);
  void run_exact(const std::shared_ptr<Request>& request);
  void finish(Request& request, Result<std::vector<Tensor>> outputs);

  BatcherOptions options_;
  std::vector<DType> dtypes_;
  std::vector<Shape> shapes_;
  BatchRunFn run_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Request>> queue_;
  int64_t queued_samples_ = 0;  // not yet taken, over queue_
  bool stopping_ = false;
  BatcherStats stats_;
  std::thread worker_;
};

}  // namespace kiln::serve
