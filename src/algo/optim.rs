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
    /// count ([`Optimizer::step_groups`]), all in one flat parameter and one flat gradient buffer:
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
        let flat_params = move_into_flat(&params);
        let flat_grads = zeros();
        let mut grad_ptrs = Vec::with_capacity(params.len());
        tch::no_grad(|| -> Result<()> {
            let grads = slices_like(&flat_grads, &params);
            for ((name, p), mut grad) in names.iter().zip(&params).zip(grads) {
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

    /// One Adam update of each listed group `(g, lr)`, with its own learning rate and step
    /// count; the groups not listed keep their parameters and moments. The gradients are checked
    /// once for all of them.
    pub fn step_groups(&mut self, steps: &[(usize, f64)]) -> Result<()> {
        let OptimizerSpec::Adam { beta1, beta2, eps } = self.spec else {
            bail!("optimizer: parameter groups are implemented for Adam only");
        };
        for &(_, lr) in steps {
            ensure!(
                lr.is_finite() && lr >= 0.0,
                "optimizer: learning rate must be finite and >= 0, got {lr}"
            );
        }
        self.check_gradients_in_place()?;
        for &(g, lr) in steps {
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
            })?;
        }
        Ok(())
    }

    /// One update with learning rate `lr` from the gradients currently held by the parameters.
    pub fn step(&mut self, lr: f64) -> Result<()> {
        ensure!(
            lr.is_finite() && lr >= 0.0,
            "optimizer: learning rate must be finite and >= 0, got {lr}"
        );
        ensure!(
            self.groups.len() == 1,
            "optimizer: a grouped optimizer steps group by group (step_groups)"
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

/// Moves `params` (one kind and device) into one new contiguous buffer, back to back in order,
/// and returns it: each parameter keeps its values and becomes a view into the buffer.
fn move_into_flat(params: &[Tensor]) -> Tensor {
    let total: i64 = params.iter().map(|p| p.numel() as i64).sum();
    let flat = Tensor::zeros([total], (params[0].kind(), params[0].device()));
    tch::no_grad(|| {
        for (p, mut value) in params.iter().zip(slices_like(&flat, params)) {
            value.copy_(p);
            // set_data swaps the storage under the variable itself, so the network's layers, the
            // VarStore and every shallow clone see the flat buffer from now on.
            p.shallow_clone().set_data(&value);
        }
    });
    flat
}

/// A target network (DQN's θ⁻, SAC's and TD3's θ̄): the frozen variables of a VarStore that
/// mirror one optimizer group, moved into a flat buffer laid out like that group's slice of the
/// optimizer's parameters, so a Polyak step is three operations on the whole network instead of
/// four per tensor (on SAC's critics, 48 a gradient step).
#[derive(Debug)]
pub struct TargetNetwork {
    /// The online group's slice of the optimizer's flat parameters.
    online: Tensor,
    /// Every target variable's values, laid out like `online`.
    target: Tensor,
}

impl TargetNetwork {
    /// The target over `target`'s variables (in [`parameters_in_order`] order), which must
    /// match group `g` of `optimizer` one to one in name and shape.
    pub fn of_group(optimizer: &Optimizer, g: usize, target: &VarStore) -> Result<TargetNetwork> {
        let group = &optimizer.groups[g];
        let online_names = &optimizer.names[group.params.clone()];
        let online_params = optimizer.group_parameters(g);
        let targets = parameters_in_order(target);
        ensure!(
            targets.len() == online_params.len(),
            "target network: {} variables for a group of {}",
            targets.len(),
            online_params.len()
        );
        let prefix = if group.name.is_empty() {
            String::new()
        } else {
            format!("{}.", group.name)
        };
        for ((name, t), (online_name, p)) in
            targets.iter().zip(online_names.iter().zip(online_params))
        {
            ensure!(
                format!("{prefix}{name}") == *online_name && t.size() == p.size(),
                "target network: variable {name} {:?} does not mirror {online_name} {:?}",
                t.size(),
                p.size()
            );
        }
        let (offset, len) = group.elements;
        let params: Vec<Tensor> = targets.into_iter().map(|(_, t)| t).collect();
        Ok(TargetNetwork {
            online: optimizer.flat_params.narrow(0, offset, len),
            target: move_into_flat(&params),
        })
    }

    /// `θ⁻ ← τ θ + (1 - τ) θ⁻` for every variable at once (τ = 1: a hard copy), without
    /// gradients. Rounded as the per-tensor form `θ τ + θ⁻ (1 - τ)` is, so a run's numbers do not
    /// depend on the layout.
    pub fn polyak(&mut self, tau: f64) {
        tch::no_grad(|| {
            if tau >= 1.0 {
                self.target.copy_(&self.online);
            } else {
                let moved = &self.online * tau;
                self.target *= 1.0 - tau;
                self.target += moved;
            }
        });
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

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;
    use tch::nn::{self, Module};

    /// Two layers under `root` (names sort `fc0` before `fc1`), drawn from `seed`.
    fn network(seed: i64, out: i64) -> (VarStore, [nn::Linear; 2]) {
        tch::manual_seed(seed);
        let vs = VarStore::new(Device::Cpu);
        let layers = [
            nn::linear(vs.root() / "fc0", 3, 4, Default::default()),
            nn::linear(vs.root() / "fc1", 4, out, Default::default()),
        ];
        (vs, layers)
    }

    fn adam() -> OptimizerSpec {
        OptimizerSpec::Adam {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }

    fn values(vs: &VarStore) -> Vec<(String, Vec<f32>)> {
        parameters_in_order(vs)
            .into_iter()
            .map(|(n, t)| (n, Vec::<f32>::try_from(t.flatten(0, -1)).unwrap()))
            .collect()
    }

    /// Backpropagates the sum of squares of the two layers' output on a batch of ones.
    fn backward(layers: &[nn::Linear; 2]) {
        let x = Tensor::ones([2, 3], (Kind::Float, Device::Cpu));
        layers[1]
            .forward(&layers[0].forward(&x))
            .square()
            .sum(Kind::Float)
            .backward();
    }

    /// The global L2 norm of `vs`'s gradients, by hand.
    fn grad_norm(vs: &VarStore) -> f64 {
        parameters_in_order(vs)
            .iter()
            .map(|(_, p)| p.grad().square().sum(Kind::Double).double_value(&[]))
            .sum::<f64>()
            .sqrt()
    }

    /// Clipping returns the norm before it and scales only what it clips: the whole model, or
    /// one group of a grouped optimizer (the others keep their gradients).
    #[test]
    fn clipping_reports_the_raw_norm_and_scales_only_its_gradients() {
        let (vs, layers) = network(6, 2);
        let mut whole = Optimizer::new(&vs, adam()).unwrap();
        backward(&layers);
        let raw = grad_norm(&vs);
        assert!(raw > 0.5, "{raw}");
        let reported = whole.clip_grad_norm(0.5).unwrap();
        assert!((reported - raw).abs() < 1e-5 * raw, "{reported} vs {raw}");
        assert!((grad_norm(&vs) - 0.5).abs() < 1e-5, "{}", grad_norm(&vs));
        // PyTorch's coefficient, max / (norm + 1e-6), where the 1e-6 shows: a norm of 2e-6
        // clipped to 1e-6 ends at 2/3 of 1e-6.
        tch::no_grad(|| {
            for (_, p) in parameters_in_order(&vs) {
                let mut g = p.grad();
                let _ = g.g_mul_scalar_(2e-6 / 0.5);
            }
        });
        whole.clip_grad_norm(1e-6).unwrap();
        let tiny = grad_norm(&vs);
        assert!((tiny - 2e-6 / 3.0).abs() < 1e-9, "{tiny}");

        let (actor, actor_layers) = network(7, 2);
        let (critic, critic_layers) = network(8, 2);
        let mut grouped =
            Optimizer::grouped(&[("actor", &actor), ("critic", &critic)], adam()).unwrap();
        backward(&actor_layers);
        backward(&critic_layers);
        let (actor_raw, critic_raw) = (grad_norm(&actor), grad_norm(&critic));
        let g = grouped.group("critic").unwrap();
        let reported = grouped.clip_group_grad_norm(g, 0.25).unwrap();
        assert!(
            (reported - critic_raw).abs() < 1e-5 * critic_raw,
            "{reported} vs {critic_raw}"
        );
        assert!((grad_norm(&critic) - 0.25).abs() < 1e-5);
        assert_eq!(grad_norm(&actor), actor_raw);
    }

    #[test]
    fn hyperparameters_outside_their_ranges_are_refused() {
        let (vs, _) = network(1, 2);
        let adam = |beta1, beta2, eps| OptimizerSpec::Adam { beta1, beta2, eps };
        for (spec, words) in [
            (adam(1.0, 0.999, 1e-8), "beta1 must be in [0, 1), got 1"),
            (adam(0.9, -0.1, 1e-8), "beta2 must be in [0, 1), got -0.1"),
            (adam(0.9, 0.999, 0.0), "eps must be positive, got 0"),
            (
                OptimizerSpec::RmsProp {
                    alpha: 1.5,
                    eps: 1e-5,
                },
                "alpha must be in [0, 1), got 1.5",
            ),
            (
                OptimizerSpec::RmsProp {
                    alpha: 0.99,
                    eps: f64::INFINITY,
                },
                "eps must be positive, got inf",
            ),
        ] {
            let err = Optimizer::new(&vs, spec).unwrap_err().to_string();
            assert!(err.contains(words), "{spec:?}: {err}");
        }
    }

    /// What a resume does: the moments and the step count restored into a new optimizer make
    /// its next step the uninterrupted one's, bias correction included.
    #[test]
    fn a_restored_step_count_continues_adams_bias_correction() {
        let (a, layers_a) = network(4, 2);
        let (b, layers_b) = network(5, 2);
        let mut first = Optimizer::new(&a, adam()).unwrap();
        let mut second = Optimizer::new(&b, adam()).unwrap();
        let step = |opt: &mut Optimizer, layers: &[nn::Linear; 2]| {
            opt.zero_grad();
            backward(layers);
            opt.step(0.1).unwrap();
        };
        step(&mut first, &layers_a);
        step(&mut first, &layers_a);
        tch::no_grad(|| {
            for ((_, mut mine), (_, theirs)) in parameters_in_order(&b)
                .into_iter()
                .zip(parameters_in_order(&a))
            {
                mine.copy_(&theirs);
            }
            for ((_, mut mine), (_, theirs)) in second
                .state_tensors()
                .into_iter()
                .zip(first.state_tensors())
            {
                mine.copy_(&theirs);
            }
        });
        second.set_step_count(first.step_count());
        step(&mut first, &layers_a);
        step(&mut second, &layers_b);
        assert_eq!(values(&b), values(&a));
    }

    #[test]
    fn a_polyak_step_on_the_flat_target_is_bitwise_the_per_tensor_formula() {
        let (online, _) = network(1, 2);
        let (critic, _) = network(2, 2);
        let (mut target, target_layers) = network(3, 2);
        target.freeze();
        let optimizer =
            Optimizer::grouped(&[("actor", &online), ("critic", &critic)], adam()).unwrap();
        let critic_group = optimizer.group("critic").unwrap();
        let mut polyak = TargetNetwork::of_group(&optimizer, critic_group, &target).unwrap();
        let before = values(&target);
        let tau = 0.005;
        polyak.polyak(tau);
        let after = values(&target);
        for (((name, old), (_, new)), (_, online)) in before.iter().zip(&after).zip(values(&critic))
        {
            for ((o, n), s) in old.iter().zip(new).zip(&online) {
                let want = s * tau as f32 + o * (1.0 - tau) as f32;
                assert_eq!(n.to_bits(), want.to_bits(), "{name}: {n} is not {want}");
            }
        }
        // The network's own layers read the moved values, and a hard copy equals the critic.
        let x = Tensor::ones([1, 3], (Kind::Float, Device::Cpu));
        let y = target_layers[1].forward(&target_layers[0].forward(&x));
        assert!(y.abs().sum(Kind::Float).double_value(&[]) > 0.0);
        polyak.polyak(1.0);
        assert_eq!(values(&target), values(&critic));
    }

    #[test]
    fn a_target_that_does_not_mirror_its_group_is_refused_naming_the_variable() {
        let (online, _) = network(1, 2);
        let (mut target, _) = network(3, 5);
        target.freeze();
        let optimizer = Optimizer::new(&online, adam()).unwrap();
        let err = TargetNetwork::of_group(&optimizer, 0, &target)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("fc1.bias [5] does not mirror fc1.bias [2]"),
            "{err}"
        );
    }
}
