#include "service/runtime/serve/batcher.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>

namespace kiln::serve {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t ns_between(Clock::time_point a, Clock::time_point b) {
  return static_cast<uint64_t>(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count()));
}

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The run function owns an engine that may throw (bad_alloc); a failed run fails its requests,
// never the worker.
Result<std::vector<Tensor>> run_guarded(const BatchRunFn& run, const std::vector<Tensor>& inputs) {
  try {
    return run(inputs);
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::internal, "out of memory while running the model");
  } catch (const std::exception& e) {
    return make_error(ErrorCode::internal, "running the model failed: ", e.what());
  }
}

}  // namespace

struct Batcher::Request {
  std::vector<Tensor> inputs;
  int64_t samples = 1;
  int64_t taken = 0;  // rows handed to runs (guarded by mu_)
  int64_t done = 0;   // rows whose outputs are in place (worker only)
  bool failed = false;  // worker only
  std::vector<Tensor> outputs;
  BatchDoneFn done_fn;
  Clock::time_point arrived;
};

Batcher::Batcher(BatcherOptions options, std::vector<DType> dtypes, std::vector<Shape> shapes, BatchRunFn run)
    : options_(options), dtypes_(std::move(dtypes)), shapes_(std::move(shapes)), run_(std::move(run)) {
  if (options_.batch > 0) options_.max_batch = options_.max_batch <= 0 ? options_.batch : std::min(options_.max_batch, options_.batch);
  else options_.max_batch = 1;
  if (options_.max_queued == 0) options_.max_queued = 1;
  worker_ = std::thread([this] { work(); });
}

Batcher::~Batcher() { stop(); }

void Batcher::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
}

BatcherStats Batcher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

SubmitResult Batcher::submit(std::vector<Tensor> inputs, BatchDoneFn done) {
  auto invalid = [](std::string message) { return SubmitResult{SubmitOutcome::invalid, std::move(message)}; };
  if (inputs.size() != shapes_.size())
    return invalid("the model takes " + std::to_string(shapes_.size()) + " inputs, got " + std::to_string(inputs.size()));
  int64_t samples = 1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const Shape& want = shapes_[i];
    const std::string which = "input " + std::to_string(i) + " ";
    if (t.dtype() != dtypes_[i]) return invalid(which + "has dtype " + std::string(dtype_name(t.dtype())));
    bool fits = t.shape().size() == want.size();
    if (options_.batch > 0) {
      fits = fits && !want.empty() && t.dim(0) >= 1;
      for (size_t d = 1; fits && d < want.size(); ++d) fits = t.shape()[d] == want[d];
      if (fits && i > 0 && t.dim(0) != samples) return invalid(which + "has another number of samples than input 0");
      if (fits) samples = t.dim(0);
    } else {
      fits = fits && t.shape() == want;
    }
    if (!fits) return invalid(which + "has shape " + shape_to_string(t.shape()) + ", the engine takes " + shape_to_string(want));
  }
  auto request = std::make_shared<Request>();
  request->inputs = std::move(inputs);
  request->samples = samples;
  request->done_fn = std::move(done);
  request->arrived = Clock::now();
  {
    std::lock_guard lock(mu_);
    if (stopping_) return {SubmitOutcome::stopped, "the server is shutting down"};
    if (queue_.size() >= options_.max_queued)
      return {SubmitOutcome::queue_full, "the queue is full (" + std::to_string(options_.max_queued) + " requests wait)"};
    queue_.push_back(std::move(request));
    queued_samples_ += samples;
  }
  wake_.notify_one();
  return {};
}

void Batcher::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and every request has run
    if (options_.batch == 0) {
      std::shared_ptr<Request> request = std::move(queue_.front());
      queue_.pop_front();
      queued_samples_ -= request->samples;
      lock.unlock();
      run_exact(request);
      lock.lock();
      continue;
    }
    // Wait for a full batch, at most max_delay after the oldest waiting request arrived.
    const Clock::time_point deadline = queue_.front()->arrived + options_.max_delay;
    while (!stopping_ && queued_samples_ < options_.max_batch && Clock::now() < deadline) wake_.wait_until(lock, deadline);
    std::vector<Slice> slices = take_locked();
    lock.unlock();
    if (!slices.empty()) run_batched(slices);
    slices.clear();  // drop the request references outside the lock
    lock.lock();
  }
}

std::vector<Batcher::Slice> Batcher::take_locked() {
  std::vector<Slice> slices;
  int64_t room = options_.max_batch;
  while (room > 0 && !queue_.empty()) {
    const std::shared_ptr<Request>& request = queue_.front();
    const int64_t left = request->samples - request->taken;
    if (request->failed) {  // an earlier chunk failed: the rest need not run
      queued_samples_ -= left;
      queue_.pop_front();
      continue;
    }
    const int64_t n = std::min(room, left);
    slices.push_back({request, request->taken, n});
    request->taken += n;
    queued_samples_ -= n;
    room -= n;
    if (request->taken == request->samples) queue_.pop_front();
  }
  return slices;
}

void Batcher::run_batched(const std::vector<Slice>& slices) {
  const Clock::time_point start = Clock::now();
  const int64_t batch = options_.batch;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < shapes_.size(); ++i) {
    Tensor t = Tensor::zeros(dtypes_[i], shapes_[i]);  // rows past the samples stay zero: the padding
    const size_t row_bytes = t.nbytes() / static_cast<size_t>(batch);
    char* dst = static_cast<char*>(t.raw());
    int64_t row = 0;
    for (const Slice& s : slices) {
      const char* src = static_cast<const char*>(s.request->inputs[i].raw());
      if (row_bytes) std::memcpy(dst + row * row_bytes, src + s.offset * row_bytes, static_cast<size_t>(s.count) * row_bytes);
      row += s.count;
    }
    inputs.push_back(std::move(t));
  }
  Result<std::vector<Tensor>> result = run_guarded(run_, inputs);
  const Clock::time_point end = Clock::now();
  {
    std::lock_guard lock(mu_);
    ++stats_.execution_count;
    stats_.compute_ns += ns_between(start, end);
    stats_.last_inference_ms = unix_ms_now();
    for (const Slice& s : slices)
      if (s.offset == 0) stats_.queue_ns += ns_between(s.request->arrived, start);
  }
  if (result) {
    for (const Tensor& out : *result)
      if (out.rank() < 1 || out.dim(0) != batch) {
        result = make_error(ErrorCode::internal, "the engine returned an output of shape ", shape_to_string(out.shape()),
                            " that does not lead with the batch ", batch);
        break;
      }
  }
  for (const Slice& s : slices) {
    Request& request = *s.request;
    if (request.failed) continue;
    if (!result) {
      finish(request, result.error());
      continue;
    }
    if (request.outputs.empty()) {
      for (const Tensor& out : *result) {
        Shape shape = out.shape();
        shape[0] = request.samples;
        request.outputs.push_back(Tensor::zeros(out.dtype(), std::move(shape)));
      }
    }
    int64_t row = 0;
    for (const Slice& other : slices) {  // this slice's first row in the batch
      if (&other == &s) break;
      row += other.count;
    }
    for (size_t o = 0; o < result->size(); ++o) {
      const Tensor& out = (*result)[o];
      const size_t row_bytes = out.nbytes() / static_cast<size_t>(batch);
      const char* src = static_cast<const char*>(out.raw());
      char* dst = static_cast<char*>(request.outputs[o].raw());
      if (row_bytes) std::memcpy(dst + s.offset * row_bytes, src + row * row_bytes, static_cast<size_t>(s.count) * row_bytes);
    }
    request.done += s.count;
    if (request.done == request.samples) finish(request, std::move(request.outputs));
  }
}

void Batcher::run_exact(const std::shared_ptr<Request>& request) {
  const Clock::time_point start = Clock::now();
  Result<std::vector<Tensor>> result = run_guarded(run_, request->inputs);
  {
    std::lock_guard lock(mu_);
    ++stats_.execution_count;
    stats_.compute_ns += ns_between(start, Clock::now());
    stats_.queue_ns += ns_between(request->arrived, start);
    stats_.last_inference_ms = unix_ms_now();
  }
  finish(*request, std::move(result));
}

void Batcher::finish(Request& request, Result<std::vector<Tensor>> outputs) {
  request.failed = !outputs;
  {
    std::lock_guard lock(mu_);
    ++stats_.requests;
    if (outputs) {
      stats_.inference_count += static_cast<uint64_t>(request.samples);
      stats_.success_ns += ns_between(request.arrived, Clock::now());
    } else {
      ++stats_.failed;
    }
  }
  request.inputs.clear();
  BatchDoneFn done = std::move(request.done_fn);
  request.done_fn = nullptr;
  if (!done) return;
  try {
    done(std::move(outputs));
  } catch (...) {  // a callback must not take the worker down; it owns its own error reporting
  }
}

}  // namespace kiln::serve
