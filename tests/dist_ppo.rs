//! The PPO update over real processes and real Gloo: a fixed global batch on one rank and the
//! same batch split over two ranks give parameters equal within 1e-5 after 10 updates
//! (advantages normalised over the global batch, gradients averaged by DDP), also when each rank
//! accumulates its minibatches over micro-batches and synchronises once per minibatch. Every
//! minibatch's synchronised gradient is compared too: with Adam and a gradient clip the
//! parameters hardly depend on the gradient's scale, so they alone would not show a DDP that
//! summed where it should average. The same holds for multi-discrete actions (one categorical
//! per component), for masked actions (ruled-out logits set to -1e8) and for an image observed
//! beside a vector (an image torso whose dense layer reads the vector too), and for a network
//! declared as layers.

mod common;

use std::time::Duration;

use common::{
    RecordGradients, assert_same_gradients, child_options, parse_params, parse_values,
    print_params, print_values, role, run_two_ranks, seeded,
};
use tandem::algo::{Batch, Collective, Local, Ppo};
use tandem::dist::{Ddp, ProcessGroup, SyncPolicy};
use tandem::nn::{ActorCritic, ActorCriticSpec, NetworkSpec, trainable_parameters_in_order};
use tandem_config::Layer;
use tandem_config::layer::Activation;
use tandem_env::ActionSpace;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

const GLOBAL: i64 = 64;
const MINIBATCHES: usize = 4;
const UPDATES: usize = 10;

fn config(micro_batches: usize) -> tandem_config::Ppo {
    tandem_config::Ppo {
        epochs: 2,
        minibatches: MINIBATCHES,
        micro_batches,
        lr: 3e-3,
        ..common::cleanrl_ppo()
    }
}

/// What the updates act in: the action space, whether observations end with a mask, and
/// whether they begin with a 1x5x5 image of pixels (read by a small image torso).
#[derive(Clone)]
struct Case {
    space: ActionSpace,
    masked: bool,
    image: bool,
    /// Read by a network declared as layers (a residual MLP with a layer norm) instead.
    declared: bool,
}

const IMAGE: [i64; 3] = [1, 5, 5];

impl Case {
    /// The policy head's width, which a mask matches.
    fn logits(&self) -> i64 {
        self.space
            .choices()
            .expect("this test's spaces are discrete") as i64
    }

    fn obs_len(&self) -> i64 {
        let image = if self.image {
            IMAGE.iter().product()
        } else {
            0
        };
        let mask = if self.masked { self.logits() } else { 0 };
        image + 4 + mask
    }

    fn network(&self) -> NetworkSpec {
        if self.declared {
            return NetworkSpec::Layers(vec![
                Layer::Linear { out: 32 },
                Layer::Activation(Activation::Tanh),
                Layer::Residual {
                    body: vec![
                        Layer::LayerNorm,
                        Layer::Linear { out: 32 },
                        Layer::Activation(Activation::Tanh),
                    ],
                },
            ]);
        }
        if !self.image {
            return NetworkSpec::default_mlp();
        }
        NetworkSpec::ImageBesideVector {
            image: Box::new(NetworkSpec::MinAtarCnn {
                channels: 8,
                features: 32,
            }),
            shape: IMAGE,
        }
    }
}

fn model(case: &Case) -> (VarStore, ActorCritic) {
    seeded(7, || {
        let vs = VarStore::new(Device::Cpu);
        let spec = ActorCriticSpec {
            action_mask: case.masked,
            actor_input: None,
            ..ActorCriticSpec::for_network(case.network(), common::orthogonal_init())
        };
        let m = ActorCritic::new(&vs.root(), &spec, &[case.obs_len()], case.space.clone()).unwrap();
        (vs, m)
    })
}

/// Masks `[GLOBAL, logits]` with a random half of the actions valid and, always, the stored
/// `actions` (a policy only takes valid actions).
fn masks_allowing(case: &Case, actions: &Tensor) -> Tensor {
    let opts = (Kind::Float, Device::Cpu);
    let mask = Tensor::rand([GLOBAL, case.logits()], opts)
        .ge(0.5)
        .to_kind(Kind::Float);
    let columns = match &case.space {
        ActionSpace::MultiDiscrete { nvec } => {
            let offsets: Vec<i64> = nvec
                .iter()
                .scan(0i64, |at, &n| {
                    let start = *at;
                    *at += n as i64;
                    Some(start)
                })
                .collect();
            actions + Tensor::from_slice(&offsets).unsqueeze(0)
        }
        _ => actions.unsqueeze(1),
    };
    mask.scatter_value(1, &columns, 1.0)
}

/// `GLOBAL` random actions of `space`: `[GLOBAL]` indices, or `[GLOBAL, k]` for k components.
fn random_actions(space: &ActionSpace) -> Tensor {
    let ints = (Kind::Int64, Device::Cpu);
    match space {
        ActionSpace::Discrete { n } => Tensor::randint(*n as i64, [GLOBAL], ints),
        ActionSpace::MultiDiscrete { nvec } => {
            let columns: Vec<Tensor> = nvec
                .iter()
                .map(|&n| Tensor::randint(n as i64, [GLOBAL], ints))
                .collect();
            Tensor::stack(&columns, 1)
        }
        ActionSpace::Box { .. } => unreachable!("this test's spaces are discrete"),
    }
}

/// The global batch of update `u`, rows [start, start + len).
fn batch(u: usize, start: i64, len: i64, case: &Case) -> Batch {
    seeded(1000 + u as i64, || {
        let opts = (Kind::Float, Device::Cpu);
        let mut features = Tensor::randn([GLOBAL, 4], opts);
        if case.image {
            let pixels = Tensor::randint(256, [GLOBAL, IMAGE.iter().product()], opts);
            features = Tensor::cat(&[pixels, features], 1);
        }
        let actions = random_actions(&case.space);
        let obs = if case.masked {
            Tensor::cat(&[features, masks_allowing(case, &actions)], 1)
        } else {
            features
        };
        let log_probs = Tensor::randn([GLOBAL], opts) * 0.1 - 1.1;
        let values = Tensor::randn([GLOBAL], opts);
        let advantages = Tensor::randn([GLOBAL], opts) * 2.0 + 0.5;
        let returns = &values + &advantages;
        let pick = |t: &Tensor| t.narrow(0, start, len);
        Batch::new(
            pick(&obs),
            pick(&actions),
            pick(&log_probs),
            pick(&values),
            pick(&advantages),
            pick(&returns),
        )
        .unwrap()
    })
}

/// Minibatch rows for each rank's half at update `u` (rank-local indices), and the global plan
/// whose minibatch k is the union of the ranks' minibatches k.
fn plans(u: usize) -> ([Vec<Vec<Tensor>>; 2], Vec<Vec<Tensor>>) {
    common::two_rank_plans(u, (GLOBAL / 2) as usize, MINIBATCHES, config(1).epochs)
}

fn params(vs: &VarStore) -> Vec<f32> {
    trainable_parameters_in_order(vs)
        .iter()
        .flat_map(|p| Vec::<f32>::try_from(p.detach().flatten(0, -1)).unwrap())
        .collect()
}

/// The model and its learner, built as the trainer builds them (the optimizer lays out the
/// gradients that DDP then reduces).
fn learner(micro_batches: usize, case: &Case) -> (VarStore, ActorCritic, Ppo) {
    let (vs, model) = model(case);
    let ppo = Ppo::new(&vs, config(micro_batches), 0).unwrap();
    (vs, model, ppo)
}

fn train(
    (vs, model, mut ppo): (VarStore, ActorCritic, Ppo),
    case: &Case,
    rank: Option<usize>,
    collective: &mut dyn Collective,
) -> (Vec<f32>, Vec<Vec<f32>>) {
    let mut recorder = RecordGradients::new(collective);
    for u in 0..UPDATES {
        let (per_rank, whole) = plans(u);
        let (b, plan) = match rank {
            None => (batch(u, 0, GLOBAL, case), whole),
            Some(r) => (
                batch(u, r as i64 * GLOBAL / 2, GLOBAL / 2, case),
                per_rank[r]
                    .iter()
                    .map(|e| e.iter().map(|t| t.shallow_clone()).collect())
                    .collect(),
            ),
        };
        let progress = u as f64 / UPDATES as f64;
        ppo.update_with_minibatches(&model, &b, progress, &plan, &mut recorder)
            .unwrap();
    }
    (params(&vs), recorder.synced)
}

fn three_actions() -> Case {
    Case {
        space: ActionSpace::Discrete { n: 3 },
        masked: false,
        image: false,
        declared: false,
    }
}

#[test]
fn ppo_split_over_two_real_ranks_equals_one_rank() {
    split_over_two_ranks(
        "ppo_split_over_two_real_ranks_equals_one_rank",
        1,
        &three_actions(),
    );
}

/// Gradient accumulation under DDP: each rank's minibatch of 8 runs as 4 micro-batches of 2,
/// synchronised once per minibatch, and still equals one rank stepping on whole minibatches.
#[test]
fn micro_batches_on_two_real_ranks_equal_one_rank() {
    split_over_two_ranks(
        "micro_batches_on_two_real_ranks_equal_one_rank",
        4,
        &three_actions(),
    );
}

/// The same through autograd's backward, whose hooks start each bucket's all-reduce while
/// the last micro-batch's backward runs (the host step of the MLP cases computes gradients
/// without hooks): an image torso, which has no host form.
#[test]
fn micro_batches_through_autograd_on_two_real_ranks_equal_one_rank() {
    let case = Case {
        space: ActionSpace::Discrete { n: 4 },
        masked: true,
        image: true,
        declared: false,
    };
    split_over_two_ranks(
        "micro_batches_through_autograd_on_two_real_ranks_equal_one_rank",
        4,
        &case,
    );
}

#[test]
fn multi_discrete_ppo_split_over_two_real_ranks_equals_one_rank() {
    let case = Case {
        space: ActionSpace::MultiDiscrete {
            nvec: vec![3, 2, 4].into(),
        },
        masked: false,
        image: false,
        declared: false,
    };
    split_over_two_ranks(
        "multi_discrete_ppo_split_over_two_real_ranks_equals_one_rank",
        1,
        &case,
    );
}

#[test]
fn masked_ppo_split_over_two_real_ranks_equals_one_rank() {
    let case = Case {
        space: ActionSpace::Discrete { n: 5 },
        masked: true,
        image: false,
        declared: false,
    };
    split_over_two_ranks(
        "masked_ppo_split_over_two_real_ranks_equals_one_rank",
        1,
        &case,
    );
}

#[test]
fn masked_multi_discrete_ppo_split_over_two_real_ranks_equals_one_rank() {
    let case = Case {
        space: ActionSpace::MultiDiscrete {
            nvec: vec![3, 2].into(),
        },
        masked: true,
        image: false,
        declared: false,
    };
    split_over_two_ranks(
        "masked_multi_discrete_ppo_split_over_two_real_ranks_equals_one_rank",
        1,
        &case,
    );
}

/// A gymnasium Dict of an image and vectors, with an action mask after them: the row the
/// bridge makes of it, read by the image torso with the vector joining its dense layer.
#[test]
fn image_beside_a_vector_ppo_split_over_two_real_ranks_equals_one_rank() {
    let case = Case {
        space: ActionSpace::Discrete { n: 4 },
        masked: true,
        image: true,
        declared: false,
    };
    split_over_two_ranks(
        "image_beside_a_vector_ppo_split_over_two_real_ranks_equals_one_rank",
        1,
        &case,
    );
}

/// A network declared as layers (`network "layers"`): separate actor and critic torsos
/// through autograd, a residual block and a layer norm's weights among the reduced gradients.
#[test]
fn declared_layers_ppo_split_over_two_real_ranks_equals_one_rank() {
    let case = Case {
        declared: true,
        ..three_actions()
    };
    split_over_two_ranks(
        "declared_layers_ppo_split_over_two_real_ranks_equals_one_rank",
        1,
        &case,
    );
}

fn split_over_two_ranks(test: &str, micro_batches: usize, case: &Case) {
    if role().is_some() {
        let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
        let rank = pg.rank();
        let learner = learner(micro_batches, case);
        let mut ddp = Ddp::new(
            pg,
            learner.2.optimizer().parameters(),
            SyncPolicy::Allreduce {
                bucket_mb: 4096.0 / (1024.0 * 1024.0),
                compression: tandem_config::Compression::None,
            },
        )
        .unwrap();
        assert!(ddp.bucket_count() > 1, "the test wants several buckets");
        let (p, grads) = train(learner, case, Some(rank), &mut ddp);
        ddp.into_group().shutdown(Duration::from_secs(20)).unwrap();
        print_params(&p);
        print_values("GRADS", &grads.concat());
        return;
    }
    let outputs = run_two_ranks(test, 30_000, &[], Duration::from_secs(120));
    let (p0, p1) = (parse_params(&outputs[0]), parse_params(&outputs[1]));
    assert_eq!(p0, p1, "the two ranks hold different parameters");
    let (one, one_grads) = train(learner(1, case), case, None, &mut Local);
    let (g0, g1) = (
        parse_values("GRADS", &outputs[0]),
        parse_values("GRADS", &outputs[1]),
    );
    assert_eq!(g0, g1, "the two ranks synchronised different gradients");
    assert_same_gradients(&g0, &one_grads, 1e-3);
    let initial = params(&model(case).0);
    let mut max_diff = 0f32;
    for (a, b) in one.iter().zip(&p0) {
        max_diff = max_diff.max((a - b).abs());
    }
    assert!(
        max_diff < 1e-5,
        "1 rank vs 2 ranks: parameters differ by {max_diff}"
    );
    let moved = one
        .iter()
        .zip(&initial)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(
        moved > 1e-2,
        "10 updates barely moved the parameters ({moved})"
    );
}
