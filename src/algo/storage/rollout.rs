//! Experience for on-policy learners: the T x N rollout buffer on the rank's device, the return
//! and advantage estimators (GAE(lambda), n-step returns), the flat [`Batch`] an update consumes,
//! and the seeded [`MinibatchSampler`].
//!
//! Episode ends come in two kinds and are treated differently (Pardo et al. 2018, "Time Limits in
//! Reinforcement Learning"): at a *terminated* step the MDP ended and nothing is bootstrapped; at
//! a *truncated* step (time limit) the episode was cut short, so the target bootstraps from
//! V(final observation), which the trainer evaluates and passes in because the environment has
//! already reset. In both cases the advantage recursion does not run across the boundary.
//!
//! In a game whose agents take turns, a row acts only on its own turns: between two of them it
//! waits, observing. Its transitions are its turns ([`StepRecord::acting`]); a turn's reward is
//! what the row got from that move until its next turn, and its target bootstraps from V at
//! that next turn (or from the episode's end, if the game ended while it waited). A row still
//! waiting after the rollout's last step has its next turn in the next rollout: V(s_T) is the
//! value of an observation it does not act on, which the critic never learns, so its last turn
//! is not learned from ([`RolloutArrays::unbootstrapped_turns`]) and the turns before it
//! bootstrap from V at that turn. An agent that left its game before the others is the same: its
//! rows do not act until the game restarts.
//!
//! The batch then holds either only the rows that acted ([`InactiveRows::Dropped`]: where their
//! number is the same on every rank, one row a game a step in a turn-based game that one policy
//! plays), or every row with the others weighted zero in the loss ([`InactiveRows::Masked`],
//! [`Batch::active`]: MAPPO's active masks, where their number varies, so every rank's batch
//! keeps its size).

use anyhow::{Context, Result, bail, ensure};
use tch::{Device, Kind, Tensor};

use crate::algo::actions::ActionKind;

/// One environment step for all N environments, as the trainer records it.
#[derive(Debug)]
pub struct StepRecord<'a> {
    /// `[N, ...obs_shape]`: the observations the actions were chosen from.
    pub obs: &'a Tensor,
    /// `[N]` integer actions (discrete) or `[N, d]` floats (box of d).
    pub actions: &'a Tensor,
    /// `[N]` log pi_old(a|s) at acting time.
    pub log_probs: &'a Tensor,
    /// `[N]` V_old(s) at acting time.
    pub values: &'a Tensor,
    /// `[N]` rewards of this step.
    pub rewards: &'a Tensor,
    /// `[N]` bool or 0/1: the episode reached a terminal state at this step.
    pub terminated: &'a Tensor,
    /// `[N]` bool or 0/1: the episode was cut off (time limit) at this step.
    pub truncated: &'a Tensor,
    /// `[N]` V(final observation) for the truncated environments (other entries are ignored).
    /// Required whenever any environment is truncated-and-not-terminated at this step.
    pub truncation_values: Option<&'a Tensor>,
    /// `[N]` in a game that takes turns, which rows acted (chose the action that was played);
    /// `None` when every row acted.
    pub acting: Option<&'a [bool]>,
}

/// Per-step, per-environment arrays in step-major order (index `t * num_envs + env`), the input
/// of the pure estimators. Flags are true when nonzero.
#[derive(Debug, Clone, Copy)]
pub struct RolloutArrays<'a> {
    pub num_envs: usize,
    pub rewards: &'a [f32],
    pub values: &'a [f32],
    pub terminated: &'a [f32],
    pub truncated: &'a [f32],
    pub truncation_values: &'a [f32],
    /// `[N]` V(s_T): the observation after the last recorded step.
    pub last_values: &'a [f32],
    /// Which steps were a row's own turns, in a game that takes turns; `None`: every step.
    pub acting: Option<&'a [bool]>,
    /// `[N]` which rows act on s_T, where `acting` is given; `None`: every row.
    pub last_acting: Option<&'a [bool]>,
}

impl RolloutArrays<'_> {
    fn num_steps(&self) -> Result<usize> {
        ensure!(self.num_envs > 0, "rollout: num_envs must be positive");
        let len = self.rewards.len();
        ensure!(
            len.is_multiple_of(self.num_envs),
            "rollout: {len} rewards is not a whole number of steps of {} environments",
            self.num_envs
        );
        for (name, other) in [
            ("values", self.values.len()),
            ("terminated", self.terminated.len()),
            ("truncated", self.truncated.len()),
            ("truncation_values", self.truncation_values.len()),
        ] {
            ensure!(
                other == len,
                "rollout: {name} has {other} entries, rewards has {len}"
            );
        }
        if let Some(acting) = self.acting {
            ensure!(
                acting.len() == len,
                "rollout: acting has {} entries, rewards has {len}",
                acting.len()
            );
        }
        ensure!(
            self.last_values.len() == self.num_envs,
            "rollout: last_values has {} entries for {} environments",
            self.last_values.len(),
            self.num_envs
        );
        if let Some(last_acting) = self.last_acting {
            ensure!(
                last_acting.len() == self.num_envs,
                "rollout: last_acting has {} entries for {} environments",
                last_acting.len(),
                self.num_envs
            );
        }
        Ok(len / self.num_envs)
    }

    /// For each row, the step index of its turn that has no next turn's value to bootstrap
    /// from: its last turn in the rollout, where the row waits at s_T (its next turn comes in
    /// the next rollout, and V(s_T) is the value of an observation it does not act on) and its
    /// episode did not end since. The estimators leave that turn unlearned and bootstrap the
    /// turns before it from V at it; the batch weighs it zero.
    pub fn unbootstrapped_turns(&self) -> Result<Vec<Option<usize>>> {
        let num_steps = self.num_steps()?;
        let n = self.num_envs;
        let (Some(_), Some(last_acting)) = (self.acting, self.last_acting) else {
            return Ok(vec![None; n]);
        };
        let last_turn = |env: usize| {
            for t in (0..num_steps).rev() {
                let i = t * n + env;
                if !self.bootstrap(t, env, num_steps).1 {
                    return None;
                }
                if self.acts(i) {
                    return Some(i);
                }
            }
            None
        };
        Ok((0..n)
            .map(|env| match last_acting[env] {
                true => None,
                false => last_turn(env),
            })
            .collect())
    }

    /// Whether step index `i` was its row's turn.
    fn acts(&self, i: usize) -> bool {
        self.acting.is_none_or(|acting| acting[i])
    }

    /// The value the target at step index `i` (step `t`) bootstraps from, and whether the
    /// episode continues into step t+1.
    fn bootstrap(&self, t: usize, env: usize, num_steps: usize) -> (f64, bool) {
        let i = t * self.num_envs + env;
        if self.terminated[i] != 0.0 {
            (0.0, false)
        } else if self.truncated[i] != 0.0 {
            (self.truncation_values[i] as f64, false)
        } else if t + 1 == num_steps {
            (self.last_values[env] as f64, true)
        } else {
            (self.values[i + self.num_envs] as f64, true)
        }
    }
}

/// What a row's steps between two of its turns add up to, walking backwards (a game that takes
/// turns; with every row acting on every step it stays empty): the rewards the row got while
/// it waited, and, where its episode ended while it waited, the value that end bootstraps from.
#[derive(Default)]
struct Waiting {
    reward: f64,
    end: Option<f64>,
}

impl Waiting {
    /// A step the row waited through, with its reward and `bootstrap`'s answer for it.
    fn wait(&mut self, reward: f32, (bootstrap, continues): (f64, bool)) {
        if continues {
            self.reward += reward as f64;
        } else {
            // The episode ended here: what comes after belongs to the next one.
            *self = Waiting {
                reward: reward as f64,
                end: Some(bootstrap),
            };
        }
    }

    /// A turn: its reward with what the row got until its next turn, the value its target
    /// bootstraps from, and whether the episode goes on to that next turn (whose value is
    /// `next`). Empties the wait.
    fn turn(
        &mut self,
        reward: f32,
        (bootstrap, continues): (f64, bool),
        next: f64,
    ) -> (f64, f64, bool) {
        let waited = std::mem::take(self);
        match (continues, waited.end) {
            (false, _) => (reward as f64, bootstrap, false),
            (true, Some(end)) => (reward as f64 + waited.reward, end, false),
            (true, None) => (reward as f64 + waited.reward, next, true),
        }
    }
}

/// GAE(lambda) (Schulman et al. 2016, eq. 16), returning `(advantages, returns)` with
/// `returns = advantages + values` (the lambda-return the value function regresses on).
///
///   delta_t = r_t + gamma * V_boot(t) - V(s_t)
///   A_t     = delta_t + gamma * lambda * A_{t+1}   (only while the episode continues)
///
/// In a game that takes turns, t and t+1 are a row's consecutive turns and r_t sums what it got
/// in between ([`Waiting`]); the steps it waited through get zeros.
pub fn generalized_advantages(
    arrays: &RolloutArrays,
    gamma: f64,
    lambda: f64,
) -> Result<(Vec<f32>, Vec<f32>)> {
    check_discount(gamma, lambda)?;
    let num_steps = arrays.num_steps()?;
    let n = arrays.num_envs;
    let unbootstrapped = arrays.unbootstrapped_turns()?;
    let mut advantages = vec![0f32; arrays.rewards.len()];
    for (env, &unlearned) in unbootstrapped.iter().enumerate() {
        let (mut next_value, mut next_advantage) = (arrays.last_values[env] as f64, 0f64);
        let mut waiting = Waiting::default();
        for t in (0..num_steps).rev() {
            let i = t * n + env;
            let ends = arrays.bootstrap(t, env, num_steps);
            if !arrays.acts(i) {
                waiting.wait(arrays.rewards[i], ends);
                continue;
            }
            let value = arrays.values[i] as f64;
            if unlearned == Some(i) {
                // Unlearned (advantage 0, target its own value): the turns before bootstrap here.
                (waiting, next_value, next_advantage) = (Waiting::default(), value, 0.0);
                continue;
            }
            let (reward, bootstrap, continues) = waiting.turn(arrays.rewards[i], ends, next_value);
            let delta = reward + gamma * bootstrap - value;
            let carried = if continues {
                gamma * lambda * next_advantage
            } else {
                0.0
            };
            next_advantage = delta + carried;
            advantages[i] = next_advantage as f32;
            next_value = value;
        }
    }
    let returns = advantages
        .iter()
        .zip(arrays.values)
        .map(|(a, v)| a + v)
        .collect();
    Ok((advantages, returns))
}

/// n-step discounted returns as in A3C/A2C (Mnih et al. 2016, Algorithm S3): each step's
/// return sums the rewards up to the end of the rollout and bootstraps from V(s_T), or from
/// V(final observation) at a truncation, or from nothing at a termination.
///
///   R_t = r_t + gamma * R_{t+1}        (R_T = V(s_T))
///
/// In a game that takes turns, t and t+1 are a row's consecutive turns, as for
/// [`generalized_advantages`]; the steps it waited through get zeros.
pub fn n_step_returns(arrays: &RolloutArrays, gamma: f64) -> Result<Vec<f32>> {
    check_discount(gamma, 1.0)?;
    let num_steps = arrays.num_steps()?;
    let n = arrays.num_envs;
    let unbootstrapped = arrays.unbootstrapped_turns()?;
    let mut returns = vec![0f32; arrays.rewards.len()];
    for (env, &unlearned) in unbootstrapped.iter().enumerate() {
        let mut next_return = arrays.last_values[env] as f64;
        let mut waiting = Waiting::default();
        for t in (0..num_steps).rev() {
            let i = t * n + env;
            let ends = arrays.bootstrap(t, env, num_steps);
            if !arrays.acts(i) {
                waiting.wait(arrays.rewards[i], ends);
                continue;
            }
            if unlearned == Some(i) {
                // Unlearned (its return is its own value): the turns before bootstrap here.
                next_return = arrays.values[i] as f64;
                returns[i] = next_return as f32;
                waiting = Waiting::default();
                continue;
            }
            let (reward, bootstrap, continues) = waiting.turn(arrays.rewards[i], ends, next_return);
            let tail = if continues { next_return } else { bootstrap };
            next_return = reward + gamma * tail;
            returns[i] = next_return as f32;
        }
    }
    Ok(returns)
}

/// V-trace's truncation levels (Espeholt et al. 2018, "IMPALA", section 4.1): rho-bar bounds the
/// importance weights of the temporal differences and of the policy gradient, c-bar the traces.
#[derive(Debug, Clone, Copy)]
pub struct VtraceClips {
    pub rho: f64,
    pub c: f64,
}

/// V-trace targets and policy-gradient advantages (Espeholt et al. 2018, eq. 1, its recursive
/// form in Remark 1, and section 4.2), returning `(advantages, targets)`. `arrays` holds the
/// learner's values V(x_t) and V(x_T), `log_ratios` log pi(a_t|x_t) - log mu(a_t|x_t) of the
/// learner's policy pi against the behaviour policy mu that acted:
///
///   rho_t = min(rho-bar, pi/mu),   c_t = lambda min(c-bar, pi/mu)
///   delta_t = rho_t (r_t + gamma V_boot(t) - V(x_t))
///   v_t - V(x_t) = delta_t + gamma c_t (v_{t+1} - V(x_{t+1}))   (only while the episode continues)
///   A_t = rho_t (r_t + gamma v_{t+1} - V(x_t))                  (v_{t+1} = V_boot(t) at an end)
///
/// With pi = mu and both levels at least 1, the targets are GAE(lambda)'s returns.
pub fn vtrace(
    arrays: &RolloutArrays,
    log_ratios: &[f32],
    gamma: f64,
    lambda: f64,
    clips: VtraceClips,
) -> Result<(Vec<f32>, Vec<f32>)> {
    check_discount(gamma, lambda)?;
    let num_steps = arrays.num_steps()?;
    ensure!(
        arrays.acting.is_none(),
        "rollout: V-trace needs every row to act on every step, not a game that takes turns \
         or whose agents leave before it ends"
    );
    ensure!(
        log_ratios.len() == arrays.rewards.len(),
        "rollout: {} log-ratios for {} steps",
        log_ratios.len(),
        arrays.rewards.len()
    );
    let n = arrays.num_envs;
    let mut advantages = vec![0f32; arrays.rewards.len()];
    let mut targets = vec![0f32; arrays.rewards.len()];
    for env in 0..n {
        // v_{t+1} - V(x_{t+1}); zero after the last step, where v_T = V(x_T).
        let mut next_correction = 0f64;
        for t in (0..num_steps).rev() {
            let i = t * n + env;
            let ratio = (log_ratios[i] as f64).exp();
            let (rho, c) = (ratio.min(clips.rho), lambda * ratio.min(clips.c));
            let (bootstrap, continues) = arrays.bootstrap(t, env, num_steps);
            let carried = if continues { next_correction } else { 0.0 };
            let (reward, value) = (arrays.rewards[i] as f64, arrays.values[i] as f64);
            let delta = rho * (reward + gamma * bootstrap - value);
            let correction = delta + gamma * c * carried;
            targets[i] = (value + correction) as f32;
            advantages[i] = (rho * (reward + gamma * (bootstrap + carried) - value)) as f32;
            next_correction = correction;
        }
    }
    Ok((advantages, targets))
}

fn check_discount(gamma: f64, lambda: f64) -> Result<()> {
    ensure!(
        (0.0..=1.0).contains(&gamma),
        "rollout: gamma must be in [0, 1], got {gamma}"
    );
    ensure!(
        (0.0..=1.0).contains(&lambda),
        "rollout: GAE lambda must be in [0, 1], got {lambda}"
    );
    Ok(())
}

/// A flat batch of `B` samples for an update. Row `t * N + env` for a flattened rollout.
#[derive(Debug)]
pub struct Batch {
    /// `[B, ...obs_shape]`
    pub obs: Tensor,
    /// `[B]` integer actions (discrete) or `[B, d]` f32 (box of d)
    pub actions: Tensor,
    /// `[B]` log pi_old(a|s)
    pub log_probs: Tensor,
    /// `[B]` V_old(s)
    pub values: Tensor,
    /// `[B]` advantage estimates (not normalised; the learner normalises over the global batch)
    pub advantages: Tensor,
    /// `[B]` value targets
    pub returns: Tensor,
    /// For a recurrent policy: what recomputing its states over the rows needs.
    pub sequences: Option<Sequences>,
    /// `[B]` 1 for the rows that are transitions of their own, 0 for rows that did not act
    /// (a turn waited through, an agent gone from its game), which the losses weight zero;
    /// `None`: every row acted.
    pub active: Option<Tensor>,
}

/// What a rollout's batch does with the rows that did not act ([`StepRecord::acting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InactiveRows {
    /// Leaves them out: for batches whose rows that acted are as many on every rank.
    #[default]
    Dropped,
    /// Keeps them, marked in [`Batch::active`], so the batch has the same size on every rank.
    Masked,
}

/// A batch's rows as whole environment sequences (row `t * envs + env`), for a recurrent policy
/// whose update recomputes its states from the rollout's start, truncated there.
#[derive(Debug)]
pub struct Sequences {
    /// `[B]` 1 where an episode starts at that row's observation (its state is zeroed first).
    pub starts: Tensor,
    /// `[envs, width]`: each environment's state before the rollout's first step.
    pub initial_state: Tensor,
}

impl Sequences {
    /// Environments in the batch.
    pub fn num_envs(&self) -> i64 {
        self.initial_state.size()[0]
    }
}

impl Batch {
    /// Checks that all fields agree on the batch size and are on one device.
    pub fn new(
        obs: Tensor,
        actions: Tensor,
        log_probs: Tensor,
        values: Tensor,
        advantages: Tensor,
        returns: Tensor,
    ) -> Result<Batch> {
        let obs_shape = obs.size();
        ensure!(
            !obs_shape.is_empty(),
            "batch: observations need a batch dimension, got a scalar"
        );
        let b = obs_shape[0];
        ensure!(b > 0, "batch: the batch is empty");
        let device = obs.device();
        let action_shape = actions.size();
        ensure!(
            matches!(action_shape.as_slice(), [rows] | [rows, _] if *rows == b),
            "batch: actions have shape {action_shape:?}, expected [{b}] or [{b}, dim]"
        );
        ensure!(
            actions.device() == device,
            "batch: actions are on {:?} but observations are on {device:?}",
            actions.device()
        );
        for (name, t) in [
            ("log_probs", &log_probs),
            ("values", &values),
            ("advantages", &advantages),
            ("returns", &returns),
        ] {
            ensure!(
                t.size() == [b],
                "batch: {name} has shape {:?}, expected [{b}]",
                t.size()
            );
            ensure!(
                t.device() == device,
                "batch: {name} is on {:?} but observations are on {device:?}",
                t.device()
            );
        }
        Ok(Batch {
            obs,
            actions,
            log_probs,
            values,
            advantages,
            returns,
            sequences: None,
            active: None,
        })
    }

    pub fn len(&self) -> i64 {
        self.obs.size()[0]
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn device(&self) -> Device {
        self.obs.device()
    }

    /// The same rows, sharing storage (no copy).
    pub fn select_all(&self) -> Batch {
        Batch {
            obs: self.obs.shallow_clone(),
            actions: self.actions.shallow_clone(),
            log_probs: self.log_probs.shallow_clone(),
            values: self.values.shallow_clone(),
            advantages: self.advantages.shallow_clone(),
            returns: self.returns.shallow_clone(),
            sequences: self.sequences.as_ref().map(|s| Sequences {
                starts: s.starts.shallow_clone(),
                initial_state: s.initial_state.shallow_clone(),
            }),
            active: self.active.as_ref().map(Tensor::shallow_clone),
        }
    }

    /// The row indices `[T * k]` (step-major) of the environments `envs` `[k]` of a sequence
    /// batch.
    pub fn rows_of_envs(&self, envs: &Tensor) -> Result<Tensor> {
        let sequences = self
            .sequences
            .as_ref()
            .context("batch: only a batch of environment sequences selects environments")?;
        let n = sequences.num_envs();
        let steps = self.len() / n;
        let firsts = Tensor::arange(steps, (Kind::Int64, self.device())) * n;
        Ok((firsts.unsqueeze(1) + envs.unsqueeze(0)).reshape([-1]))
    }

    /// The whole sequences of environments `envs` `[k]` (int64 on the batch's device), their
    /// rows step-major, with those environments' initial states.
    pub fn select_envs(&self, envs: &Tensor) -> Result<Batch> {
        let rows = self.rows_of_envs(envs)?;
        let mut picked = self.select(&rows);
        let sequences = self.sequences.as_ref().context("batch: no sequences")?;
        picked.sequences = Some(Sequences {
            starts: sequences.starts.index_select(0, &rows),
            initial_state: sequences.initial_state.index_select(0, envs),
        });
        Ok(picked)
    }

    /// The rows `indices` (an integer tensor on the batch's device).
    pub fn select(&self, indices: &Tensor) -> Batch {
        let pick = |t: &Tensor| t.index_select(0, indices);
        Batch {
            obs: pick(&self.obs),
            actions: pick(&self.actions),
            log_probs: pick(&self.log_probs),
            values: pick(&self.values),
            advantages: pick(&self.advantages),
            returns: pick(&self.returns),
            sequences: None,
            active: self.active.as_ref().map(pick),
        }
    }

    /// Rows `start .. start + len` (shares storage).
    pub fn narrow(&self, start: i64, len: i64) -> Result<Batch> {
        ensure!(
            start >= 0 && len > 0 && start + len <= self.len(),
            "batch: rows {start}..{} are outside a batch of {}",
            start + len,
            self.len()
        );
        let cut = |t: &Tensor| t.narrow(0, start, len);
        Ok(Batch {
            obs: cut(&self.obs),
            actions: cut(&self.actions),
            log_probs: cut(&self.log_probs),
            values: cut(&self.values),
            advantages: cut(&self.advantages),
            returns: cut(&self.returns),
            sequences: None,
            active: self.active.as_ref().map(cut),
        })
    }
}

/// Rollout storage for `num_steps` x `num_envs` transitions on one device.
#[derive(Debug)]
pub struct RolloutBuffer {
    num_steps: i64,
    num_envs: i64,
    obs_shape: Vec<i64>,
    action_kind: ActionKind,
    obs: Tensor,
    /// `[T, N]` int64 (discrete) or `[T, N, d]` f32 (box of d).
    actions: Tensor,
    log_probs: Tensor,
    values: Tensor,
    rewards: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    truncation_values: Tensor,
    /// Per step: whether truncation values were supplied.
    has_truncation_values: Vec<bool>,
    /// `[T * N]` which rows acted at each step ([`StepRecord::acting`]); `None` while every
    /// row acted.
    acting: Option<Vec<bool>>,
    /// What the batch does with the rows that did not act.
    inactive: InactiveRows,
    /// `[T, N]` 1 where an episode starts at that step's observation (recurrent policies).
    starts: Tensor,
    /// `[N, width]` the recurrent state before the first step; `None` for a feed-forward policy.
    initial_state: Option<Tensor>,
    /// `[N, ...obs_shape]` the observations after the last step, s_T, and `[N]` whether each
    /// starts an episode: what a learner evaluates its own V(s_T) on (V-trace).
    bootstrap_obs: Tensor,
    bootstrap_starts: Tensor,
    /// `[N]` which rows act on s_T, in a game that takes turns ([`RolloutArrays::last_acting`]).
    bootstrap_acting: Option<Vec<bool>>,
    filled: i64,
}

/// Writes `src` (`[N, ...]`) into row `t` of `storage` (`[T, N, ...]`). When both are contiguous CPU
/// tensors of one type (the rollout's usual case) that is a plain memory copy: as a tensor copy
/// it would be two dispatched operations, for each of seven fields, every step.
fn write_row(storage: &Tensor, t: i64, src: &Tensor) {
    let n = src.numel();
    let plain = storage.device() == Device::Cpu
        && src.device() == Device::Cpu
        && storage.kind() == src.kind()
        && storage.is_contiguous()
        && src.is_contiguous()
        && storage.numel() == storage.size()[0] as usize * n;
    if plain {
        let bytes = n * src.kind().elt_size_in_bytes();
        // SAFETY: `storage` is a contiguous CPU tensor whose rows hold `n` elements of `src`'s
        // type, and row `t` exists (the caller checked `t < num_steps`); `src` is a contiguous
        // CPU tensor of `n` such elements. `copy` tolerates overlap.
        unsafe {
            std::ptr::copy(
                src.data_ptr() as *const u8,
                (storage.data_ptr() as *mut u8).add(t as usize * bytes),
                bytes,
            );
        }
    } else {
        storage.get(t).copy_(src);
    }
}

fn expect_shape(what: &str, step: i64, t: &Tensor, shape: &[i64]) -> Result<()> {
    ensure!(
        t.size() == shape,
        "rollout step {step}: {what} has shape {:?}, expected {shape:?}",
        t.size()
    );
    Ok(())
}

impl RolloutBuffer {
    /// Storage with float observations for actions of `action_kind`.
    pub fn new(
        num_steps: i64,
        num_envs: i64,
        obs_shape: &[i64],
        action_kind: ActionKind,
        device: Device,
    ) -> Result<Self> {
        Self::with_obs_kind(
            num_steps,
            num_envs,
            obs_shape,
            Kind::Float,
            action_kind,
            device,
        )
    }

    /// Storage with observations kept as `obs_kind`: `Kind::Uint8` holds raw 0..255 pixels in a
    /// quarter of the memory (the network converts and scales them); observations pushed as
    /// floats are cast on the way in.
    pub fn with_obs_kind(
        num_steps: i64,
        num_envs: i64,
        obs_shape: &[i64],
        obs_kind: Kind,
        action_kind: ActionKind,
        device: Device,
    ) -> Result<Self> {
        ensure!(
            matches!(
                obs_kind,
                Kind::Float | Kind::Uint8 | Kind::Half | Kind::BFloat16
            ),
            "rollout buffer: observations can be stored as float, half, bfloat16 or uint8, not {obs_kind:?}"
        );
        ensure!(
            num_steps > 0,
            "rollout buffer: num_steps must be positive, got {num_steps}"
        );
        ensure!(
            num_envs > 0,
            "rollout buffer: num_envs must be positive, got {num_envs}"
        );
        ensure!(
            obs_shape.iter().all(|&d| d > 0),
            "rollout buffer: observation shape {obs_shape:?} has a non-positive dimension"
        );
        ensure!(
            action_kind.values_per_action() > 0,
            "rollout buffer: box actions need at least one value"
        );
        let mut action_shape = vec![num_steps];
        action_shape.extend(action_kind.shape(num_envs));
        let mut full_obs = vec![num_steps, num_envs];
        full_obs.extend_from_slice(obs_shape);
        let float = |shape: &[i64]| Tensor::zeros(shape, (Kind::Float, device));
        let tn = [num_steps, num_envs];
        let mut row_obs = vec![num_envs];
        row_obs.extend_from_slice(obs_shape);
        Ok(RolloutBuffer {
            num_steps,
            num_envs,
            obs_shape: obs_shape.to_vec(),
            action_kind,
            obs: Tensor::zeros(&full_obs, (obs_kind, device)),
            actions: Tensor::zeros(&action_shape, (action_kind.tensor_kind(), device)),
            log_probs: float(&tn),
            values: float(&tn),
            rewards: float(&tn),
            terminated: float(&tn),
            truncated: float(&tn),
            truncation_values: float(&tn),
            has_truncation_values: vec![false; num_steps as usize],
            acting: None,
            inactive: InactiveRows::default(),
            starts: float(&tn),
            initial_state: None,
            bootstrap_obs: Tensor::zeros(&row_obs, (obs_kind, device)),
            bootstrap_starts: float(&[num_envs]),
            bootstrap_acting: None,
            filled: 0,
        })
    }

    pub fn num_steps(&self) -> i64 {
        self.num_steps
    }
    pub fn device(&self) -> Device {
        self.obs.device()
    }
    pub fn num_envs(&self) -> i64 {
        self.num_envs
    }
    pub fn action_kind(&self) -> ActionKind {
        self.action_kind
    }
    /// Steps recorded since the last reset.
    pub fn len(&self) -> i64 {
        self.filled
    }
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }
    pub fn is_full(&self) -> bool {
        self.filled == self.num_steps
    }
    /// Starts a new rollout (storage is reused and overwritten).
    pub fn reset(&mut self) {
        self.filled = 0;
        self.has_truncation_values.fill(false);
        self.acting = None;
        self.bootstrap_acting = None;
    }

    /// What the batch does with the rows that did not act: the learner's choice, made once
    /// (it must be the same on every rank).
    pub fn set_inactive_rows(&mut self, inactive: InactiveRows) {
        self.inactive = inactive;
    }

    /// Makes the rollout a recurrent one: `state` `[N, width]` is each environment's state
    /// before its first step (kept, not copied: the caller passes a tensor it no longer
    /// changes).
    pub fn set_initial_state(&mut self, state: &Tensor) -> Result<()> {
        ensure!(
            state.dim() == 2 && state.size()[0] == self.num_envs,
            "rollout buffer: an initial state of shape {:?} is not one row per environment ({})",
            state.size(),
            self.num_envs
        );
        self.initial_state = Some(state.shallow_clone());
        Ok(())
    }

    /// Records the observations after the rollout's last step (`[N, ...obs_shape]`), for a
    /// recurrent policy which of them start an episode (`[N]`, 1 or 0), and in a game that
    /// takes turns which rows act on them (`[N]`).
    pub fn set_bootstrap(
        &mut self,
        obs: &Tensor,
        starts: Option<&Tensor>,
        acting: Option<&[bool]>,
    ) -> Result<()> {
        expect_shape(
            "bootstrap obs",
            self.filled,
            obs,
            &self.bootstrap_obs.size(),
        )?;
        if let Some(acting) = acting {
            ensure!(
                acting.len() == self.num_envs as usize,
                "rollout buffer: {} rows act on s_T, expected one flag for each of {}",
                acting.len(),
                self.num_envs
            );
        }
        self.bootstrap_acting = acting.map(<[bool]>::to_vec);
        tch::no_grad(|| {
            self.bootstrap_obs.copy_(obs);
            match starts {
                Some(starts) => self.bootstrap_starts.copy_(&starts.to_kind(Kind::Float)),
                None => {
                    let _ = self.bootstrap_starts.fill_(0.0);
                }
            }
        });
        Ok(())
    }

    /// Rows `first..first + count` of s_T (`[count, ...obs_shape]`), to fill in place: in ready
    /// order each group records its s_T when it takes the rollout's last step. Those
    /// environments start no episode there as far as the buffer says (ready order collects
    /// for feed-forward policies only, which read no episode starts).
    pub fn bootstrap_rows(&mut self, first: i64, count: i64) -> Tensor {
        let _ = self.bootstrap_starts.narrow(0, first, count).fill_(0.0);
        self.bootstrap_obs.narrow(0, first, count)
    }

    /// What [`RolloutBuffer::set_bootstrap`] recorded: s_T and its episode starts.
    pub fn bootstrap(&self) -> (&Tensor, &Tensor) {
        (&self.bootstrap_obs, &self.bootstrap_starts)
    }

    /// Records which environments start an episode at the next pushed step's observation
    /// (`[N]`, 1 or 0).
    pub fn set_starts(&mut self, starts: &Tensor) -> Result<()> {
        let t = self.filled;
        ensure!(
            t < self.num_steps,
            "rollout buffer: already holds {} steps; reset it before recording more",
            self.num_steps
        );
        expect_shape("starts", t, starts, &[self.num_envs])?;
        tch::no_grad(|| write_row(&self.starts, t, &starts.to_kind(Kind::Float)));
        Ok(())
    }

    /// The storage row the next [`RolloutBuffer::push`] fills with observations (a view,
    /// `[num_envs, ...obs_shape]`): write the observations here and act on this tensor, and the
    /// push has nothing to copy for them.
    pub fn next_obs(&self) -> Result<Tensor> {
        ensure!(
            self.filled < self.num_steps,
            "rollout buffer: already holds {} steps; reset it before recording more",
            self.num_steps
        );
        Ok(self.obs.get(self.filled))
    }

    /// Row `t` of the observation storage `[N, ...obs_shape]`, to fill in place: a pipelined
    /// rollout writes a group's next observations into row `t + 1` before step `t` is pushed.
    pub fn obs_row(&self, t: i64) -> Result<Tensor> {
        ensure!(
            (0..self.num_steps).contains(&t),
            "rollout buffer: no observation row {t} in a rollout of {} steps",
            self.num_steps
        );
        Ok(self.obs.get(t))
    }

    /// Records one step for all environments.
    pub fn push(&mut self, step: &StepRecord) -> Result<()> {
        let t = self.filled;
        ensure!(
            t < self.num_steps,
            "rollout buffer: already holds {} steps; reset it before recording more",
            self.num_steps
        );
        let n = self.num_envs;
        let mut obs_shape = vec![n];
        obs_shape.extend_from_slice(&self.obs_shape);
        expect_shape("obs", t, step.obs, &obs_shape)?;
        self.check_actions(t, step.actions)?;
        for (what, tensor) in [
            ("log_probs", step.log_probs),
            ("values", step.values),
            ("rewards", step.rewards),
            ("terminated", step.terminated),
            ("truncated", step.truncated),
        ] {
            expect_shape(what, t, tensor, &[n])?;
        }
        if let Some(v) = step.truncation_values {
            expect_shape("truncation_values", t, v, &[n])?;
        }
        self.record_acting(t, step.acting)?;
        tch::no_grad(|| {
            // Observations written in place through `next_obs` are already there. (The storage
            // is contiguous, so row t starts t rows in.)
            let obs_row_bytes = step.obs.numel() * self.obs.kind().elt_size_in_bytes();
            if self.obs.data_ptr() as usize + t as usize * obs_row_bytes
                != step.obs.data_ptr() as usize
            {
                self.obs.get(t).copy_(step.obs);
            }
            write_row(&self.actions, t, step.actions);
            write_row(&self.log_probs, t, step.log_probs);
            write_row(&self.values, t, step.values);
            write_row(&self.rewards, t, step.rewards);
            write_row(&self.terminated, t, step.terminated);
            write_row(&self.truncated, t, step.truncated);
            match step.truncation_values {
                Some(v) => write_row(&self.truncation_values, t, v),
                None => {
                    let _ = self.truncation_values.get(t).zero_();
                }
            }
        });
        self.has_truncation_values[t as usize] = step.truncation_values.is_some();
        self.filled += 1;
        Ok(())
    }

    /// Row t of [`RolloutBuffer::acting`], made on the first step that says which rows acted
    /// (every row acting on the steps that do not).
    fn record_acting(&mut self, t: i64, acting: Option<&[bool]>) -> Result<()> {
        let Some(given) = acting else {
            return Ok(());
        };
        let n = self.num_envs as usize;
        ensure!(
            given.len() == n,
            "rollout step {t}: acting has {} entries, expected {n}",
            given.len()
        );
        let steps = self.num_steps as usize;
        let all = self.acting.get_or_insert_with(|| vec![true; steps * n]);
        all[t as usize * n..(t as usize + 1) * n].copy_from_slice(given);
        Ok(())
    }

    /// Actions must be of the buffer's kind: a float tensor cast into int64 storage (or the
    /// reverse) would silently round a policy's choices.
    fn check_actions(&self, t: i64, actions: &Tensor) -> Result<()> {
        let expected = self.action_kind.shape(self.num_envs);
        ensure!(
            actions.size() == expected,
            "rollout step {t}: actions have shape {:?}, expected {expected:?} for {}",
            actions.size(),
            self.action_kind
        );
        let floats = actions.is_floating_point();
        match self.action_kind {
            ActionKind::Discrete | ActionKind::MultiDiscrete { .. } => ensure!(
                !floats,
                "rollout step {t}: {} must be integers, got {:?}",
                self.action_kind,
                actions.kind()
            ),
            ActionKind::Box { .. } => ensure!(
                floats,
                "rollout step {t}: box actions must be floats, got {:?}",
                actions.kind()
            ),
        }
        Ok(())
    }

    fn host_arrays(&self, last_values: &Tensor) -> Result<HostArrays> {
        ensure!(
            self.is_full(),
            "rollout buffer: holds {} of {} steps; returns need the whole rollout",
            self.filled,
            self.num_steps
        );
        ensure!(
            last_values.size() == [self.num_envs],
            "rollout: last_values has shape {:?}, expected [{}]",
            last_values.size(),
            self.num_envs
        );
        let arrays = HostArrays {
            rewards: host_floats(&self.rewards)?,
            values: host_floats(&self.values)?,
            terminated: host_floats(&self.terminated)?,
            truncated: host_floats(&self.truncated)?,
            truncation_values: host_floats(&self.truncation_values)?,
            last_values: host_floats(last_values)?,
            acting: self.acting.clone(),
            last_acting: self.bootstrap_acting.clone(),
        };
        let n = self.num_envs as usize;
        for (t, supplied) in self.has_truncation_values.iter().enumerate() {
            if *supplied {
                continue;
            }
            let row = t * n..(t + 1) * n;
            if let Some(env) = row
                .clone()
                .find(|&i| arrays.truncated[i] != 0.0 && arrays.terminated[i] == 0.0)
            {
                bail!(
                    "rollout step {t}: environment {} was truncated but no truncation_values were \
                     recorded; pass V(final observation) so the return can bootstrap",
                    env - t * n
                );
            }
        }
        Ok(arrays)
    }

    fn device_tensor(&self, host: &[f32]) -> Tensor {
        Tensor::from_slice(host)
            .to_device(self.obs.device())
            .reshape([-1])
    }

    /// The batch of the rollout's rows with these advantages and returns; `unlearned`, per
    /// row, a turn that weighs zero ([`RolloutArrays::unbootstrapped_turns`]).
    fn flat_batch(
        &self,
        advantages: &[f32],
        returns: &[f32],
        unlearned: &[Option<usize>],
    ) -> Result<Batch> {
        let b = self.num_steps * self.num_envs;
        let mut obs_shape = vec![b];
        obs_shape.extend_from_slice(&self.obs_shape);
        let mut batch = Batch::new(
            self.obs.reshape(&obs_shape),
            self.actions.reshape(self.action_kind.shape(b)),
            self.log_probs.reshape([b]),
            self.values.reshape([b]),
            self.device_tensor(advantages),
            self.device_tensor(returns),
        )?;
        batch.sequences = self.initial_state.as_ref().map(|state| Sequences {
            starts: self.starts.reshape([b]),
            initial_state: state.shallow_clone(),
        });
        let Some(acting) = &self.acting else {
            return Ok(batch);
        };
        let mut learned = acting.clone();
        for &i in unlearned.iter().flatten() {
            learned[i] = false;
        }
        let weight = |i: usize| f32::from(u8::from(learned[i]));
        if self.inactive == InactiveRows::Masked {
            let weights: Vec<f32> = (0..learned.len()).map(weight).collect();
            batch.active = Some(self.device_tensor(&weights));
            return Ok(batch);
        }
        // The batch is the rows' own turns.
        ensure!(
            batch.sequences.is_none(),
            "rollout: a recurrent policy's sequences cannot leave out the steps a row waited through"
        );
        let turns: Vec<i64> = (0..acting.len() as i64)
            .filter(|&i| acting[i as usize])
            .collect();
        ensure!(
            !turns.is_empty(),
            "rollout: no row took a turn in this rollout"
        );
        let mut batch = batch.select(&Tensor::from_slice(&turns).to_device(self.obs.device()));
        if unlearned.iter().any(Option::is_some) {
            let weights: Vec<f32> = turns.iter().map(|&i| weight(i as usize)).collect();
            batch.active = Some(self.device_tensor(&weights));
        }
        Ok(batch)
    }

    /// Everything the buffer holds, by name, for a checkpoint of a batch in flight
    /// ([`RolloutBuffer::restore`] reads it back into a buffer of the same shape).
    pub fn contents(&self) -> Vec<(String, Tensor)> {
        let flags: Vec<i64> = self
            .has_truncation_values
            .iter()
            .map(|&b| b as i64)
            .collect();
        let mut named = vec![
            ("obs", self.obs.shallow_clone()),
            ("actions", self.actions.shallow_clone()),
            ("log_probs", self.log_probs.shallow_clone()),
            ("values", self.values.shallow_clone()),
            ("rewards", self.rewards.shallow_clone()),
            ("terminated", self.terminated.shallow_clone()),
            ("truncated", self.truncated.shallow_clone()),
            ("truncation_values", self.truncation_values.shallow_clone()),
            ("has_truncation_values", Tensor::from_slice(&flags)),
            ("starts", self.starts.shallow_clone()),
            ("bootstrap_obs", self.bootstrap_obs.shallow_clone()),
            ("bootstrap_starts", self.bootstrap_starts.shallow_clone()),
            ("filled", Tensor::from_slice(&[self.filled])),
        ];
        if let Some(state) = &self.initial_state {
            named.push(("initial_state", state.shallow_clone()));
        }
        named
            .into_iter()
            .map(|(name, t)| (name.to_string(), t))
            .collect()
    }

    /// Reads back what [`RolloutBuffer::contents`] gave, refusing anything whose names, shapes
    /// or types differ from this buffer's.
    pub fn restore(&mut self, named: &[(String, Tensor)]) -> Result<()> {
        let get = |name: &str| {
            named
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t)
                .with_context(|| format!("it holds no `{name}`"))
        };
        let fields = [
            ("obs", &self.obs),
            ("actions", &self.actions),
            ("log_probs", &self.log_probs),
            ("values", &self.values),
            ("rewards", &self.rewards),
            ("terminated", &self.terminated),
            ("truncated", &self.truncated),
            ("truncation_values", &self.truncation_values),
            ("starts", &self.starts),
            ("bootstrap_obs", &self.bootstrap_obs),
            ("bootstrap_starts", &self.bootstrap_starts),
        ];
        for (name, storage) in fields {
            let saved = get(name)?;
            ensure!(
                saved.size() == storage.size() && saved.kind() == storage.kind(),
                "its `{name}` is {:?} of shape {:?}; this run's is {:?} of shape {:?}",
                saved.kind(),
                saved.size(),
                storage.kind(),
                storage.size()
            );
            let mut target = storage.shallow_clone();
            tch::no_grad(|| target.copy_(saved));
        }
        let flags = Vec::<i64>::try_from(get("has_truncation_values")?)
            .context("reading `has_truncation_values`")?;
        ensure!(
            flags.len() == self.has_truncation_values.len(),
            "it records {} steps; this run's rollout has {}",
            flags.len(),
            self.num_steps
        );
        let filled = i64::try_from(get("filled")?).context("reading `filled`")?;
        ensure!(
            (0..=self.num_steps).contains(&filled),
            "it claims {filled} filled steps of {}",
            self.num_steps
        );
        let state = named.iter().find(|(n, _)| n == "initial_state");
        self.initial_state = state.map(|(_, t)| t.to_device(self.device()));
        for (flag, saved) in self.has_truncation_values.iter_mut().zip(flags) {
            *flag = saved != 0;
        }
        self.filled = filled;
        Ok(())
    }

    /// The flattened rollout with GAE(lambda) advantages and lambda-returns (PPO).
    /// `last_values` is V(s_T) `[N]` for the observations after the last step.
    pub fn gae_batch(&self, last_values: &Tensor, gamma: f64, lambda: f64) -> Result<Batch> {
        let host = self.host_arrays(last_values)?;
        let arrays = host.view(self.num_envs as usize);
        let (advantages, returns) = generalized_advantages(&arrays, gamma, lambda)?;
        self.flat_batch(&advantages, &returns, &arrays.unbootstrapped_turns()?)
    }

    /// The flattened rollout with V-trace advantages and targets ([`vtrace`]): `learner` holds
    /// the learner's log pi(a_t|s_t) and V(s_t) `[T * N]` of the stored steps and its V(s_T)
    /// `[N]`; at a truncation the target bootstraps from the value stored at collection.
    pub fn vtrace_batch(
        &self,
        learner: &LearnerView,
        gamma: f64,
        lambda: f64,
        clips: VtraceClips,
    ) -> Result<Batch> {
        let mut host = self.host_arrays(&learner.last_values)?;
        let behaviour_log_probs = host_floats(&self.log_probs)?;
        let log_ratios: Vec<f32> = host_floats(&learner.log_probs)?
            .iter()
            .zip(&behaviour_log_probs)
            .map(|(pi, mu)| pi - mu)
            .collect();
        host.values = host_floats(&learner.values)?;
        let (advantages, targets) = vtrace(
            &host.view(self.num_envs as usize),
            &log_ratios,
            gamma,
            lambda,
            clips,
        )?;
        // V-trace runs where every row acts on every step, so every target bootstraps.
        self.flat_batch(&advantages, &targets, &[])
    }

    /// The flattened steps with zero advantages and returns: what a learner evaluates itself on.
    pub fn steps(&self) -> Result<Batch> {
        let zeros = vec![0f32; (self.num_steps * self.num_envs) as usize];
        self.flat_batch(&zeros, &zeros, &[])
    }

    /// The flattened rollout with n-step returns and advantages `R_t - V(s_t)` (A2C).
    pub fn n_step_batch(&self, last_values: &Tensor, gamma: f64) -> Result<Batch> {
        let host = self.host_arrays(last_values)?;
        let arrays = host.view(self.num_envs as usize);
        let returns = n_step_returns(&arrays, gamma)?;
        let advantages: Vec<f32> = returns
            .iter()
            .zip(&host.values)
            .map(|(r, v)| r - v)
            .collect();
        self.flat_batch(&advantages, &returns, &arrays.unbootstrapped_turns()?)
    }
}

/// A learner's own view of a rollout at an update's start, for V-trace: log pi(a_t|s_t) and
/// V(s_t) `[T * N]` (row `t * N + env`) and V(s_T) `[N]`.
#[derive(Debug)]
pub struct LearnerView {
    pub log_probs: Tensor,
    pub values: Tensor,
    pub last_values: Tensor,
}

struct HostArrays {
    rewards: Vec<f32>,
    values: Vec<f32>,
    terminated: Vec<f32>,
    truncated: Vec<f32>,
    truncation_values: Vec<f32>,
    last_values: Vec<f32>,
    acting: Option<Vec<bool>>,
    last_acting: Option<Vec<bool>>,
}

impl HostArrays {
    fn view(&self, num_envs: usize) -> RolloutArrays<'_> {
        RolloutArrays {
            num_envs,
            rewards: &self.rewards,
            values: &self.values,
            terminated: &self.terminated,
            truncated: &self.truncated,
            truncation_values: &self.truncation_values,
            last_values: &self.last_values,
            acting: self.acting.as_deref(),
            last_acting: self.last_acting.as_deref(),
        }
    }
}

/// Seeded shuffling of sample indices into minibatches. Its whole state is one `u64`
/// ([`MinibatchSampler::state`]), so its seed fixes every draw: PPO derives one per update and
/// a resumed run draws the same minibatches. The generator is SplitMix64 (Steele et al. 2014): tiny, fast, and good enough
/// for shuffling; it does not touch libtorch's generator, so sampling actions and shuffling
/// never perturb each other.
#[derive(Debug, Clone)]
pub struct MinibatchSampler {
    state: u64,
}

impl MinibatchSampler {
    pub fn new(seed: u64) -> Self {
        MinibatchSampler { state: seed }
    }

    pub fn state(&self) -> u64 {
        self.state
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(crate::seeds::GOLDEN_GAMMA);
        tandem_env::rng::splitmix64_finalize(self.state)
    }

    /// Uniform in `0..bound` without modulo bias (Lemire 2019, multiply-and-reject).
    fn below(&mut self, bound: u64) -> u64 {
        loop {
            let wide = (self.next_u64() as u128) * (bound as u128);
            let low = wide as u64;
            if low >= bound.wrapping_neg() % bound {
                return (wide >> 64) as u64;
            }
        }
    }

    /// A uniformly random permutation of `0..n` (Fisher-Yates).
    pub fn permutation(&mut self, n: usize) -> Vec<i64> {
        let mut order: Vec<i64> = (0..n as i64).collect();
        for i in (1..n).rev() {
            let j = self.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        order
    }

    /// One epoch's minibatches: a fresh permutation of `0..batch_size` cut into
    /// `num_minibatches` equal index tensors on `device`. The batch must divide evenly, so that
    /// every rank runs the same number of equally sized minibatches.
    pub fn minibatches(
        &mut self,
        batch_size: i64,
        num_minibatches: i64,
        device: Device,
    ) -> Result<Vec<Tensor>> {
        ensure!(
            num_minibatches > 0 && batch_size > 0,
            "minibatches: batch size ({batch_size}) and number of minibatches ({num_minibatches}) must be positive"
        );
        ensure!(
            batch_size % num_minibatches == 0,
            "minibatches: the per-rank batch of {batch_size} samples does not split into {num_minibatches} equal minibatches"
        );
        let size = (batch_size / num_minibatches) as usize;
        let order = self.permutation(batch_size as usize);
        Ok(order
            .chunks(size)
            .map(|chunk| Tensor::from_slice(chunk).to_device(device))
            .collect())
    }
}

/// `t` flattened into host floats.
fn host_floats(t: &Tensor) -> Result<Vec<f32>> {
    let flat = t.to_device(Device::Cpu).to_kind(Kind::Float).reshape([-1]);
    Vec::<f32>::try_from(&flat).context("rollout: copying to the host")
}
