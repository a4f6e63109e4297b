//! The twin MLP actor-critic's forward and backward passes computed on the host, for the small
//! networks of classic control and MuJoCo, where libtorch's per-operation dispatch and autograd
//! bookkeeping, not the arithmetic, are most of a PPO step (docs/performance.md, "Training" 1).
//!
//! [`HostTwinMlp`] reads the parameters of an [`super::ActorCritic`] with separate MLP torsos
//! (`TwinMlp` and `StackedHeads`) where they are, and adds its gradients into theirs, so the
//! optimizer, DDP and checkpoints see the very variables of the autograd path. The forward pass
//! keeps every layer's output for the backward pass; the caller turns the heads' outputs into a
//! loss and hands back the loss's gradient at them (the learner's host step, `algo::ppo_host`).
//! The matrix products are oneMKL's or `matrixmultiply`'s (one thread, `super::host_gemm`); tanh
//! is libtorch's vectorised kernel over a whole layer at once. tests/algo_ppo_host.rs holds both
//! passes to autograd's.

use anyhow::{Context, Result, ensure};
use tch::{Device, Kind, Tensor};

use super::host_gemm::gemm_acc;
use super::torso::Activation;

/// One layer of both torsos (or both heads): `weight` `[2, inputs, width]`, `bias` `[2, 1, width]`
/// and, for a backward pass, their gradients; all contiguous f32 on the CPU.
#[derive(Debug)]
struct HostLayer {
    weight: Tensor,
    bias: Tensor,
    /// `(weight's, bias's)`; `None` for a network that only acts.
    grads: Option<(Tensor, Tensor)>,
    inputs: usize,
    width: usize,
}

/// A twin MLP actor-critic's parameters, read in place, and the workspace of one pass.
#[derive(Debug)]
pub struct HostTwinMlp {
    /// The hidden layers, then the stacked heads (slice 0 the policy's, slice 1 the value's in
    /// its column 0).
    layers: Vec<HostLayer>,
    activation: Activation,
    /// Rows of the last forward pass.
    rows: usize,
    /// Per layer, its output for both torsos, `[2, rows, width]`: after the activation for the
    /// hidden layers, the heads' raw outputs for the last.
    outputs: Vec<Vec<f32>>,
    /// The gradient at the current layer's output, and at its input (backward's scratch).
    grad_out: Vec<f32>,
    grad_in: Vec<f32>,
}

/// Whether the host passes pay: where the process computes on one thread, as they do. With
/// more, libtorch's kernels spread a layer over them (the threads rule gives small networks one
/// thread; docs/performance.md, "7. Threads").
pub(crate) fn host_passes_pay() -> bool {
    tch::get_num_threads() == 1
}

/// `t` as a float slice. Callers check it is a contiguous f32 CPU tensor ([`check_host`]).
fn floats(t: &Tensor) -> &[f32] {
    // SAFETY: `t` is a contiguous f32 tensor on the CPU (checked when it was taken in), so its
    // `numel()` elements lie at `data_ptr()`; the slice borrows `t`, whose storage outlives it,
    // and the host passes write only other buffers (gradients, workspace) while it is alive.
    unsafe { std::slice::from_raw_parts(t.data_ptr() as *const f32, t.numel()) }
}

/// `t` as a mutable float slice: a gradient buffer no one else touches during a host pass.
fn floats_mut(t: &mut Tensor) -> &mut [f32] {
    // SAFETY: as in `floats`; the gradients are written only by this pass while it runs (the
    // optimizer and DDP read them after it returns), and the slice borrows `t` mutably.
    unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, t.numel()) }
}

/// `t`'s values in place, when it is a contiguous f32 CPU tensor (an error naming `what`
/// otherwise).
pub(crate) fn float_view<'a>(t: &'a Tensor, what: &str) -> Result<&'a [f32]> {
    check_host(t, what)?;
    Ok(floats(t))
}

/// `t`'s values in place for writing, as [`float_view`].
pub(crate) fn float_view_mut<'a>(t: &'a mut Tensor, what: &str) -> Result<&'a mut [f32]> {
    check_host(t, what)?;
    Ok(floats_mut(t))
}

fn check_host(t: &Tensor, what: &str) -> Result<()> {
    ensure!(
        t.defined() && t.device() == Device::Cpu && t.kind() == Kind::Float && t.is_contiguous(),
        "host MLP: {what} must be a contiguous f32 CPU tensor"
    );
    Ok(())
}

impl HostLayer {
    fn new(weight: &Tensor, bias: &Tensor, with_grads: bool) -> Result<HostLayer> {
        check_host(weight, "a weight")?;
        check_host(bias, "a bias")?;
        let grads = match with_grads {
            true => {
                let (weight_grad, bias_grad) = (weight.grad(), bias.grad());
                check_host(&weight_grad, "a weight's gradient")?;
                check_host(&bias_grad, "a bias's gradient")?;
                Some((weight_grad, bias_grad))
            }
            false => None,
        };
        let [two, inputs, width] = weight.size()[..] else {
            anyhow::bail!(
                "host MLP: a stacked weight is [2, in, out], got {:?}",
                weight.size()
            );
        };
        ensure!(
            two == 2 && bias.size() == [2, 1, width],
            "host MLP: weight {:?} and bias {:?} are not one stacked layer",
            weight.size(),
            bias.size()
        );
        Ok(HostLayer {
            weight: weight.shallow_clone(),
            bias: bias.shallow_clone(),
            grads,
            inputs: inputs as usize,
            width: width as usize,
        })
    }

    /// Torso `t`'s `[inputs, width]` weight.
    fn weight(&self, t: usize) -> &[f32] {
        let n = self.inputs * self.width;
        &floats(&self.weight)[t * n..(t + 1) * n]
    }
}

/// The activation in place over a whole buffer: tanh through libtorch's vectorised kernel (one
/// call per layer, not per element), ReLU here.
fn activate(activation: Activation, values: &mut [f32]) {
    match activation {
        Activation::Relu => values.iter_mut().for_each(|v| *v = v.max(0.0)),
        Activation::Tanh => {
            // SAFETY: the tensor views `values` (contiguous f32, `values.len()` elements) only
            // for this call, which writes within it; `values` is borrowed mutably meanwhile.
            let view = unsafe {
                Tensor::from_blob(
                    values.as_mut_ptr() as *const u8,
                    &[values.len() as i64],
                    &[1],
                    Kind::Float,
                    Device::Cpu,
                )
            };
            let _ = tch::no_grad(|| view.shallow_clone().tanh_());
        }
    }
}

/// The gradient at a hidden layer's pre-activation from the one at its output `y`:
/// tanh' = 1 - y^2, relu' = [y > 0].
fn through_activation(activation: Activation, grad: &mut [f32], outputs: &[f32]) {
    match activation {
        Activation::Tanh => grad
            .iter_mut()
            .zip(outputs)
            .for_each(|(g, y)| *g *= 1.0 - y * y),
        Activation::Relu => grad.iter_mut().zip(outputs).for_each(|(g, y)| {
            if *y <= 0.0 {
                *g = 0.0
            }
        }),
    }
}

impl HostTwinMlp {
    /// From the stacked hidden layers and heads, `(weight, bias)` each. `with_grads`: the
    /// network will run backward passes, which add into the gradients the optimizer has laid out
    /// (they must exist); without, it only runs forward passes.
    pub(crate) fn new(
        hidden: &[(Tensor, Tensor)],
        heads: (&Tensor, &Tensor),
        activation: Activation,
        with_grads: bool,
    ) -> Result<HostTwinMlp> {
        let mut layers = hidden
            .iter()
            .map(|(w, b)| HostLayer::new(w, b, with_grads))
            .collect::<Result<Vec<_>>>()?;
        layers.push(HostLayer::new(heads.0, heads.1, with_grads)?);
        for pair in layers.windows(2) {
            ensure!(
                pair[0].width == pair[1].inputs,
                "host MLP: a layer of width {} feeds one of {} inputs",
                pair[0].width,
                pair[1].inputs
            );
        }
        let outputs = vec![Vec::new(); layers.len()];
        Ok(HostTwinMlp {
            layers,
            activation,
            rows: 0,
            outputs,
            grad_out: Vec::new(),
            grad_in: Vec::new(),
        })
    }

    /// Inputs per row (the flattened observation).
    pub fn inputs(&self) -> usize {
        self.layers[0].inputs
    }

    /// Outputs per row of each head slice (the policy's width; the value is column 0 of slice 1).
    pub fn head_width(&self) -> usize {
        self.layers.last().map_or(0, |l| l.width)
    }

    /// Both torsos and heads over `obs` `[rows, inputs]`; returns the heads' outputs
    /// `[2, rows, head_width]` (slice 0 the policy head's, slice 1's column 0 the values).
    pub fn forward(&mut self, obs: &[f32]) -> Result<&[f32]> {
        let inputs = self.inputs();
        ensure!(
            inputs > 0 && obs.len().is_multiple_of(inputs),
            "host MLP: {} observation values are not rows of {inputs}",
            obs.len()
        );
        let rows = obs.len() / inputs;
        self.rows = rows;
        let last = self.layers.len() - 1;
        for l in 0..self.layers.len() {
            let (before, rest) = self.outputs.split_at_mut(l);
            let out = &mut rest[0];
            let layer = &self.layers[l];
            let (k, w) = (layer.inputs, layer.width);
            out.resize(2 * rows * w, 0.0);
            let bias = floats(&layer.bias);
            for t in 0..2 {
                let out_t = &mut out[t * rows * w..(t + 1) * rows * w];
                // z = b + h W: the bias in every row, then the product added to it.
                for row in out_t.chunks_exact_mut(w) {
                    row.copy_from_slice(&bias[t * w..(t + 1) * w]);
                }
                let input = match l {
                    0 => obs,
                    _ => &before[l - 1][t * rows * k..(t + 1) * rows * k],
                };
                gemm_acc(
                    (rows, k, w),
                    input,
                    (k, 1),
                    layer.weight(t),
                    (w, 1),
                    out_t,
                    1.0,
                );
            }
            if l < last {
                activate(self.activation, out);
            }
        }
        Ok(&self.outputs[last])
    }

    /// Adds to the parameters' gradients those of a loss whose gradient at the heads' outputs of
    /// the last [`HostTwinMlp::forward`] (over `obs`, the same rows) is `grad_heads`
    /// `[2, rows, head_width]`.
    pub fn backward(&mut self, obs: &[f32], grad_heads: &[f32]) -> Result<()> {
        let rows = self.rows;
        ensure!(
            obs.len() == rows * self.inputs() && grad_heads.len() == 2 * rows * self.head_width(),
            "host MLP: backward needs the forward pass's {rows} rows and a gradient for each of \
             its head outputs"
        );
        let last = self.layers.len() - 1;
        self.grad_out.clear();
        self.grad_out.extend_from_slice(grad_heads);
        for l in (0..=last).rev() {
            let layer = &mut self.layers[l];
            let (k, w) = (layer.inputs, layer.width);
            if l < last {
                through_activation(self.activation, &mut self.grad_out, &self.outputs[l]);
            }
            if l > 0 {
                self.grad_in.resize(2 * rows * k, 0.0);
            }
            for t in 0..2 {
                let g = &self.grad_out[t * rows * w..(t + 1) * rows * w];
                let input = match l {
                    0 => obs,
                    _ => &self.outputs[l - 1][t * rows * k..(t + 1) * rows * k],
                };
                let (weight_grad, bias_grad) = layer
                    .grads
                    .as_mut()
                    .context("host MLP: this network was built to act, without gradients")?;
                // dL/dW = h^T g, dL/db = the column sums of g.
                let weight_grad = &mut floats_mut(weight_grad)[t * k * w..(t + 1) * k * w];
                gemm_acc((k, rows, w), input, (1, k), g, (w, 1), weight_grad, 1.0);
                let bias_grad = &mut floats_mut(bias_grad)[t * w..(t + 1) * w];
                for row in g.chunks_exact(w) {
                    bias_grad.iter_mut().zip(row).for_each(|(b, x)| *b += x);
                }
                // dL/dh = g W^T, for the layer below (none below the first).
                if l > 0 {
                    let weight = &floats(&layer.weight)[t * k * w..(t + 1) * k * w];
                    let grad_in = &mut self.grad_in[t * rows * k..(t + 1) * rows * k];
                    gemm_acc((rows, w, k), g, (w, 1), weight, (1, w), grad_in, 0.0);
                }
            }
            if l > 0 {
                std::mem::swap(&mut self.grad_out, &mut self.grad_in);
            }
        }
        Ok(())
    }
}
