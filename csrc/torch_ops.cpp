// A C ABI over the libtorch operations tandem needs and tch does not expose: installing a
// parameter's gradient buffer (DDP buckets, the optimizer's flat gradients), the fused Adam
// kernel, the flush-denormals switch and saving named tensors into memory. Rust reaches them
// through src/torch_ops.rs.
//
// Contract for every entry point: it never lets a C++ exception cross the boundary. It returns 0 on
// success; on failure it returns 1 and stores a malloc'ed, NUL-terminated message in *err, which the
// caller frees with tto_free. Tensors cross as `at::Tensor*` (what tch's Tensor::as_mut_ptr gives).

#include "ffi_guard.hpp"

#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/_fused_adam.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/serialize/output-archive.h>

#include <cstdlib>

using tandem_ffi::guarded;

extern "C" {

void tto_free(void* p) { std::free(p); }

// Makes `grad` the gradient tensor of `param`; autograd then accumulates into it in place (so
// gradients can live inside a flat all-reduce bucket, with no copies around the collective).
int tto_set_grad(at::Tensor* param, at::Tensor* grad, char** err) {
  return guarded(err, [&] { param->mutable_grad() = *grad; });
}

// One Adam step over flat tensors in a single fused libtorch kernel (the one behind PyTorch's
// `Adam(fused=True)`), with `step` the number of this step (from 1): the same update as the
// nine separate operations it replaces, for a fraction of their dispatch cost on small models.
int tto_fused_adam(at::Tensor* param, at::Tensor* grad, at::Tensor* exp_avg, at::Tensor* exp_avg_sq,
                   at::Tensor* step, double lr, double beta1, double beta2, double eps, char** err) {
  return guarded(err, [&] {
    at::NoGradGuard no_grad;
    at::_fused_adam_({*param}, {*grad}, {*exp_avg}, {*exp_avg_sq}, {}, {*step}, lr, beta1, beta2,
                     /*weight_decay=*/0.0, eps, /*amsgrad=*/false, /*maximize=*/false);
  });
}

// Makes the calling thread's float operations treat denormal inputs and results as zero (the
// CPU's FTZ and DAZ modes, through libtorch's own switch, the one behind PyTorch's
// `torch.set_flush_denormal`). Threads created afterwards inherit the mode. Returns 1 when the
// CPU supports it and it is now on, 0 otherwise.
int tto_flush_denormals(void) { return at::globalContext().setFlushDenormal(true) ? 1 : 0; }

// The tensor's offset into its storage, in elements. tch 0.26 has `storage_offset`; tch 0.24 (the
// release for torch 2.11, which scripts/device-build links against) does not.
int64_t tto_storage_offset(const at::Tensor* t) noexcept { return t->storage_offset(); }

// Makes the archive torch::save writes for the `n` named tensors (the format tch's
// `Tensor::save_multi` writes to a file and `Tensor::load_multi` reads) and hands its bytes to
// `sink(ctx, data, size)` write by write, so the caller gathers them with a single copy. tch
// 0.26's own in-memory writer makes a Rust slice of each write's data pointer, which is null for
// a zero-byte record (an empty tensor): undefined behaviour, which debug builds abort on
// (docs/design.md, "Rank 0 writes"). Zero-byte writes are skipped here, so `data` is never null.
int tto_save_named(at::Tensor* const* tensors, const char* const* names, int64_t n,
                   void (*sink)(void* ctx, const void* data, size_t size), void* ctx, char** err) {
  return guarded(err, [&] {
    torch::serialize::OutputArchive archive;
    for (int64_t i = 0; i < n; ++i) archive.write(names[i], *tensors[i], /*is_buffer=*/false);
    archive.save_to([sink, ctx](const void* data, size_t size) {
      if (size > 0) sink(ctx, data, size);
      return size;
    });
  });
}

}  // extern "C"
