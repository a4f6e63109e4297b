//! Pieces the learners share: checks on a batch, statistics over the global batch (all ranks),
//! the learning-rate schedule, the synchronised optimizer step, and the target-network update
//! of the off-policy learners.

use anyhow::{Result, bail, ensure};
use tch::{Kind, Tensor};

use crate::algo::Collective;
use crate::algo::optim::Optimizer;
use crate::algo::storage::rollout::Batch;
use crate::nn::ActorCritic;
use tandem_env::ActionSpace;

/// Rejects a batch the model cannot evaluate (wrong observation shape, out-of-range discrete
/// actions, box actions of the wrong width) before any collective runs, with a message naming
/// the problem. Box actions are not range-checked: the rollout stores unclipped samples.
pub(crate) fn check_batch(model: &ActorCritic, batch: &Batch) -> Result<()> {
    let obs = batch.obs.size();
    ensure!(
        obs[1..] == *model.obs_shape(),
        "update: batch observations have shape {:?} per sample, the network expects {:?}",
        &obs[1..],
        model.obs_shape()
    );
    let n = match model.action_space() {
        ActionSpace::Discrete { n } => *n as i64,
        ActionSpace::Box { low, .. } => return check_box_actions(batch, low.len()),
        ActionSpace::MultiDiscrete { nvec } => return check_multi_discrete_actions(batch, nvec),
    };
    ensure!(
        !batch.actions.is_floating_point(),
        "update: discrete actions must be integers, got {:?}",
        batch.actions.kind()
    );
    let (low, high) = batch.actions.aminmax(None, false);
    let (low, high) = (low.int64_value(&[]), high.int64_value(&[]));
    if low < 0 || high >= n {
        bail!(
            "update: batch holds action {} but the action space is 0..{n}",
            if low < 0 { low } else { high }
        );
    }
    Ok(())
}

/// `[B, k]` integers, column `i` within `0..nvec[i]`.
fn check_multi_discrete_actions(batch: &Batch, nvec: &[usize]) -> Result<()> {
    ensure!(
        !batch.actions.is_floating_point(),
        "update: multi-discrete actions must be integers, got {:?}",
        batch.actions.kind()
    );
    let shape = batch.actions.size();
    ensure!(
        shape.len() == 2 && shape[1] == nvec.len() as i64,
        "update: batch actions have shape {shape:?}, the network acts with {} components",
        nvec.len()
    );
    if shape[0] == 0 {
        return Ok(());
    }
    let low = Vec::<i64>::try_from(batch.actions.amin(0, false))?;
    let high = Vec::<i64>::try_from(batch.actions.amax(0, false))?;
    for (i, &n) in nvec.iter().enumerate() {
        if low[i] < 0 || high[i] >= n as i64 {
            bail!(
                "update: batch holds action {} in component {i}, whose actions are 0..{n}",
                if low[i] < 0 { low[i] } else { high[i] }
            );
        }
    }
    Ok(())
}

fn check_box_actions(batch: &Batch, dim: usize) -> Result<()> {
    ensure!(
        batch.actions.is_floating_point(),
        "update: box actions must be floats, got {:?}",
        batch.actions.kind()
    );
    let shape = batch.actions.size();
    ensure!(
        shape.len() == 2 && shape[1] == dim as i64,
        "update: batch actions have shape {shape:?}, the network acts with boxes of {dim}"
    );
    Ok(())
}

/// Learning rate at `progress` (fraction of training done, in [0, 1]): linear decay to 0 when
/// annealing (CleanRL: `lr * (1 - (iteration - 1) / num_iterations)`), else constant.
pub(crate) fn scheduled_lr(base: f64, anneal: bool, progress: f64) -> Result<f64> {
    ensure!(
        (0.0..=1.0).contains(&progress),
        "update: training progress must be in [0, 1], got {progress}"
    );
    Ok(if anneal {
        base * (1.0 - progress)
    } else {
        base
    })
}

/// Statistics of the whole global batch, summed over ranks in one collective. Where a batch
/// has rows that did not act ([`Batch::active`]), they are over the rows that acted.
pub(crate) struct GlobalBatchStats {
    pub advantage_mean: f64,
    pub advantage_std: f64,
    /// 1 - Var[returns - values] / Var[returns] over the global batch; NaN when the returns
    /// have zero variance (the ratio is undefined).
    pub explained_variance: f64,
    /// Whether some rank's batch has rows that did not act: then every rank weights its losses
    /// ([`LossWeights`]).
    pub masked: bool,
}

/// Sums per-rank moments of advantages, returns and value errors over all ranks, and checks that
/// every rank will run the same number of optimizer steps with equally sized minibatches
/// (otherwise the gradient all-reduce would hang or average unequal things).
pub(crate) fn global_batch_stats(
    batch: &Batch,
    optimizer_steps: usize,
    minibatch_size: i64,
    collective: &mut dyn Collective,
) -> Result<GlobalBatchStats> {
    let (advantages, returns, values) = (
        batch.advantages.to_kind(Kind::Double),
        batch.returns.to_kind(Kind::Double),
        batch.values.to_kind(Kind::Double),
    );
    let errors = &returns - &values;
    // Rows that did not act count zero; their number is summed on the device, the batch's
    // own known on the host.
    let active = batch.active.as_ref().map(|a| a.to_kind(Kind::Double));
    let sums_of = |x: &Tensor| match &active {
        Some(w) => [
            (x * w).sum(Kind::Double),
            (x.square() * w).sum(Kind::Double),
        ],
        None => [x.sum(Kind::Double), x.square().sum(Kind::Double)],
    };
    let mut moments: Vec<Tensor> = [&advantages, &returns, &errors]
        .into_iter()
        .flat_map(sums_of)
        .collect();
    moments.extend(active.as_ref().map(|w| w.sum(Kind::Double)));
    let mut sums = Vec::<f64>::try_from(&Tensor::stack(&moments, 0).to_device(tch::Device::Cpu))?;
    if active.is_none() {
        sums.push(batch.len() as f64);
    }
    let steps = optimizer_steps as f64;
    let size = minibatch_size as f64;
    let masked = f64::from(u8::from(batch.active.is_some()));
    sums.extend_from_slice(&[steps, steps * steps, size, size * size, masked]);
    collective.all_reduce_sum(&mut sums)?;
    let world = collective.world_size() as f64;
    let same_everywhere = |sum: f64, sum_sq: f64| world * sum_sq == sum * sum;
    ensure!(
        same_everywhere(sums[7], sums[8]) && same_everywhere(sums[9], sums[10]),
        "update: ranks disagree on the number of optimizer steps ({} on this rank) or the minibatch size \
         ({minibatch_size} here); every rank needs the same per-rank batch size",
        optimizer_steps
    );
    let n = sums[6];
    ensure!(
        n >= 2.0,
        "update: the global batch has {n} samples that acted; advantage statistics need at least 2"
    );
    let mean = |s: f64| s / n;
    let (advantage_mean, advantage_std) = mean_and_std(sums[0], sums[1], n);
    // Population variances, as np.var in CleanRL's explained variance.
    let returns_var = mean(sums[3]) - mean(sums[2]).powi(2);
    let errors_var = mean(sums[5]) - mean(sums[4]).powi(2);
    let explained_variance = if returns_var > 0.0 {
        1.0 - errors_var / returns_var
    } else {
        f64::NAN
    };
    Ok(GlobalBatchStats {
        advantage_mean,
        advantage_std,
        explained_variance,
        masked: sums[11] > 0.0,
    })
}

/// The weights of a batch's rows in the mean losses of its minibatches, where some rank's batch
/// has rows that did not act: w_i = a_i * world * B / C_k for row i of minibatch k, with a_i
/// its [`Batch::active`] flag (1 where the batch has none), B the minibatch's size on each rank
/// and C_k the rows that acted in minibatch k summed over the ranks. A rank's mean of
/// w_i * loss_i, averaged over the ranks as DDP averages gradients, is then the mean over the
/// global minibatch's rows that acted: what one rank holding every rank's rows would compute.
pub(crate) struct LossWeights {
    /// world * B / C_k for each minibatch, in the order given (0 where no row acted).
    scales: Vec<f64>,
}

impl LossWeights {
    /// The weights of the minibatches whose rows are `minibatches` (each `[B]`, the same `B`
    /// on every rank), in one collective. Only where some rank's batch has rows that did not
    /// act ([`GlobalBatchStats::masked`]): elsewhere every weight would be 1, and the losses
    /// take plain means.
    pub fn of(
        batch: &Batch,
        minibatches: &[Tensor],
        collective: &mut dyn Collective,
    ) -> Result<LossWeights> {
        let mut counts: Vec<f64> = match &batch.active {
            Some(active) => {
                let each: Vec<Tensor> = minibatches
                    .iter()
                    .map(|rows| active.index_select(0, rows).sum(Kind::Double))
                    .collect();
                Vec::<f64>::try_from(&Tensor::stack(&each, 0).to_device(tch::Device::Cpu))?
            }
            None => minibatches
                .iter()
                .map(|rows| rows.size()[0] as f64)
                .collect(),
        };
        collective.all_reduce_sum(&mut counts)?;
        let world = collective.world_size() as f64;
        let scales = minibatches
            .iter()
            .zip(counts)
            .map(|(rows, count)| match count > 0.0 {
                true => world * rows.size()[0] as f64 / count,
                false => 0.0,
            })
            .collect();
        Ok(LossWeights { scales })
    }

    /// The weights of `rows` of `batch` in minibatch `k`.
    pub fn of_rows(&self, k: usize, batch: &Batch, rows: &Tensor) -> Tensor {
        let scale = self.scales[k];
        match &batch.active {
            Some(active) => active.index_select(0, rows) * scale,
            None => Tensor::full(rows.size(), scale, (Kind::Float, batch.device())),
        }
    }

    /// The weights of every row of `batch`, the whole of minibatch `k`.
    pub fn of_all(&self, k: usize, batch: &Batch) -> Tensor {
        let scale = self.scales[k];
        match &batch.active {
            Some(active) => active * scale,
            None => Tensor::full([batch.len()], scale, (Kind::Float, batch.device())),
        }
    }
}

/// The mean of `x` weighted by `weights` ([`LossWeights`]): mean(w * x); plain where `None`.
pub fn weighted_mean(x: &Tensor, weights: Option<&Tensor>) -> Tensor {
    match weights {
        Some(w) => (x * w).mean(Kind::Float),
        None => x.mean(Kind::Float),
    }
}

/// The mean and the unbiased (n - 1) standard deviation of `n` values from their sum and sum of
/// squares, as torch.std in CleanRL's and Stable-Baselines3's advantage normalisation.
pub(crate) fn mean_and_std(sum: f64, sum_sq: f64, n: f64) -> (f64, f64) {
    let mean = sum / n;
    let var = ((sum_sq - n * mean * mean) / (n - 1.0)).max(0.0);
    (mean, var.sqrt())
}

/// `advantages` normalised by the mean and standard deviation of the rows `rows` of every
/// rank (the global minibatch: each rank holds its share, so all ranks normalise alike, as
/// one rank holding the whole minibatch would), summed in one collective. Every row of the
/// result is normalised; the caller reads the minibatch's.
pub(crate) fn normalized_over_rows(
    batch: &Batch,
    advantages: &Tensor,
    rows: &Tensor,
    collective: &mut dyn Collective,
) -> Result<Tensor> {
    let picked = advantages.index_select(0, rows).to_kind(Kind::Double);
    // Rows that did not act count zero; the minibatch's size is known on the host.
    let moments = match &batch.active {
        Some(active) => {
            let w = active.index_select(0, rows).to_kind(Kind::Double);
            vec![
                (&picked * &w).sum(Kind::Double),
                (picked.square() * &w).sum(Kind::Double),
                w.sum(Kind::Double),
            ]
        }
        None => vec![picked.sum(Kind::Double), picked.square().sum(Kind::Double)],
    };
    let mut sums = Vec::<f64>::try_from(&Tensor::stack(&moments, 0).to_device(tch::Device::Cpu))?;
    if batch.active.is_none() {
        sums.push(rows.size1()? as f64);
    }
    collective.all_reduce_sum(&mut sums)?;
    ensure!(
        sums[2] >= 2.0,
        "update: a global minibatch of {} samples that acted; normalising its advantages needs at least 2",
        sums[2]
    );
    let (mean, std) = mean_and_std(sums[0], sums[1], sums[2]);
    Ok((advantages - mean) / (std + 1e-8))
}

/// Backward of one loss into the accumulated gradients. `ends_step` marks the backward after
/// which the gradients are synchronised (the only one, or the last micro-batch's): DDP overlaps
/// its all-reduce with that one, and only that one.
pub(crate) fn accumulate_gradients(
    loss: &Tensor,
    ends_step: bool,
    collective: &mut dyn Collective,
) {
    if ends_step {
        collective.before_backward();
    }
    loss.backward();
}

/// Zeroed gradients, backward, DDP gradient sync, clipping of the (now identical) averaged
/// gradient, step. Returns the gradient norm before clipping.
pub(crate) fn synchronised_step(
    optimizer: &mut Optimizer,
    loss: &Tensor,
    max_grad_norm: f64,
    lr: f64,
    collective: &mut dyn Collective,
    position: &dyn Fn() -> String,
) -> Result<f64> {
    optimizer.zero_grad();
    accumulate_gradients(loss, true, collective);
    step_on_gradients(optimizer, max_grad_norm, lr, collective, position)
}

/// DDP gradient sync, clipping, step, on gradients already accumulated. Returns the gradient
/// norm before clipping. A non-finite norm is an error on every rank at once (all ranks hold the
/// same averaged gradient), so no rank is left waiting.
pub(crate) fn step_on_gradients(
    optimizer: &mut Optimizer,
    max_grad_norm: f64,
    lr: f64,
    collective: &mut dyn Collective,
    position: &dyn Fn() -> String,
) -> Result<f64> {
    collective.sync_gradients(optimizer.parameters())?;
    let norm = optimizer.clip_grad_norm(max_grad_norm)?;
    if !norm.is_finite() {
        bail!(
            "update: the gradient norm is {norm} at {}; the loss diverged",
            position()
        );
    }
    // Under the broadcast policy only rank 0 steps; then the policy's post-step sync runs
    // (parameter broadcast, periodic averaging).
    if collective.steps_locally() {
        optimizer.step(lr)?;
    }
    collective.after_step(optimizer.parameters())?;
    Ok(norm)
}
