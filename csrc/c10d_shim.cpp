// A C ABI over libtorch's c10d: the TCPStore rendezvous store and the Gloo (CPU) and NCCL (CUDA)
// process groups, and DDP's gradient reducer. Rust reaches c10d only through these functions (see
// src/dist/ffi.rs). Libtorch calls that are not about other ranks live in csrc/torch_ops.cpp.
//
// Contract for every entry point: it never lets a C++ exception cross the boundary. It returns 0 on
// success; on failure it returns 1 and stores a malloc'ed, NUL-terminated message in *err, which the
// caller frees with tdc_free. Tensors cross as `at::Tensor*` (what tch's Tensor::as_mut_ptr gives).

#include "ffi_guard.hpp"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <c10/util/Logging.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/headeronly/version.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using tandem_ffi::caught;
using tandem_ffi::guarded;

namespace {

void init_logging_once() {
  // Makes libtorch honour TORCH_CPP_LOG_LEVEL, so c10d's own warnings can be silenced or shown.
  static std::once_flag flag;
  std::call_once(flag, [] { c10::initLogging(); });
}

c10d::ReduceOp to_reduce_op(int op) {
  switch (op) {
    case 0: return c10d::ReduceOp::SUM;
    case 1: return c10d::ReduceOp::MIN;
    case 2: return c10d::ReduceOp::MAX;
    case 3: return c10d::ReduceOp::PRODUCT;
    default: throw std::invalid_argument("unknown reduce op code " + std::to_string(op));
  }
}

std::vector<at::Tensor> to_vector(at::Tensor** tensors, size_t n) {
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(*tensors[i]);
  return out;
}

void wait_work(const c10::intrusive_ptr<c10d::Work>& work) {
  if (!work->wait()) throw std::runtime_error("collective did not complete");
}


// The gradient reducer: DDP's all-reduce overlapped with the backward pass.
//
// Buckets are contiguous ranges of gradient memory, numbered in launch order (the trainer puts the
// last layers, whose gradients backward produces first, in bucket 0). Once armed, a post-hook on
// each parameter's gradient accumulator counts the parameter in; when every parameter of a bucket
// is in, that bucket's all-reduce is started asynchronously, but only after all lower-numbered
// buckets, so every rank issues the same collectives in the same order. `finish` starts whatever
// is left (all of it when the reducer was not armed, e.g. after a micro-batch's backward under
// accumulation), waits, and divides by the world size. Hooks never throw into autograd: a failure
// is kept and reported by `finish`. (A hook runs on whichever thread autograd runs the
// accumulator on, the backward caller's on CPU, one of autograd's device threads on CUDA.)
struct ReducerState {
  struct Bucket {
    at::Tensor flat;  // the gradients themselves, f32
    at::Tensor wire;  // what is all-reduced: `flat`, or a bf16 copy of it
    std::vector<size_t> params;
    size_t pending = 0;
    c10::intrusive_ptr<c10d::Work> work;
  };
  c10::intrusive_ptr<c10d::Backend> backend;
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> slots;  // each parameter's range of its bucket's `flat`
  std::vector<size_t> bucket_of;
  std::vector<bool> ready;
  std::vector<Bucket> buckets;
  size_t next_launch = 0;
  bool armed = false;
  std::string error;
  // Set by a hook that failed where it could not keep its message (taking `mu` itself threw).
  std::atomic<bool> hook_failed_unlocked{false};
  std::mutex mu;

  // A gradient that is not the bucket's memory (replaced by someone, or never set) is copied in.
  void gather(size_t i) {
    const at::Tensor& grad = params[i].grad();
    if (!grad.defined()) {
      slots[i].zero_();
    } else if (grad.data_ptr() != slots[i].data_ptr()) {
      slots[i].copy_(grad);
    }
  }

  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      Bucket& b = buckets[next_launch];
      if (!b.wire.is_same(b.flat)) b.wire.copy_(b.flat);
      std::vector<at::Tensor> one{b.wire};
      c10d::AllreduceOptions opts;
      opts.reduceOp = c10d::ReduceOp::SUM;
      b.work = backend->allreduce(one, opts);
      ++next_launch;
    }
  }

  void mark(size_t i) {
    if (ready[i]) return;
    ready[i] = true;
    gather(i);
    --buckets[bucket_of[i]].pending;
  }

  // The body of every parameter's post-hook. Nothing it does may throw into autograd.
  void on_gradient(size_t i) noexcept {
    std::string unlocked;
    bool failed = caught(unlocked, [&] {
      std::lock_guard<std::mutex> lock(mu);
      if (!armed || !error.empty()) return;
      std::string message;
      if (caught(message, [&] {
            at::NoGradGuard no_grad;
            mark(i);
            launch_ready();
          })) {
        error = "gradient hook of parameter " + std::to_string(i) + ": " + message;
      }
    });
    if (failed) hook_failed_unlocked.store(true);
  }

  void reset() {
    for (auto& b : buckets) {
      b.pending = b.params.size();
      b.work.reset();
    }
    std::fill(ready.begin(), ready.end(), false);
    next_launch = 0;
    armed = false;
  }

  void finish(int world) {
    std::lock_guard<std::mutex> lock(mu);
    struct Reset {
      ReducerState* s;
      ~Reset() { s->reset(); }
    } reset_on_exit{this};
    at::NoGradGuard no_grad;
    // Launched collectives are waited for even after a failure, so no work is left running on
    // memory that the next step reuses.
    std::string failure = error;
    error.clear();
    if (failure.empty() && hook_failed_unlocked.exchange(false)) {
      failure = "a gradient hook could not lock the reducer";
    }
    if (failure.empty()) {
      for (size_t i = 0; i < params.size(); ++i) mark(i);
      launch_ready();
    }
    // A bucket is averaged as soon as it is in, while later buckets are still on the wire.
    for (size_t k = 0; k < buckets.size(); ++k) {
      auto& b = buckets[k];
      if (!b.work) continue;
      std::string message;
      if (caught(message, [&] { wait_work(b.work); }) && failure.empty()) {
        failure = "gradient all-reduce of bucket " + std::to_string(k) + " of " +
                  std::to_string(buckets.size()) + ": " + message;
      }
      if (failure.empty()) {
        if (!b.wire.is_same(b.flat)) b.flat.copy_(b.wire);
        b.flat.div_(world);
      }
    }
    if (!failure.empty()) throw std::runtime_error(failure);
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor grad = params[i].grad();
      if (grad.defined() && grad.data_ptr() != slots[i].data_ptr()) grad.copy_(slots[i]);
    }
  }
};

}  // namespace

struct TdcReducer {
  std::shared_ptr<ReducerState> state;
  // Kept alive so the hooks stay registered (a variable holds its accumulator only weakly).
  // Whatever handle libtorch gives out: shared_ptr<Node> up to torch 2.12 (2.11 is the GPU
  // machine's, scripts/device-build), intrusive_ptr<Node> from 2.13.
  std::vector<decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()))>
      accumulators;
};


struct TdcStore {
  c10::intrusive_ptr<c10d::Store> store;
};

struct TdcGroup {
  c10::intrusive_ptr<c10d::Backend> backend;
};

// An all-reduce started and not yet waited for: the tensor it reduces in place and its work.
struct TdcWork {
  at::Tensor tensor;
  c10::intrusive_ptr<c10d::Work> work;
};

extern "C" {

// The entry points that are not `guarded` cannot throw, and say so with noexcept: tdc_free,
// the two constant queries, and the *_free functions, which only `delete` (destructors are
// noexcept, so a throw inside one would end the process before any catch could see it).

void tdc_free(void* p) noexcept { std::free(p); }

// The libtorch version these headers (and so this binary) were built against, e.g. "2.13.0":
// a string literal of the header's, so nothing here can throw.
const char* tdc_torch_version() noexcept { return TORCH_VERSION; }

// A server with listen_fd >= 0 takes over that bound, listening socket (closing it when done)
// instead of binding every interface itself: tandem binds loopback only (src/dist/relay.rs).
int tdc_store_create(const char* host, uint16_t port, int is_server, int64_t timeout_ms,
                     int listen_fd, TdcStore** out, uint16_t* bound_port, char** err) {
  return guarded(err, [&] {
    init_logging_once();
    c10d::TCPStoreOptions opts;
    opts.port = port;
    opts.isServer = is_server != 0;
    // Ranks announce themselves through keys (src/dist/rendezvous.rs) so that a missing rank can be
    // named; the server must not block in its constructor waiting for a worker count.
    opts.waitWorkers = false;
    opts.numWorkers = std::nullopt;
    opts.timeout = std::chrono::milliseconds(timeout_ms);
    if (is_server != 0 && listen_fd >= 0) opts.masterListenFd = listen_fd;
    auto store = c10::make_intrusive<c10d::TCPStore>(std::string(host), opts);
    if (bound_port) *bound_port = store->getPort();
    *out = new TdcStore{store};
  });
}

void tdc_store_free(TdcStore* s) noexcept { delete s; }

int tdc_store_set(TdcStore* s, const char* key, const uint8_t* data, size_t len, char** err) {
  return guarded(err, [&] {
    std::vector<uint8_t> value(data, data + len);
    s->store->set(std::string(key), value);
  });
}

// Returns *found = 0 without waiting when the key is absent.
int tdc_store_try_get(TdcStore* s, const char* key, uint8_t** data, size_t* len, int* found,
                      char** err) {
  return guarded(err, [&] {
    std::string k(key);
    *found = 0;
    *data = nullptr;
    *len = 0;
    if (!s->store->check({k})) return;
    auto value = s->store->get(k);
    *data = static_cast<uint8_t*>(std::malloc(value.empty() ? 1 : value.size()));
    if (*data == nullptr) throw std::bad_alloc();
    std::memcpy(*data, value.data(), value.size());
    *len = value.size();
    *found = 1;
  });
}

int tdc_store_add(TdcStore* s, const char* key, int64_t delta, int64_t* result, char** err) {
  return guarded(err, [&] { *result = s->store->add(std::string(key), delta); });
}

int tdc_store_check(TdcStore* s, const char* key, int* present, char** err) {
  return guarded(err, [&] { *present = s->store->check({std::string(key)}) ? 1 : 0; });
}

// `interfaces`: network interface names separated by commas (GLOO_SOCKET_IFNAME), one Gloo
// device each; when empty, one device bound to `interface_host`'s address.
// `prefix`: where the group's own keys live in the store, so that they never meet tandem's
// rendezvous keys nor another group's (a population member's group beside the job's).
int tdc_group_create_gloo(TdcStore* s, const char* prefix, int rank, int size, int64_t timeout_ms,
                          const char* interface_host, const char* interfaces, int threads,
                          TdcGroup** out, char** err) {
  return guarded(err, [&] {
    init_logging_once();
    auto opts = c10d::ProcessGroupGloo::Options::create(std::chrono::milliseconds(timeout_ms));
    std::string names(interfaces);
    if (names.empty()) {
      opts->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(std::string(interface_host)));
    } else {
      size_t start = 0;
      while (start <= names.size()) {
        size_t comma = names.find(',', start);
        if (comma == std::string::npos) comma = names.size();
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(
            names.substr(start, comma - start)));
        start = comma + 1;
      }
    }
    if (threads > 0) opts->threads = threads;
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(std::string(prefix), s->store);
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, size, opts);
    *out = new TdcGroup{pg};
  });
}

int tdc_nccl_compiled() noexcept {
#ifdef USE_C10D_NCCL
  return 1;
#else
  return 0;
#endif
}

// This process's current CUDA device: where an NCCL group stages host tensors.
int tdc_current_cuda_device(int* out, char** err) {
  return guarded(err, [&] {
#ifdef USE_C10D_NCCL
    *out = static_cast<int>(c10::cuda::current_device());
#else
    (void)out;
    throw std::runtime_error("this tandem was built without CUDA; rebuild with `cargo build --features cuda`");
#endif
  });
}

// Makes `index` this process's current CUDA device, so tensors created without an explicit
// device (inside libtorch and NCCL) land on the rank's own GPU.
int tdc_set_cuda_device(int index, char** err) {
  return guarded(err, [&] {
#ifdef USE_C10D_NCCL
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
#else
    (void)index;
    throw std::runtime_error("this tandem was built without CUDA; rebuild with `cargo build --features cuda`");
#endif
  });
}

int tdc_group_create_nccl(TdcStore* s, const char* prefix, int rank, int size, int64_t timeout_ms,
                          TdcGroup** out, char** err) {
  return guarded(err, [&] {
#ifdef USE_C10D_NCCL
    init_logging_once();
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = std::chrono::milliseconds(timeout_ms);
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(std::string(prefix), s->store);
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, rank, size, opts);
    *out = new TdcGroup{pg};
#else
    (void)s; (void)prefix; (void)rank; (void)size; (void)timeout_ms; (void)out;
    throw std::runtime_error(
        "this tandem was built without NCCL; rebuild with `cargo build --features cuda`");
#endif
  });
}

void tdc_group_free(TdcGroup* g) noexcept { delete g; }

int tdc_allreduce(TdcGroup* g, at::Tensor** tensors, size_t n, int op, char** err) {
  return guarded(err, [&] {
    auto ts = to_vector(tensors, n);
    c10d::AllreduceOptions opts;
    opts.reduceOp = to_reduce_op(op);
    // One tensor per call: Gloo's multi-tensor allreduce means "one tensor per local device".
    for (auto& t : ts) {
      std::vector<at::Tensor> one{t};
      wait_work(g->backend->allreduce(one, opts));
    }
  });
}

// Starts an all-reduce of `tensor` (in place; the work keeps the tensor alive) and returns at
// once; `tdc_work_wait` waits for it. Collectives started on a group complete in the order
// they were started, on every rank alike.
int tdc_allreduce_start(TdcGroup* g, at::Tensor* tensor, int op, TdcWork** out, char** err) {
  return guarded(err, [&] {
    c10d::AllreduceOptions opts;
    opts.reduceOp = to_reduce_op(op);
    std::vector<at::Tensor> one{*tensor};
    auto work = g->backend->allreduce(one, opts);
    *out = new TdcWork{*tensor, work};
  });
}

int tdc_work_wait(TdcWork* w, char** err) {
  return guarded(err, [&] { wait_work(w->work); });
}

void tdc_work_free(TdcWork* w) noexcept { delete w; }

int tdc_broadcast(TdcGroup* g, at::Tensor* tensor, int root, char** err) {
  return guarded(err, [&] {
    std::vector<at::Tensor> one{*tensor};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    wait_work(g->backend->broadcast(one, opts));
  });
}

int tdc_reduce(TdcGroup* g, at::Tensor* tensor, int root, int op, char** err) {
  return guarded(err, [&] {
    std::vector<at::Tensor> one{*tensor};
    c10d::ReduceOptions opts;
    opts.rootRank = root;
    opts.reduceOp = to_reduce_op(op);
    wait_work(g->backend->reduce(one, opts));
  });
}

int tdc_allgather(TdcGroup* g, at::Tensor** outputs, size_t world, at::Tensor* input, char** err) {
  return guarded(err, [&] {
    std::vector<std::vector<at::Tensor>> outs(1);
    outs[0] = to_vector(outputs, world);
    std::vector<at::Tensor> in{*input};
    wait_work(g->backend->allgather(outs, in));
  });
}

// A gradient reducer over `n` parameters given bucket by bucket: bucket k holds the next
// bucket_sizes[k] entries of `params` (and of `slots`, each parameter's range of flats[k]).
// With bf16 set, buckets travel as bf16 copies.
int tdc_reducer_create(TdcGroup* g, at::Tensor** params, at::Tensor** slots, size_t n,
                       const size_t* bucket_sizes, at::Tensor** flats, size_t n_buckets, int bf16,
                       TdcReducer** out, char** err) {
  return guarded(err, [&] {
    auto state = std::make_shared<ReducerState>();
    state->backend = g->backend;
    state->params = to_vector(params, n);
    state->slots = to_vector(slots, n);
    state->ready.assign(n, false);
    size_t next = 0;
    for (size_t k = 0; k < n_buckets; ++k) {
      ReducerState::Bucket b;
      b.flat = *flats[k];
      b.wire = bf16 ? b.flat.to(at::kBFloat16) : b.flat;
      for (size_t j = 0; j < bucket_sizes[k]; ++j) {
        if (next >= n) throw std::invalid_argument("bucket sizes add up to more than the parameters");
        b.params.push_back(next);
        state->bucket_of.push_back(k);
        ++next;
      }
      b.pending = b.params.size();
      state->buckets.push_back(std::move(b));
    }
    if (next != n) throw std::invalid_argument("bucket sizes do not add up to the parameters");
    auto reducer = std::make_unique<TdcReducer>();
    reducer->state = state;
    std::weak_ptr<ReducerState> weak = state;
    for (size_t i = 0; i < n; ++i) {
      auto accumulator = torch::autograd::impl::grad_accumulator(state->params[i]);
      if (!accumulator) throw std::invalid_argument("parameter " + std::to_string(i) + " is not a leaf that requires grad");
      accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [weak, i](const torch::autograd::variable_list& outputs,
                    const torch::autograd::variable_list&) {
            // weak_ptr::lock and on_gradient never throw. Copying `outputs` (the hook's
            // required result) can only fail out of memory, and that is autograd's to carry
            // to the backward call, as it does for its own allocations.
            if (auto live = weak.lock()) live->on_gradient(i);
            return outputs;
          }));
      reducer->accumulators.push_back(std::move(accumulator));
    }
    *out = reducer.release();
  });
}

// From now until the next finish, buckets are all-reduced as backward completes them.
int tdc_reducer_arm(TdcReducer* r, char** err) {
  return guarded(err, [&] {
    std::lock_guard<std::mutex> lock(r->state->mu);
    r->state->armed = true;
  });
}

// Starts what backward did not, waits for every bucket, averages over `world` ranks. `params`
// must be the reducer's own parameters (the same variables), in the order given at creation.
int tdc_reducer_finish(TdcReducer* r, at::Tensor** params, size_t n, int world, char** err) {
  return guarded(err, [&] {
    const auto& own = r->state->params;
    bool same = n == own.size();
    for (size_t i = 0; same && i < n; ++i) same = own[i].is_same(*params[i]);
    if (!same) {
      throw std::invalid_argument(
          "these are not the parameters the DDP reducer was built for (build Ddp from "
          "Optimizer::parameters, after the optimizer)");
    }
    r->state->finish(world);
  });
}

void tdc_reducer_free(TdcReducer* r) noexcept { delete r; }

int tdc_barrier(TdcGroup* g, char** err) {
  return guarded(err, [&] { wait_work(g->backend->barrier()); });
}

}  // extern "C"
