//! PPO and A2C updates: the loss against hand-computed values, the optimizers against libtorch's
//! own, bit-reproducibility, and one rank versus two in-process "ranks" (threads joined by a
//! collective that averages their gradients) giving the same parameters.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};

use anyhow::Result;
use tandem::algo::{
    A2c, Batch, Collective, Local, MinibatchSampler, Optimizer, OptimizerSpec, Ppo, clip_grad_norm,
    ppo_loss, ratio_diagnostics,
};
use tandem::nn::{
    Activation, ActorCritic, ActorCriticSpec, EntropyUse, Evaluation, NetworkSpec,
    parameters_in_order,
};
use tandem_config::AdvantageNorm;
use tandem_env::ActionSpace;
use tch::nn::{OptimizerConfig, VarStore};
use tch::{Device, Kind, Tensor};

/// libtorch's generator is process-wide and tests run on parallel threads: tests that seed it
/// hold this lock while they draw.
static TORCH_RNG: Mutex<()> = Mutex::new(());

fn with_torch_rng<T>(draw: impl FnOnce() -> T) -> T {
    let _guard = TORCH_RNG
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    draw()
}

fn floats(values: &[f32]) -> Tensor {
    Tensor::from_slice(values)
}

fn scalar(t: &Tensor) -> f64 {
    t.double_value(&[])
}

#[test]
fn ppo_loss_matches_hand_computation() {
    // Ratios r = [1.5, 0.9, 0.7]; advantages [1, -2, 0.5]; eps 0.2.
    //   -min(rA, clip(r)A): [-min(1.5, 1.2), -min(-1.8, -1.8), -min(0.35, 0.4)] = [-1.2, 1.8, -0.35]
    //   policy loss = 0.25 / 3; ratios outside [0.8, 1.2]: 1.5 and 0.7 -> clip fraction 2/3.
    // Values: old [1, 2, 0], new [1.5, 1.9, -0.5], returns [2, 1, 0], value clip 0.2.
    //   unclipped errors^2 [0.25, 0.81, 0.25]; clipped predictions [1.2, 1.9, -0.2] ->
    //   errors^2 [0.64, 0.81, 0.04]; max [0.64, 0.81, 0.25] -> value loss 0.5 * 1.7 / 3.
    // Entropy mean 0.6. Total = 0.25/3 - 0.01 * 0.6 + 0.5 * (0.85/3) = 0.219.
    let ratios = [1.5f64, 0.9, 0.7];
    let new = Evaluation {
        log_probs: Tensor::from_slice(&ratios.map(|r| r.ln() as f32)),
        entropy: floats(&[1.0, 0.5, 0.3]),
        values: floats(&[1.5, 1.9, -0.5]),
    };
    let old_log_probs = floats(&[0.0, 0.0, 0.0]);
    let old_values = floats(&[1.0, 2.0, 0.0]);
    let advantages = floats(&[1.0, -2.0, 0.5]);
    let returns = floats(&[2.0, 1.0, 0.0]);
    let config = common::cleanrl_ppo();
    let loss = ppo_loss(
        &new,
        &old_log_probs,
        &old_values,
        &advantages,
        &returns,
        None,
        &config,
    );
    let close = |name: &str, got: f64, expected: f64| {
        assert!(
            (got - expected).abs() < 1e-6,
            "{name}: got {got}, expected {expected}"
        );
    };
    close("policy loss", scalar(&loss.policy_loss), 0.25 / 3.0);
    close("value loss", scalar(&loss.value_loss), 0.5 * 1.7 / 3.0);
    close("entropy", scalar(&loss.entropy), 0.6);
    let (approx_kl, clip_fraction) = ratio_diagnostics(&loss.log_ratio, config.clip, None);
    close("clip fraction", scalar(&clip_fraction), 2.0 / 3.0);
    close("total", scalar(&loss.total), 0.219);
    let kl: f64 = ratios.iter().map(|r| (r - 1.0) - r.ln()).sum::<f64>() / 3.0;
    close("approx kl", scalar(&approx_kl), kl);

    let unclipped_config = tandem_config::Ppo {
        value_clip: None,
        ..common::cleanrl_ppo()
    };
    let loss = ppo_loss(
        &new,
        &old_log_probs,
        &old_values,
        &advantages,
        &returns,
        None,
        &unclipped_config,
    );
    close(
        "unclipped value loss",
        scalar(&loss.value_loss),
        0.5 * 1.31 / 3.0,
    );
}

#[test]
fn optimizers_match_libtorchs_adam_and_rmsprop() {
    let cases = [
        (
            OptimizerSpec::Adam {
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-5,
            },
            "exp_avg_sq/w",
        ),
        (
            OptimizerSpec::RmsProp {
                alpha: 0.99,
                eps: 1e-5,
            },
            "square_avg/w",
        ),
    ];
    let _guard = TORCH_RNG
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    for (spec, state_name) in cases {
        let reference_vs = VarStore::new(Device::Cpu);
        let reference_w = reference_vs.root().randn_standard("w", &[3, 4]);
        let mut ours_vs = VarStore::new(Device::Cpu);
        let ours_w = ours_vs.root().zeros("w", &[3, 4]);
        ours_vs.copy(&reference_vs).unwrap();
        let target = Tensor::randn([3, 4], (Kind::Float, Device::Cpu));
        let weights = Tensor::rand([3, 4], (Kind::Float, Device::Cpu)) * 3.0;
        let loss = |w: &Tensor| ((w - &target).square() * &weights).sum(Kind::Float);
        let lr = 0.05;
        let mut reference = match spec {
            OptimizerSpec::Adam { eps, .. } => tch::nn::Adam {
                eps,
                ..Default::default()
            }
            .build(&reference_vs, lr)
            .unwrap(),
            OptimizerSpec::RmsProp { alpha, eps } => tch::nn::RmsProp {
                alpha,
                eps,
                wd: 0.0,
                momentum: 0.0,
                centered: false,
            }
            .build(&reference_vs, lr)
            .unwrap(),
        };
        let mut ours = Optimizer::new(&ours_vs, spec).unwrap();
        let loss_before = scalar(&loss(&ours_w).detach());
        for _ in 0..6 {
            reference.zero_grad();
            loss(&reference_w).backward();
            reference.step();
            ours.zero_grad();
            loss(&ours_w).backward();
            ours.step(lr).unwrap();
        }
        let diff = scalar(&(&reference_w - &ours_w).abs().max());
        assert!(
            diff < 1e-6,
            "{spec:?}: parameters differ from libtorch's by {diff}"
        );
        // The steps descended: both optimizers agreeing on parameters that did not move, or that
        // moved uphill, would pass the comparison above.
        let loss_after = scalar(&loss(&ours_w).detach());
        assert!(
            loss_after < 0.9 * loss_before,
            "{spec:?}: 6 steps took the loss from {loss_before} to {loss_after}"
        );
        assert_eq!(ours.step_count(), 6);
        let names: Vec<String> = ours.state_tensors().into_iter().map(|(n, _)| n).collect();
        assert!(names.contains(&state_name.to_string()), "{names:?}");
    }
}

#[test]
fn gradient_clipping_scales_to_the_limit_and_reports_the_raw_norm() {
    let vs = VarStore::new(Device::Cpu);
    let w = vs.root().zeros("w", &[2]);
    (&w * floats(&[3.0, 4.0])).sum(Kind::Float).backward();
    let names = vec!["w".to_string()];
    let norm = clip_grad_norm(&names, std::slice::from_ref(&w), 1.0).unwrap();
    assert!((norm - 5.0).abs() < 1e-6);
    let clipped = Vec::<f32>::try_from(&w.grad()).unwrap();
    assert!(
        (clipped[0] - 0.6).abs() < 1e-5 && (clipped[1] - 0.8).abs() < 1e-5,
        "{clipped:?}"
    );
    // Below the limit nothing changes.
    let norm = clip_grad_norm(&names, std::slice::from_ref(&w), 10.0).unwrap();
    assert!((norm - 1.0).abs() < 1e-5);
    assert!((Vec::<f32>::try_from(&w.grad()).unwrap()[0] - 0.6).abs() < 1e-5);

    let unused = vs.root().zeros("unused", &[1]);
    let err = clip_grad_norm(&["unused".into()], &[unused], 1.0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("unused has no gradient"), "{err}");
}

const OBS: i64 = 4;
const ACTIONS: i64 = 3;

fn spec() -> ActorCriticSpec {
    ActorCriticSpec::for_network(
        NetworkSpec::Mlp {
            hidden: vec![8, 8],
            activation: Activation::Tanh,
        },
        common::orthogonal_init(),
    )
}

fn new_model() -> (VarStore, ActorCritic) {
    with_torch_rng(new_model_holding_rng)
}

fn new_model_holding_rng() -> (VarStore, ActorCritic) {
    let vs = VarStore::new(Device::Cpu);
    let model = ActorCritic::new(
        &vs.root(),
        &spec(),
        &[OBS],
        ActionSpace::Discrete {
            n: ACTIONS as usize,
        },
    )
    .unwrap();
    (vs, model)
}

type Snapshot = Vec<(String, Tensor)>;

fn snapshot(vs: &VarStore) -> Snapshot {
    parameters_in_order(vs)
        .into_iter()
        .map(|(n, t)| (n, t.detach().copy()))
        .collect()
}

fn load(vs: &VarStore, from: &Snapshot) {
    let by_name: HashMap<&str, &Tensor> = from.iter().map(|(n, t)| (n.as_str(), t)).collect();
    for (name, mut t) in parameters_in_order(vs) {
        tch::no_grad(|| t.copy_(by_name[name.as_str()]));
    }
}

fn copy_batch(b: &Batch) -> Batch {
    Batch::new(
        b.obs.copy(),
        b.actions.copy(),
        b.log_probs.copy(),
        b.values.copy(),
        b.advantages.copy(),
        b.returns.copy(),
    )
    .unwrap()
}

/// A seeded initial model and a 16-sample batch acted by it (so the first ratios are 1).
fn fixture(seed: i64) -> (Snapshot, Batch) {
    let _guard = TORCH_RNG
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    tch::manual_seed(seed);
    let (vs, model) = new_model_holding_rng();
    let obs = Tensor::randn([16, OBS], (Kind::Float, Device::Cpu));
    let taken = model.act(&obs).unwrap();
    let advantages = Tensor::randn([16], (Kind::Float, Device::Cpu)) * 2.0 + 0.3;
    let returns = &taken.values + Tensor::randn([16], (Kind::Float, Device::Cpu));
    let batch = Batch::new(
        obs,
        taken.actions,
        taken.log_probs,
        taken.values,
        advantages,
        returns,
    )
    .unwrap();
    (snapshot(&vs), batch)
}

/// A model holding `initial`'s parameters and its PPO learner (`shuffle_seed` as `Ppo::new`).
fn learner(
    initial: &Snapshot,
    config: tandem_config::Ppo,
    shuffle_seed: u64,
) -> (VarStore, ActorCritic, Ppo) {
    let (vs, model) = new_model();
    load(&vs, initial);
    let ppo = Ppo::new(&vs, config, shuffle_seed).unwrap();
    (vs, model, ppo)
}

fn max_param_diff(a: &Snapshot, b: &Snapshot) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|((na, ta), (nb, tb))| {
            assert_eq!(na, nb);
            scalar(&(ta - tb).abs().max())
        })
        .fold(0.0, f64::max)
}

/// With the ratios held at 1 (a learning rate too small to move them), PPO's policy loss is
/// minus the mean normalised advantage of the rows its minibatches hold: two minibatches of
/// the same rows 0..8 of 16 show over what the advantages were normalised.
#[test]
fn advantages_are_normalised_over_the_batch_or_each_minibatch() {
    let (initial, batch) = fixture(5);
    advantages_are_normalised_as_by_hand(&initial, &batch);
    // Advantages spread over about 1e-7: the 1e-8 beside the standard deviation shows (a
    // normalisation by std - 1e-8 would give twice the values here).
    let mut tiny = copy_batch(&batch);
    tiny.advantages = &batch.advantages * 1e-7;
    advantages_are_normalised_as_by_hand(&initial, &tiny);
}

fn advantages_are_normalised_as_by_hand(initial: &Snapshot, batch: &Batch) {
    let a: Vec<f64> = Vec::<f32>::try_from(&batch.advantages)
        .unwrap()
        .iter()
        .map(|&x| f64::from(x))
        .collect();
    // By hand: mean, and the unbiased standard deviation, as torch.std.
    let moments = |xs: &[f64]| {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var.sqrt())
    };
    let minus_mean_of_first_8 = |(mean, std): (f64, f64)| {
        -a[..8]
            .iter()
            .map(|x| (x - mean) / (std + 1e-8))
            .sum::<f64>()
            / 8.0
    };
    let plan = vec![to_plan(&[(0..8).collect(), (0..8).collect()])];
    for (mode, expected) in [
        (AdvantageNorm::Batch, minus_mean_of_first_8(moments(&a))),
        (
            AdvantageNorm::Minibatch,
            minus_mean_of_first_8(moments(&a[..8])),
        ),
        (AdvantageNorm::Off, -a[..8].iter().sum::<f64>() / 8.0),
    ] {
        let config = tandem_config::Ppo {
            lr: 1e-12,
            epochs: 1,
            minibatches: 2,
            normalize_advantages: mode,
            ..common::cleanrl_ppo()
        };
        let (_vs, model, mut ppo) = learner(initial, config, 0);
        let stats = ppo
            .update_with_minibatches(&model, batch, 0.0, &plan, &mut Local)
            .unwrap();
        assert!(
            (stats.policy_loss - expected).abs() < 1e-5 * expected.abs().max(1.0),
            "{mode:?}: policy loss {} vs {expected} by hand",
            stats.policy_loss
        );
    }
    // The normalisations differ, so the check above tells them apart.
    let batch_mean = minus_mean_of_first_8(moments(&a));
    let minibatch_mean = minus_mean_of_first_8(moments(&a[..8]));
    assert!(
        (batch_mean - minibatch_mean).abs() > 0.05,
        "{batch_mean} {minibatch_mean}"
    );
}

fn ppo_config(target_kl: Option<f64>) -> tandem_config::Ppo {
    tandem_config::Ppo {
        lr: 0.02,
        epochs: 3,
        minibatches: 2,
        // Small enough that every step clips, so the test sees clipping happen after the sync.
        max_grad_norm: Some(0.05),
        target_kl,
        ..common::cleanrl_ppo()
    }
}

#[test]
fn a_ppo_update_is_bit_reproducible_under_the_same_seed() {
    let run = || {
        let (initial, batch) = fixture(11);
        let (vs, model, mut ppo) = learner(&initial, ppo_config(None), 5);
        let first = ppo.update(&model, &batch, 0.0, &mut Local).unwrap();
        let second = ppo.update(&model, &batch, 0.5, &mut Local).unwrap();
        (snapshot(&vs), first, second)
    };
    let (params_a, first_a, second_a) = run();
    let (params_b, first_b, second_b) = run();
    for ((name, a), (_, b)) in params_a.iter().zip(&params_b) {
        assert!(a.equal(b), "{name} differs between identical runs");
    }
    assert_eq!(first_a, first_b);
    assert_eq!(second_a, second_b);
    // The update did something, and annealing halved the learning rate.
    let (initial, _) = fixture(11);
    assert!(max_param_diff(&initial, &params_a) > 1e-4);
    assert_eq!(second_a.learning_rate, first_a.learning_rate * 0.5);
    assert_eq!(first_a.epochs_run, 3);
    assert_eq!(first_a.optimizer_steps, 6);
}

/// In-process stand-in for the DDP runtime: ranks are threads that meet at a barrier and
/// exchange values through shared slots.
struct ThreadCollective {
    rank: usize,
    world: usize,
    barrier: Arc<Barrier>,
    slots: Arc<Mutex<Vec<Vec<f64>>>>,
}

impl ThreadCollective {
    fn group(world: usize) -> Vec<ThreadCollective> {
        let barrier = Arc::new(Barrier::new(world));
        let slots = Arc::new(Mutex::new(vec![Vec::new(); world]));
        (0..world)
            .map(|rank| ThreadCollective {
                rank,
                world,
                barrier: barrier.clone(),
                slots: slots.clone(),
            })
            .collect()
    }

    fn exchange(&self, mine: Vec<f64>) -> Vec<Vec<f64>> {
        self.slots.lock().unwrap()[self.rank] = mine;
        self.barrier.wait();
        let all = self.slots.lock().unwrap().clone();
        self.barrier.wait();
        all
    }

    fn sum(&self, mine: Vec<f64>) -> Vec<f64> {
        let all = self.exchange(mine);
        assert!(
            all.iter().all(|v| v.len() == all[0].len()),
            "ranks reduced different lengths"
        );
        (0..all[0].len())
            .map(|i| all.iter().map(|v| v[i]).sum())
            .collect()
    }
}

impl Collective for ThreadCollective {
    fn select_part(&mut self, _part: usize) -> Result<()> {
        Ok(())
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.world
    }
    fn sync_gradients(&mut self, params: &[Tensor]) -> Result<()> {
        let grads: Vec<Tensor> = params.iter().map(Tensor::grad).collect();
        let flat = Tensor::cat(
            &grads.iter().map(|g| g.reshape([-1])).collect::<Vec<_>>(),
            0,
        );
        let mine = Vec::<f64>::try_from(&flat.to_kind(Kind::Double))?;
        let summed = self.sum(mine);
        let average = Tensor::from_slice(&summed) / self.world as f64;
        let mut offset = 0;
        for g in grads {
            let n = g.numel() as i64;
            let mut g = g;
            tch::no_grad(|| g.copy_(&average.narrow(0, offset, n).reshape(g.size())));
            offset += n;
        }
        Ok(())
    }
    fn all_reduce_sum(&mut self, values: &mut [f64]) -> Result<()> {
        let summed = self.sum(values.to_vec());
        values.copy_from_slice(&summed);
        Ok(())
    }
    fn decide(&mut self, mine: bool) -> Result<bool> {
        Ok(self.exchange(vec![mine as u8 as f64])[0][0] != 0.0)
    }
}

/// Runs `work(rank, input, collective)` on two threads joined by a [`ThreadCollective`]
/// (tensors are not `Sync`, so each rank's tensors are moved into its thread).
fn two_ranks<I: Send, R: Send>(
    inputs: [I; 2],
    work: impl Fn(usize, I, &mut dyn Collective) -> R + Sync,
) -> Vec<R> {
    let collectives = ThreadCollective::group(2);
    std::thread::scope(|scope| {
        let handles: Vec<_> = collectives
            .into_iter()
            .zip(inputs)
            .map(|(mut c, input)| {
                let work = &work;
                scope.spawn(move || work(c.rank, input, &mut c))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn copy_snapshot(s: &Snapshot) -> Snapshot {
    s.iter().map(|(n, t)| (n.clone(), t.copy())).collect()
}

/// Each rank's half of the batch with its own copy of the initial parameters.
fn rank_inputs(initial: &Snapshot, batch: &Batch, second_half: i64) -> [(Snapshot, Batch); 2] {
    [
        (
            copy_snapshot(initial),
            copy_batch(&batch.narrow(0, 8).unwrap()),
        ),
        (
            copy_snapshot(initial),
            copy_batch(&batch.narrow(8, second_half).unwrap()),
        ),
    ]
}

type Plan = Vec<Vec<Vec<i64>>>;

/// `plan[epoch][k]` for each rank's half (different orders per rank), and the matching plan for
/// the whole batch: global minibatch k is the union of the ranks' minibatches k.
fn split_plans(epochs: usize) -> ([Plan; 2], Plan) {
    let mut samplers = [MinibatchSampler::new(100), MinibatchSampler::new(200)];
    let mut per_rank: [Plan; 2] = [Vec::new(), Vec::new()];
    let mut whole = Vec::new();
    for _ in 0..epochs {
        let orders: Vec<Vec<i64>> = samplers.iter_mut().map(|s| s.permutation(8)).collect();
        let mut rank_epochs = [Vec::new(), Vec::new()];
        let mut global_epoch = Vec::new();
        for k in 0..2 {
            let local: Vec<Vec<i64>> = orders
                .iter()
                .map(|o| o[k * 4..k * 4 + 4].to_vec())
                .collect();
            let mut global = local[0].clone();
            global.extend(local[1].iter().map(|i| i + 8));
            global_epoch.push(global);
            for (rank, indices) in local.into_iter().enumerate() {
                rank_epochs[rank].push(indices);
            }
        }
        for (rank, epoch) in rank_epochs.into_iter().enumerate() {
            per_rank[rank].push(epoch);
        }
        whole.push(global_epoch);
    }
    (per_rank, whole)
}

fn to_plan(plan: &[Vec<i64>]) -> Vec<Tensor> {
    plan.iter()
        .map(|indices| Tensor::from_slice(indices))
        .collect()
}

fn assert_stats_close(one: &[f64], two: &[f64]) {
    for (i, (a, b)) in one.iter().zip(two).enumerate() {
        assert!(
            (a - b).abs() < 1e-5,
            "statistic {i}: one rank {a}, two ranks {b}"
        );
    }
}

/// The reported gradient norm is the mean over the update's optimizer steps: with a learning
/// rate too small to move the parameters, three epochs of the whole batch report the one
/// epoch's norm (a sum, a product or a remainder over the steps would not).
#[test]
fn the_reported_gradient_norm_is_the_mean_over_the_steps() {
    let (initial, batch) = fixture(7);
    let norm = |epochs: usize| {
        let config = tandem_config::Ppo {
            lr: 1e-12,
            epochs,
            minibatches: 1,
            max_grad_norm: None,
            ..common::cleanrl_ppo()
        };
        let (_vs, model, mut ppo) = learner(&initial, config, 0);
        let stats = ppo.update(&model, &batch, 0.0, &mut Local).unwrap();
        assert_eq!(stats.optimizer_steps, epochs);
        stats.grad_norm
    };
    let (one, three) = (norm(1), norm(3));
    assert!(one > 0.1, "{one}");
    assert!((three - one).abs() < 1e-6 * one, "{three} vs {one}");
}

/// What an update reports goes to TensorBoard under these tags (docs and dashboards read them).
#[test]
fn an_updates_statistics_are_its_scalars_under_their_tags() {
    let (initial, batch) = fixture(8);
    let (_vs, model, mut ppo) = learner(&initial, ppo_config(None), 0);
    let stats = ppo.update(&model, &batch, 0.0, &mut Local).unwrap();
    let scalars = stats.scalars();
    let tag = |name: &str| {
        scalars
            .iter()
            .find(|(t, _)| *t == name)
            .unwrap_or_else(|| panic!("no {name} in {scalars:?}"))
            .1
    };
    assert_eq!(tag("loss/policy"), stats.policy_loss);
    assert_eq!(tag("loss/value"), stats.value_loss);
    assert_eq!(tag("ppo/approx_kl"), stats.approx_kl);
    assert_eq!(tag("ppo/epochs"), stats.epochs_run as f64);
    assert_eq!(tag("optim/grad_norm"), stats.grad_norm);
    assert!(stats.value_loss > 0.0 && stats.grad_norm > 0.0, "{stats:?}");
}

/// The KL early stop compares the ranks' MEAN epoch KL with the target: with the target between
/// the mean and twice it, two ranks train on past the first epoch (a sum over ranks, or a
/// product, would stop them there).
#[test]
fn the_kl_early_stop_reads_the_mean_over_ranks() {
    let (initial, batch) = fixture(6);
    let run = |config: tandem_config::Ppo| {
        two_ranks(
            rank_inputs(&initial, &batch, 8),
            |_, (initial, half), collective| {
                let (_vs, model, mut ppo) = learner(&initial, config.clone(), 0);
                ppo.update(&model, &half, 0.0, collective).unwrap()
            },
        )
    };
    // One epoch alone: its mean KL over the ranks is what the stop would read after it.
    let one_epoch = run(tandem_config::Ppo {
        epochs: 1,
        ..ppo_config(None)
    });
    let first_epoch_kl = one_epoch[0].approx_kl;
    assert!(first_epoch_kl > 0.0, "{one_epoch:?}");
    for target in [1.5 * first_epoch_kl, 0.5 * first_epoch_kl] {
        let stats = run(ppo_config(Some(target)));
        let expected = if target > first_epoch_kl { 2 } else { 1 };
        for rank in &stats {
            assert!(
                if expected == 1 {
                    rank.epochs_run == 1
                } else {
                    rank.epochs_run >= 2
                },
                "target {target} against a first-epoch KL of {first_epoch_kl}: {rank:?}"
            );
        }
    }
}

/// Ranks holding batches of different sizes would take minibatches of different sizes (and a
/// different number of collectives each): both refuse before the first step, naming the size.
#[test]
fn ranks_with_batches_of_different_sizes_refuse_the_update_before_any_step() {
    let (initial, batch) = fixture(5);
    let config = ppo_config(None);
    let results = two_ranks(
        rank_inputs(&initial, &batch, 4),
        |_, (initial, half), collective| {
            let (_vs, model, mut ppo) = learner(&initial, config.clone(), 0);
            let error = ppo.update(&model, &half, 0.0, collective).unwrap_err();
            (
                format!("{error:#}"),
                ppo.optimizer().step_count(),
                half.len(),
            )
        },
    );
    for (error, steps, rows) in results {
        assert!(
            error.contains("ranks disagree on the number of optimizer steps"),
            "{error}"
        );
        // Two minibatches of the rank's rows: 4 on the rank of 8, 2 on the rank of 4.
        assert!(
            error.contains(&format!("the minibatch size ({} here)", rows / 2)),
            "{error}"
        );
        assert_eq!(steps, 0);
    }
}

#[test]
fn ppo_on_two_ranks_equals_ppo_on_one_rank_with_the_whole_batch() {
    // Per minibatch, each rank normalises by the global minibatch's statistics, as one rank
    // holding the whole minibatch does; by its own share alone, the ranks would diverge.
    for (target_kl, normalize_advantages) in [
        (None, AdvantageNorm::Batch),
        (Some(1e-9), AdvantageNorm::Batch),
        (None, AdvantageNorm::Minibatch),
    ] {
        let config = tandem_config::Ppo {
            normalize_advantages,
            ..ppo_config(target_kl)
        };
        let epochs = config.epochs;
        let (initial, batch) = fixture(3);
        let (per_rank_plans, whole_plan) = split_plans(epochs);

        let (vs, model, mut ppo) = learner(&initial, config.clone(), 0);
        let plan: Vec<Vec<Tensor>> = whole_plan.iter().map(|e| to_plan(e)).collect();
        let one = ppo
            .update_with_minibatches(&model, &batch, 0.25, &plan, &mut Local)
            .unwrap();
        let one_rank_params = snapshot(&vs);

        let results = two_ranks(
            rank_inputs(&initial, &batch, 8),
            |rank, (initial, half), collective| {
                let (vs, model, mut ppo) = learner(&initial, config.clone(), 0);
                let plan: Vec<Vec<Tensor>> =
                    per_rank_plans[rank].iter().map(|e| to_plan(e)).collect();
                let stats = ppo
                    .update_with_minibatches(&model, &half, 0.25, &plan, collective)
                    .unwrap();
                (snapshot(&vs), stats)
            },
        );

        let expected_epochs = if target_kl.is_some() { 1 } else { epochs };
        assert_eq!(one.epochs_run, expected_epochs);
        assert!(
            one.clip_fraction > 0.0 || target_kl.is_some(),
            "the clipped branch never ran: {one:?}"
        );
        assert!(
            one.grad_norm > config.max_grad_norm.unwrap(),
            "gradients were never clipped: {one:?}"
        );
        for (rank, (params, stats)) in results.iter().enumerate() {
            let diff = max_param_diff(&one_rank_params, params);
            assert!(
                diff < 1e-5,
                "target_kl {target_kl:?}, rank {rank}: parameters differ by {diff}"
            );
            assert!(
                max_param_diff(&initial, params) > 1e-3,
                "the update did not move the parameters"
            );
            assert_eq!(stats.epochs_run, expected_epochs);
            assert_stats_close(&ppo_numbers(&one), &ppo_numbers(stats));
        }
        assert!(
            results[0]
                .0
                .iter()
                .zip(&results[1].0)
                .all(|((_, a), (_, b))| a.equal(b)),
            "ranks diverged"
        );
    }
}

#[test]
fn a2c_on_two_ranks_equals_a2c_on_one_rank() {
    let config = tandem_config::A2c {
        normalize_advantages: true,
        entropy_coef: 0.01,
        ..common::sb3_a2c()
    };
    let (initial, batch) = fixture(4);
    let (vs, model) = new_model();
    load(&vs, &initial);
    // The policy loss is -E[log pi(a|s) A] with A normalised over the batch: check it by hand.
    let advantages = Vec::<f32>::try_from(&batch.advantages).unwrap();
    let n = advantages.len() as f64;
    let mean = advantages.iter().map(|&a| a as f64).sum::<f64>() / n;
    let std = (advantages
        .iter()
        .map(|&a| (a as f64 - mean).powi(2))
        .sum::<f64>()
        / (n - 1.0))
        .sqrt();
    let log_probs = Vec::<f32>::try_from(&batch.log_probs).unwrap();
    let expected_policy_loss = -advantages
        .iter()
        .zip(&log_probs)
        .map(|(&a, &lp)| lp as f64 * (a as f64 - mean) / (std + 1e-8))
        .sum::<f64>()
        / n;

    let mut a2c = A2c::new(&vs, config.clone()).unwrap();
    for _ in 0..3 {
        // The first step sees the rollout's own policy, so its log-probabilities are the batch's.
        let stats = a2c.update(&model, &batch, 0.0, &mut Local).unwrap();
        if a2c.optimizer().step_count() == 1 {
            assert!(
                (stats.policy_loss - expected_policy_loss).abs() < 1e-5,
                "{stats:?} vs {expected_policy_loss}"
            );
        }
    }
    let one_rank_params = snapshot(&vs);

    let results = two_ranks(
        rank_inputs(&initial, &batch, 8),
        |_, (initial, half), collective| {
            let (vs, model) = new_model();
            load(&vs, &initial);
            let mut a2c = A2c::new(&vs, config.clone()).unwrap();
            for _ in 0..3 {
                a2c.update(&model, &half, 0.0, collective).unwrap();
            }
            snapshot(&vs)
        },
    );
    for params in &results {
        let diff = max_param_diff(&one_rank_params, params);
        assert!(diff < 1e-5, "parameters differ by {diff}");
    }
    assert!(max_param_diff(&initial, &one_rank_params) > 1e-3);
}

/// A collective whose rank 0 has decided to stop, whatever this rank measured.
struct RankZeroSaysStop;

impl Collective for RankZeroSaysStop {
    fn select_part(&mut self, _part: usize) -> Result<()> {
        Ok(())
    }
    fn rank(&self) -> usize {
        1
    }
    fn world_size(&self) -> usize {
        1
    }
    fn sync_gradients(&mut self, _: &[Tensor]) -> Result<()> {
        Ok(())
    }
    fn all_reduce_sum(&mut self, _: &mut [f64]) -> Result<()> {
        Ok(())
    }
    fn decide(&mut self, _mine: bool) -> Result<bool> {
        Ok(true)
    }
}

#[test]
fn kl_early_stop_follows_rank_zeros_decision() {
    let (initial, batch) = fixture(5);
    let (vs, model) = new_model();
    load(&vs, &initial);
    // This rank would never stop on its own (target 1e9) but rank 0's decision wins.
    let mut ppo = Ppo::new(&vs, ppo_config(Some(1e9)), 0).unwrap();
    let stats = ppo
        .update(&model, &batch, 0.0, &mut RankZeroSaysStop)
        .unwrap();
    assert_eq!(stats.epochs_run, 1);
    assert_eq!(stats.optimizer_steps, 2);
    let stats = ppo.update(&model, &batch, 0.0, &mut Local).unwrap();
    assert_eq!(stats.epochs_run, 3);
}

#[test]
fn bad_updates_are_refused_with_reasons() {
    let (initial, batch) = fixture(6);
    let (_vs, model, mut ppo) = learner(&initial, ppo_config(None), 0);
    let err = ppo
        .update(&model, &batch, 1.5, &mut Local)
        .unwrap_err()
        .to_string();
    assert!(err.contains("progress must be in [0, 1]"), "{err}");

    let bad_actions = copy_batch(&batch);
    let _ = bad_actions.actions.get(3).fill_(ACTIONS);
    let err = ppo
        .update(&model, &bad_actions, 0.0, &mut Local)
        .unwrap_err()
        .to_string();
    assert!(err.contains("action 3") && err.contains("0..3"), "{err}");

    let err = ppo
        .update(&model, &batch.narrow(0, 7).unwrap(), 0.0, &mut Local)
        .unwrap_err()
        .to_string();
    assert!(err.contains("7 samples does not split into 2"), "{err}");

    let outside: Vec<Vec<Tensor>> = (0..3)
        .map(|_| {
            vec![
                Tensor::from_slice(&[0i64, 16]),
                Tensor::from_slice(&[1i64, 2]),
            ]
        })
        .collect();
    let err = ppo
        .update_with_minibatches(&model, &batch, 0.0, &outside, &mut Local)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the minibatch plan indexes rows 0..=16 of a batch of 16"),
        "{err}"
    );

    // Ranks with different batch sizes are told so instead of hanging in the gradient sync.
    let errors = two_ranks(
        rank_inputs(&initial, &batch, 4),
        |_, (_, half), collective| {
            let (vs, model) = new_model();
            let mut ppo = Ppo::new(&vs, ppo_config(None), 0).unwrap();
            ppo.update(&model, &half, 0.0, collective)
                .unwrap_err()
                .to_string()
        },
    );
    for err in errors {
        assert!(err.contains("ranks disagree"), "{err}");
    }
}

#[test]
fn optimizer_state_survives_a_save_and_load() {
    let (initial, batch) = fixture(8);
    let config = tandem_config::Ppo {
        epochs: 1,
        minibatches: 1,
        ..ppo_config(None)
    };
    let (vs, model, mut ppo) = learner(&initial, config.clone(), 1);
    ppo.update(&model, &batch, 0.0, &mut Local).unwrap();
    let saved_params = snapshot(&vs);
    let saved_state: Snapshot = ppo
        .optimizer()
        .state_tensors()
        .into_iter()
        .map(|(n, t)| (n, t.copy()))
        .collect();
    let saved_steps = ppo.optimizer().step_count();
    ppo.update(&model, &batch, 0.5, &mut Local).unwrap();
    let uninterrupted = snapshot(&vs);

    let (resumed_vs, resumed_model) = new_model();
    load(&resumed_vs, &saved_params);
    // Every update shuffles from the learner's seed: the resumed learner is given the same one.
    let mut resumed = Ppo::new(&resumed_vs, config, 1).unwrap();
    resumed
        .optimizer_mut()
        .load_state(&saved_state, saved_steps)
        .unwrap();
    resumed
        .update(&resumed_model, &batch, 0.5, &mut Local)
        .unwrap();
    for ((name, a), (_, b)) in uninterrupted.iter().zip(&snapshot(&resumed_vs)) {
        assert!(a.equal(b), "{name} differs after resuming");
    }

    let err = resumed
        .optimizer_mut()
        .load_state(&saved_state[1..], 1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("holds"), "{err}");
}

#[test]
fn micro_batches_accumulate_to_the_minibatch_update() {
    let (initial, batch) = fixture(5);
    let run = |micro_batches: usize| {
        let (vs, model) = new_model();
        load(&vs, &initial);
        let config = tandem_config::Ppo {
            micro_batches,
            ..ppo_config(None)
        };
        let mut ppo = Ppo::new(&vs, config, 3).unwrap();
        let mut stats = Vec::new();
        for u in 0..3 {
            let s = ppo
                .update(&model, &batch, u as f64 / 4.0, &mut Local)
                .unwrap();
            stats.push(s);
        }
        (snapshot(&vs), stats)
    };
    let (whole, whole_stats) = run(1);
    // 16 samples in 2 minibatches of 8: micro-batches of 4 and of 2 samples.
    for micro in [2, 4] {
        let (parts, parts_stats) = run(micro);
        let diff = max_param_diff(&whole, &parts);
        assert!(
            diff < 1e-5,
            "{micro} micro-batches end {diff} away from whole minibatches"
        );
        assert!(
            max_param_diff(&initial, &parts) > 1e-3,
            "nothing was learnt"
        );
        for (a, b) in whole_stats.iter().zip(&parts_stats) {
            assert!(
                (a.policy_loss - b.policy_loss).abs() < 1e-5,
                "{a:?} vs {b:?}"
            );
            assert!((a.grad_norm - b.grad_norm).abs() < 1e-5, "{a:?} vs {b:?}");
            assert_eq!(a.optimizer_steps, b.optimizer_steps);
        }
    }

    let (vs, model) = new_model();
    let mut ppo = Ppo::new(
        &vs,
        tandem_config::Ppo {
            micro_batches: 3,
            ..ppo_config(None)
        },
        0,
    )
    .unwrap();
    let err = ppo
        .update(&model, &batch, 0.0, &mut Local)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("3 micro-batches do not divide the minibatch of 8"),
        "{err}"
    );
}

/// `batch` with the rows `active` marks 0 made nonsense (observations, old log-probabilities,
/// advantages and returns moved far off) and marked in [`Batch::active`]: rows that did not act
/// (a turn waited through, an agent gone) must weigh nothing, whatever they hold.
fn masked(batch: &Batch, active: &[f32]) -> Batch {
    let active = floats(active);
    let off: Tensor = 1.0 - &active;
    let mut b = Batch::new(
        &batch.obs + off.unsqueeze(1) * 7.0,
        batch.actions.copy(),
        &batch.log_probs - &off * 0.5,
        batch.values.copy(),
        &batch.advantages + &off * 40.0,
        &batch.returns - &off * 25.0,
    )
    .unwrap();
    b.active = Some(active);
    b
}

/// The rows of `batch` that `active` marks 1, as a batch of their own.
fn acted(batch: &Batch, active: &[f32]) -> Batch {
    let rows: Vec<i64> = (0..active.len() as i64)
        .filter(|&i| active[i as usize] == 1.0)
        .collect();
    copy_batch(&batch.select(&Tensor::from_slice(&rows)))
}

/// An update's statistics, in a list to compare.
fn ppo_numbers(s: &tandem::algo::PpoStats) -> Vec<f64> {
    vec![
        s.policy_loss,
        s.value_loss,
        s.entropy,
        s.approx_kl,
        s.clip_fraction,
        s.explained_variance,
        s.grad_norm,
        s.learning_rate,
    ]
}

/// A batch whose rows did not all act learns what the batch of the rows that acted learns:
/// the losses' means, the advantage statistics (over the batch or the minibatch), the KL and
/// clip fraction, the explained variance are all over the rows that acted. Two epochs of one
/// minibatch, so both see the same rows in each step.
#[test]
fn rows_that_did_not_act_weigh_nothing_in_a_ppo_update() {
    let active = [
        1., 1., 0., 1., 0., 0., 1., 1., 1., 0., 1., 1., 0., 1., 1., 0.,
    ];
    let (initial, batch) = fixture(8);
    for normalize_advantages in [AdvantageNorm::Batch, AdvantageNorm::Minibatch] {
        let config = tandem_config::Ppo {
            normalize_advantages,
            minibatches: 1,
            epochs: 2,
            ..ppo_config(None)
        };
        let run = |batch: &Batch| {
            let (vs, model, mut ppo) = learner(&initial, config.clone(), 0);
            let all = Tensor::arange(batch.len(), (Kind::Int64, Device::Cpu));
            let plan = vec![vec![all.shallow_clone()], vec![all]];
            let stats = ppo
                .update_with_minibatches(&model, batch, 0.0, &plan, &mut Local)
                .unwrap();
            (snapshot(&vs), stats)
        };
        let (weighted, weighted_stats) = run(&masked(&batch, &active));
        let (compact, compact_stats) = run(&acted(&batch, &active));
        let diff = max_param_diff(&weighted, &compact);
        assert!(
            diff < 1e-5,
            "{normalize_advantages:?}: parameters differ by {diff}"
        );
        assert!(max_param_diff(&initial, &compact) > 1e-3, "nothing moved");
        assert_stats_close(&ppo_numbers(&weighted_stats), &ppo_numbers(&compact_stats));
    }
}

/// Ranks whose batches hold different numbers of rows that acted (or none that did not)
/// learn what one rank learns from their batches together: each minibatch's mean is over the
/// rows that acted on every rank, not the mean of each rank's means.
#[test]
fn ranks_with_different_numbers_of_rows_that_acted_equal_one_rank() {
    let first = [1., 1., 1., 1., 1., 1., 0., 1.];
    let second = [0., 1., 0., 0., 1., 0., 1., 0.];
    let every = [1.; 8];
    for (masks, normalize_advantages) in [
        ([&first, &second], AdvantageNorm::Batch),
        ([&first, &second], AdvantageNorm::Minibatch),
        // A rank whose rows all acted has no mask, and weighs its rows as the others do.
        ([&every, &second], AdvantageNorm::Batch),
    ] {
        let config = tandem_config::Ppo {
            normalize_advantages,
            ..ppo_config(None)
        };
        let (initial, batch) = fixture(9);
        let whole_mask: Vec<f32> = masks.iter().flat_map(|m| m.iter().copied()).collect();
        let whole = masked(&batch, &whole_mask);
        let (per_rank_plans, whole_plan) = split_plans(config.epochs);

        let (vs, model, mut ppo) = learner(&initial, config.clone(), 0);
        let plan: Vec<Vec<Tensor>> = whole_plan.iter().map(|e| to_plan(e)).collect();
        let one = ppo
            .update_with_minibatches(&model, &whole, 0.25, &plan, &mut Local)
            .unwrap();
        let one_rank_params = snapshot(&vs);

        let halves = [0, 1].map(|rank| {
            let mut half = copy_batch(&whole.narrow(rank * 8, 8).unwrap());
            if masks[rank as usize] != &every {
                half.active = Some(floats(masks[rank as usize]));
            }
            (copy_snapshot(&initial), half)
        });
        let results = two_ranks(halves, |rank, (initial, half), collective| {
            let (vs, model, mut ppo) = learner(&initial, config.clone(), 0);
            let plan: Vec<Vec<Tensor>> = per_rank_plans[rank].iter().map(|e| to_plan(e)).collect();
            let stats = ppo
                .update_with_minibatches(&model, &half, 0.25, &plan, collective)
                .unwrap();
            (snapshot(&vs), stats)
        });
        for (rank, (params, stats)) in results.iter().enumerate() {
            let diff = max_param_diff(&one_rank_params, params);
            assert!(
                diff < 1e-5,
                "{normalize_advantages:?}, rank {rank}: parameters differ by {diff}"
            );
            assert_stats_close(&ppo_numbers(&one), &ppo_numbers(stats));
        }
        assert!(max_param_diff(&initial, &one_rank_params) > 1e-3);
    }
}

/// A2C's one step weighs the rows that did not act zero, on one rank and on two whose
/// batches hold different numbers of rows that acted.
#[test]
fn rows_that_did_not_act_weigh_nothing_in_an_a2c_update() {
    let config = tandem_config::A2c {
        normalize_advantages: true,
        entropy_coef: 0.01,
        ..common::sb3_a2c()
    };
    let masks = [
        [1., 0., 1., 1., 0., 1., 1., 1.],
        [0., 0., 1., 0., 1., 0., 0., 0.],
    ];
    let whole_mask: Vec<f32> = masks.iter().flatten().copied().collect();
    let (initial, batch) = fixture(10);
    let run = |batch: &Batch| {
        let (vs, model) = new_model();
        load(&vs, &initial);
        let mut a2c = A2c::new(&vs, config.clone()).unwrap();
        let stats = a2c.update(&model, batch, 0.0, &mut Local).unwrap();
        (snapshot(&vs), stats)
    };
    let whole = masked(&batch, &whole_mask);
    let (weighted, weighted_stats) = run(&whole);
    let (compact, compact_stats) = run(&acted(&batch, &whole_mask));
    assert!(max_param_diff(&weighted, &compact) < 1e-5);
    assert!(max_param_diff(&initial, &compact) > 1e-3, "nothing moved");
    let numbers = |s: &tandem::algo::A2cStats| {
        vec![
            s.policy_loss,
            s.value_loss,
            s.entropy,
            s.explained_variance,
            s.grad_norm,
        ]
    };
    assert_stats_close(&numbers(&weighted_stats), &numbers(&compact_stats));

    let halves = [0, 1].map(|rank| {
        let mut half = copy_batch(&whole.narrow(rank * 8, 8).unwrap());
        half.active = Some(floats(&masks[rank as usize]));
        (copy_snapshot(&initial), half)
    });
    let results = two_ranks(halves, |_, (initial, half), collective| {
        let (vs, model) = new_model();
        load(&vs, &initial);
        let mut a2c = A2c::new(&vs, config.clone()).unwrap();
        let stats = a2c.update(&model, &half, 0.0, collective).unwrap();
        (snapshot(&vs), stats)
    });
    for (params, stats) in &results {
        let diff = max_param_diff(&compact, params);
        assert!(diff < 1e-5, "two ranks: parameters differ by {diff}");
        // Each rank's losses are its share of the global means: their mean over ranks is
        // the one rank's.
        assert_stats_close(&numbers(&compact_stats), &numbers(stats));
    }
}

/// A2C's step (Mnih et al. 2016) on the rollout's own policy: its gradient is that of
/// -E[log pi(a|s) A'] + c_V E[(R - V(s))^2] - beta E[H] with A' the advantages normalised over
/// the batch, built here by hand on a twin model; its statistics are those three means.
#[test]
fn an_a2c_step_descends_its_three_terms_worked_by_hand() {
    let config = tandem_config::A2c {
        normalize_advantages: true,
        entropy_coef: 0.05,
        value_coef: 0.7,
        max_grad_norm: None,
        ..common::sb3_a2c()
    };
    let (initial, batch) = fixture(12);
    let (vs, model) = new_model();
    load(&vs, &initial);
    let mut a2c = A2c::new(&vs, config.clone()).unwrap();
    let stats = a2c.update(&model, &batch, 0.0, &mut Local).unwrap();
    let stepped: Vec<Tensor> = parameters_in_order(&vs)
        .iter()
        .map(|(_, p)| p.grad().copy())
        .collect();

    let (twin_vs, twin) = new_model();
    load(&twin_vs, &initial);
    let new = twin
        .evaluate(&batch.obs, &batch.actions, EntropyUse::Differentiable)
        .unwrap();
    let a = &batch.advantages;
    let normalised = (a - a.mean(Kind::Float)) / (a.std(true) + 1e-8);
    let policy = -(&new.log_probs * normalised).mean(Kind::Float);
    let value = (&batch.returns - &new.values).square().mean(Kind::Float);
    let entropy = new.entropy.mean(Kind::Float);
    let total = &policy + &value * config.value_coef - &entropy * config.entropy_coef;
    total.backward();
    for ((name, p), got) in parameters_in_order(&twin_vs).iter().zip(&stepped) {
        let diff = scalar(&(p.grad() - got).abs().max());
        assert!(diff < 1e-6, "{name}: gradients differ by {diff}");
    }
    assert!(
        (stats.policy_loss - scalar(&policy)).abs() < 1e-6,
        "{stats:?}"
    );
    assert!(
        (stats.value_loss - scalar(&value)).abs() < 1e-6,
        "{stats:?}"
    );
    assert!((stats.entropy - scalar(&entropy)).abs() < 1e-6, "{stats:?}");
    let scalars = stats.scalars();
    let tag = |t: &str| scalars.iter().find(|(n, _)| *n == t).map(|(_, v)| *v);
    assert_eq!(tag("loss/value"), Some(stats.value_loss));
    assert_eq!(tag("loss/entropy"), Some(stats.entropy));
}

/// A2C normalises advantages by (A - mean) / (std + 1e-8), as SB3's does: with advantages
/// spread over about 1e-7, the 1e-8 beside the standard deviation is a tenth of it and shows
/// in the policy loss (over advantages spread over about 2 it is below float precision).
#[test]
fn a2c_normalises_tiny_advantage_spreads_with_its_epsilon() {
    let config = tandem_config::A2c {
        normalize_advantages: true,
        ..common::sb3_a2c()
    };
    let (initial, batch) = fixture(13);
    let tiny = with_torch_rng(|| {
        tch::manual_seed(4);
        // Centred near 0, where float32 resolves a spread of 1e-7.
        Tensor::randn([16], (Kind::Float, Device::Cpu)) * 1e-7
    });
    let batch = Batch::new(
        batch.obs.copy(),
        batch.actions.copy(),
        batch.log_probs.copy(),
        batch.values.copy(),
        tiny,
        batch.returns.copy(),
    )
    .unwrap();
    let a = Vec::<f32>::try_from(&batch.advantages).unwrap();
    let n = a.len() as f64;
    let mean = a.iter().map(|&v| v as f64).sum::<f64>() / n;
    let std = (a.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let log_probs = Vec::<f32>::try_from(&batch.log_probs).unwrap();
    let policy_loss = |eps: f64| {
        -a.iter()
            .zip(&log_probs)
            .map(|(&v, &lp)| lp as f64 * (v as f64 - mean) / (std + eps))
            .sum::<f64>()
            / n
    };
    let (vs, model) = new_model();
    load(&vs, &initial);
    let mut a2c = A2c::new(&vs, config).unwrap();
    let stats = a2c.update(&model, &batch, 0.0, &mut Local).unwrap();
    let (with, without) = (policy_loss(1e-8), policy_loss(-1e-8));
    let gap = (with - without).abs();
    assert!(
        gap > 0.1 * with.abs(),
        "{with} vs {without}: the case cannot tell"
    );
    assert!(
        (stats.policy_loss - with).abs() < 0.1 * gap,
        "{} vs {with} (without the epsilon's sign: {without})",
        stats.policy_loss
    );
}
