//! Data-parallel training state kept equal across ranks: the sync policies (gradient all-reduce in
//! buckets with optional bf16 compression, reduce-to-rank-0 plus parameter broadcast, periodic
//! parameter averaging, none), the start-up broadcast of parameters and buffers from rank 0, and
//! the cross-rank fingerprint that proves ranks still agree.
//!
//! Every rank must call the same methods in the same order; the methods themselves never decide
//! differently on different ranks (the decisions are functions of the update count only).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tch::{Kind, Tensor};

use super::{Layout, ProcessGroup, ReduceOp};

/// How ranks keep their models together.
#[derive(Debug, Clone, PartialEq)]
pub enum SyncPolicy {
    /// Average gradients after every backward pass (DDP), in buckets of about `bucket_bytes`.
    AllReduce { bucket_bytes: usize, bf16: bool },
    /// Gradients are summed on rank 0, which alone steps and then broadcasts the parameters.
    Broadcast,
    /// Each rank steps on its own gradients; parameters are averaged every `every` updates.
    Periodic { every: u64 },
    /// Independent ranks (nothing is synchronised after the initial broadcast).
    None,
}

/// A contiguous group of parameters reduced in one collective.
struct Bucket {
    params: Vec<usize>,
    flat: Tensor,
    layout: Layout,
}

/// The gradient synchroniser of one rank.
pub struct Ddp {
    pg: ProcessGroup,
    policy: SyncPolicy,
    buckets: Vec<Bucket>,
    updates: u64,
    /// Time spent in collectives since the last [`Ddp::take_sync_time`].
    sync_time: Duration,
}

impl Ddp {
    /// Builds the buckets for `params` (in the caller's fixed order) and checks with every rank
    /// that all of them hold the same parameter layout.
    pub fn new(pg: ProcessGroup, params: &[Tensor], policy: SyncPolicy) -> Result<Ddp> {
        // One layout check for the whole parameter list, so later bucket collectives can skip it.
        pg.verify_layout(&params.iter().collect::<Vec<_>>())
            .context("ranks do not hold the same model")?;
        let mut buckets = Vec::new();
        if let SyncPolicy::AllReduce { bucket_bytes, bf16 } = &policy {
            let kind = if *bf16 { Kind::BFloat16 } else { Kind::Float };
            let mut current: Vec<usize> = Vec::new();
            let mut bytes = 0usize;
            let flush = |current: &mut Vec<usize>, buckets: &mut Vec<Bucket>| -> Result<()> {
                if current.is_empty() {
                    return Ok(());
                }
                let numel: i64 = current.iter().map(|&i| params[i].numel() as i64).sum();
                let flat = Tensor::zeros([numel], (kind, params[current[0]].device()));
                let layout = Layout::of(&[&flat]);
                buckets.push(Bucket {
                    params: std::mem::take(current),
                    flat,
                    layout,
                });
                Ok(())
            };
            for (i, p) in params.iter().enumerate() {
                if p.kind() != Kind::Float {
                    bail!(
                        "parameter {i} is {:?}; gradient buckets hold f32 parameters only",
                        p.kind()
                    );
                }
                current.push(i);
                bytes += p.numel() * 4;
                if bytes >= *bucket_bytes {
                    flush(&mut current, &mut buckets)?;
                    bytes = 0;
                }
            }
            flush(&mut current, &mut buckets)?;
        }
        // Uncompressed buckets hold the gradients themselves (each parameter's gradient is a view
        // into its bucket), so a sync is one all-reduce and one division, with no copies. When
        // the gradients already lie back to back (the optimizer's flat buffer), the buckets are
        // slices of that buffer; otherwise the gradients are moved into the buckets.
        let in_place =
            matches!(policy, SyncPolicy::AllReduce { bf16: false, .. }) && pg.world_size() > 1;
        if in_place && let Some(flat) = contiguous_gradients(params) {
            let mut offset = 0i64;
            for bucket in &mut buckets {
                let numel = bucket.flat.numel() as i64;
                bucket.flat = flat.narrow(0, offset, numel);
                offset += numel;
            }
        } else if in_place {
            for bucket in &buckets {
                let mut offset = 0i64;
                for &i in &bucket.params {
                    let n = params[i].numel() as i64;
                    let view = bucket.flat.narrow(0, offset, n).view_as(&params[i]);
                    super::group::set_grad(&params[i], &view)?;
                    offset += n;
                }
            }
        }
        Ok(Ddp {
            pg,
            policy,
            buckets,
            updates: 0,
            sync_time: Duration::ZERO,
        })
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

    /// Number of gradient buckets (0 unless the policy is all-reduce).
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
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

    /// After backward: makes the gradients what this policy wants stepped on.
    pub fn sync_gradients(&mut self, params: &[Tensor]) -> Result<()> {
        if self.pg.world_size() == 1 {
            return Ok(());
        }
        let start = Instant::now();
        let world = self.pg.world_size() as f64;
        match &self.policy {
            SyncPolicy::AllReduce { .. } => {
                for bucket in &mut self.buckets {
                    tch::no_grad(|| -> Result<()> {
                        // Gradients normally live in the bucket already; copy only those that
                        // do not (compressed buckets, or a gradient someone replaced).
                        let mut offset = 0i64;
                        let mut copied = Vec::new();
                        for &i in &bucket.params {
                            let n = params[i].numel() as i64;
                            let mut slot = bucket.flat.narrow(0, offset, n);
                            let g = params[i].grad();
                            if !g.defined() {
                                let _ = slot.zero_();
                            } else if g.data_ptr() != slot.data_ptr() || g.kind() != slot.kind() {
                                slot.copy_(&g.view(-1));
                                copied.push((i, offset, n));
                            }
                            offset += n;
                        }
                        let mut flat = [bucket.flat.shallow_clone()];
                        self.pg
                            .all_reduce_verified(&bucket.layout, &mut flat, ReduceOp::Sum)?;
                        let _ = bucket.flat.g_div_scalar_(world);
                        for (i, offset, n) in copied {
                            params[i]
                                .grad()
                                .view(-1)
                                .copy_(&bucket.flat.narrow(0, offset, n));
                        }
                        Ok(())
                    })?;
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

    /// After the optimizer step: parameter broadcast or periodic averaging, per the policy.
    pub fn after_step(&mut self, params: &[Tensor]) -> Result<()> {
        self.updates += 1;
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
            SyncPolicy::Periodic { every } if every > 0 && self.updates.is_multiple_of(every) => {
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
            SyncPolicy::AllReduce { .. } | SyncPolicy::Broadcast => true,
            SyncPolicy::Periodic { every } => every > 0 && self.updates.is_multiple_of(every),
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
        .f_as_strided([offset as i64], [1], Some(first.storage_offset()))
        .ok()
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
