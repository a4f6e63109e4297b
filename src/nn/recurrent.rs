//! The recurrent core an actor-critic may put between its torso and its heads: an LSTM
//! (Hochreiter & Schmidhuber 1997, with a forget gate) or a GRU (Cho et al. 2014), one layer,
//! stepped over time with the state reset wherever an episode starts.
//!
//! The cells are written from two linear layers each (`core.input.*` on the torso's features,
//! `core.hidden.*` on the previous output) rather than taken from tch's `nn::lstm`/`nn::gru`:
//! those draw their own initialisation (not the project's [`InitSpec`] schemes), keep cuDNN's
//! flattened weight layout, and run whole sequences without a per-step reset, which a rollout
//! crossing episode boundaries needs at every step anyway. The input projection of a whole
//! sequence is one matrix multiply; only the hidden projection runs step by step.
//!
//! A state is one tensor `[envs, width]` per batch of environments: an LSTM's `h` then `c`
//! (width `2 * size`), a GRU's `h` (width `size`).

use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use super::init::{LayerInit, linear};

/// Which cell the core runs: the config's `core`.
pub use tandem_config::Core;

/// Gates per unit: input, forget, cell and output (LSTM); reset, update and new (GRU).
fn gates(core: Core) -> i64 {
    match core {
        Core::Lstm => 4,
        Core::Gru => 3,
    }
}

/// A recurrent core of `size` units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreSpec {
    pub kind: Core,
    pub size: i64,
}

/// One recurrent layer.
#[derive(Debug)]
pub(crate) struct RecurrentCore {
    spec: CoreSpec,
    input: nn::Linear,
    hidden: nn::Linear,
}

impl RecurrentCore {
    /// Variables `input.*` (`[gates * size, inputs]`) and `hidden.*` (`[gates * size, size]`)
    /// under `path`, initialised as `init` says (orthogonal with gain 1 and zero biases under
    /// the orthogonal scheme, as CleanRL's `ppo_atari_lstm`).
    pub(crate) fn new(path: &nn::Path, spec: CoreSpec, inputs: i64, init: LayerInit) -> Self {
        let width = gates(spec.kind) * spec.size;
        RecurrentCore {
            spec,
            input: linear(path / "input", inputs, width, init),
            hidden: linear(path / "hidden", spec.size, width, init),
        }
    }

    pub(crate) fn output_dim(&self) -> i64 {
        self.spec.size
    }

    /// Width of a state: `h` and `c` for an LSTM, `h` for a GRU.
    pub(crate) fn state_width(&self) -> i64 {
        match self.spec.kind {
            Core::Lstm => 2 * self.spec.size,
            Core::Gru => self.spec.size,
        }
    }

    /// Runs `features` `[T * n, inputs]` (step-major: row `t * n + env`) from `state` `[n,
    /// width]`; `starts` `[T * n]` is 1 where an episode starts at that step, and the state is
    /// zeroed there before the step. Returns the outputs `[T * n, size]` and the state after
    /// the last step.
    pub(crate) fn forward(
        &self,
        features: &Tensor,
        starts: &Tensor,
        state: &Tensor,
    ) -> (Tensor, Tensor) {
        let n = state.size()[0];
        let steps = features.size()[0] / n;
        // Shaped by the step count alone, so a traced step (`tandem export`) takes any batch.
        let projected = self.input.forward(features).unflatten(0, [steps, -1]);
        let keep = (starts.to_kind(Kind::Float).neg() + 1.0)
            .unflatten(0, [steps, -1])
            .unsqueeze(-1);
        let mut state = state.shallow_clone();
        let mut outputs = Vec::with_capacity(steps as usize);
        for t in 0..steps {
            state = &state * keep.get(t);
            let (output, next) = self.step(&projected.get(t), &state);
            outputs.push(output);
            state = next;
        }
        (Tensor::cat(&outputs, 0), state)
    }

    /// One step from the input projection `x` `[n, gates * size]` and `state`.
    fn step(&self, x: &Tensor, state: &Tensor) -> (Tensor, Tensor) {
        let size = self.spec.size;
        match self.spec.kind {
            Core::Lstm => {
                let h = state.narrow(1, 0, size);
                let c = state.narrow(1, size, size);
                let gates = x + self.hidden.forward(&h);
                let [i, f, g, o] = chunks::<4>(&gates);
                let c = f.sigmoid() * c + i.sigmoid() * g.tanh();
                let h = o.sigmoid() * c.tanh();
                let next = Tensor::cat(&[&h, &c], 1);
                (h, next)
            }
            Core::Gru => {
                let recurrent = self.hidden.forward(state);
                let [xr, xz, xn] = chunks::<3>(x);
                let [hr, hz, hn] = chunks::<3>(&recurrent);
                let r = (xr + hr).sigmoid();
                let z = (xz + hz).sigmoid();
                let candidate = (xn + r * hn).tanh();
                let h = &candidate + z * (state - &candidate);
                (h.shallow_clone(), h)
            }
        }
    }
}

/// `x` `[n, K * size]` as its K column blocks.
fn chunks<const K: usize>(x: &Tensor) -> [Tensor; K] {
    let parts = x.chunk(K as i64, 1);
    std::array::from_fn(|i| parts[i].shallow_clone())
}
