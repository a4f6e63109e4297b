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

/// How a layer's weight lies in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `[slices, inputs, width]` with bias `[slices, 1, width]`: the twin torsos' and stacked
    /// heads' layers, one slice per network.
    Stacked,
    /// `[width, inputs]` with bias `[width]`: one `nn::Linear`, one slice.
    Linear,
}

/// One layer (of one network, or of both stacked ones) and, for a backward pass, its
/// gradients; all contiguous f32 on the CPU.
#[derive(Debug)]
struct HostLayer {
    weight: Tensor,
    bias: Tensor,
    /// `(weight's, bias's)`; `None` for a network that only runs forward (or only passes
    /// gradients through to its input, with detached weights).
    grads: Option<(Tensor, Tensor)>,
    layout: Layout,
    slices: usize,
    inputs: usize,
    width: usize,
}

/// A stack of host layers over one input, with the workspace of one pass: layer 0 reads the
/// input (the same for every slice), layer `l` slice `t` reads slice `t` of layer `l - 1`'s
/// output. The activation follows every layer but the last, and the last too where
/// `activate_last` (a torso whose features feed heads kept apart).
#[derive(Debug)]
struct HostStack {
    layers: Vec<HostLayer>,
    activation: Activation,
    activate_last: bool,
    /// Rows of the last forward pass.
    rows: usize,
    /// Per layer, its output `[slices, rows, width]`, after the activation where it has one.
    outputs: Vec<Vec<f32>>,
    /// The gradient at the current layer's output, and at its input (backward's scratch).
    grad_out: Vec<f32>,
    grad_in: Vec<f32>,
}

/// The twin MLP actor-critic's parameters, read in place, and the workspace of one pass: the
/// hidden layers of both torsos, then the stacked heads (slice 0 the policy's, slice 1 the
/// value's in its column 0).
#[derive(Debug)]
pub struct HostTwinMlp {
    stack: HostStack,
}

/// An MLP of `nn::Linear` layers on the host (SAC's actor and critics): a torso whose every
/// layer is activated, a head of one layer, or a critic activated between layers.
#[derive(Debug)]
pub struct HostMlp {
    stack: HostStack,
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
    fn new(weight: &Tensor, bias: &Tensor, layout: Layout, with_grads: bool) -> Result<HostLayer> {
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
        let (slices, inputs, width) = match (layout, &weight.size()[..]) {
            (Layout::Stacked, &[slices, inputs, width]) => {
                ensure!(
                    bias.size() == [slices, 1, width],
                    "host MLP: weight {:?} and bias {:?} are not one stacked layer",
                    weight.size(),
                    bias.size()
                );
                (slices, inputs, width)
            }
            (Layout::Linear, &[width, inputs]) => {
                ensure!(
                    bias.size() == [width],
                    "host MLP: weight {:?} and bias {:?} are not one linear layer",
                    weight.size(),
                    bias.size()
                );
                (1, inputs, width)
            }
            (_, shape) => anyhow::bail!(
                "host MLP: a {layout:?} layer's weight cannot have the shape {shape:?}"
            ),
        };
        Ok(HostLayer {
            weight: weight.shallow_clone(),
            bias: bias.shallow_clone(),
            grads,
            layout,
            slices: slices as usize,
            inputs: inputs as usize,
            width: width as usize,
        })
    }

    /// Slice `t`'s weight as the `[inputs, width]` matrix the forward product takes, with its
    /// row and column strides.
    fn weight_in_out(&self, t: usize) -> (&[f32], (usize, usize)) {
        let (k, w) = (self.inputs, self.width);
        match self.layout {
            Layout::Stacked => (&floats(&self.weight)[t * k * w..(t + 1) * k * w], (w, 1)),
            Layout::Linear => (floats(&self.weight), (1, k)),
        }
    }

    /// out = b + x W for every slice: `input(t)` is slice `t`'s `[rows, inputs]`, `out`
    /// `[slices, rows, width]`.
    fn forward<'a>(&self, rows: usize, input: impl Fn(usize) -> &'a [f32], out: &mut [f32]) {
        let (k, w) = (self.inputs, self.width);
        let bias = floats(&self.bias);
        for t in 0..self.slices {
            let out_t = &mut out[t * rows * w..(t + 1) * rows * w];
            // z = b + h W: the bias in every row, then the product added to it.
            for row in out_t.chunks_exact_mut(w) {
                row.copy_from_slice(&bias[t * w..(t + 1) * w]);
            }
            let (weight, strides) = self.weight_in_out(t);
            gemm_acc((rows, k, w), input(t), (k, 1), weight, strides, out_t, 1.0);
        }
    }

    /// Adds slice `t`'s weight and bias gradients for the gradient `g` `[rows, width]` at its
    /// pre-activation over `input` `[rows, inputs]`: dL/dW = hᵀ g, dL/db = the column sums of g.
    fn add_param_grads(&mut self, t: usize, input: &[f32], g: &[f32]) -> Result<()> {
        let (k, w) = (self.inputs, self.width);
        let rows = g.len() / w;
        let layout = self.layout;
        let (weight_grad, bias_grad) = self
            .grads
            .as_mut()
            .context("host MLP: this network was built without gradients")?;
        let weight_grad = &mut floats_mut(weight_grad)[t * k * w..(t + 1) * k * w];
        match layout {
            // [inputs, width] = hᵀ g
            Layout::Stacked => gemm_acc((k, rows, w), input, (1, k), g, (w, 1), weight_grad, 1.0),
            // [width, inputs] = gᵀ h
            Layout::Linear => gemm_acc((w, rows, k), g, (1, w), input, (k, 1), weight_grad, 1.0),
        }
        let bias_grad = &mut floats_mut(bias_grad)[t * w..(t + 1) * w];
        for row in g.chunks_exact(w) {
            bias_grad.iter_mut().zip(row).for_each(|(b, x)| *b += x);
        }
        Ok(())
    }

    /// `grad_in` (+)= g Wᵀ for slice `t`: the gradient at the layer's input `[rows, inputs]`,
    /// added to what it holds where `add`.
    fn input_grad(&self, t: usize, g: &[f32], grad_in: &mut [f32], add: bool) {
        let (k, w) = (self.inputs, self.width);
        let rows = g.len() / w;
        // Wᵀ is the forward's W with its strides swapped.
        let (weight, (rs, cs)) = self.weight_in_out(t);
        let beta = if add { 1.0 } else { 0.0 };
        gemm_acc((rows, w, k), g, (w, 1), weight, (cs, rs), grad_in, beta);
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
        // A select, not a conditional store, so that it compiles to vector blends.
        Activation::Relu => grad
            .iter_mut()
            .zip(outputs)
            .for_each(|(g, y)| *g = if *y <= 0.0 { 0.0 } else { *g }),
    }
}

impl HostStack {
    fn new(layers: Vec<HostLayer>, activation: Activation, activate_last: bool) -> Result<Self> {
        ensure!(!layers.is_empty(), "host MLP: a network needs a layer");
        for pair in layers.windows(2) {
            ensure!(
                pair[0].width == pair[1].inputs && pair[0].slices == pair[1].slices,
                "host MLP: a layer of width {} feeds one of {} inputs",
                pair[0].width,
                pair[1].inputs
            );
        }
        let outputs = vec![Vec::new(); layers.len()];
        Ok(HostStack {
            layers,
            activation,
            activate_last,
            rows: 0,
            outputs,
            grad_out: Vec::new(),
            grad_in: Vec::new(),
        })
    }

    fn inputs(&self) -> usize {
        self.layers[0].inputs
    }

    fn width(&self) -> usize {
        self.layers.last().map_or(0, |l| l.width)
    }

    fn activated(&self, l: usize) -> bool {
        l + 1 < self.layers.len() || self.activate_last
    }

    /// Every layer over `input` `[rows, inputs]`; returns the last one's output
    /// `[slices, rows, width]`.
    fn forward(&mut self, input: &[f32]) -> Result<&[f32]> {
        let inputs = self.inputs();
        ensure!(
            inputs > 0 && input.len().is_multiple_of(inputs),
            "host MLP: {} input values are not rows of {inputs}",
            input.len()
        );
        let rows = input.len() / inputs;
        self.rows = rows;
        for l in 0..self.layers.len() {
            let activated = self.activated(l);
            let (before, rest) = self.outputs.split_at_mut(l);
            let out = &mut rest[0];
            let layer = &self.layers[l];
            out.resize(layer.slices * rows * layer.width, 0.0);
            let k = layer.inputs;
            layer.forward(
                rows,
                |t| match l {
                    0 => input,
                    _ => &before[l - 1][t * rows * k..(t + 1) * rows * k],
                },
                out,
            );
            if activated {
                activate(self.activation, out);
            }
        }
        Ok(&self.outputs[self.layers.len() - 1])
    }

    /// From the gradient `grad_last` at the last forward pass's output (over `input`, the same
    /// rows): adds the parameters' gradients where `params`, and writes the gradient at the
    /// input, summed over the slices, into `grad_input` where one is given.
    fn backward(
        &mut self,
        input: &[f32],
        grad_last: &[f32],
        params: bool,
        mut grad_input: Option<&mut Vec<f32>>,
    ) -> Result<()> {
        let rows = self.rows;
        let slices = self.layers[0].slices;
        ensure!(
            input.len() == rows * self.inputs() && grad_last.len() == slices * rows * self.width(),
            "host MLP: backward needs the forward pass's {rows} rows and a gradient for each of \
             its outputs"
        );
        let last = self.layers.len() - 1;
        self.grad_out.clear();
        self.grad_out.extend_from_slice(grad_last);
        for l in (0..=last).rev() {
            let (k, w) = (self.layers[l].inputs, self.layers[l].width);
            if self.activated(l) {
                through_activation(self.activation, &mut self.grad_out, &self.outputs[l]);
            }
            // Where the gradient at this layer's input goes: the layer below's scratch, or at
            // the network's input (one gradient, summed over the slices) the caller's buffer.
            let mut below = match (l, grad_input.as_deref_mut()) {
                (0, None) => None,
                (0, Some(grad)) => Some(grad),
                _ => Some(&mut self.grad_in),
            };
            if let Some(grad) = below.as_deref_mut() {
                grad.resize(if l == 0 { rows * k } else { slices * rows * k }, 0.0);
            }
            let layer = &mut self.layers[l];
            for t in 0..slices {
                let g = &self.grad_out[t * rows * w..(t + 1) * rows * w];
                let h = match l {
                    0 => input,
                    _ => &self.outputs[l - 1][t * rows * k..(t + 1) * rows * k],
                };
                if params {
                    layer.add_param_grads(t, h, g)?;
                }
                // dL/dh = g Wᵀ for the layer below; at the input, summed over the slices.
                if let Some(grad) = below.as_deref_mut() {
                    match l {
                        0 => layer.input_grad(t, g, grad, t > 0),
                        _ => layer.input_grad(
                            t,
                            g,
                            &mut grad[t * rows * k..(t + 1) * rows * k],
                            false,
                        ),
                    }
                }
            }
            if l > 0 {
                std::mem::swap(&mut self.grad_out, &mut self.grad_in);
            }
        }
        Ok(())
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
            .map(|(w, b)| HostLayer::new(w, b, Layout::Stacked, with_grads))
            .collect::<Result<Vec<_>>>()?;
        layers.push(HostLayer::new(
            heads.0,
            heads.1,
            Layout::Stacked,
            with_grads,
        )?);
        ensure!(
            layers.iter().all(|l| l.slices == 2),
            "host MLP: the twin network's layers are stacked pairs"
        );
        Ok(HostTwinMlp {
            stack: HostStack::new(layers, activation, false)?,
        })
    }

    /// Inputs per row (the flattened observation).
    pub fn inputs(&self) -> usize {
        self.stack.inputs()
    }

    /// Outputs per row of each head slice (the policy's width; the value is column 0 of slice 1).
    pub fn head_width(&self) -> usize {
        self.stack.width()
    }

    /// Both torsos and heads over `obs` `[rows, inputs]`; returns the heads' outputs
    /// `[2, rows, head_width]` (slice 0 the policy head's, slice 1's column 0 the values).
    pub fn forward(&mut self, obs: &[f32]) -> Result<&[f32]> {
        self.stack.forward(obs)
    }

    /// Adds to the parameters' gradients those of a loss whose gradient at the heads' outputs of
    /// the last [`HostTwinMlp::forward`] (over `obs`, the same rows) is `grad_heads`
    /// `[2, rows, head_width]`.
    pub fn backward(&mut self, obs: &[f32], grad_heads: &[f32]) -> Result<()> {
        self.stack.backward(obs, grad_heads, true, None)
    }
}

impl HostMlp {
    /// From `nn::Linear` layers' `(weight [out, in], bias [out])`, in order. `activate_last`:
    /// the activation follows the last layer too (a torso). `with_grads`: backward passes may
    /// add into the parameters' gradients, which must exist.
    pub(crate) fn new(
        linears: &[(Tensor, Tensor)],
        activation: Activation,
        activate_last: bool,
        with_grads: bool,
    ) -> Result<HostMlp> {
        let layers = linears
            .iter()
            .map(|(w, b)| HostLayer::new(w, b, Layout::Linear, with_grads))
            .collect::<Result<Vec<_>>>()?;
        Ok(HostMlp {
            stack: HostStack::new(layers, activation, activate_last)?,
        })
    }

    /// Inputs per row.
    pub fn inputs(&self) -> usize {
        self.stack.inputs()
    }

    /// Outputs per row.
    pub fn width(&self) -> usize {
        self.stack.width()
    }

    /// The network over `input` `[rows, inputs]`; returns its output `[rows, width]`.
    pub fn forward(&mut self, input: &[f32]) -> Result<&[f32]> {
        self.stack.forward(input)
    }

    /// The output of the last [`HostMlp::forward`].
    pub fn output(&self) -> &[f32] {
        &self.stack.outputs[self.stack.layers.len() - 1]
    }

    /// For a loss whose gradient at the last forward pass's output (over `input`) is `grad`:
    /// adds the parameters' gradients where `params` (the network must have been built with
    /// them), and writes the gradient at the input `[rows, inputs]` into `grad_input` where one
    /// is given.
    pub fn backward(
        &mut self,
        input: &[f32],
        grad: &[f32],
        params: bool,
        grad_input: Option<&mut Vec<f32>>,
    ) -> Result<()> {
        self.stack.backward(input, grad, params, grad_input)
    }
}
