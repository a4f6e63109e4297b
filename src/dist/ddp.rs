//! Data-parallel training state kept equal across ranks: the sync policies (gradient all-reduce in
//! buckets, overlapped with backward, with optional bf16 compression; reduce-to-rank-0 plus
//! parameter broadcast; periodic parameter averaging; none), the start-up broadcast of parameters
//! and buffers from rank 0, and the cross-rank fingerprint that proves ranks still agree.
//!
//! Build a `Ddp` after the learner, from `Optimizer::parameters`: the all-reduce buckets are then
//! slices of the optimizer's flat gradient buffer, and the reducer's hooks sit on exactly the
//! variables the optimizer steps.
//!
//! Every rank must call the same methods in the same order; the methods themselves never decide
//! differently on different ranks (the decisions are functions of the update count only).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use tch::{Kind, Tensor};

use super::group::{GradientReducer, ReducerBucket};
use super::{Layout, ProcessGroup, ReduceOp};

/// How ranks keep their models together: the config's `sync` policy, as the user wrote it.
pub use tandem_config::SyncPolicy;

/// Bytes in one MiB, the unit of `bucket-mb`.
const MIB: f64 = 1024.0 * 1024.0;

/// The first bucket's size cap: small, so that its all-reduce starts early in the backward pass
/// (it holds the last layers, whose gradients come first); later buckets use the configured size.
const FIRST_BUCKET_BYTES: usize = 1 << 20;

/// The gradient synchroniser of one rank.
pub struct Ddp {
    pg: ProcessGroup,
    policy: SyncPolicy,
    /// One part per policy of the run: each policy's parameters are bucketed, reduced and
    /// counted on their own, because a policy's backward pass touches only its own.
    parts: Vec<Part>,
    /// The part the [`crate::algo::Collective`] methods act on ([`Ddp::select_part`]).
    current: usize,
    /// Time spent in collectives since the last [`Ddp::take_sync_time`].
    sync_time: Duration,
}

/// The synchronisation state of one policy's parameters.
struct Part {
    /// Parameter indices of each all-reduce bucket, in launch order (empty unless all-reduce).
    buckets: Vec<Vec<usize>>,
    /// Runs the all-reduce policy's collectives, overlapped with backward (world size > 1).
    reducer: Option<GradientReducer>,
    /// Why the last [`Ddp::before_backward`] could not arm the reducer, for the
    /// [`Ddp::sync_gradients`] that ends that step to report (arming itself reports nothing).
    arm_failure: Option<super::DistError>,
    /// Optimizer steps of this part's policy.
    updates: u64,
}

impl Ddp {
    /// Builds the buckets for `params` (in the caller's fixed order) and checks with every rank
    /// that all of them hold the same parameter layout: one policy's synchroniser.
    pub fn new(pg: ProcessGroup, params: &[Tensor], policy: SyncPolicy) -> Result<Ddp> {
        Ddp::with_parts(pg, &[params], policy)
    }

    /// A synchroniser of several policies' parameters, `parts[i]` policy i's, each bucketed
    /// and reduced on its own; one layout check covers them all.
    pub fn with_parts(pg: ProcessGroup, parts: &[&[Tensor]], policy: SyncPolicy) -> Result<Ddp> {
        let every: Vec<&Tensor> = parts.iter().flat_map(|p| p.iter()).collect();
        // One layout check for the whole parameter list, so later bucket collectives can skip it.
        pg.verify_layout(&every)
            .context("ranks do not hold the same model")?;
        let parts = parts
            .iter()
            .map(|params| Part::new(&pg, params, policy))
            .collect::<Result<_>>()?;
        Ok(Ddp {
            pg,
            policy,
            parts,
            current: 0,
            sync_time: Duration::ZERO,
        })
    }

    /// Makes part `part` (policy `part`'s parameters) the one the [`crate::algo::Collective`]
    /// methods synchronise.
    pub fn select_part(&mut self, part: usize) -> Result<()> {
        ensure!(
            part < self.parts.len(),
            "no policy {part} to synchronise: {} were set up",
            self.parts.len()
        );
        self.current = part;
        Ok(())
    }

    fn part(&mut self) -> &mut Part {
        &mut self.parts[self.current]
    }

    pub fn group(&self) -> &ProcessGroup {
        &self.pg
    }

    /// The process group back, e.g. for [`ProcessGroup::shutdown`] at the end of a run.
    pub fn into_group(self) -> ProcessGroup {
        self.pg
    }

    pub fn policy(&self) -> &SyncPolicy {
        &self.policy
    }

    pub fn rank(&self) -> usize {
        self.pg.rank()
    }

    pub fn world_size(&self) -> usize {
        self.pg.world_size()
    }

    /// Number of gradient buckets over every policy (0 unless the policy is all-reduce).
    pub fn bucket_count(&self) -> usize {
        self.parts.iter().map(|p| p.buckets.len()).sum()
    }

    /// The next backward pass ends a gradient step (not a micro-batch of one): under the
    /// all-reduce policy, buckets are all-reduced while backward is still running.
    /// A failure to arm is reported by the step's [`Ddp::sync_gradients`].
    pub fn before_backward(&mut self) {
        let part = self.part();
        if let Some(reducer) = &mut part.reducer
            && let Err(e) = reducer.arm()
        {
            part.arm_failure.get_or_insert(e);
        }
    }

    /// Time spent synchronising since the last call.
    pub fn take_sync_time(&mut self) -> Duration {
        std::mem::take(&mut self.sync_time)
    }

    /// Copies rank 0's values into every rank's `tensors` (parameters, buffers, optimizer
    /// state): at start and after a resume, so ranks begin identical.
    pub fn broadcast_from_rank0(&mut self, tensors: &[Tensor]) -> Result<()> {
        let start = Instant::now();
        tch::no_grad(|| -> Result<()> {
            // One check for the whole list; each broadcast below then skips its own.
            self.pg
                .verify_layout(&tensors.iter().collect::<Vec<_>>())
                .context("ranks do not hold the same tensors to broadcast")?;
            for t in tensors {
                let mut t = t.shallow_clone();
                let one = Layout::of(&[&t]);
                self.pg.broadcast_verified(&one, &mut t, 0)?;
            }
            Ok(())
        })?;
        self.sync_time += start.elapsed();
        Ok(())
    }

    /// After backward: makes the gradients of the selected part's `params` what the sync
    /// policy wants stepped on.
    pub fn sync_gradients(&mut self, params: &[Tensor]) -> Result<()> {
        if let Some(e) = self.part().arm_failure.take() {
            return Err(e.into());
        }
        if self.pg.world_size() == 1 {
            return Ok(());
        }
        let start = Instant::now();
        match &self.policy {
            SyncPolicy::Allreduce { .. } => {
                let part = &mut self.parts[self.current];
                if let Some(reducer) = &mut part.reducer {
                    // In bucket order, as the reducer was built.
                    let ordered: Vec<Tensor> = part
                        .buckets
                        .iter()
                        .flatten()
                        .map(|&i| params.get(i).map(Tensor::shallow_clone))
                        .collect::<Option<_>>()
                        .context("sync_gradients: fewer parameters than Ddp was built for")?;
                    reducer.finish(&ordered)?;
                }
            }
            SyncPolicy::Broadcast => {
                tch::no_grad(|| -> Result<()> {
                    for p in params {
                        let mut g = grad_or_zeros(p);
                        let layout = Layout::of(&[&g]);
                        self.pg.reduce_verified(&layout, &mut g, 0, ReduceOp::Avg)?;
                        // Other ranks' buffers hold partial sums; they do not step, so clear them.
                        if self.pg.rank() != 0 {
                            let _ = g.zero_();
                        }
                    }
                    Ok(())
                })?;
            }
            SyncPolicy::Periodic { .. } | SyncPolicy::None => {}
        }
        self.sync_time += start.elapsed();
        Ok(())
    }

    /// Whether this rank applies the optimizer step (under `Broadcast`, only rank 0 does).
    pub fn steps_locally(&self) -> bool {
        !matches!(self.policy, SyncPolicy::Broadcast) || self.pg.rank() == 0
    }

    /// After the selected part's optimizer step: parameter broadcast or periodic averaging of
    /// its `params`, per the policy.
    pub fn after_step(&mut self, params: &[Tensor]) -> Result<()> {
        self.part().updates += 1;
        let updates = self.part().updates;
        if self.pg.world_size() == 1 {
            return Ok(());
        }
        let start = Instant::now();
        match self.policy {
            SyncPolicy::Broadcast => {
                tch::no_grad(|| -> Result<()> {
                    for p in params {
                        let mut p = p.shallow_clone();
                        let layout = Layout::of(&[&p]);
                        self.pg.broadcast_verified(&layout, &mut p, 0)?;
                    }
                    Ok(())
                })?;
            }
            SyncPolicy::Periodic { every } if every > 0 && updates.is_multiple_of(every) => {
                tch::no_grad(|| -> Result<()> {
                    for p in params {
                        let mut one = [p.shallow_clone()];
                        let layout = Layout::of(&[&one[0]]);
                        self.pg
                            .all_reduce_verified(&layout, &mut one, ReduceOp::Avg)?;
                    }
                    Ok(())
                })?;
            }
            _ => {}
        }
        self.sync_time += start.elapsed();
        Ok(())
    }

    /// Whether ranks are expected to hold identical parameters right now (what the fingerprint
    /// check may demand).
    pub fn ranks_should_agree(&self) -> bool {
        match self.policy {
            SyncPolicy::Allreduce { .. } | SyncPolicy::Broadcast => true,
            SyncPolicy::Periodic { every } => {
                let averaged = |p: &Part| p.updates.is_multiple_of(every);
                every > 0 && self.parts.iter().all(averaged)
            }
            SyncPolicy::None => false,
        }
    }

    /// Compares a bitwise fingerprint of every named tensor across ranks; a mismatch is an error
    /// naming the ranks and the first differing tensor (in the given order).
    pub fn check_fingerprints(&mut self, named: &[(String, Tensor)]) -> Result<()> {
        let start = Instant::now();
        let mine: Vec<i64> = named.iter().map(|(_, t)| fingerprint(t) as i64).collect();
        let all = self.pg.all_gather(&Tensor::from_slice(&mine))?;
        let all: Vec<Vec<i64>> = all
            .iter()
            .map(|t| Vec::<i64>::try_from(t).unwrap_or_default())
            .collect();
        self.sync_time += start.elapsed();
        for (i, (name, _)) in named.iter().enumerate() {
            let reference = all[0][i];
            let differing: Vec<usize> =
                (0..all.len()).filter(|&r| all[r][i] != reference).collect();
            if !differing.is_empty() {
                bail!(
                    "ranks have drifted apart: rank(s) {differing:?} differ from rank 0 in `{name}` \
                     (the first differing tensor of {}); fingerprints {:?}",
                    named.len(),
                    (0..all.len())
                        .map(|r| format!("{:016x}", all[r][i] as u64))
                        .collect::<Vec<_>>()
                );
            }
        }
        Ok(())
    }
}

/// The one buffer holding the gradients of `params` back to back, in this order, if they are laid
/// out that way (f32, contiguous, each starting where the previous one ends).
fn contiguous_gradients(params: &[Tensor]) -> Option<Tensor> {
    let first = params.first()?.grad();
    if !first.defined() {
        return None;
    }
    let base = first.data_ptr() as usize;
    let mut offset = 0usize;
    for p in params {
        let g = p.grad();
        let laid_out = g.defined()
            && g.kind() == Kind::Float
            && g.device() == first.device()
            && g.is_contiguous()
            && g.data_ptr() as usize == base + offset * 4;
        if !laid_out {
            return None;
        }
        offset += g.numel();
    }
    // as_strided checks the range against the first gradient's storage, so the whole range is one
    // allocation (and every gradient, starting inside it, lies in it).
    first
        .f_as_strided(
            [offset as i64],
            [1],
            Some(crate::torch_ops::storage_offset(&first)),
        )
        .ok()
}

/// The all-reduce policy's reducer. Each bucket's memory is where the gradients are: a slice of
/// the optimizer's flat gradient buffer when the gradients lie back to back, or else a new buffer
/// that the gradients are moved into.
fn build_reducer(
    pg: &ProcessGroup,
    params: &[Tensor],
    buckets: &[Vec<usize>],
    bf16: bool,
) -> Result<GradientReducer> {
    let flat_grads = contiguous_gradients(params);
    let mut offsets = Vec::with_capacity(params.len());
    let mut offset = 0i64;
    for p in params {
        offsets.push(offset);
        offset += p.numel() as i64;
    }
    let mut reducer_buckets = Vec::with_capacity(buckets.len());
    tch::no_grad(|| -> Result<()> {
        for members in buckets {
            let numel: i64 = members.iter().map(|&i| params[i].numel() as i64).sum();
            let flat = match &flat_grads {
                Some(all) => all.narrow(0, offsets[members[0]], numel),
                None => Tensor::zeros([numel], (Kind::Float, params[members[0]].device())),
            };
            let mut slots = Vec::with_capacity(members.len());
            let mut at = 0i64;
            for &i in members {
                let n = params[i].numel() as i64;
                let mut slot = flat.narrow(0, at, n).view_as(&params[i]);
                if flat_grads.is_none() {
                    let existing = params[i].grad();
                    if existing.defined() {
                        slot.copy_(&existing);
                    }
                    crate::torch_ops::set_grad(&params[i], &slot)?;
                }
                slots.push(slot);
                at += n;
            }
            reducer_buckets.push(ReducerBucket {
                params: members.iter().map(|&i| &params[i]).collect(),
                slots,
                flat,
            });
        }
        Ok(())
    })?;
    Ok(pg.gradient_reducer(&reducer_buckets, bf16)?)
}

fn grad_or_zeros(p: &Tensor) -> Tensor {
    let g = p.grad();
    if g.defined() { g } else { p.zeros_like() }
}

/// A 64-bit FNV-1a digest of a tensor's exact bytes (on CPU), shape included.
pub fn fingerprint(t: &Tensor) -> u64 {
    let cpu = t.detach().to_device(tch::Device::Cpu).contiguous();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    for d in cpu.size() {
        for b in d.to_le_bytes() {
            eat(b);
        }
    }
    let bytes = cpu.numel() * cpu.kind().elt_size_in_bytes();
    let mut buf = vec![0u8; bytes];
    cpu.copy_data_u8(&mut buf, cpu.numel());
    for b in buf {
        eat(b);
    }
    h
}

impl crate::algo::Collective for Ddp {
    fn rank(&self) -> usize {
        self.pg.rank()
    }

    fn world_size(&self) -> usize {
        self.pg.world_size()
    }

    fn before_backward(&mut self) {
        Ddp::before_backward(self)
    }

    fn select_part(&mut self, part: usize) -> Result<()> {
        Ddp::select_part(self, part)
    }

    fn sync_gradients(&mut self, params: &[Tensor]) -> Result<()> {
        Ddp::sync_gradients(self, params)
    }

    fn all_reduce_sum(&mut self, values: &mut [f64]) -> Result<()> {
        if self.pg.world_size() == 1 {
            return Ok(());
        }
        let start = Instant::now();
        let mut t = [Tensor::from_slice(values)];
        let layout = Layout::of(&[&t[0]]);
        // Every caller passes a fixed-length vector, identical in length on all ranks.
        self.pg
            .all_reduce_verified(&layout, &mut t, ReduceOp::Sum)?;
        values.copy_from_slice(&Vec::<f64>::try_from(&t[0])?);
        self.sync_time += start.elapsed();
        Ok(())
    }

    fn steps_locally(&self) -> bool {
        Ddp::steps_locally(self)
    }

    fn after_step(&mut self, params: &[Tensor]) -> Result<()> {
        Ddp::after_step(self, params)
    }

    fn take_sync_time(&mut self) -> Duration {
        Ddp::take_sync_time(self)
    }

    fn decide(&mut self, mine: bool) -> Result<bool> {
        if self.pg.world_size() == 1 {
            return Ok(mine);
        }
        let start = Instant::now();
        let mut t = Tensor::from_slice(&[mine as u8]);
        let layout = Layout::of(&[&t]);
        self.pg.broadcast_verified(&layout, &mut t, 0)?;
        self.sync_time += start.elapsed();
        Ok(t.int64_value(&[0]) != 0)
    }
}

impl Part {
    /// The buckets (and, on several ranks, the reducer) of one policy's `params`.
    fn new(pg: &ProcessGroup, params: &[Tensor], policy: SyncPolicy) -> Result<Part> {
        let mut part = Part {
            buckets: Vec::new(),
            reducer: None,
            arm_failure: None,
            updates: 0,
        };
        let SyncPolicy::Allreduce {
            bucket_mb,
            compression,
        } = policy
        else {
            return Ok(part);
        };
        for (i, p) in params.iter().enumerate() {
            if p.kind() != Kind::Float {
                bail!(
                    "parameter {i} is {:?}; gradient buckets hold f32 parameters only",
                    p.kind()
                );
            }
        }
        part.buckets = buckets(params, (bucket_mb * MIB) as usize);
        if pg.world_size() > 1 {
            let bf16 = compression == tandem_config::Compression::Bf16;
            part.reducer = Some(build_reducer(pg, params, &part.buckets, bf16)?);
        }
        Ok(part)
    }
}

/// The parameter indices of each bucket, filled from the last parameter backwards: backward
/// produces the last layers' gradients first, so bucket 0 can be all-reduced while backward
/// still works through the early layers (which in a CNN cost the most).
fn buckets(params: &[Tensor], bucket_bytes: usize) -> Vec<Vec<usize>> {
    let mut buckets = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut bytes = 0usize;
    for i in (0..params.len()).rev() {
        current.push(i);
        bytes += params[i].numel() * 4;
        let cap = if buckets.is_empty() {
            FIRST_BUCKET_BYTES.min(bucket_bytes)
        } else {
            bucket_bytes
        };
        if bytes >= cap {
            current.reverse();
            buckets.push(std::mem::take(&mut current));
            bytes = 0;
        }
    }
    if !current.is_empty() {
        current.reverse();
        buckets.push(current);
    }
    buckets
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a over the shape's bytes, then the values' bytes: worked by hand for a tensor of
    /// two bytes, and different for every one-bit change of a float among many.
    #[test]
    fn a_fingerprint_is_fnv_1a_of_shape_and_bytes_and_sees_one_bit() {
        let t = Tensor::from_slice(&[7u8, 200]);
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in 2i64.to_le_bytes().into_iter().chain([7u8, 200]) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        assert_eq!(fingerprint(&t), h);
        let values: Vec<f32> = (0..64).map(|i| i as f32 * 0.37 - 3.0).collect();
        let base = fingerprint(&Tensor::from_slice(&values));
        let mut seen = std::collections::HashSet::from([base]);
        for i in 0..values.len() {
            for bit in [0, 13, 31] {
                let mut flipped = values.clone();
                flipped[i] = f32::from_bits(flipped[i].to_bits() ^ (1 << bit));
                assert!(
                    seen.insert(fingerprint(&Tensor::from_slice(&flipped))),
                    "value {i}, bit {bit}: a fingerprint seen before"
                );
            }
        }
        // The shape counts too: the same bytes as [2, 32] are another tensor.
        let reshaped = Tensor::from_slice(&values).reshape([2, 32]);
        assert_ne!(fingerprint(&reshaped), base);
    }
}
