//! Wrappers over time: frame-skip (with max-pooling of the last two frames) and
//! frame-stack.

use super::{forward_to_inner, wrapper_snapshot_methods};
use crate::env::{Env, Step};
use crate::snapshot::Persist;
use crate::space::{Action, ActionSpace, Layout, ObsBuf, ObsShape, ObsSpace, ObsStore};

/// Repeats each action `skip` times and sums the rewards.
///
/// Only the last two frames are requested from the wrapped environment (the others
/// are stepped with [`ObsBuf::Skip`]), and a frame is kept only if the episode goes on
/// after it; the max-pool is written back into the last frame. That is exactly what
/// gymnasium's `AtariPreprocessing` does, so a step that ends the episode returns the
/// frames kept from earlier steps (such an observation only ever ends an episode, and
/// is never bootstrapped from after a termination).
pub struct FrameSkip {
    inner: Box<dyn Env>,
    skip: u32,
    max_pool: bool,
    /// Second-to-last and last frame kept (the last one pooled in place).
    frames: [ObsStore; 2],
    /// Where a frame lands before we know whether the episode went on after it.
    scratch: ObsStore,
}

impl FrameSkip {
    pub fn new(inner: Box<dyn Env>, skip: u32, max_pool: bool) -> Self {
        let space = inner.observation_space();
        FrameSkip {
            inner,
            skip,
            max_pool: max_pool && skip > 1,
            frames: [ObsStore::zeros(&space), ObsStore::zeros(&space)],
            scratch: ObsStore::zeros(&space),
        }
    }

    /// Max-pools the two kept frames into the last one and writes it out.
    fn pool_and_write(&mut self, obs: &mut ObsBuf<'_>) {
        if self.max_pool {
            let [older, last] = &mut self.frames;
            match (older, last) {
                (ObsStore::U8(a), ObsStore::U8(b)) => {
                    for (y, &x) in b.iter_mut().zip(a.iter()) {
                        *y = (*y).max(x);
                    }
                }
                (ObsStore::F32(a), ObsStore::F32(b)) => {
                    for (y, &x) in b.iter_mut().zip(a.iter()) {
                        *y = y.max(x);
                    }
                }
                _ => unreachable!("frame-skip buffers follow the wrapped observation space"),
            }
        }
        self.frames[1].write_to(obs);
    }
}

impl Env for FrameSkip {
    fn observation_space(&self) -> ObsSpace {
        self.inner.observation_space()
    }
    fn action_space(&self) -> ActionSpace {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, mut obs: ObsBuf<'_>) {
        self.inner.reset(seed, self.frames[1].buf());
        if let ObsStore::U8(v) = &mut self.frames[0] {
            v.fill(0);
        } else if let ObsStore::F32(v) = &mut self.frames[0] {
            v.fill(f32::MIN);
        }
        self.pool_and_write(&mut obs);
    }
    fn step(&mut self, action: Action<'_>, mut obs: ObsBuf<'_>) -> Step {
        let mut total = Step::default();
        let wanted = !obs.is_skip();
        for t in 0..self.skip {
            let slot = match self.skip - t {
                1 if wanted => Some(1),
                2 if wanted && self.max_pool => Some(0),
                _ => None,
            };
            let out = if slot.is_some() {
                self.scratch.buf()
            } else {
                ObsBuf::Skip
            };
            let step = self.inner.step(action, out);
            total.reward += step.reward;
            total.raw_reward += step.raw_reward;
            total.terminated |= step.terminated;
            total.truncated |= step.truncated;
            total.game_over |= step.game_over;
            if step.done() {
                break;
            }
            if let Some(slot) = slot {
                // A swap, not a copy: the next frame overwrites the scratch whole.
                std::mem::swap(&mut self.frames[slot], &mut self.scratch);
            }
        }
        if wanted {
            self.pool_and_write(&mut obs);
        }
        total
    }
    wrapper_snapshot_methods!("frame-skip", params: [skip, max_pool], state: [frames]);
    forward_to_inner!(with_normalizers);
}

/// Stacks the last `k` observations on the channel axis, oldest first; images come out
/// channels-first. After a reset all `k` slots hold the first observation.
pub struct FrameStack {
    inner: Box<dyn Env>,
    output: ObsSpace,
    /// The wrapped observation before reordering, when it is interleaved (HWC, C > 1).
    incoming: Option<ObsStore>,
    ring: Box<[ObsStore]>,
    /// Slot the next frame goes to (= the oldest frame).
    head: usize,
    /// (height * width, channels) for the HWC to CHW reorder.
    plane: (usize, usize),
}

impl FrameStack {
    pub fn new(inner: Box<dyn Env>, k: usize, output: ObsSpace) -> Self {
        let input = inner.observation_space();
        let (incoming, plane) = match input.shape {
            ObsShape::Image {
                height,
                width,
                channels,
                layout: Layout::Hwc,
            } if channels > 1 => (Some(ObsStore::zeros(&input)), (height * width, channels)),
            _ => (None, (0, 0)),
        };
        let ring = (0..k).map(|_| ObsStore::zeros(&input)).collect();
        FrameStack {
            inner,
            output,
            incoming,
            ring,
            head: 0,
            plane,
        }
    }

    /// Fetches the wrapped observation into the ring slot `head` (reordered to CHW).
    fn capture(&mut self, fill: impl FnOnce(&mut Box<dyn Env>, ObsBuf<'_>) -> Step) -> Step {
        let slot = &mut self.ring[self.head];
        match &mut self.incoming {
            None => fill(&mut self.inner, slot.buf()),
            Some(incoming) => {
                let step = fill(&mut self.inner, incoming.buf());
                let (plane, channels) = self.plane;
                match (incoming, slot) {
                    (ObsStore::U8(src), ObsStore::U8(dst)) => hwc_to_chw(src, dst, plane, channels),
                    (ObsStore::F32(src), ObsStore::F32(dst)) => {
                        hwc_to_chw(src, dst, plane, channels)
                    }
                    _ => unreachable!("frame-stack buffers follow the wrapped observation space"),
                }
                step
            }
        }
    }

    fn write_output(&self, obs: &mut ObsBuf<'_>) {
        let k = self.ring.len();
        let frame = self.output.len() / k;
        for i in 0..k {
            let slot = &self.ring[(self.head + i) % k];
            slot.write_to(&mut obs.slice(i * frame, (i + 1) * frame));
        }
    }
}

fn hwc_to_chw<T: Copy>(src: &[T], dst: &mut [T], plane: usize, channels: usize) {
    for (p, px) in src.chunks_exact(channels).enumerate() {
        for (c, &v) in px.iter().enumerate() {
            dst[c * plane + p] = v;
        }
    }
}

impl Env for FrameStack {
    fn observation_space(&self) -> ObsSpace {
        self.output
    }
    fn action_space(&self) -> ActionSpace {
        self.inner.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, mut obs: ObsBuf<'_>) {
        self.head = 0;
        self.capture(|env, buf| {
            env.reset(seed, buf);
            Step::default()
        });
        let (first, rest) = self.ring.split_at_mut(1);
        for slot in rest {
            slot.clone_from(&first[0]);
        }
        self.write_output(&mut obs);
    }
    fn step(&mut self, action: Action<'_>, mut obs: ObsBuf<'_>) -> Step {
        let step = self.capture(|env, buf| env.step(action, buf));
        self.head = (self.head + 1) % self.ring.len();
        self.write_output(&mut obs);
        step
    }
    fn chain_names(&self, names: &mut Vec<String>) {
        names.push("frame-stack".to_owned());
        self.inner.chain_names(names);
    }
    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), crate::EnvError> {
        crate::snapshot::save_section(out, "frame-stack", |out| {
            self.head.save(out);
            self.ring.save(out);
            self.inner.save_state(out)
        })
    }
    fn load_state(&mut self, input: &mut &[u8]) -> Result<(), crate::EnvError> {
        crate::snapshot::load_section(input, "frame-stack", |input| {
            self.head.load(input)?;
            if self.head >= self.ring.len() {
                return Err(crate::snapshot::snapshot_error(format!(
                    "corrupt: newest frame at {} of {}",
                    self.head,
                    self.ring.len()
                )));
            }
            crate::snapshot::load_buffer(&mut self.ring, "the stack of frames", input)?;
            self.inner.load_state(input)
        })
    }
    forward_to_inner!(with_normalizers);
}
