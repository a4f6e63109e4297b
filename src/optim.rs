//! Optimizers written over plain tensors (Adam, RMSprop) instead of tch's opaque C++ ones, so
//! that their state can be checkpointed, broadcast from rank 0 after a resume, and included in
//! the cross-rank fingerprint. The update rules follow the papers and match torch.optim's
//! defaults (Adam: Kingma & Ba 2015, bias-corrected; RMSprop: Tieleman & Hinton 2012, eps
//! outside the square root).

use tch::{Kind, Tensor};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptimizerKind {
    Adam { beta1: f64, beta2: f64, eps: f64 },
    RmsProp { alpha: f64, eps: f64 },
}

impl OptimizerKind {
    pub fn adam() -> Self {
        OptimizerKind::Adam {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-5,
        }
    }
    pub fn rmsprop() -> Self {
        OptimizerKind::RmsProp {
            alpha: 0.99,
            eps: 1e-5,
        }
    }
}

/// An optimizer over a fixed, ordered list of parameters.
pub struct Optimizer {
    kind: OptimizerKind,
    params: Vec<Tensor>,
    /// Adam: first moments; RMSprop: unused (empty).
    first: Vec<Tensor>,
    /// Adam: second moments; RMSprop: running mean of squared gradients.
    second: Vec<Tensor>,
    steps: i64,
    lr: f64,
}

impl Optimizer {
    pub fn new(kind: OptimizerKind, params: Vec<Tensor>, lr: f64) -> Optimizer {
        let zeros = |ps: &[Tensor]| {
            ps.iter()
                .map(|p| p.zeros_like().detach())
                .collect::<Vec<_>>()
        };
        let first = match kind {
            OptimizerKind::Adam { .. } => zeros(&params),
            OptimizerKind::RmsProp { .. } => Vec::new(),
        };
        let second = zeros(&params);
        Optimizer {
            kind,
            params,
            first,
            second,
            steps: 0,
            lr,
        }
    }

    pub fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    pub fn lr(&self) -> f64 {
        self.lr
    }

    pub fn steps(&self) -> i64 {
        self.steps
    }

    pub fn zero_grad(&mut self) {
        for p in &mut self.params {
            let mut g = p.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    }

    /// Scales gradients so their global L2 norm is at most `max_norm`; returns the norm before.
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> f64 {
        let grads: Vec<Tensor> = self
            .params
            .iter()
            .map(|p| p.grad())
            .filter(|g| g.defined())
            .collect();
        if grads.is_empty() {
            return 0.0;
        }
        let total = Tensor::stack(&grads.iter().map(|g| g.norm()).collect::<Vec<_>>(), 0)
            .norm()
            .double_value(&[]);
        let scale = max_norm / (total + 1e-6);
        if scale < 1.0 {
            for mut g in grads {
                let _ = g.g_mul_scalar_(scale);
            }
        }
        total
    }

    /// One update of every parameter from its current gradient.
    pub fn step(&mut self) {
        self.steps += 1;
        let t = self.steps as f64;
        tch::no_grad(|| match self.kind {
            OptimizerKind::Adam { beta1, beta2, eps } => {
                let bias1 = 1.0 - beta1.powf(t);
                let bias2 = 1.0 - beta2.powf(t);
                for ((p, m), v) in self
                    .params
                    .iter_mut()
                    .zip(&mut self.first)
                    .zip(&mut self.second)
                {
                    let g = p.grad();
                    if !g.defined() {
                        continue;
                    }
                    // m <- b1 m + (1 - b1) g ;  v <- b2 v + (1 - b2) g^2
                    let _ = m.g_mul_scalar_(beta1).g_add_(&(&g * (1.0 - beta1)));
                    let _ = v.g_mul_scalar_(beta2).g_add_(&(&g * &g * (1.0 - beta2)));
                    // p <- p - lr * (m / bias1) / (sqrt(v / bias2) + eps)
                    let denom = (&*v / bias2).sqrt() + eps;
                    let update = (&*m / bias1) / denom * self.lr;
                    let _ = p.g_sub_(&update);
                }
            }
            OptimizerKind::RmsProp { alpha, eps } => {
                for (p, sq) in self.params.iter_mut().zip(&mut self.second) {
                    let g = p.grad();
                    if !g.defined() {
                        continue;
                    }
                    // s <- a s + (1 - a) g^2 ;  p <- p - lr g / (sqrt(s) + eps)
                    let _ = sq.g_mul_scalar_(alpha).g_add_(&(&g * &g * (1.0 - alpha)));
                    let update = &g / (sq.sqrt() + eps) * self.lr;
                    let _ = p.g_sub_(&update);
                }
            }
        });
    }

    /// The optimizer's state tensors in a fixed order, named, for checkpoints, broadcasts and
    /// fingerprints. The step count travels as a one-element tensor.
    pub fn state(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        for (i, m) in self.first.iter().enumerate() {
            out.push((format!("optimizer.first.{i:04}"), m.shallow_clone()));
        }
        for (i, v) in self.second.iter().enumerate() {
            out.push((format!("optimizer.second.{i:04}"), v.shallow_clone()));
        }
        out
    }

    /// Replaces the state with `state` (same names and shapes as [`Optimizer::state`]).
    pub fn load_state(&mut self, state: &[(String, Tensor)], steps: i64) -> anyhow::Result<()> {
        let mine = self.state();
        if mine.len() != state.len() {
            anyhow::bail!(
                "optimizer state has {} tensors, the checkpoint {}",
                mine.len(),
                state.len()
            );
        }
        tch::no_grad(|| -> anyhow::Result<()> {
            for ((name, mut dst), (other, src)) in mine.into_iter().zip(state) {
                if name != *other || dst.size() != src.size() {
                    anyhow::bail!(
                        "optimizer state {name} {:?} does not match {other} {:?}",
                        dst.size(),
                        src.size()
                    );
                }
                dst.copy_(&src.to_kind(Kind::Float).to_device(dst.device()));
            }
            Ok(())
        })?;
        self.steps = steps;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adam_matches_the_closed_form_first_step() {
        // With bias correction, Adam's first step moves each weight by lr * sign(g) (up to eps).
        let p = Tensor::from_slice(&[1.0f32, -2.0, 3.0]).set_requires_grad(true);
        let loss = (&p * Tensor::from_slice(&[0.5f32, -4.0, 0.0])).sum(Kind::Float);
        loss.backward();
        let mut opt = Optimizer::new(
            OptimizerKind::Adam {
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-12,
            },
            vec![p.shallow_clone()],
            0.1,
        );
        opt.step();
        let v = Vec::<f32>::try_from(&p.detach()).unwrap();
        assert!((v[0] - 0.9).abs() < 1e-6, "{v:?}");
        assert!((v[1] - -1.9).abs() < 1e-6, "{v:?}");
        assert!((v[2] - 3.0).abs() < 1e-6, "{v:?}");
    }

    #[test]
    fn rmsprop_first_step_divides_by_the_root_mean_square() {
        let p = Tensor::from_slice(&[1.0f32]).set_requires_grad(true);
        (&p * 2.0).sum(Kind::Float).backward();
        let mut opt = Optimizer::new(
            OptimizerKind::RmsProp {
                alpha: 0.99,
                eps: 0.0,
            },
            vec![p.shallow_clone()],
            0.01,
        );
        opt.step();
        // s = 0.01 * 4 = 0.04 ; update = 0.01 * 2 / 0.2 = 0.1
        let v = p.detach().double_value(&[0]);
        assert!((v - 0.9).abs() < 1e-6, "{v}");
    }

    #[test]
    fn clipping_scales_to_the_max_norm() {
        let p = Tensor::from_slice(&[0.0f32, 0.0]).set_requires_grad(true);
        (&p * Tensor::from_slice(&[3.0f32, 4.0]))
            .sum(Kind::Float)
            .backward();
        let mut opt = Optimizer::new(OptimizerKind::adam(), vec![p.shallow_clone()], 0.1);
        let before = opt.clip_grad_norm(1.0);
        assert!((before - 5.0).abs() < 1e-5);
        let g = Vec::<f32>::try_from(&p.grad()).unwrap();
        assert!(
            (g[0] - 0.6).abs() < 1e-5 && (g[1] - 0.8).abs() < 1e-5,
            "{g:?}"
        );
    }

    #[test]
    fn state_round_trips() {
        let p = Tensor::from_slice(&[1.0f32, 2.0]).set_requires_grad(true);
        (&p * &p).sum(Kind::Float).backward();
        let mut a = Optimizer::new(OptimizerKind::adam(), vec![p.shallow_clone()], 0.1);
        a.step();
        let q = Tensor::from_slice(&[1.0f32, 2.0]).set_requires_grad(true);
        let mut b = Optimizer::new(OptimizerKind::adam(), vec![q.shallow_clone()], 0.1);
        b.load_state(&a.state(), a.steps()).unwrap();
        for ((_, x), (_, y)) in a.state().iter().zip(b.state().iter()) {
            assert!(x.equal(y));
        }
        assert_eq!(b.steps(), 1);
    }
}
