//! Proximal Policy Optimization (Schulman et al. 2017, "Proximal Policy Optimization
//! Algorithms"), clipped-surrogate variant, with the implementation details of CleanRL's
//! `ppo.py` (Huang et al. 2022, "The 37 Implementation Details of PPO").
//!
//! One update, top to bottom:
//! 1. advantages A_t come from GAE(lambda) (paper eq. 11-12; [`crate::algo::storage::rollout`]);
//! 2. they are normalised with the mean and standard deviation of the GLOBAL batch, summed over
//!    ranks, so N ranks normalise exactly like one rank holding all the data (CleanRL normalises
//!    per minibatch; over the whole batch is the choice that stays rank-count independent);
//! 3. for K epochs, for each minibatch: maximise L^CLIP+VF+S (paper eq. 9) by one optimizer
//!    step on the DDP-averaged gradient, clipped to a global norm;
//! 4. optionally stop early when the epoch's mean approximate KL exceeds `target_kl`, decided on
//!    rank 0 so every rank runs the same number of collectives.
//!
//! Step 3's gradient is autograd's of [`ppo_loss`], or, for separate MLP torsos on one CPU
//! thread, the same gradient worked out by hand ([`crate::algo::ppo::host`]).
//!
//! Where a batch keeps rows that did not act (a turn waited through, an agent gone from its
//! game: [`Batch::active`]), every expectation in steps 2 to 4 is over the rows that acted, on
//! every rank together (MAPPO's active masks, weighted as `common::LossWeights` says).

pub mod host;

use anyhow::{Result, ensure};
use tch::nn::VarStore;
use tch::{Kind, Reduction, Tensor};

use crate::algo::Collective;
use crate::algo::common::{
    GlobalBatchStats, LossWeights, accumulate_gradients, check_batch, global_batch_stats,
    normalized_over_rows, scheduled_lr, step_on_gradients, weighted_mean,
};
use crate::algo::learner::Scalars;
use crate::algo::on_policy::update::{PolicyUpdate, UpdateAt, evaluate_rows, learner_view};
use crate::algo::optim::{Optimizer, OptimizerSpec};
use crate::algo::ppo::host::{HostPpoStep, PpoTerms};
use crate::algo::storage::rollout::{Batch, MinibatchSampler, RolloutBuffer, VtraceClips};
use crate::nn::{ActorCritic, EntropyUse, Evaluation};
use crate::seeds::{Purpose, derived_seed};

/// The learner's settings: the config's `algorithm "ppo"` section, as the user wrote it.
pub use tandem_config::Ppo as Settings;
use tandem_config::{AdvantageNorm, Advantages};

/// The terms of the PPO objective on one minibatch. `total` carries gradients; the others are
/// detached scalars for logging.
#[derive(Debug)]
pub struct PpoLoss {
    /// -L^CLIP + c1 L^VF - c2 S, the quantity minimised.
    pub total: Tensor,
    /// -L^CLIP
    pub policy_loss: Tensor,
    /// L^VF
    pub value_loss: Tensor,
    /// S, mean entropy
    pub entropy: Tensor,
    /// log r_t(theta) per sample, detached: the input of [`ratio_diagnostics`], which the
    /// update evaluates once over many minibatches rather than once per minibatch.
    pub log_ratio: Tensor,
}

impl PpoLoss {
    /// The detached terms, without the total.
    pub fn terms(self) -> PpoTerms {
        PpoTerms {
            policy_loss: self.policy_loss,
            value_loss: self.value_loss,
            entropy: self.entropy,
            log_ratio: self.log_ratio,
        }
    }
}

/// Two diagnostics of the probability ratios r = exp(`log_ratio`), over all its elements
/// (weighted by the rows' loss `weights`, where some rows did not act): E[(r - 1) - log r], the
/// low-variance KL(old || new) estimator CleanRL logs, and the fraction of samples whose ratio
/// left [1 - eps, 1 + eps]. For equally sized minibatches, over their concatenation they equal
/// the mean of the per-minibatch values.
pub fn ratio_diagnostics(
    log_ratio: &Tensor,
    clip_coef: f64,
    weights: Option<&Tensor>,
) -> (Tensor, Tensor) {
    tch::no_grad(|| {
        let ratio_minus_one = log_ratio.exp() - 1.0;
        let approx_kl = weighted_mean(&(&ratio_minus_one - log_ratio), weights);
        let outside = ratio_minus_one.abs().gt(clip_coef);
        let clip_fraction = match weights {
            Some(w) => weighted_mean(&outside.to_kind(Kind::Float), Some(w)),
            None => outside.mean(Kind::Float),
        };
        (approx_kl, clip_fraction)
    })
}

/// The PPO loss on one minibatch. `advantages` are already normalised (if at all);
/// `old_log_probs`, `old_values` and `returns` come from the rollout. Each expectation E[.] is
/// the mean over the rows, or, with `weights` (`common::LossWeights`: rows that did not act weigh
/// 0), the mean of the weighted rows.
pub fn ppo_loss(
    new: &Evaluation,
    old_log_probs: &Tensor,
    old_values: &Tensor,
    advantages: &Tensor,
    returns: &Tensor,
    weights: Option<&Tensor>,
    config: &Settings,
) -> PpoLoss {
    let mean = |x: &Tensor| weighted_mean(x, weights);
    // Probability ratio r_t(theta) = pi_theta(a_t|s_t) / pi_theta_old(a_t|s_t)  (eq. 6).
    let log_ratio = &new.log_probs - old_log_probs;
    let ratio = log_ratio.exp();

    // L^CLIP = E[min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)]  (eq. 7); we minimise -L^CLIP.
    let eps = config.clip;
    let negated = -advantages;
    let unclipped = &negated * &ratio;
    let clipped = &negated * ratio.clamp(1.0 - eps, 1.0 + eps);
    let policy_loss = mean(&unclipped.maximum(&clipped));

    // L^VF = (V_theta(s_t) - V_t^targ)^2 (eq. 9), halved as in CleanRL; optionally with the
    // value prediction clipped around the old one (Huang et al. 2022, detail 9).
    let squared_error = match config.value_clip {
        Some(value_eps) => {
            let unclipped = (&new.values - returns).square();
            let clipped_values =
                old_values + (&new.values - old_values).clamp(-value_eps, value_eps);
            let clipped = (clipped_values - returns).square();
            mean(&unclipped.maximum(&clipped))
        }
        None if weights.is_some() => mean(&(&new.values - returns).square()),
        None => new.values.mse_loss(returns, Reduction::Mean),
    };

    // S[pi_theta](s_t), the entropy bonus.
    let entropy = mean(&new.entropy);

    // Maximise L^CLIP - c1 L^VF + c2 S  (eq. 9)  <=>  minimise its negation. With c2 = 0 the
    // entropy term adds no gradient, so it is left out of the graph that backward walks (it is
    // still reported). The halving of L^VF folds into c1: one operation fewer to differentiate.
    let mut total = &policy_loss + &squared_error * (0.5 * config.value_coef);
    if config.entropy_coef != 0.0 {
        total = &total - &entropy * config.entropy_coef;
    }
    let value_loss = tch::no_grad(|| &squared_error * 0.5);

    PpoLoss {
        total,
        policy_loss: policy_loss.detach(),
        value_loss: value_loss.detach(),
        entropy: entropy.detach(),
        log_ratio: log_ratio.detach(),
    }
}

/// What one update did, averaged over its minibatches and over ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct PpoStats {
    pub policy_loss: f64,
    pub value_loss: f64,
    pub entropy: f64,
    pub approx_kl: f64,
    pub clip_fraction: f64,
    /// Of the rollout's value predictions against its returns, over the global batch; NaN when
    /// the returns have zero variance.
    pub explained_variance: f64,
    /// Global gradient norm before clipping (of the rank-averaged gradient).
    pub grad_norm: f64,
    pub learning_rate: f64,
    /// Epochs completed (fewer than `update_epochs` after a KL early stop).
    pub epochs_run: usize,
    /// Optimizer steps taken.
    pub optimizer_steps: usize,
}

/// The PPO learner: its optimizer (state checkpointed) and the seed the next update shuffles
/// its minibatches with. Nothing of the shuffle is carried from one update to the next: the
/// trainer derives every update's seed from (seed, rank, update), so a resumed run shuffles as
/// the uninterrupted one did.
#[derive(Debug)]
pub struct Ppo {
    config: Settings,
    optimizer: Optimizer,
    shuffle_seed: u64,
}

/// Index of each statistic in what the update all-reduces at its end.
const POLICY: usize = 0;
const VALUE: usize = 1;
const ENTROPY: usize = 2;
const KL: usize = 3;
const CLIP: usize = 4;
const GRAD_NORM: usize = 5;

impl Ppo {
    /// Adam over the trainable variables of `vs`; `shuffle_seed` seeds the minibatch order.
    pub fn new(vs: &VarStore, config: Settings, shuffle_seed: u64) -> Result<Ppo> {
        let optimizer = Optimizer::new(
            vs,
            OptimizerSpec::Adam {
                beta1: 0.9,
                beta2: 0.999,
                eps: config.adam_eps,
            },
        )?;
        Ok(Ppo {
            config,
            optimizer,
            shuffle_seed,
        })
    }

    /// The learner of `algorithm "ppo"` for this rank's share of the experiment.
    pub fn from_config(vs: &VarStore, p: &Settings) -> Result<Ppo> {
        // The minibatch order is re-derived at every update (see `learn`).
        Ppo::new(vs, p.clone(), 0)
    }

    pub fn optimizer(&self) -> &Optimizer {
        &self.optimizer
    }
    pub fn optimizer_mut(&mut self) -> &mut Optimizer {
        &mut self.optimizer
    }

    /// One PPO update on this rank's share of the batch. `progress` is the fraction of training
    /// done before this update (for annealing); the minibatches are shuffled from the learner's
    /// shuffle seed. Every rank must call it with a batch of the same size.
    pub fn update(
        &mut self,
        model: &ActorCritic,
        batch: &Batch,
        progress: f64,
        collective: &mut dyn Collective,
    ) -> Result<PpoStats> {
        // A recurrent policy's minibatches are whole environment sequences (shuffled
        // environments, not steps), so its states can be recomputed from the rollout's start.
        let units = batch
            .sequences
            .as_ref()
            .map_or(batch.len(), |s| s.num_envs());
        let mut sampler = MinibatchSampler::new(self.shuffle_seed);
        let plan = (0..self.config.epochs)
            .map(|_| sampler.minibatches(units, self.config.minibatches as i64, batch.device()))
            .collect::<Result<Vec<_>>>()?;
        self.update_with_minibatches(model, batch, progress, &plan, collective)
    }

    /// [`Ppo::update`] with the minibatch indices given: `plan[epoch][k]` holds the rows of
    /// minibatch k in that epoch (for tests and for custom orders); for a batch of
    /// environment sequences, the environments whose whole sequences it holds.
    ///
    /// The update in the paper's order: normalise the advantages; for each epoch and minibatch,
    /// the probability ratio, the clipped surrogate, the value loss and the entropy bonus, one
    /// optimizer step; after each epoch, the KL early stop.
    pub fn update_with_minibatches(
        &mut self,
        model: &ActorCritic,
        batch: &Batch,
        progress: f64,
        plan: &[Vec<Tensor>],
        collective: &mut dyn Collective,
    ) -> Result<PpoStats> {
        let config = self.config.clone();
        check_batch(model, batch)?;
        let minibatch_size = check_plan(plan, &config, batch)?
            * batch
                .sequences
                .as_ref()
                .map_or(1, |s| batch.len() / s.num_envs());
        let lr = scheduled_lr(config.lr, config.anneal_lr, progress)?;
        let optimizer_steps = config.epochs * config.minibatches;
        let global = global_batch_stats(batch, optimizer_steps, minibatch_size, collective)?;
        // Where some rank's batch has rows that did not act: each minibatch's rows, in plan
        // order (environments stand for their sequences' rows), and their weights.
        let (rows_of, weights) = match global.masked {
            true => {
                let rows = (plan.iter().flatten())
                    .map(|indices| minibatch_rows(batch, indices))
                    .collect::<Result<Vec<_>>>()?;
                let weights = LossWeights::of(batch, &rows, collective)?;
                (rows, Some(weights))
            }
            false => (Vec::new(), None),
        };

        // Advantage normalisation over the global batch (Huang et al. 2022, detail 7); per
        // minibatch, below, where the config asks for it.
        let advantages = match config.normalize_advantages {
            AdvantageNorm::Batch => {
                (&batch.advantages - global.advantage_mean) / (global.advantage_std + 1e-8)
            }
            AdvantageNorm::Off | AdvantageNorm::Minibatch => batch.advantages.shallow_clone(),
        };

        // The host step where the network has its form and the rank computes on one thread, as
        // the host step does: autograd's gradients without libtorch's per-operation costs.
        let mut host = match crate::nn::host_mlp::host_passes_pay() {
            true => HostPpoStep::for_model(model)?,
            false => None,
        };
        let mut record = UpdateRecord::default();
        for (epoch, minibatches) in plan.iter().enumerate() {
            let epoch_start = record.log_ratios.len();
            for (k, indices) in minibatches.iter().enumerate() {
                let nth = epoch * minibatches.len() + k;
                let per_minibatch = match config.normalize_advantages {
                    AdvantageNorm::Minibatch => {
                        let rows = match rows_of.get(nth) {
                            Some(rows) => rows.shallow_clone(),
                            None => minibatch_rows(batch, indices)?,
                        };
                        Some(normalized_over_rows(batch, &advantages, &rows, collective)?)
                    }
                    AdvantageNorm::Off | AdvantageNorm::Batch => None,
                };
                let minibatch = Minibatch {
                    batch,
                    advantages: per_minibatch.as_ref().unwrap_or(&advantages),
                    indices,
                    weights: weights.as_ref().map(|w| (w, nth)),
                };
                self.optimizer.zero_grad();
                for part in minibatch.parts(config.micro_batches as i64)? {
                    let terms = match &mut host {
                        Some(host) => part.accumulate_on_host(host, &config, collective)?,
                        None => part.accumulate_by_autograd(model, &config, collective)?,
                    };
                    record.push(terms, part.weights);
                }
                let position = || format!("epoch {epoch}, minibatch {k}");
                record.grad_norm_sum += step_on_gradients(
                    &mut self.optimizer,
                    config.max_grad_norm.unwrap_or(f64::INFINITY),
                    lr,
                    collective,
                    &position,
                )?;
                record.steps += 1;
            }
            record.epochs += 1;
            if let Some(target_kl) = config.target_kl
                && epoch_kl_exceeds(&record, epoch_start, target_kl, &config, collective)?
            {
                break;
            }
        }
        record.into_stats(&global, lr, config.clip, collective)
    }
}

/// Checks the plan against the config and the batch before any collective runs; returns the
/// minibatch size.
fn check_plan(plan: &[Vec<Tensor>], config: &Settings, batch: &Batch) -> Result<i64> {
    ensure!(
        plan.len() == config.epochs,
        "ppo: the minibatch plan has {} epochs, the config asks for {}",
        plan.len(),
        config.epochs
    );
    let minibatch_size = plan
        .first()
        .and_then(|e| e.first())
        .map_or(0, |m| m.size1().unwrap_or(0));
    for (epoch, minibatches) in plan.iter().enumerate() {
        ensure!(
            minibatches.len() == config.minibatches,
            "ppo: epoch {epoch} of the plan has {} minibatches, the config asks for {}",
            minibatches.len(),
            config.minibatches
        );
        for (k, m) in minibatches.iter().enumerate() {
            ensure!(
                m.size() == [minibatch_size] && minibatch_size > 0,
                "ppo: minibatches must all hold the same positive number of indices ({minibatch_size}); \
                 epoch {epoch} minibatch {k} has shape {:?}",
                m.size()
            );
            ensure!(
                m.kind() == Kind::Int64 && m.device() == batch.device(),
                "ppo: minibatch indices must be int64 on {:?}; epoch {epoch} minibatch {k} is {:?} on {:?}",
                batch.device(),
                m.kind(),
                m.device()
            );
        }
    }
    // One range check over the whole plan (per minibatch, it would cost three operations and
    // a device read each).
    let every_index = Tensor::cat(&plan.iter().flatten().collect::<Vec<_>>(), 0);
    let (low, high) = every_index.aminmax(None, false);
    let (low, high) = (low.int64_value(&[]), high.int64_value(&[]));
    let (units, what) = match &batch.sequences {
        Some(sequences) => (sequences.num_envs(), "environments"),
        None => (batch.len(), "rows"),
    };
    ensure!(
        low >= 0 && high < units,
        "ppo: the minibatch plan indexes {what} {low}..={high} of a batch of {units}"
    );
    ensure!(
        minibatch_size % config.micro_batches as i64 == 0,
        "ppo: {} micro-batches do not divide the minibatch of {minibatch_size} {what}",
        config.micro_batches
    );
    Ok(minibatch_size)
}

/// The batch rows a minibatch's indices stand for: themselves, or for a batch of environment
/// sequences, every row of those environments.
fn minibatch_rows(batch: &Batch, indices: &Tensor) -> Result<Tensor> {
    match &batch.sequences {
        Some(_) => batch.rows_of_envs(indices),
        None => Ok(indices.shallow_clone()),
    }
}

/// The rows of one minibatch, with their normalised advantages, and where some rank's batch
/// has rows that did not act, the weights of its rows (minibatch `.1` of `.0`).
struct Minibatch<'a> {
    batch: &'a Batch,
    advantages: &'a Tensor,
    indices: &'a Tensor,
    weights: Option<(&'a LossWeights, usize)>,
}

/// One micro-batch of a minibatch: its rows, their weights in the loss (if weighted), and its
/// share of the minibatch's gradient.
struct MinibatchPart {
    rows: Batch,
    advantages: Tensor,
    weights: Option<Tensor>,
    micro_batches: i64,
    is_last: bool,
}

impl std::ops::Deref for MinibatchPart {
    type Target = Batch;
    fn deref(&self) -> &Batch {
        &self.rows
    }
}

impl Minibatch<'_> {
    /// The minibatch cut into `micro_batches` equal parts (gradient accumulation: each part's
    /// mean loss weighted by 1/micro sums to the minibatch's mean loss). A minibatch that is the
    /// whole batch is used as it is: the order of its rows changes no mean, only the rounding of
    /// sums, and gathering it would cost a copy of every field.
    fn parts(&self, micro_batches: i64) -> Result<Vec<MinibatchPart>> {
        let size = self.indices.size1()?;
        if micro_batches == 1 && self.batch.sequences.is_none() && size == self.batch.len() {
            return Ok(vec![MinibatchPart {
                rows: self.batch.select_all(),
                advantages: self.advantages.shallow_clone(),
                weights: self.weights.map(|(w, k)| w.of_all(k, self.batch)),
                micro_batches,
                is_last: true,
            }]);
        }
        let part_size = size / micro_batches;
        (0..micro_batches)
            .map(|j| {
                let rows = if micro_batches == 1 {
                    self.indices.shallow_clone()
                } else {
                    self.indices.narrow(0, j * part_size, part_size)
                };
                // Environments stand for their whole sequences.
                let (picked, rows) = match &self.batch.sequences {
                    Some(_) => (
                        self.batch.select_envs(&rows)?,
                        self.batch.rows_of_envs(&rows)?,
                    ),
                    None => (self.batch.select(&rows), rows),
                };
                Ok(MinibatchPart {
                    weights: self.weights.map(|(w, k)| w.of_rows(k, self.batch, &rows)),
                    rows: picked,
                    advantages: self.advantages.index_select(0, &rows),
                    micro_batches,
                    is_last: j == micro_batches - 1,
                })
            })
            .collect()
    }
}

impl MinibatchPart {
    /// Backpropagates this part's share of the minibatch loss. DDP synchronises once per
    /// minibatch, overlapping the last part's backward.
    fn accumulate_gradients(&self, loss: &Tensor, collective: &mut dyn Collective) {
        if self.micro_batches == 1 {
            accumulate_gradients(loss, true, collective);
        } else {
            let share = 1.0 / self.micro_batches as f64;
            accumulate_gradients(&(loss * share), self.is_last, collective);
        }
    }

    /// Evaluates the part under the current policy and backpropagates its share of the loss
    /// built from r_t(θ), L^CLIP, L^VF and S (paper eq. 6-9); returns the loss's detached terms.
    fn accumulate_by_autograd(
        &self,
        model: &ActorCritic,
        config: &Settings,
        collective: &mut dyn Collective,
    ) -> Result<PpoTerms> {
        let entropy = EntropyUse::for_coefficient(config.entropy_coef);
        let evaluation = evaluate_rows(model, self, entropy)?;
        let loss = ppo_loss(
            &evaluation,
            &self.log_probs,
            &self.values,
            &self.advantages,
            &self.returns,
            self.weights.as_ref(),
            config,
        );
        self.accumulate_gradients(&loss.total, collective);
        Ok(loss.terms())
    }

    /// The same share of the same gradient, by the host step ([`HostPpoStep`]); returns the
    /// loss's detached terms.
    fn accumulate_on_host(
        &self,
        host: &mut HostPpoStep,
        config: &Settings,
        collective: &mut dyn Collective,
    ) -> Result<PpoTerms> {
        if self.is_last {
            collective.before_backward();
        }
        let share = 1.0 / self.micro_batches as f64;
        host.accumulate(
            &self.rows,
            &self.advantages,
            self.weights.as_ref(),
            share,
            config,
        )
    }
}

/// Whether the mean approximate KL of the epoch whose parts start at `epoch_start` in
/// `record`, averaged over ranks, exceeds `target_kl`; rank 0's answer is everyone's, so every
/// rank runs the same number of collectives.
fn epoch_kl_exceeds(
    record: &UpdateRecord,
    epoch_start: usize,
    target_kl: f64,
    config: &Settings,
    collective: &mut dyn Collective,
) -> Result<bool> {
    let (epoch_kl, _) = record.ratio_diagnostics(epoch_start, config.clip);
    let mut kl = [epoch_kl.double_value(&[])];
    collective.all_reduce_sum(&mut kl)?;
    let mean_kl = kl[0] / collective.world_size() as f64;
    collective.decide(mean_kl > target_kl)
}

/// The detached loss terms and log-ratios of every (micro-)batch, reduced once at the end (and
/// per epoch for the KL early stop): per minibatch, their reductions would cost more
/// operations than the loss itself on small models. All parts have the same size, so means
/// over the lot are the means of the per-minibatch values.
#[derive(Default)]
struct UpdateRecord {
    policy: Vec<Tensor>,
    value: Vec<Tensor>,
    entropy: Vec<Tensor>,
    log_ratios: Vec<Tensor>,
    /// Each part's loss weights, where the update weighs its rows.
    weights: Vec<Tensor>,
    grad_norm_sum: f64,
    steps: usize,
    epochs: usize,
}

impl UpdateRecord {
    fn push(&mut self, loss: PpoTerms, weights: Option<Tensor>) {
        self.policy.push(loss.policy_loss);
        self.value.push(loss.value_loss);
        self.entropy.push(loss.entropy);
        self.log_ratios.push(loss.log_ratio);
        self.weights.extend(weights);
    }

    /// [`ratio_diagnostics`] over the parts from `start` on.
    fn ratio_diagnostics(&self, start: usize, clip_coef: f64) -> (Tensor, Tensor) {
        let weights = match self.weights.is_empty() {
            true => None,
            false => Some(Tensor::cat(&self.weights[start..], 0)),
        };
        let log_ratios = Tensor::cat(&self.log_ratios[start..], 0);
        ratio_diagnostics(&log_ratios, clip_coef, weights.as_ref())
    }

    /// The update's statistics, averaged over ranks in one collective.
    fn into_stats(
        self,
        global: &GlobalBatchStats,
        lr: f64,
        clip_coef: f64,
        collective: &mut dyn Collective,
    ) -> Result<PpoStats> {
        let (approx_kl, clip_fraction) = self.ratio_diagnostics(0, clip_coef);
        let [policy, value, entropy] =
            [self.policy, self.value, self.entropy].map(|t| Tensor::stack(&t, 0).mean(Kind::Float));
        let on_device = Tensor::stack(&[policy, value, entropy, approx_kl, clip_fraction], 0);
        let mut averages =
            Vec::<f64>::try_from(&on_device.to_device(tch::Device::Cpu).to_kind(Kind::Double))?;
        averages.push(self.grad_norm_sum / self.steps as f64);
        collective.all_reduce_sum(&mut averages)?;
        let world = collective.world_size() as f64;
        let mean = |i: usize| averages[i] / world;
        Ok(PpoStats {
            policy_loss: mean(POLICY),
            value_loss: mean(VALUE),
            entropy: mean(ENTROPY),
            approx_kl: mean(KL),
            clip_fraction: mean(CLIP),
            explained_variance: global.explained_variance,
            grad_norm: mean(GRAD_NORM),
            learning_rate: lr,
            epochs_run: self.epochs,
            optimizer_steps: self.steps,
        })
    }
}

impl PpoStats {
    /// The update's scalars by TensorBoard tag.
    pub fn scalars(&self) -> Scalars {
        vec![
            ("loss/policy", self.policy_loss),
            ("loss/value", self.value_loss),
            ("loss/entropy", self.entropy),
            ("ppo/approx_kl", self.approx_kl),
            ("ppo/clip_fraction", self.clip_fraction),
            ("ppo/explained_variance", self.explained_variance),
            ("ppo/epochs", self.epochs_run as f64),
            ("optim/grad_norm", self.grad_norm),
            ("optim/learning_rate", self.learning_rate),
        ]
    }
}

impl PolicyUpdate for Ppo {
    fn optimizer(&self) -> &Optimizer {
        &self.optimizer
    }
    fn retune(&mut self, algorithm: &tandem_config::Algorithm) -> Result<()> {
        match algorithm {
            tandem_config::Algorithm::Ppo(settings) => {
                self.config = settings.clone();
                Ok(())
            }
            other => anyhow::bail!("ppo cannot take {}'s settings", other.name()),
        }
    }
    fn optimizer_mut(&mut self) -> &mut Optimizer {
        &mut self.optimizer
    }

    fn learn(
        &mut self,
        model: &ActorCritic,
        rollout: &RolloutBuffer,
        last_values: &Tensor,
        at: UpdateAt,
        collective: &mut dyn Collective,
    ) -> Result<Scalars> {
        // Minibatch order is derived from (seed, rank, update), not carried state, so a resumed
        // run shuffles exactly as the uninterrupted one.
        self.shuffle_seed = derived_seed(at.seed, Purpose::Shuffle, at.rank as u64, at.update);
        let Settings {
            gamma, gae_lambda, ..
        } = self.config;
        let batch = match self.config.advantages {
            Advantages::Gae => rollout.gae_batch(last_values, gamma, gae_lambda)?,
            // V-trace: targets and advantages from the learner's own policy and values,
            // weighted by the truncated ratios against the policy that collected the batch.
            Advantages::Vtrace => {
                let clips = VtraceClips {
                    rho: self.config.vtrace_rho_clip,
                    c: self.config.vtrace_c_clip,
                };
                rollout.vtrace_batch(&learner_view(model, rollout)?, gamma, gae_lambda, clips)?
            }
        };
        Ok(self
            .update(model, &batch, at.progress, collective)?
            .scalars())
    }
}
