//! Reward and observation scaling wrappers: clip-reward, scale-reward, clamp-reward,
//! normalize-obs, normalize-reward.

use super::{
    forward_to_inner, observation_methods, pass_through_step, reward_wrapper_env,
    wrapper_snapshot_methods,
};
use crate::env::{Env, ObsOut, Step};
use crate::norm::{NormKind, Normalizer};
use crate::space::{Action, ActionSpace, Dtype, ObsBuf, ObsSpace, ObsStore};

/// Replaces each reward by its sign.
pub struct ClipReward {
    inner: Box<dyn Env>,
}

impl ClipReward {
    pub fn new(inner: Box<dyn Env>) -> Self {
        ClipReward { inner }
    }
}

impl ClipReward {
    fn step_with(&mut self, action: Action<'_>, obs: ObsOut<'_>) -> Step {
        let mut step = obs.step(&mut *self.inner, action);
        step.reward = if step.reward > 0.0 {
            1.0
        } else if step.reward < 0.0 {
            -1.0
        } else {
            0.0
        };
        step
    }
}

reward_wrapper_env!(ClipReward, "clip-reward", params: []);

/// Multiplies each reward by a constant factor; the raw reward, the game's score, is left.
pub struct ScaleReward {
    inner: Box<dyn Env>,
    factor: f64,
}

impl ScaleReward {
    pub fn new(inner: Box<dyn Env>, factor: f64) -> Self {
        ScaleReward { inner, factor }
    }

    fn step_with(&mut self, action: Action<'_>, obs: ObsOut<'_>) -> Step {
        let mut step = obs.step(&mut *self.inner, action);
        // In f64, so a factor given to more digits than f32 holds is applied as written.
        step.reward = (f64::from(step.reward) * self.factor) as f32;
        step
    }
}

reward_wrapper_env!(ScaleReward, "scale-reward", params: [factor]);

/// Clamps each reward to `[low, high]`; the raw reward, the game's score, is left.
pub struct ClampReward {
    inner: Box<dyn Env>,
    low: f64,
    high: f64,
}

impl ClampReward {
    pub fn new(inner: Box<dyn Env>, low: f64, high: f64) -> Self {
        ClampReward { inner, low, high }
    }

    fn step_with(&mut self, action: Action<'_>, obs: ObsOut<'_>) -> Step {
        let mut step = obs.step(&mut *self.inner, action);
        step.reward = f64::from(step.reward).clamp(self.low, self.high) as f32;
        step
    }
}

reward_wrapper_env!(ClampReward, "clamp-reward", params: [low, high]);

/// Normalises observations with running statistics (f32 output).
pub struct NormalizeObs {
    inner: Box<dyn Env>,
    input: ObsStore,
    values: Vec<f32>,
    normalizer: Normalizer,
    clip: f32,
    output: ObsSpace,
}

impl NormalizeObs {
    pub fn new(inner: Box<dyn Env>, clip: f32, epsilon: f64) -> Self {
        let input = inner.observation_space();
        NormalizeObs {
            inner,
            input: ObsStore::zeros(&input),
            values: vec![0.0; input.len()],
            normalizer: Normalizer::new(NormKind::Observation, input.len(), epsilon),
            clip,
            output: ObsSpace {
                dtype: Dtype::F32,
                ..input
            },
        }
    }

    fn process(&mut self, obs: &mut ObsBuf<'_>) {
        let ObsBuf::F32(out) = obs else { return };
        match &self.input {
            ObsStore::U8(v) => self
                .values
                .iter_mut()
                .zip(v)
                .for_each(|(d, &s)| *d = f32::from(s)),
            ObsStore::F32(v) => self.values.copy_from_slice(v),
        }
        self.normalizer
            .observe(self.values.iter().map(|&v| f64::from(v)));
        out.copy_from_slice(&self.values);
        self.normalizer.normalize(out, self.clip);
    }
}

impl Env for NormalizeObs {
    observation_methods!(process);
    wrapper_snapshot_methods!("normalize-obs", params: [clip], state: [normalizer]);
    fn visit_normalizers(&mut self, visit: &mut dyn FnMut(&mut Normalizer)) {
        self.inner.visit_normalizers(visit);
        visit(&mut self.normalizer);
    }
    forward_to_inner!();
}

/// Divides rewards by the running standard deviation of the discounted return.
pub struct NormalizeReward {
    inner: Box<dyn Env>,
    gamma: f64,
    clip: f32,
    discounted_return: f64,
    normalizer: Normalizer,
}

impl NormalizeReward {
    pub fn new(inner: Box<dyn Env>, gamma: f64, clip: f32, epsilon: f64) -> Self {
        NormalizeReward {
            inner,
            gamma,
            clip,
            discounted_return: 0.0,
            normalizer: Normalizer::new(NormKind::Reward, 1, epsilon),
        }
    }
}

impl NormalizeReward {
    fn step_with(&mut self, action: Action<'_>, obs: ObsOut<'_>) -> Step {
        let mut step = obs.step(&mut *self.inner, action);
        self.discounted_return = self.discounted_return * self.gamma + f64::from(step.reward);
        self.normalizer.observe([self.discounted_return]);
        step.reward = self.normalizer.scale(step.reward, self.clip);
        step
    }
}

impl Env for NormalizeReward {
    fn observation_space(&self) -> ObsSpace {
        self.inner.observation_space()
    }
    fn action_space(&self) -> ActionSpace {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, obs: ObsBuf<'_>) {
        self.discounted_return = 0.0;
        self.inner.reset(seed, obs)
    }
    pass_through_step!();
    wrapper_snapshot_methods!("normalize-reward", params: [gamma, clip], state: [discounted_return, normalizer]);
    fn visit_normalizers(&mut self, visit: &mut dyn FnMut(&mut Normalizer)) {
        self.inner.visit_normalizers(visit);
        visit(&mut self.normalizer);
    }
    forward_to_inner!();
}
