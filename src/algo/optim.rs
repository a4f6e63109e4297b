//! Optimizers with state the rest of tandem can see, and gradient-norm clipping.
//!
//! tch's optimizers keep their moments inside libtorch where they cannot be saved, loaded or
//! fingerprinted. Checkpoint/resume and the cross-rank consistency check need exactly that state,
//! so the two update rules the learners use keep it here, in plain tensors, following PyTorch's
//! formulations (so hyperparameters mean what they mean in CleanRL/SB3). RMSprop is written out;
//! Adam runs libtorch's fused kernel (PyTorch's `Adam(fused=True)`) on the same state.

use anyhow::{Context, Result, bail, ensure};
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
///
/// The optimizer moves the parameters into one contiguous buffer (each parameter becomes a view
/// into it) and gives them gradients that are views into a second one, so a step, a clip and a
/// `zero_grad` are a handful of tensor operations on the whole model instead of a handful per
/// parameter: on a CartPole-sized network the per-operation overhead of libtorch, not the
/// arithmetic, is what an update costs. DDP finds the gradients already contiguous and all-reduces
/// slices of the same buffer.
#[derive(Debug)]
pub struct Optimizer {
    spec: OptimizerSpec,
    names: Vec<String>,
    params: Vec<Tensor>,
    /// Every parameter's values, back to back in `params` order.
    flat_params: Tensor,
    /// Every parameter's gradient, laid out like `flat_params`.
    flat_grads: Tensor,
    /// Where each parameter's gradient must stay (checked before each step: a gradient replaced
    /// behind the optimizer's back would otherwise be silently ignored).
    grad_ptrs: Vec<usize>,
    /// Adam's first moment (undefined for RMSprop), laid out like `flat_params`.
    first_moment: Tensor,
    /// Adam's second moment or RMSprop's running square average.
    second_moment: Tensor,
    /// RMSprop's work buffer, so a step allocates nothing.
    scratch: Tensor,
    /// Adam's step number t as the 0-dim float tensor the fused kernel reads.
    step_number: Tensor,
    steps: u64,
    /// The networks of a [`Optimizer::grouped`] optimizer (one group spanning everything
    /// otherwise).
    groups: Vec<Group>,
}

/// One network of a grouped optimizer.
#[derive(Debug)]
struct Group {
    name: String,
    /// Its parameters' indices, and its `(offset, length)` in the flat buffers.
    params: std::ops::Range<usize>,
    elements: (i64, i64),
    steps: u64,
}

/// The trainable variables of `vs` in [`parameters_in_order`] order.
fn trainable(vs: &VarStore) -> impl Iterator<Item = (String, Tensor)> {
    parameters_in_order(vs)
        .into_iter()
        .filter(|(_, t)| t.requires_grad())
}

impl Optimizer {
    pub fn new(vs: &VarStore, spec: OptimizerSpec) -> Result<Self> {
        let (names, params): (Vec<String>, Vec<Tensor>) = trainable(vs).unzip();
        ensure!(
            !params.is_empty(),
            "optimizer: the VarStore has no trainable variables"
        );
        let whole = Group {
            name: String::new(),
            params: 0..params.len(),
            elements: (0, params.iter().map(|p| p.numel() as i64).sum()),
            steps: 0,
        };
        Self::with_groups(names, params, vec![whole], spec)
    }

    /// One optimizer over several networks, each a group with its own learning rate and step
    /// count ([`Optimizer::step_group`]), all in one flat parameter and one flat gradient buffer:
    /// a learner that syncs its networks' gradients together then hands DDP gradients that lie
    /// back to back. Parameters are named `<group>.<name>`, groups in the order given.
    pub fn grouped(stores: &[(&str, &VarStore)], spec: OptimizerSpec) -> Result<Self> {
        ensure!(
            matches!(spec, OptimizerSpec::Adam { .. }),
            "optimizer: parameter groups are implemented for Adam only"
        );
        let (mut names, mut params, mut groups) = (Vec::new(), Vec::new(), Vec::new());
        let mut offset = 0i64;
        for (group, vs) in stores {
            let first = params.len();
            for (name, p) in trainable(vs) {
                names.push(format!("{group}.{name}"));
                params.push(p);
            }
            ensure!(
                params.len() > first,
                "optimizer: group {group} has no trainable variables"
            );
            let len: i64 = params[first..].iter().map(|p| p.numel() as i64).sum();
            groups.push(Group {
                name: group.to_string(),
                params: first..params.len(),
                elements: (offset, len),
                steps: 0,
            });
            offset += len;
        }
        Self::with_groups(names, params, groups, spec)
    }

    fn with_groups(
        names: Vec<String>,
        params: Vec<Tensor>,
        groups: Vec<Group>,
        spec: OptimizerSpec,
    ) -> Result<Self> {
        spec.validate()?;
        let (kind, device) = (params[0].kind(), params[0].device());
        for (name, p) in names.iter().zip(&params) {
            ensure!(
                p.kind() == kind && p.device() == device,
                "optimizer: parameter {name} is {:?} on {:?}, the first is {kind:?} on {device:?}; \
                 all parameters must share one type and device",
                p.kind(),
                p.device()
            );
        }
        let total: i64 = params.iter().map(|p| p.numel() as i64).sum();
        let zeros = || Tensor::zeros([total], (kind, device));
        let flat_params = zeros();
        let flat_grads = zeros();
        let mut grad_ptrs = Vec::with_capacity(params.len());
        tch::no_grad(|| -> Result<()> {
            let values = slices_like(&flat_params, &params);
            let grads = slices_like(&flat_grads, &params);
            for (((name, p), mut value), mut grad) in
                names.iter().zip(&params).zip(values).zip(grads)
            {
                value.copy_(p);
                // set_data swaps the storage under the variable itself, so the network's layers,
                // the VarStore and every shallow clone see the flat buffer from now on.
                p.shallow_clone().set_data(&value);
                let existing = p.grad();
                if existing.defined() {
                    grad.copy_(&existing);
                }
                crate::torch_ops::set_grad(p, &grad)
                    .with_context(|| format!("optimizer: installing the gradient of {name}"))?;
                grad_ptrs.push(grad.data_ptr() as usize);
            }
            Ok(())
        })?;
        let (first_moment, scratch) = match spec {
            OptimizerSpec::Adam { .. } => (zeros(), Tensor::new()),
            OptimizerSpec::RmsProp { .. } => (Tensor::new(), zeros()),
        };
        Ok(Optimizer {
            spec,
            names,
            params,
            flat_params,
            flat_grads,
            grad_ptrs,
            first_moment,
            second_moment: zeros(),
            scratch,
            step_number: Tensor::zeros([], (Kind::Float, device)),
            steps: 0,
            groups,
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
        let firsts = match self.spec {
            OptimizerSpec::Adam { .. } => slices_like(&self.first_moment, &self.params),
            OptimizerSpec::RmsProp { .. } => Vec::new(),
        };
        let firsts = self
            .names
            .iter()
            .zip(firsts)
            .map(|(n, t)| (format!("exp_avg/{n}"), t));
        let seconds = self
            .names
            .iter()
            .zip(slices_like(&self.second_moment, &self.params))
            .map(|(n, t)| (format!("{second}/{n}"), t));
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

    /// Clears every parameter's gradient (in place: the gradients must stay views into the
    /// flat buffer, which DDP all-reduces).
    pub fn zero_grad(&mut self) {
        let _ = self.flat_grads.zero_();
    }

    /// Scales the gradients so that their global L2 norm is at most `max_norm`, as
    /// [`clip_grad_norm`] does, on the flat gradient buffer. Returns the norm before clipping.
    /// (A gradient replaced behind the optimizer's back is refused by the [`Optimizer::step`]
    /// that follows; checking here too would double the check's cost, 12 handles per step.)
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> Result<f64> {
        clip_flat(&[self.flat_grads.shallow_clone()], max_norm)
    }

    /// Fails if some parameter's gradient is no longer the view into the flat buffer the
    /// optimizer gave it (someone replaced it), instead of stepping on stale values.
    fn check_gradients_in_place(&self) -> Result<()> {
        for ((p, name), &ptr) in self.params.iter().zip(&self.names).zip(&self.grad_ptrs) {
            let g = p.grad();
            ensure!(
                g.defined() && g.data_ptr() as usize == ptr,
                "optimizer: the gradient of {name} was replaced; gradients must be accumulated \
                 in place (zero them with Optimizer::zero_grad, never set them to None)"
            );
        }
        Ok(())
    }

    /// The index of group `name` of a [`Optimizer::grouped`] optimizer.
    pub fn group(&self, name: &str) -> Result<usize> {
        self.groups
            .iter()
            .position(|g| g.name == name)
            .with_context(|| format!("optimizer: no parameter group {name}"))
    }

    /// The parameters of group `g`, in order.
    pub fn group_parameters(&self, g: usize) -> &[Tensor] {
        &self.params[self.groups[g].params.clone()]
    }

    /// Steps group `g` has taken (its Adam bias correction depends on it).
    pub fn group_step_count(&self, g: usize) -> u64 {
        self.groups[g].steps
    }

    pub fn set_group_step_count(&mut self, g: usize, steps: u64) {
        self.groups[g].steps = steps;
    }

    /// [`Optimizer::clip_grad_norm`] on group `g`'s gradients alone.
    pub fn clip_group_grad_norm(&mut self, g: usize, max_norm: f64) -> Result<f64> {
        let (offset, len) = self.groups[g].elements;
        clip_flat(&[self.flat_grads.narrow(0, offset, len)], max_norm)
    }

    /// One Adam update of group `g` alone, with its own learning rate and step count; the
    /// other groups' parameters and moments stay as they are.
    pub fn step_group(&mut self, g: usize, lr: f64) -> Result<()> {
        ensure!(
            lr.is_finite() && lr >= 0.0,
            "optimizer: learning rate must be finite and >= 0, got {lr}"
        );
        let OptimizerSpec::Adam { beta1, beta2, eps } = self.spec else {
            bail!("optimizer: parameter groups are implemented for Adam only");
        };
        self.check_gradients_in_place()?;
        let group = &mut self.groups[g];
        group.steps += 1;
        let (offset, len) = group.elements;
        let slice = |t: &Tensor| t.narrow(0, offset, len);
        tch::no_grad(|| {
            let _ = self.step_number.fill_(group.steps as f64);
            crate::torch_ops::fused_adam(
                &slice(&self.flat_params),
                &slice(&self.flat_grads),
                &slice(&self.first_moment),
                &slice(&self.second_moment),
                &self.step_number,
                lr,
                (beta1, beta2, eps),
            )
            .map_err(anyhow::Error::from)
        })
    }

    /// One update with learning rate `lr` from the gradients currently held by the parameters.
    pub fn step(&mut self, lr: f64) -> Result<()> {
        ensure!(
            lr.is_finite() && lr >= 0.0,
            "optimizer: learning rate must be finite and >= 0, got {lr}"
        );
        ensure!(
            self.groups.len() == 1,
            "optimizer: a grouped optimizer steps group by group (step_group)"
        );
        self.check_gradients_in_place()?;
        self.steps += 1;
        let g = &self.flat_grads;
        let (theta, s) = (&mut self.flat_params, &mut self.scratch);
        tch::no_grad(|| match self.spec {
            OptimizerSpec::Adam { beta1, beta2, eps } => {
                // m <- beta1 m + (1 - beta1) g ;  v <- beta2 v + (1 - beta2) g^2
                // theta <- theta - lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + eps)
                // in libtorch's fused kernel (PyTorch's `Adam(fused=True)`): one operation where
                // the same arithmetic written out takes nine, and on small models the
                // per-operation overhead is most of a step.
                let _ = self.step_number.fill_(self.steps as f64);
                crate::torch_ops::fused_adam(
                    theta,
                    g,
                    &self.first_moment,
                    &self.second_moment,
                    &self.step_number,
                    lr,
                    (beta1, beta2, eps),
                )
                .map_err(anyhow::Error::from)
            }
            OptimizerSpec::RmsProp { alpha, eps } => {
                let v = &mut self.second_moment;
                // v <- alpha v + (1 - alpha) g^2 ;  theta <- theta - lr g / (sqrt(v) + eps)
                let _ = g.square_out(s);
                let _ = v.lerp_(s, 1.0 - alpha);
                let _ = v.sqrt_out(s);
                *s += eps;
                let _ = g.div_out(s, s);
                *s *= lr;
                *theta -= &*s;
                Ok(())
            }
        })
    }
}

/// `flat`'s consecutive slices, one per tensor of `like`, each viewed in that tensor's shape: the
/// optimizer's layout of parameters, gradients and moments.
fn slices_like(flat: &Tensor, like: &[Tensor]) -> Vec<Tensor> {
    let mut offset = 0i64;
    like.iter()
        .map(|p| {
            let n = p.numel() as i64;
            let view = flat.narrow(0, offset, n).view_as(p);
            offset += n;
            view
        })
        .collect()
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
/// Returns the norm before clipping.
pub fn clip_grad_norm(names: &[String], params: &[Tensor], max_norm: f64) -> Result<f64> {
    clip_flat(&gradients(names, params)?, max_norm)
}

/// The norm is read to the host (the learners log it and check it is finite after every step
/// anyway), so the coefficient is worked out there and the gradients are touched only when they
/// need scaling: one or two tensor operations instead of six.
fn clip_flat(grads: &[Tensor], max_norm: f64) -> Result<f64> {
    ensure!(
        max_norm > 0.0,
        "gradient clipping: max norm must be positive, got {max_norm}"
    );
    tch::no_grad(|| {
        let total = match grads {
            [one] => one.norm(),
            _ => {
                let norms: Vec<Tensor> = grads.iter().map(Tensor::norm).collect();
                Tensor::stack(&norms, 0).norm()
            }
        };
        // The norm in the gradients' precision, and the coefficient computed in it too, as
        // PyTorch does on its float tensors (the result rounds exactly like theirs).
        let total = total.to_kind(Kind::Float).double_value(&[]) as f32;
        let coefficient = (max_norm as f32) / (total + 1e-6);
        if coefficient < 1.0 {
            for g in grads {
                let mut g = g.shallow_clone();
                g *= f64::from(coefficient);
            }
        }
        Ok(f64::from(total))
    })
}
