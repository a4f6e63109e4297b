//! One rank's replay memory for DQN: a ring of environment steps with memory-lean frame storage,
//! n-step returns computed at sampling time, and uniform or proportional prioritized sampling
//! (Schaul et al. 2016) through a sum-tree.
//!
//! Storage. The buffer is a ring of `rows` vector steps; row `t` holds, for each of the rank's
//! `num_envs` environments, the *newest frame* of the observation the step was taken from, the
//! action, the reward and the done flags. A stacked observation `[k*c, h, w]` (k frames,
//! oldest first) is rebuilt from the newest frames of rows `t-k+1 ..= t` of the same
//! environment; rows before the episode's first observation are replaced by that first frame,
//! which is what the stacking wrapper shows after a reset, so a stack never mixes episodes.
//! The observation after an episode's last step (the env has already reset) is kept as one extra
//! frame beside the ring. Pixel observations (integer values 0..=255) are kept as `u8`.
//!
//! Which slots may be sampled: a row needs its `n` successors (for the n-step return and the
//! bootstrap observation) and its `k-1` predecessors (for the stack) still in the ring. Every
//! other slot has priority 0 in the sum-tree, so uniform sampling is the same tree with all
//! sampleable slots at priority 1.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, bail, ensure};
use tandem_env::rng::Xoshiro256;

use crate::algo::actions::{ActionBatch, ActionKind};

/// A binary tree whose leaves are priorities and whose inner nodes are the sums of their
/// children: prefix-sum search and updates in O(log n) (Schaul et al. 2016, appendix B.2.1).
#[derive(Debug, Clone)]
pub struct SumTree {
    leaves: usize,
    /// Node 1 is the root; node i has children 2i and 2i+1; leaves start at `leaves`.
    nodes: Vec<f64>,
}

impl SumTree {
    pub fn new(capacity: usize) -> SumTree {
        let leaves = capacity.max(1).next_power_of_two();
        SumTree {
            leaves,
            nodes: vec![0.0; 2 * leaves],
        }
    }

    pub fn capacity(&self) -> usize {
        self.leaves
    }

    pub fn total(&self) -> f64 {
        self.nodes[1]
    }

    pub fn get(&self, index: usize) -> f64 {
        self.nodes[self.leaves + index]
    }

    pub fn set(&mut self, index: usize, priority: f64) {
        assert!(
            priority.is_finite() && priority >= 0.0,
            "sum-tree priorities must be finite and non-negative, got {priority}"
        );
        let mut node = self.leaves + index;
        self.nodes[node] = priority;
        while node > 1 {
            node /= 2;
            self.nodes[node] = self.nodes[2 * node] + self.nodes[2 * node + 1];
        }
    }

    /// The leaf `i` with `sum(p[..i]) <= mass < sum(p[..=i])`. Never a zero-priority leaf while
    /// the total is positive, even where rounding puts `mass` at an edge.
    pub fn find(&self, mass: f64) -> usize {
        let mut mass = mass.max(0.0);
        let mut node = 1;
        while node < self.leaves {
            let (left, right) = (self.nodes[2 * node], self.nodes[2 * node + 1]);
            if (mass < left || right <= 0.0) && left > 0.0 {
                node *= 2;
            } else {
                mass -= left;
                node = 2 * node + 1;
            }
        }
        node - self.leaves
    }
}

/// Frames kept as bytes for pixel observations, as floats otherwise.
#[derive(Debug, Clone, PartialEq)]
enum FrameStore {
    U8(Vec<u8>),
    F32(Vec<f32>),
}

impl FrameStore {
    fn write(&mut self, at: usize, values: &[f32]) {
        match self {
            FrameStore::U8(v) => {
                for (d, &s) in v[at..at + values.len()].iter_mut().zip(values) {
                    *d = s as u8;
                }
            }
            FrameStore::F32(v) => v[at..at + values.len()].copy_from_slice(values),
        }
    }

    fn read(&self, at: usize, out: &mut [f32]) {
        match self {
            FrameStore::U8(v) => {
                let len = out.len();
                for (d, &s) in out.iter_mut().zip(&v[at..at + len]) {
                    *d = s as f32;
                }
            }
            FrameStore::F32(v) => out.copy_from_slice(&v[at..at + out.len()]),
        }
    }

    fn equals(&self, at: usize, values: &[f32]) -> bool {
        match self {
            FrameStore::U8(v) => v[at..at + values.len()]
                .iter()
                .zip(values)
                .all(|(&a, &b)| a as f32 == b),
            FrameStore::F32(v) => v[at..at + values.len()] == *values,
        }
    }
}

/// How a replay buffer is laid out and sampled.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplaySpec {
    /// Transitions this rank holds (rounded down to whole vector steps).
    pub capacity: usize,
    pub num_envs: usize,
    /// Values of one (stacked) observation.
    pub obs_len: usize,
    /// Frames per stacked observation (1 when observations are not stacked).
    pub stack: usize,
    /// Keep frames as u8: every observation value is an integer in 0..=255.
    pub pixels: bool,
    /// Steps of the bootstrapped return.
    pub n_step: usize,
    pub gamma: f64,
    /// `Some(alpha)`: proportional prioritization with exponent alpha; `None`: uniform.
    pub priority_alpha: Option<f64>,
    /// What one stored action is (from the environments' action space).
    pub actions: ActionKind,
}

/// One environment step of every environment of the rank, as the VecEnv reports it.
pub struct VectorStep<'a> {
    /// The observations the actions were taken from, `num_envs * obs_len`.
    pub obs: &'a [f32],
    /// One action per environment, of the spec's kind.
    pub actions: &'a ActionBatch,
    pub rewards: &'a [f32],
    pub terminated: &'a [bool],
    pub truncated: &'a [bool],
    /// The observations that ended episodes (rows where terminated or truncated).
    pub final_obs: &'a [f32],
}

/// A sampled batch, flat and row-major, ready to become tensors.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Slot indices, for [`ReplayBuffer::update_priorities`].
    pub slots: Vec<usize>,
    pub obs: Vec<f32>,
    pub actions: ActionBatch,
    /// Discounted n-step reward sums, `sum_{j<m} gamma^j r_{t+j}`.
    pub returns: Vec<f32>,
    /// Factor of the bootstrap value: `gamma^m`, or 0 when the episode terminated within the m steps.
    pub discounts: Vec<f32>,
    /// The observation `m` steps later (an episode's final observation where it ended sooner).
    pub next_obs: Vec<f32>,
    /// Importance-sampling weights normalised by the batch maximum; all 1 for uniform replay.
    pub weights: Vec<f32>,
}

#[derive(Debug, Clone)]
pub struct ReplayBuffer {
    spec: ReplaySpec,
    rows: usize,
    frame_len: usize,
    frames: FrameStore,
    /// One action per slot.
    actions: ActionBatch,
    rewards: Vec<f32>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    /// Steps since the episode's first observation, capped at `stack - 1`.
    episode_pos: Vec<u32>,
    /// Newest frame of the observation that ended the episode at a slot.
    final_frames: HashMap<usize, Vec<f32>>,
    /// The next observation's `episode_pos`, per environment.
    next_pos: Vec<u32>,
    /// Vector steps pushed so far (absolute row counter).
    rows_written: u64,
    /// The newest row has its observations and actions but not yet its outcome.
    outcome_due: bool,
    tree: SumTree,
    max_priority: f64,
    /// A caller's label saved with the buffer: the trainer stores the global step, so a resume
    /// can tell that a replay file and a model checkpoint were written together.
    tag: u64,
}

/// Small constant added to |TD error| so no transition gets priority 0: p_i = |δ_i| + ε
/// (Schaul et al. 2016, section 3.3), sampled with P(i) = p_i^α / Σ_k p_k^α (eq. 1).
const PRIORITY_EPS: f64 = 1e-6;
/// Format 3 records the action kind in the header and stores box actions as f32 values; a
/// format-2 file (before box actions) holds discrete actions in the same layout otherwise.
const MAGIC: &[u8; 8] = b"TNDMRPL3";
const MAGIC_V2: &[u8; 8] = b"TNDMRPL2";

impl ReplayBuffer {
    pub fn new(spec: ReplaySpec) -> Result<ReplayBuffer> {
        ensure!(
            !matches!(spec.actions, ActionKind::MultiDiscrete { .. }),
            "replay: the off-policy learners take discrete or box actions, not {}",
            spec.actions
        );
        ensure!(
            spec.num_envs >= 1 && spec.stack >= 1 && spec.n_step >= 1,
            "replay: needs at least one environment, frame and step, got {spec:?}"
        );
        ensure!(
            spec.obs_len.is_multiple_of(spec.stack),
            "replay: an observation of {} values does not split into {} stacked frames",
            spec.obs_len,
            spec.stack
        );
        let rows = spec.capacity / spec.num_envs;
        // Sampleable rows need stack-1 predecessors and n successors inside the ring.
        let reserved = spec.stack - 1 + spec.n_step;
        ensure!(
            rows > reserved,
            "replay: a capacity of {} transitions over {} environments gives {rows} steps per environment; \
             stacks of {} frames and n-step {} need more than {reserved}",
            spec.capacity,
            spec.num_envs,
            spec.stack,
            spec.n_step
        );
        if let Some(alpha) = spec.priority_alpha {
            ensure!(
                (0.0..=1.0).contains(&alpha),
                "replay: priority alpha must be in [0, 1], got {alpha}"
            );
        }
        ensure!(
            spec.actions.values_per_action() > 0,
            "replay: box actions need at least one value"
        );
        let slots = rows * spec.num_envs;
        let frame_len = spec.obs_len / spec.stack;
        let frames = if spec.pixels {
            FrameStore::U8(vec![0; slots * frame_len])
        } else {
            FrameStore::F32(vec![0.0; slots * frame_len])
        };
        Ok(ReplayBuffer {
            rows,
            frame_len,
            frames,
            actions: ActionBatch::zeros(spec.actions, slots),
            rewards: vec![0.0; slots],
            terminated: vec![false; slots],
            truncated: vec![false; slots],
            episode_pos: vec![0; slots],
            final_frames: HashMap::new(),
            next_pos: vec![0; spec.num_envs],
            rows_written: 0,
            outcome_due: false,
            tree: SumTree::new(slots),
            max_priority: 1.0,
            tag: 0,
            spec,
        })
    }

    pub fn spec(&self) -> &ReplaySpec {
        &self.spec
    }

    /// Transitions that can be sampled now.
    pub fn sampleable(&self) -> usize {
        let ready_end = self.rows_written.saturating_sub(self.spec.n_step as u64);
        (ready_end.saturating_sub(self.lowest_sampleable_row())) as usize * self.spec.num_envs
    }

    /// The oldest row whose stack predecessors are all still in the ring.
    fn lowest_sampleable_row(&self) -> u64 {
        if self.rows_written > self.rows as u64 {
            self.rows_written - self.rows as u64 + (self.spec.stack as u64 - 1)
        } else {
            0
        }
    }

    pub fn tag(&self) -> u64 {
        self.tag
    }

    pub fn set_tag(&mut self, tag: u64) {
        self.tag = tag;
    }

    /// Vector steps pushed since the buffer was created.
    pub fn steps_pushed(&self) -> u64 {
        self.rows_written
    }

    fn slot(&self, row: u64, env: usize) -> usize {
        (row % self.rows as u64) as usize * self.spec.num_envs + env
    }

    fn new_priority(&self) -> f64 {
        match self.spec.priority_alpha {
            Some(alpha) => self.max_priority.powf(alpha),
            None => 1.0,
        }
    }

    /// Environments per row, values per observation, frames per stack, values per frame.
    fn row_shape(&self) -> (usize, usize, usize, usize) {
        (
            self.spec.num_envs,
            self.spec.obs_len,
            self.spec.stack,
            self.frame_len,
        )
    }

    /// Appends one vector step: [`ReplayBuffer::push_observations`] then
    /// [`ReplayBuffer::push_outcome`].
    pub fn push(&mut self, step: &VectorStep<'_>) -> Result<()> {
        self.push_observations(step.obs, step.actions)?;
        self.push_outcome(
            step.rewards,
            step.terminated,
            step.truncated,
            step.final_obs,
        )
    }

    /// The first half of a vector step: the observations the actions were taken from and the
    /// actions, in a new row. Checks that each stacked observation continues the stored stack
    /// of its environment (a wrapper after the stack that changes observations would break
    /// the rebuilt stacks silently otherwise).
    ///
    /// What can be sampled is then what it is after the whole step: no sampleable transition
    /// reads the new row's rewards, flags or final observation (its n-step return ends at
    /// least one row earlier), only its observation, as the one after the row before. So an
    /// update may sample here while the environments are still stepping, and
    /// [`ReplayBuffer::push_outcome`] completes the row afterwards.
    pub fn push_observations(&mut self, obs: &[f32], actions: &ActionBatch) -> Result<()> {
        let (n, len, k, f) = self.row_shape();
        ensure!(
            !self.outcome_due,
            "replay: the previous vector step's outcome was never pushed"
        );
        ensure!(
            obs.len() == n * len && actions.len() == n,
            "replay: a vector step must hold {n} environments of {len} observation values"
        );
        ensure!(
            actions.kind() == self.spec.actions,
            "replay: the buffer stores {}, the vector step holds {}",
            self.spec.actions,
            actions.kind()
        );
        let row = self.rows_written;
        for env in 0..n {
            let obs = &obs[env * len..(env + 1) * len];
            let newest = &obs[(k - 1) * f..];
            if self.spec.pixels
                && let Some(v) = newest
                    .iter()
                    .find(|v| !(0.0..=255.0).contains(*v) || v.fract() != 0.0)
            {
                bail!("replay: pixel storage got the value {v}, not an integer in 0..=255");
            }
            let pos = self.next_pos[env];
            if k > 1 && pos > 0 {
                let previous = self.slot(row - 1, env) * f;
                if !self.frames.equals(previous, &obs[(k - 2) * f..(k - 1) * f]) {
                    bail!(
                        "replay: the observation of environment {env} does not continue its frame stack; \
                         a wrapper after the stack changes observations, which frame storage cannot rebuild"
                    );
                }
            }
            let slot = self.slot(row, env);
            self.frames.write(slot * f, newest);
            self.actions.copy_row(slot, actions, env);
            self.episode_pos[slot] = pos;
            self.final_frames.remove(&slot);
            self.tree.set(slot, 0.0);
        }
        self.rows_written += 1;
        self.outcome_due = true;
        // The rows whose stacks now reach into the overwritten row leave the sample space ...
        if self.rows_written > self.rows as u64 {
            let oldest = self.rows_written - self.rows as u64;
            for r in oldest..oldest + (k as u64 - 1) {
                for env in 0..n {
                    let s = self.slot(r, env);
                    self.tree.set(s, 0.0);
                }
            }
        }
        // ... and the row whose n-step horizon just completed enters it.
        if let Some(ready) = self.rows_written.checked_sub(self.spec.n_step as u64 + 1)
            && ready >= self.lowest_sampleable_row()
        {
            let p = self.new_priority();
            for env in 0..n {
                let s = self.slot(ready, env);
                self.tree.set(s, p);
            }
        }
        Ok(())
    }

    /// The second half of a vector step: its rewards, done flags and the observations that
    /// ended episodes (rows where terminated or truncated), for the row the last
    /// [`ReplayBuffer::push_observations`] began.
    pub fn push_outcome(
        &mut self,
        rewards: &[f32],
        terminated: &[bool],
        truncated: &[bool],
        final_obs: &[f32],
    ) -> Result<()> {
        let (n, len, k, f) = self.row_shape();
        ensure!(
            self.outcome_due,
            "replay: an outcome pushed without the observations of its vector step"
        );
        ensure!(
            final_obs.len() == n * len
                && rewards.len() == n
                && terminated.len() == n
                && truncated.len() == n,
            "replay: a vector step must hold {n} environments of {len} observation values"
        );
        let row = self.rows_written - 1;
        for env in 0..n {
            let slot = self.slot(row, env);
            self.rewards[slot] = rewards[env];
            self.terminated[slot] = terminated[env];
            self.truncated[slot] = truncated[env];
            if terminated[env] || truncated[env] {
                let fin = &final_obs[env * len..(env + 1) * len];
                self.final_frames.insert(slot, fin[(k - 1) * f..].to_vec());
                self.next_pos[env] = 0;
            } else {
                self.next_pos[env] = (self.episode_pos[slot] + 1).min(k as u32 - 1);
            }
        }
        self.outcome_due = false;
        Ok(())
    }

    /// The absolute row of a slot, given that it is still in the ring.
    fn row_of(&self, slot: usize) -> u64 {
        let position = (slot / self.spec.num_envs) as u64;
        let newest = self.rows_written - 1;
        let newest_pos = newest % self.rows as u64;
        let back = (newest_pos + self.rows as u64 - position) % self.rows as u64;
        newest - back
    }

    /// Writes the stacked observation of `(row, env)` into `out`; with `final_frame`, the stack
    /// that follows it when the episode ended there (its frames shifted by one, the final frame last).
    fn write_stack(&self, row: u64, env: usize, final_frame: Option<&[f32]>, out: &mut [f32]) {
        let (k, f) = (self.spec.stack, self.frame_len);
        let pos = self.episode_pos[self.slot(row, env)] as u64;
        // Frame i of the stack (0 = oldest) is the newest frame of row `row - (k-1-i)`, but never
        // older than the episode's first row.
        let shift = u64::from(final_frame.is_some());
        for i in 0..k {
            let back = (k - 1 - i) as u64;
            let dst = &mut out[i * f..(i + 1) * f];
            if shift == 1 && back == 0 {
                dst.copy_from_slice(final_frame.expect("shift implies a final frame"));
                continue;
            }
            let back = back - shift;
            let source = row - back.min(pos);
            self.frames.read(self.slot(source, env) * f, dst);
        }
    }

    /// The stacked observation stored at `slot` (for tests and checks).
    pub fn observation(&self, slot: usize) -> Vec<f32> {
        let mut out = vec![0.0; self.spec.obs_len];
        let row = self.row_of(slot);
        self.write_stack(row, slot % self.spec.num_envs, None, &mut out);
        out
    }

    /// The observation after the transition at `slot` (the episode's final one where it ended).
    pub fn next_observation(&self, slot: usize) -> Vec<f32> {
        let mut out = vec![0.0; self.spec.obs_len];
        let row = self.row_of(slot);
        let env = slot % self.spec.num_envs;
        self.write_next(row, env, &mut out);
        out
    }

    fn write_next(&self, row: u64, env: usize, out: &mut [f32]) {
        let slot = self.slot(row, env);
        match self.final_frames.get(&slot) {
            Some(fin) => self.write_stack(row, env, Some(fin), out),
            None => self.write_stack(row + 1, env, None, out),
        }
    }

    /// Draws `batch` transitions: proportional to priority in `batch` equal segments of the
    /// total (stratified, Schaul et al. 2016, appendix B.2.1), and for prioritized replay with
    /// importance weights `w_i = (N P(i))^-beta / max_j w_j` (section 3.4), with
    /// the maximum taken over the batch.
    pub fn sample(&self, batch: usize, beta: f64, rng: &mut Xoshiro256) -> Result<Sample> {
        let available = self.sampleable();
        ensure!(
            batch >= 1 && available >= batch,
            "replay: cannot sample {batch} transitions, {available} are ready"
        );
        let total = self.tree.total();
        ensure!(total > 0.0, "replay: every ready transition has priority 0");
        let len = self.spec.obs_len;
        let mut s = Sample {
            slots: Vec::with_capacity(batch),
            obs: vec![0.0; batch * len],
            actions: ActionBatch::with_capacity(self.spec.actions, batch),
            returns: Vec::with_capacity(batch),
            discounts: Vec::with_capacity(batch),
            next_obs: vec![0.0; batch * len],
            weights: Vec::with_capacity(batch),
        };
        let segment = total / batch as f64;
        for i in 0..batch {
            let slot = self
                .tree
                .find((i as f64 + rng.next_f64()) * segment)
                .min(self.rows * self.spec.num_envs - 1);
            let env = slot % self.spec.num_envs;
            let row = self.row_of(slot);
            self.write_stack(row, env, None, &mut s.obs[i * len..(i + 1) * len]);
            // n-step return (Sutton & Barto eq. 7.1): rewards until the episode ends or n steps pass.
            let mut ret = 0.0f64;
            let mut discount = 1.0f64;
            let mut last = row;
            let mut terminal = false;
            for j in 0..self.spec.n_step as u64 {
                let sj = self.slot(row + j, env);
                ret += discount * self.rewards[sj] as f64;
                discount *= self.spec.gamma;
                last = row + j;
                if self.terminated[sj] {
                    terminal = true;
                    break;
                }
                if self.truncated[sj] {
                    break;
                }
            }
            self.write_next(last, env, &mut s.next_obs[i * len..(i + 1) * len]);
            s.slots.push(slot);
            s.actions.push_row(&self.actions, slot);
            s.returns.push(ret as f32);
            s.discounts
                .push(if terminal { 0.0 } else { discount as f32 });
            let weight = match self.spec.priority_alpha {
                Some(_) => {
                    let p = self.tree.get(slot) / total;
                    (available as f64 * p).powf(-beta)
                }
                None => 1.0,
            };
            s.weights.push(weight as f32);
        }
        let max = s.weights.iter().cloned().fold(0.0f32, f32::max);
        if max > 0.0 {
            for w in &mut s.weights {
                *w /= max;
            }
        }
        Ok(s)
    }

    /// Sets the priorities of sampled slots to `(|td error| + eps)^alpha` (Schaul et al. 2016,
    /// proportional variant); new transitions then enter at the largest priority seen so far.
    /// Without prioritization this does nothing.
    pub fn update_priorities(&mut self, slots: &[usize], td_errors: &[f32]) -> Result<()> {
        let Some(alpha) = self.spec.priority_alpha else {
            return Ok(());
        };
        ensure!(
            slots.len() == td_errors.len(),
            "replay: {} slots but {} TD errors",
            slots.len(),
            td_errors.len()
        );
        for (&slot, &delta) in slots.iter().zip(td_errors) {
            ensure!(
                delta.is_finite(),
                "replay: TD error {delta} for slot {slot} is not finite"
            );
            // A slot overwritten since it was sampled keeps its new state.
            if self.tree.get(slot) == 0.0 {
                continue;
            }
            let priority = delta.abs() as f64 + PRIORITY_EPS;
            self.max_priority = self.max_priority.max(priority);
            self.tree.set(slot, priority.powf(alpha));
        }
        Ok(())
    }

    /// The whole buffer as bytes (for checkpoints).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        let spec = &self.spec;
        for v in [
            spec.capacity as u64,
            spec.num_envs as u64,
            spec.obs_len as u64,
            spec.stack as u64,
            spec.pixels as u64,
            spec.n_step as u64,
            spec.gamma.to_bits(),
            spec.priority_alpha.map(f64::to_bits).unwrap_or(u64::MAX),
            self.rows_written,
            self.max_priority.to_bits(),
            self.tag,
            action_code(spec.actions),
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        match &self.frames {
            FrameStore::U8(v) => out.extend_from_slice(v),
            FrameStore::F32(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        }
        let slots = self.actions.len();
        for i in 0..slots {
            self.write_action(i, &mut out);
            out.extend_from_slice(&self.rewards[i].to_le_bytes());
            out.push(self.terminated[i] as u8 | (self.truncated[i] as u8) << 1);
            out.extend_from_slice(&self.episode_pos[i].to_le_bytes());
            out.extend_from_slice(&self.tree.get(i).to_le_bytes());
        }
        for p in &self.next_pos {
            out.extend_from_slice(&p.to_le_bytes());
        }
        let mut finals: Vec<_> = self.final_frames.iter().collect();
        finals.sort_by_key(|(s, _)| **s);
        out.extend_from_slice(&(finals.len() as u64).to_le_bytes());
        for (slot, frame) in finals {
            out.extend_from_slice(&(*slot as u64).to_le_bytes());
            frame
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
        }
        out
    }

    /// Restores a buffer written by [`ReplayBuffer::to_bytes`]; its layout must equal `spec`.
    pub fn from_bytes(spec: ReplaySpec, bytes: &[u8]) -> Result<ReplayBuffer> {
        let mut buf = ReplayBuffer::new(spec)?;
        let mut r = bytes;
        let u64s = read_header(&mut r)?;
        buf.check_action_code(u64s[11])?;
        let saved = (
            u64s[0] as usize,
            u64s[1] as usize,
            u64s[2] as usize,
            u64s[3] as usize,
            u64s[4] != 0,
            u64s[5] as usize,
            f64::from_bits(u64s[6]),
        );
        let s = &buf.spec;
        ensure!(
            saved
                == (
                    s.capacity, s.num_envs, s.obs_len, s.stack, s.pixels, s.n_step, s.gamma
                )
                && (u64s[7] == u64::MAX) == s.priority_alpha.is_none(),
            "the replay file was written for another layout (capacity, envs, observation, stacked frames, \
             n-step, gamma or prioritization differ): saved {saved:?}, this run {s:?}"
        );
        buf.rows_written = u64s[8];
        buf.max_priority = f64::from_bits(u64s[9]);
        buf.tag = u64s[10];
        match &mut buf.frames {
            FrameStore::U8(v) => r.read_exact(v).context("replay file truncated in frames")?,
            FrameStore::F32(v) => {
                for x in v.iter_mut() {
                    *x = f32::from_bits(read_u32(&mut r)?);
                }
            }
        }
        for i in 0..buf.actions.len() {
            buf.read_action(i, &mut r)?;
            buf.rewards[i] = f32::from_bits(read_u32(&mut r)?);
            let mut flags = [0u8];
            r.read_exact(&mut flags).context("replay file truncated")?;
            buf.terminated[i] = flags[0] & 1 != 0;
            buf.truncated[i] = flags[0] & 2 != 0;
            buf.episode_pos[i] = read_u32(&mut r)?;
            let p = f64::from_bits(read_u64(&mut r)?);
            ensure!(p.is_finite() && p >= 0.0, "replay file holds priority {p}");
            buf.tree.set(i, p);
        }
        for p in buf.next_pos.iter_mut() {
            *p = read_u32(&mut r)?;
        }
        let finals = read_u64(&mut r)?;
        for _ in 0..finals {
            let slot = read_u64(&mut r)? as usize;
            ensure!(slot < buf.actions.len(), "replay file names slot {slot}");
            let mut frame = vec![0f32; buf.frame_len];
            for x in &mut frame {
                *x = f32::from_bits(read_u32(&mut r)?);
            }
            buf.final_frames.insert(slot, frame);
        }
        ensure!(r.is_empty(), "replay file has {} trailing bytes", r.len());
        Ok(buf)
    }

    fn write_action(&self, slot: usize, out: &mut Vec<u8>) {
        match &self.actions {
            ActionBatch::Discrete(v) => out.extend_from_slice(&v[slot].to_le_bytes()),
            ActionBatch::Box { dim, values } => values[slot * dim..(slot + 1) * dim]
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            ActionBatch::MultiDiscrete { dim, values } => values[slot * dim..(slot + 1) * dim]
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        }
    }

    fn read_action(&mut self, slot: usize, r: &mut &[u8]) -> Result<()> {
        match &mut self.actions {
            ActionBatch::Discrete(v) => v[slot] = read_u64(r)? as i64,
            ActionBatch::Box { dim, values } => {
                for x in &mut values[slot * *dim..(slot + 1) * *dim] {
                    *x = f32::from_bits(read_u32(r)?);
                }
            }
            ActionBatch::MultiDiscrete { dim, values } => {
                for x in &mut values[slot * *dim..(slot + 1) * *dim] {
                    *x = read_u64(r)? as i64;
                }
            }
        }
        Ok(())
    }

    /// A file of the other action kind cannot be read as this one: its slots have another size.
    fn check_action_code(&self, code: u64) -> Result<()> {
        let saved = match code {
            0 => ActionKind::Discrete,
            dim => ActionKind::Box { dim: dim as usize },
        };
        ensure!(
            saved == self.spec.actions,
            "the replay file holds {saved}, this run's environments take {}",
            self.spec.actions
        );
        Ok(())
    }

    /// Writes the buffer to `path` atomically (see [`crate::atomic`]).
    pub fn save(&self, path: &Path) -> Result<()> {
        ensure!(
            !self.outcome_due,
            "replay: cannot save {} while its newest vector step awaits its outcome",
            path.display()
        );
        let dir = path
            .parent()
            .with_context(|| format!("{} has no parent directory", path.display()))?;
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        crate::atomic::write_atomic(path, &self.to_bytes())
            .with_context(|| format!("cannot write the replay buffer {}", path.display()))
    }

    pub fn load(spec: ReplaySpec, path: &Path) -> Result<ReplayBuffer> {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        ReplayBuffer::from_bytes(spec, &bytes).with_context(|| format!("in {}", path.display()))
    }
}

/// The header's action field: 0 for discrete, the values per action for a box.
fn action_code(kind: ActionKind) -> u64 {
    match kind {
        ActionKind::Discrete => 0,
        ActionKind::Box { dim } => dim as u64,
        ActionKind::MultiDiscrete { .. } => unreachable!("ReplayBuffer::new refuses {kind}"),
    }
}

/// The magic and the header's numbers: the layout, counters and tag, then the action field
/// (0, discrete, for a format-2 file, which has none).
fn read_header(r: &mut &[u8]) -> Result<[u64; 12]> {
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)
        .context("replay file truncated before its header")?;
    let fields = match &magic {
        m if m == MAGIC => 12,
        m if m == MAGIC_V2 => 11,
        _ => bail!("not a tandem replay file (bad magic)"),
    };
    let mut u64s = [0u64; 12];
    for v in &mut u64s[..fields] {
        *v = read_u64(r)?;
    }
    Ok(u64s)
}

fn read_u64(r: &mut &[u8]) -> Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b).context("replay file truncated")?;
    Ok(u64::from_le_bytes(b))
}

fn read_u32(r: &mut &[u8]) -> Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).context("replay file truncated")?;
    Ok(u32::from_le_bytes(b))
}
