//! The libtorch operations tandem needs that tch does not expose, over the C ABI in
//! `csrc/torch_ops.cpp`: installing a parameter's gradient buffer ([`set_grad`]), libtorch's
//! fused Adam kernel ([`fused_adam`]), its flush-denormals switch ([`flush_denormals`]) and a
//! tensor's storage offset ([`storage_offset`]), and saving named tensors into memory
//! ([`save_named`], in place of tch's unsound in-memory writer).
//! Nothing here is about other ranks; the c10d shim is `crate::dist`'s.

use std::ffi::{CStr, CString, c_char, c_int, c_void};

use tch::Tensor;
use torch_sys::C_tensor;

/// A libtorch operation threw; `message` is the C++ exception's own text.
#[derive(Debug, thiserror::Error)]
#[error("{context} failed: {message}")]
pub struct TorchOpError {
    pub context: String,
    pub message: String,
}

type Result<T> = std::result::Result<T, TorchOpError>;

/// oneMKL, linked into libtorch, asks this whether the CPU is Intel's before it picks a kernel
/// of its vector maths (VML: `tanh`, `exp`, ...) by the CPU's instruction sets; on any other
/// CPU it takes its generic SSE kernel whatever the CPU supports. Defined here and exported
/// (build.rs), it is the definition libtorch's call binds to, as the malloc family binds to
/// mimalloc: MKL then chooses by the instruction sets alone. On a 2-core AMD EPYC (AVX-512) a
/// tanh of 2x256x64 floats took 88 us on the generic kernel; a CartPole PPO minibatch's forward
/// pass went from 350 to 167 us (docs/performance.md, "small networks on AMD"). Intel CPUs
/// answer the same either way.
#[unsafe(no_mangle)]
pub extern "C" fn mkl_serv_intel_cpu_true() -> c_int {
    1
}

// Every fallible function returns 0 on success and 1 on failure, with a malloc'ed message in
// `err` that must be released with `tto_free`.
unsafe extern "C" {
    fn tto_free(p: *mut c_void);
    fn tto_set_grad(param: *mut C_tensor, grad: *mut C_tensor, err: *mut *mut c_char) -> c_int;
    #[allow(clippy::too_many_arguments)]
    fn tto_fused_adam(
        param: *mut C_tensor,
        grad: *mut C_tensor,
        exp_avg: *mut C_tensor,
        exp_avg_sq: *mut C_tensor,
        step: *mut C_tensor,
        lr: f64,
        beta1: f64,
        beta2: f64,
        eps: f64,
        err: *mut *mut c_char,
    ) -> c_int;
    fn tto_flush_denormals() -> c_int;
    fn tto_storage_offset(t: *const C_tensor) -> i64;
    fn tto_save_named(
        tensors: *const *mut C_tensor,
        names: *const *const c_char,
        n: i64,
        sink: extern "C" fn(ctx: *mut c_void, data: *const c_void, size: usize),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    ) -> c_int;
}

/// The bytes of libtorch's archive of the named tensors: what `Tensor::save_multi` writes to a
/// file and `Tensor::load_multi` reads back. Written in memory by our own shim, as tch's
/// in-memory writer is unsound for empty tensors (docs/design.md, "Rank 0 writes").
pub fn save_named(named: &[(String, Tensor)]) -> Result<Vec<u8>> {
    let mut tensors: Vec<Tensor> = named.iter().map(|(_, t)| t.shallow_clone()).collect();
    let names = named
        .iter()
        .map(|(name, _)| CString::new(name.as_str()))
        .collect::<std::result::Result<Vec<CString>, _>>()
        .map_err(|e| TorchOpError {
            context: "saving tensors".into(),
            message: format!("a tensor name holds a NUL byte: {e}"),
        })?;
    let pointers: Vec<*mut C_tensor> = tensors.iter_mut().map(|t| t.as_mut_ptr()).collect();
    let name_pointers: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let (mut bytes, mut err) = (Vec::new(), std::ptr::null_mut());
    // SAFETY: `pointers` and `name_pointers` hold `named.len()` valid entries, live for the call:
    // the tensors are shallow clones owned by this frame and the names NUL-terminated CStrings
    // kept in `names`. The shim only reads them; it calls `append_to_vec` with `ctx` = `bytes`,
    // borrowed mutably by nothing else during the call, and fills `err` on failure.
    let rc = unsafe {
        tto_save_named(
            pointers.as_ptr(),
            name_pointers.as_ptr(),
            named.len() as i64,
            append_to_vec,
            (&mut bytes as *mut Vec<u8>).cast(),
            &mut err,
        )
    };
    check(rc, err, "saving tensors")?;
    Ok(bytes)
}

/// `tto_save_named`'s sink: appends one of libtorch's writes to the `Vec<u8>` behind `ctx`.
extern "C" fn append_to_vec(ctx: *mut c_void, data: *const c_void, size: usize) {
    // SAFETY: `ctx` is the `Vec<u8>` that `save_named` lends for the duration of its call, and no
    // other reference to it is used meanwhile; the shim passes a non-null `data` of `size`
    // readable bytes (it skips zero-byte writes), valid until this function returns.
    let (bytes, data) = unsafe {
        (
            &mut *ctx.cast::<Vec<u8>>(),
            std::slice::from_raw_parts(data.cast::<u8>(), size),
        )
    };
    bytes.extend_from_slice(data);
}

/// The offset of `t`'s first element into its storage, in elements (`Tensor::storage_offset`,
/// which tch 0.24, the release scripts/device-build builds with, lacks).
pub fn storage_offset(t: &Tensor) -> i64 {
    // SAFETY: `t` is a live tensor borrowed for the call; reading its offset neither throws nor
    // keeps the pointer.
    unsafe { tto_storage_offset(t.as_ptr()) }
}

/// Puts the calling thread's float arithmetic in flush-to-zero / denormals-are-zero mode
/// (docs/design.md, "Denormals are flushed"); threads it starts afterwards inherit the mode.
/// False where the CPU has no such mode.
pub fn flush_denormals() -> bool {
    // SAFETY: the shim takes no arguments and only sets this thread's float control register
    // through libtorch's `setFlushDenormal`, which does not throw.
    unsafe { tto_flush_denormals() == 1 }
}

/// Makes `grad` the gradient of `param` (a view into a bucket, typically): autograd accumulates
/// into it in place from then on.
pub fn set_grad(param: &Tensor, grad: &Tensor) -> Result<()> {
    let mut p = param.shallow_clone();
    let mut g = grad.shallow_clone();
    let mut err = std::ptr::null_mut();
    // SAFETY: `p` and `g` are live tensors owned by this frame, so both `at::Tensor*` stay valid
    // for the call; the shim copies the handle it keeps (a reference count), and `err` is a
    // valid out-pointer it may fill with a message we free in `check`.
    let rc = unsafe { tto_set_grad(p.as_mut_ptr(), g.as_mut_ptr(), &mut err) };
    check(rc, err, "setting a gradient buffer")
}

/// One Adam step (PyTorch's form, no weight decay) on flat tensors, in libtorch's fused kernel;
/// `step` is a 0-dim float tensor on the parameters' device holding this step's number (from 1).
#[allow(clippy::too_many_arguments)]
pub fn fused_adam(
    param: &Tensor,
    grad: &Tensor,
    exp_avg: &Tensor,
    exp_avg_sq: &Tensor,
    step: &Tensor,
    lr: f64,
    (beta1, beta2, eps): (f64, f64, f64),
) -> Result<()> {
    let [mut p, mut g, mut m, mut v, mut t] =
        [param, grad, exp_avg, exp_avg_sq, step].map(Tensor::shallow_clone);
    let mut err = std::ptr::null_mut();
    // SAFETY: the five tensors are shallow clones owned by this frame, alive until the call
    // returns; the kernel runs synchronously and keeps no pointer to them. Wrong shapes or
    // devices make libtorch throw, which the shim turns into `rc` 1 and a message in `err`.
    let rc = unsafe {
        tto_fused_adam(
            p.as_mut_ptr(),
            g.as_mut_ptr(),
            m.as_mut_ptr(),
            v.as_mut_ptr(),
            t.as_mut_ptr(),
            lr,
            beta1,
            beta2,
            eps,
            &mut err,
        )
    };
    check(rc, err, "the fused Adam step")
}

fn check(rc: c_int, err: *mut c_char, context: &str) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    let message = if err.is_null() {
        "no message from libtorch".to_string()
    } else {
        // SAFETY: a non-null `err` after a failed call is the shim's NUL-terminated malloc'ed
        // copy, owned by us; it is read once here and freed right after, never used again.
        let text = unsafe { CStr::from_ptr(err) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: `err` came from the shim's malloc and is freed exactly once, by its own free.
        unsafe { tto_free(err.cast()) };
        text
    };
    Err(TorchOpError {
        context: context.to_string(),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process's dynamic linker resolves oneMKL's question to tandem's answer, not to
    /// libtorch's own definition (which says no on any CPU but Intel's): the export in build.rs
    /// is what makes the binding happen.
    #[test]
    fn libtorchs_mkl_asks_tandem_whether_the_cpu_is_intels() {
        // Any libtorch call loads and initialises libtorch_cpu before the lookup.
        let _ = Tensor::zeros([1], (tch::Kind::Float, tch::Device::Cpu));
        // SAFETY: a lookup by a NUL-terminated name in the global scope; nothing is called.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"mkl_serv_intel_cpu_true".as_ptr()) };
        assert_eq!(
            found as usize, mkl_serv_intel_cpu_true as *const () as usize,
            "mkl_serv_intel_cpu_true resolves to libtorch's definition"
        );
    }
}
