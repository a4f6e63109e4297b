//! Optimizers with state the rest of tandem can see, and gradient-norm clipping.
//!
//! tch's optimizers keep their moments inside libtorch where they cannot be saved, loaded or
//! fingerprinted. Checkpoint/resume and the cross-rank consistency check need exactly that state,
//! so the two update rules the learners use are written here on plain tensors, following
//! PyTorch's formulations (so hyperparameters mean what they mean in CleanRL/SB3).

use anyhow::{Result, bail, ensure};
use tch::nn::VarStore;
use tch::{Kind, Tensor};

use crate::nn::parameters_in_order;

/// An update rule and its constants.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptimizerSpec {
    /// Adam (Kingma & Ba 2015), PyTorch's form: bias-corrected moments, `eps` added to the
    /// bias-corrected root of the second moment. No weight decay.
    Adam { beta1: f64, beta2: f64, eps: f64 },
    /// RMSprop (Tieleman & Hinton 2012), PyTorch's form: `eps` added outside the square root;
    /// no momentum, not centred.
    RmsProp { alpha: f64, eps: f64 },
}

impl OptimizerSpec {
    fn validate(&self) -> Result<()> {
        let unit = |name: &str, v: f64| -> Result<()> {
            ensure!(
                (0.0..1.0).contains(&v),
                "optimizer: {name} must be in [0, 1), got {v}"
            );
            Ok(())
        };
        let positive = |name: &str, v: f64| -> Result<()> {
            ensure!(
                v.is_finite() && v > 0.0,
                "optimizer: {name} must be positive, got {v}"
            );
            Ok(())
        };
        match *self {
            OptimizerSpec::Adam { beta1, beta2, eps } => {
                unit("beta1", beta1)?;
                unit("beta2", beta2)?;
                positive("eps", eps)
            }
            OptimizerSpec::RmsProp { alpha, eps } => {
                unit("alpha", alpha)?;
                positive("eps", eps)
            }
        }
    }
}

/// An optimizer over the trainable variables of a VarStore, in [`parameters_in_order`] order.
#[derive(Debug)]
pub struct Optimizer {
    spec: OptimizerSpec,
    names: Vec<String>,
    params: Vec<Tensor>,
    /// Adam's first moment (empty for RMSprop).
    first_moments: Vec<Tensor>,
    /// Adam's second moment or RMSprop's running square average.
    second_moments: Vec<Tensor>,
    /// One work buffer per parameter, so a step allocates nothing.
    scratch: Vec<Tensor>,
    steps: u64,
}

impl Optimizer {
    pub fn new(vs: &VarStore, spec: OptimizerSpec) -> Result<Self> {
        spec.validate()?;
        let (names, params): (Vec<String>, Vec<Tensor>) = parameters_in_order(vs)
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .unzip();
        ensure!(
            !params.is_empty(),
            "optimizer: the VarStore has no trainable variables"
        );
        let zeros = |ps: &[Tensor]| {
            ps.iter()
                .map(|p| p.zeros_like().set_requires_grad(false))
                .collect()
        };
        let first_moments = match spec {
            OptimizerSpec::Adam { .. } => zeros(&params),
            OptimizerSpec::RmsProp { .. } => Vec::new(),
        };
        let second_moments = zeros(&params);
        let scratch = zeros(&params);
        Ok(Optimizer {
            spec,
            names,
            params,
            first_moments,
            second_moments,
            scratch,
            steps: 0,
        })
    }

    pub fn spec(&self) -> OptimizerSpec {
        self.spec
    }

    /// The parameters this optimizer updates, in order (shallow clones sharing storage). This is
    /// the list to hand to `Collective::sync_gradients`.
    pub fn parameters(&self) -> &[Tensor] {
        &self.params
    }

    pub fn parameter_names(&self) -> &[String] {
        &self.names
    }

    /// Optimizer steps taken (Adam's bias correction depends on it; checkpoint it).
    pub fn step_count(&self) -> u64 {
        self.steps
    }

    pub fn set_step_count(&mut self, steps: u64) {
        self.steps = steps;
    }

    /// The optimizer's state tensors with stable names (`exp_avg/<param>`, `exp_avg_sq/<param>`
    /// for Adam, `square_avg/<param>` for RMSprop), in a fixed order. They share storage with
    /// the optimizer: a checkpoint loader restores them with `copy_`.
    pub fn state_tensors(&self) -> Vec<(String, Tensor)> {
        let second = match self.spec {
            OptimizerSpec::Adam { .. } => "exp_avg_sq",
            OptimizerSpec::RmsProp { .. } => "square_avg",
        };
        let firsts = self
            .names
            .iter()
            .zip(&self.first_moments)
            .map(|(n, t)| (format!("exp_avg/{n}"), t.shallow_clone()));
        let seconds = self
            .names
            .iter()
            .zip(&self.second_moments)
            .map(|(n, t)| (format!("{second}/{n}"), t.shallow_clone()));
        firsts.chain(seconds).collect()
    }

    /// Restores state saved from [`Optimizer::state_tensors`] and [`Optimizer::step_count`]
    /// (a checkpoint). Every tensor must be present with its shape; nothing is changed otherwise.
    pub fn load_state(&mut self, saved: &[(String, Tensor)], steps: u64) -> Result<()> {
        let current = self.state_tensors();
        ensure!(
            saved.len() == current.len(),
            "optimizer state: the checkpoint holds {} tensors, this optimizer has {}",
            saved.len(),
            current.len()
        );
        let by_name: std::collections::HashMap<&str, &Tensor> =
            saved.iter().map(|(n, t)| (n.as_str(), t)).collect();
        for (name, tensor) in &current {
            let Some(stored) = by_name.get(name.as_str()) else {
                bail!("optimizer state: the checkpoint has no tensor {name}");
            };
            ensure!(
                stored.size() == tensor.size(),
                "optimizer state: {name} has shape {:?} in the checkpoint, {:?} here",
                stored.size(),
                tensor.size()
            );
        }
        tch::no_grad(|| {
            for (name, mut tensor) in current {
                tensor.copy_(by_name[name.as_str()]);
            }
        });
        self.steps = steps;
        Ok(())
    }

    /// Clears every parameter's gradient.
    pub fn zero_grad(&mut self) {
        // Zeroed in place (never replaced or detached): DDP keeps gradients as views into its
        // all-reduce buckets, and they must stay there.
        for p in &self.params {
            let mut g = p.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    }

    /// One update with learning rate `lr` from the gradients currently held by the parameters.
    pub fn step(&mut self, lr: f64) -> Result<()> {
        ensure!(
            lr.is_finite() && lr >= 0.0,
            "optimizer: learning rate must be finite and >= 0, got {lr}"
        );
        let grads = gradients(&self.names, &self.params)?;
        self.steps += 1;
        tch::no_grad(|| match self.spec {
            OptimizerSpec::Adam { beta1, beta2, eps } => {
                let t = self.steps as f64;
                let bias_correction1 = 1.0 - beta1.powf(t);
                let bias_correction2_sqrt = (1.0 - beta2.powf(t)).sqrt();
                let step_size = lr / bias_correction1;
                for (i, g) in grads.iter().enumerate() {
                    let (m, v, s) = (
                        &mut self.first_moments[i],
                        &mut self.second_moments[i],
                        &mut self.scratch[i],
                    );
                    // m <- beta1 m + (1 - beta1) g ;  v <- beta2 v + (1 - beta2) g^2
                    let _ = m.lerp_(g, 1.0 - beta1);
                    let _ = g.square_out(s);
                    let _ = v.lerp_(s, 1.0 - beta2);
                    // theta <- theta - lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + eps)
                    let _ = v.sqrt_out(s);
                    *s *= 1.0 / bias_correction2_sqrt;
                    *s += eps;
                    let _ = m.div_out(s, s);
                    *s *= step_size;
                    self.params[i] -= &*s;
                }
            }
            OptimizerSpec::RmsProp { alpha, eps } => {
                for (i, g) in grads.iter().enumerate() {
                    let (v, s) = (&mut self.second_moments[i], &mut self.scratch[i]);
                    // v <- alpha v + (1 - alpha) g^2 ;  theta <- theta - lr g / (sqrt(v) + eps)
                    let _ = g.square_out(s);
                    let _ = v.lerp_(s, 1.0 - alpha);
                    let _ = v.sqrt_out(s);
                    *s += eps;
                    let _ = g.div_out(s, s);
                    *s *= lr;
                    self.params[i] -= &*s;
                }
            }
        });
        Ok(())
    }
}

fn gradients(names: &[String], params: &[Tensor]) -> Result<Vec<Tensor>> {
    params
        .iter()
        .zip(names)
        .map(|(p, name)| {
            let g = p.grad();
            if !g.defined() {
                bail!("parameter {name} has no gradient: it did not take part in the loss");
            }
            Ok(g)
        })
        .collect()
}

/// Scales all gradients together so that their global L2 norm is at most `max_norm`, as
/// `torch.nn.utils.clip_grad_norm_` does (coefficient max_norm / (norm + 1e-6), capped at 1).
/// Returns the norm before clipping as a 0-dim tensor, so callers on a GPU need not synchronise.
pub fn clip_grad_norm(names: &[String], params: &[Tensor], max_norm: f64) -> Result<Tensor> {
    ensure!(
        max_norm > 0.0,
        "gradient clipping: max norm must be positive, got {max_norm}"
    );
    let grads = gradients(names, params)?;
    tch::no_grad(|| {
        let norms: Vec<Tensor> = grads
            .iter()
            .map(|g| g.norm().to_kind(Kind::Float))
            .collect();
        let total = Tensor::stack(&norms, 0).norm();
        let coefficient = ((&total + 1e-6).reciprocal() * max_norm).clamp_max(1.0);
        for g in &grads {
            let mut g = g.shallow_clone();
            g *= &coefficient;
        }
        Ok(total)
    })
}
