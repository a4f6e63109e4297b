//! The host PPO step (`tandem::algo::ppo_host`, over `tandem::nn::HostTwinMlp`) against
//! autograd: on random batches of a separate-MLP actor-critic, its gradients of every parameter
//! and its loss terms equal those of `ppo_loss` and a backward of its total, within float
//! tolerance, for both policies, both activations, with and without value clipping and the
//! entropy bonus, and when a minibatch is cut into micro-batches.

mod common;

use tandem::algo::ppo::host::HostPpoStep;
use tandem::algo::{Batch, Optimizer, OptimizerSpec, PpoTerms, ppo_loss};
use tandem::nn::{
    Activation, ActorCritic, ActorCriticSpec, CoreSpec, EntropyUse, NetworkSpec,
    parameters_in_order,
};
use tandem_env::ActionSpace;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

const ROWS: i64 = 37;
const OBS: i64 = 5;

struct Case {
    activation: Activation,
    space: ActionSpace,
    entropy_coef: f64,
    value_clip: Option<f64>,
    /// Rows weighted in the loss (some weighing 0: rows that did not act).
    weighted: bool,
}

fn network(activation: Activation, share_torso: bool) -> ActorCriticSpec {
    let mut spec = ActorCriticSpec::for_network(
        NetworkSpec::Mlp {
            hidden: vec![16, 12],
            activation,
        },
        common::orthogonal_init(),
    );
    spec.share_torso = share_torso;
    spec
}

/// A model, its optimizer (which lays out the gradients) and a batch whose old log-probabilities
/// sit around the model's own, so that ratios fall inside and outside the clip range.
fn setup(case: &Case, seed: i64) -> (VarStore, ActorCritic, Optimizer, Batch, Tensor) {
    let _rng = common::torch_rng();
    tch::manual_seed(seed);
    let vs = VarStore::new(Device::Cpu);
    let model = ActorCritic::new(
        &vs.root(),
        &network(case.activation, false),
        &[OBS],
        case.space.clone(),
    )
    .expect("a twin-MLP actor-critic");
    let optimizer = adam(&vs);
    // Larger weights than at initialisation, so the policy is far from uniform.
    tch::no_grad(|| {
        for (_, p) in parameters_in_order(&vs) {
            let _ = p.shallow_clone().g_add_(&(p.randn_like() * 0.3));
        }
    });
    let opts = (Kind::Float, Device::Cpu);
    let obs = Tensor::randn([ROWS, OBS], opts);
    let actions = match &case.space {
        ActionSpace::Discrete { n } => {
            Tensor::randint(*n as i64, [ROWS], (Kind::Int64, Device::Cpu))
        }
        _ => Tensor::randn([ROWS, 2], opts),
    };
    let current = model
        .evaluate(&obs, &actions, EntropyUse::ReportOnly)
        .expect("evaluate")
        .log_probs
        .detach();
    let batch = Batch {
        log_probs: current + Tensor::randn([ROWS], opts) * 0.3,
        values: Tensor::randn([ROWS], opts),
        advantages: Tensor::randn([ROWS], opts),
        returns: Tensor::randn([ROWS], opts) * 2.0,
        obs,
        actions,
        sequences: None,
        active: None,
    };
    let advantages = Tensor::randn([ROWS], opts);
    (vs, model, optimizer, batch, advantages)
}

/// PPO's Adam over `vs`: it lays out the gradients the host step adds into.
fn adam(vs: &VarStore) -> Optimizer {
    let spec = OptimizerSpec::Adam {
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-5,
    };
    Optimizer::new(vs, spec).expect("an optimizer")
}

fn settings(case: &Case) -> tandem_config::Ppo {
    tandem_config::Ppo {
        entropy_coef: case.entropy_coef,
        value_clip: case.value_clip,
        value_coef: 0.7,
        clip: 0.2,
        ..common::cleanrl_ppo()
    }
}

/// Every parameter's gradient, by name.
fn gradients(vs: &VarStore) -> Vec<(String, Tensor)> {
    parameters_in_order(vs)
        .into_iter()
        .map(|(name, p)| (name, p.grad().copy()))
        .collect()
}

/// Loss weights as an update gives them where some rows did not act: 0 for those, and the
/// same factor for the others (world * rows / rows that acted, over every rank: here as on a
/// rank whose rows acted less often than the others', so the weights do not sum to the rows).
fn weights(case: &Case) -> Option<Tensor> {
    case.weighted.then(|| {
        let active = Tensor::arange(ROWS, (Kind::Int64, Device::Cpu))
            .remainder(3)
            .ne(1)
            .to_kind(Kind::Float);
        active * 1.3
    })
}

fn autograd(
    model: &ActorCritic,
    optimizer: &mut Optimizer,
    batch: &Batch,
    (advantages, weights): (&Tensor, Option<&Tensor>),
    config: &tandem_config::Ppo,
) -> PpoTerms {
    optimizer.zero_grad();
    let evaluation = model
        .evaluate(
            &batch.obs,
            &batch.actions,
            EntropyUse::for_coefficient(config.entropy_coef),
        )
        .expect("evaluate");
    let loss = ppo_loss(
        &evaluation,
        &batch.log_probs,
        &batch.values,
        advantages,
        &batch.returns,
        weights,
        config,
    );
    loss.total.backward();
    loss.terms()
}

fn assert_close(what: &str, got: &Tensor, expected: &Tensor) {
    let scale = 1.0 + expected.abs().max().double_value(&[]);
    let diff = (got - expected).abs().max().double_value(&[]);
    assert!(
        diff <= 2e-5 * scale,
        "{what}: the host step differs from autograd by {diff} (largest value {scale})\n\
         host: {got}\nautograd: {expected}"
    );
}

fn check(case: Case) {
    let (vs, model, mut optimizer, batch, advantages) = setup(&case, 7);
    let config = settings(&case);
    let weights = weights(&case);
    let expected_terms = autograd(
        &model,
        &mut optimizer,
        &batch,
        (&advantages, weights.as_ref()),
        &config,
    );
    let expected = gradients(&vs);

    optimizer.zero_grad();
    let mut host = HostPpoStep::for_model(&model)
        .expect("gradients laid out")
        .expect("a twin MLP has the host form");
    let terms = host
        .accumulate(&batch, &advantages, weights.as_ref(), 1.0, &config)
        .expect("the host step");
    for ((name, got), (_, want)) in gradients(&vs).iter().zip(&expected) {
        assert_close(&format!("gradient of {name}"), got, want);
    }
    assert_close(
        "policy loss",
        &terms.policy_loss,
        &expected_terms.policy_loss,
    );
    assert_close("value loss", &terms.value_loss, &expected_terms.value_loss);
    assert_close("entropy", &terms.entropy, &expected_terms.entropy);
    assert_close("log ratios", &terms.log_ratio, &expected_terms.log_ratio);
    // The case must exercise the clipped surrogate on both sides of the range.
    let ratios = expected_terms.log_ratio.exp();
    let outside = (ratios.gt(1.2).logical_or(&ratios.lt(0.8)))
        .sum(Kind::Int64)
        .int64_value(&[]);
    assert!(
        outside > 0 && outside < ROWS,
        "the batch's ratios should fall on both sides of the clip range ({outside} of {ROWS} outside)"
    );
}

#[test]
fn categorical_tanh_gradients_match_autograd() {
    check(Case {
        activation: Activation::Tanh,
        space: ActionSpace::Discrete { n: 3 },
        entropy_coef: 0.0,
        value_clip: None,
        weighted: false,
    });
}

#[test]
fn categorical_with_entropy_and_value_clip_matches_autograd() {
    check(Case {
        activation: Activation::Tanh,
        space: ActionSpace::Discrete { n: 4 },
        entropy_coef: 0.05,
        value_clip: Some(0.2),
        weighted: false,
    });
}

#[test]
fn categorical_relu_gradients_match_autograd() {
    check(Case {
        activation: Activation::Relu,
        space: ActionSpace::Discrete { n: 2 },
        entropy_coef: 0.01,
        value_clip: None,
        weighted: false,
    });
}

fn unit_box() -> ActionSpace {
    ActionSpace::Box {
        low: vec![-1.0; 2].into(),
        high: vec![1.0; 2].into(),
    }
}

#[test]
fn gaussian_gradients_match_autograd() {
    check(Case {
        activation: Activation::Tanh,
        space: unit_box(),
        entropy_coef: 0.0,
        value_clip: Some(0.2),
        weighted: false,
    });
}

#[test]
fn gaussian_with_entropy_matches_autograd() {
    check(Case {
        activation: Activation::Relu,
        space: unit_box(),
        entropy_coef: 0.02,
        value_clip: None,
        weighted: false,
    });
}

/// Rows weighted in the loss, some weighing nothing (rows that did not act): categorical.
#[test]
fn weighted_categorical_rows_match_autograd() {
    check(Case {
        activation: Activation::Tanh,
        space: ActionSpace::Discrete { n: 4 },
        entropy_coef: 0.05,
        value_clip: Some(0.2),
        weighted: true,
    });
}

/// Rows weighted in the loss: Gaussian, whose entropy's gradient reaches the log-std through
/// every weighted row.
#[test]
fn weighted_gaussian_rows_match_autograd() {
    check(Case {
        activation: Activation::Relu,
        space: unit_box(),
        entropy_coef: 0.02,
        value_clip: None,
        weighted: true,
    });
}

#[test]
fn micro_batches_add_up_to_the_minibatch_gradient() {
    let case = Case {
        activation: Activation::Tanh,
        space: ActionSpace::Discrete { n: 3 },
        entropy_coef: 0.01,
        value_clip: Some(0.2),
        weighted: false,
    };
    let (vs, model, mut optimizer, batch, advantages) = setup(&case, 11);
    let config = settings(&case);
    let mut host = HostPpoStep::for_model(&model).unwrap().unwrap();
    optimizer.zero_grad();
    host.accumulate(&batch, &advantages, None, 1.0, &config)
        .unwrap();
    let whole = gradients(&vs);
    // Two halves, each weighted 1/2: the mean loss of each half averages to the whole's only
    // for equal halves, so the batch is cut at an even row count.
    let half = 18;
    let (first, second) = (
        batch.narrow(0, half).unwrap(),
        batch.narrow(half, half).unwrap(),
    );
    let even = batch.narrow(0, 2 * half).unwrap();
    optimizer.zero_grad();
    host.accumulate(
        &even,
        &advantages.narrow(0, 0, 2 * half),
        None,
        1.0,
        &config,
    )
    .unwrap();
    let even_whole = gradients(&vs);
    optimizer.zero_grad();
    host.accumulate(&first, &advantages.narrow(0, 0, half), None, 0.5, &config)
        .unwrap();
    host.accumulate(
        &second,
        &advantages.narrow(0, half, half),
        None,
        0.5,
        &config,
    )
    .unwrap();
    for ((name, got), (_, want)) in gradients(&vs).iter().zip(&even_whole) {
        assert_close(&format!("accumulated gradient of {name}"), got, want);
    }
    // And the halves' gradients are not the whole batch's (the comparison above can fail).
    let differs = gradients(&vs)
        .iter()
        .zip(&whole)
        .any(|((_, a), (_, b))| (a - b).abs().max().double_value(&[]) > 1e-6);
    assert!(differs, "37 rows and 36 rows gave the same gradient");
}

#[test]
fn networks_without_the_host_form_are_left_to_autograd() {
    let vs = VarStore::new(Device::Cpu);
    let discrete = ActionSpace::Discrete { n: 3 };
    let shared = ActorCritic::new(
        &(vs.root() / "shared"),
        &network(Activation::Tanh, true),
        &[OBS],
        discrete.clone(),
    )
    .unwrap();
    let mut recurrent_spec = network(Activation::Tanh, true);
    recurrent_spec.core = Some(CoreSpec {
        kind: tandem::nn::Core::Gru,
        size: 8,
    });
    let recurrent = ActorCritic::new(
        &(vs.root() / "rnn"),
        &recurrent_spec,
        &[OBS],
        discrete.clone(),
    )
    .unwrap();
    let multi = ActorCritic::new(
        &(vs.root() / "multi"),
        &network(Activation::Tanh, false),
        &[OBS],
        ActionSpace::MultiDiscrete {
            nvec: vec![2, 3].into(),
        },
    )
    .unwrap();
    let _optimizer = adam(&vs);
    for (what, model) in [
        ("a shared torso", &shared),
        ("a recurrent core", &recurrent),
        ("a multi-discrete policy", &multi),
    ] {
        assert!(
            HostPpoStep::for_model(model).unwrap().is_none(),
            "{what} has no host form"
        );
    }
}

/// `act` on one compute thread takes the host forward pass: its values are the network's, its
/// log-probabilities those the learner's evaluation gives the same actions, and its draws follow
/// the policy's distribution.
#[test]
fn acting_on_the_host_samples_the_networks_policy() {
    tch::set_num_threads(1);
    for space in [ActionSpace::Discrete { n: 3 }, unit_box()] {
        let case = Case {
            activation: Activation::Tanh,
            space: space.clone(),
            entropy_coef: 0.0,
            value_clip: None,
            weighted: false,
        };
        let (_vs, model, _optimizer, batch, _) = setup(&case, 5);
        let _rng = common::torch_rng();
        let taken = model.act(&batch.obs).expect("act");
        let (head, values) = model.forward(&batch.obs).expect("forward");
        assert_close("values", &taken.values, &values);
        let evaluation = model
            .evaluate(&batch.obs, &taken.actions, EntropyUse::ReportOnly)
            .unwrap();
        assert_close("log-probabilities", &taken.log_probs, &evaluation.log_probs);

        // One observation acted on 20,000 times: the draws' frequencies (categorical) or moments
        // (Gaussian) are the distribution's.
        let draws = 20_000;
        let one = batch.obs.narrow(0, 0, 1).repeat([draws, 1]);
        let actions = model.act(&one).unwrap().actions;
        match space {
            ActionSpace::Discrete { .. } => {
                let probabilities = head.narrow(0, 0, 1).softmax(-1, Kind::Float).squeeze();
                let counts = actions.bincount::<Tensor>(None, 3).to_kind(Kind::Float);
                let frequencies = counts / draws as f64;
                let off = (&frequencies - &probabilities)
                    .abs()
                    .max()
                    .double_value(&[]);
                assert!(
                    off < 0.015,
                    "frequencies {frequencies} against probabilities {probabilities}"
                );
            }
            _ => {
                let mean = actions.mean_dim(0, false, Kind::Float);
                let std = actions.std_dim(0, true, false);
                let want_std = model.distribution_parameters(&head)[1]
                    .1
                    .narrow(0, 0, 1)
                    .exp();
                // Within four standard errors of the mean.
                let error = (&mean - head.narrow(0, 0, 1).squeeze()).abs()
                    / (want_std.squeeze() / (draws as f64).sqrt());
                let error = error.max().double_value(&[]);
                assert!(
                    error < 4.0,
                    "the draws' mean is {error} standard errors off"
                );
                let off = ((&std - want_std.squeeze()) / &std)
                    .abs()
                    .max()
                    .double_value(&[]);
                assert!(off < 0.03, "standard deviation {std}, expected {want_std}");
            }
        }
    }
}
