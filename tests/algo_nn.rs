//! Networks: shapes for every torso, orthogonal initialisation with the right gains,
//! deterministic parameter order, distribution maths (categorical and Gaussian), box-action
//! heads, pixel scaling, dueling heads.

mod common;

use common::{orthogonal_init, torch_rng};
use tandem::algo::dqn::q_network::{QHead, QNetwork};
use tandem::nn::{
    Activation, ActorCritic, ActorCriticSpec, Categorical, EntropyUse, Gaussian, Init, InitSpec,
    MultiCategorical, NetworkSpec, parameters_in_order,
};
use tandem_env::{ActionSpace, Dtype, Layout, ObsSpace};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

const NATURE: NetworkSpec = NetworkSpec::NatureCnn { features: 512 };
const MINATAR: NetworkSpec = NetworkSpec::MinAtarCnn {
    channels: 16,
    features: 128,
};

fn build(spec: &ActorCriticSpec, obs_shape: &[i64], n: i64) -> (VarStore, ActorCritic) {
    let vs = VarStore::new(Device::Cpu);
    let model = ActorCritic::new(
        &vs.root(),
        spec,
        obs_shape,
        ActionSpace::Discrete { n: n as usize },
    )
    .unwrap();
    (vs, model)
}

fn mlp_spec() -> ActorCriticSpec {
    ActorCriticSpec::for_network(
        NetworkSpec::Mlp {
            hidden: vec![16, 8],
            activation: Activation::Tanh,
        },
        orthogonal_init(),
    )
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

/// W W^T (or W^T W, whichever is the smaller Gram matrix) must be gain^2 I.
fn assert_orthogonal(name: &str, weight: &Tensor, gain: f64) {
    let rows = weight.size()[0];
    let matrix = weight.reshape([rows, -1]).to_kind(Kind::Double);
    let cols = matrix.size()[1];
    let gram = if rows <= cols {
        matrix.matmul(&matrix.tr())
    } else {
        matrix.tr().matmul(&matrix)
    };
    let k = rows.min(cols);
    let expected = Tensor::eye(k, (Kind::Double, Device::Cpu)) * (gain * gain);
    let err = max_abs_diff(&gram, &expected);
    assert!(
        err < 1e-5 * gain.max(1.0).powi(2),
        "{name}: Gram matrix is off gain^2 I by {err}"
    );
}

/// Every weight of a network built from `spec` (orthogonal init) is orthogonal with its role's
/// gain from `spec.init`, and every bias is zero.
fn assert_orthogonal_init(spec: &ActorCriticSpec, obs: &[i64]) {
    let init = spec.init;
    let (vs, _) = build(spec, obs, 3);
    let mut checked = 0;
    for (name, tensor) in parameters_in_order(&vs) {
        if name.ends_with(".bias") {
            assert_eq!(
                tensor.abs().max().double_value(&[]),
                0.0,
                "{name} is not zero"
            );
            continue;
        }
        let gain = if name.starts_with("policy_head") {
            init.policy_gain
        } else if name.starts_with("value_head") {
            init.value_gain
        } else {
            init.torso_gain
        };
        if name.contains("conv") {
            assert_eq!(
                tensor.dim(),
                4,
                "{name} is not a 4-d kernel: {:?}",
                tensor.size()
            );
        }
        if name.starts_with("torsos.") {
            // Stacked MLP torsos: each slice is a usual weight, transposed.
            assert_eq!(tensor.dim(), 3, "{name}: {:?}", tensor.size());
            for index in 0..2 {
                assert_orthogonal(&name, &tensor.get(index).tr(), gain);
                checked += 1;
            }
            continue;
        }
        if name == "heads.weight" {
            // Stacked heads: the policy head's slice (all 3 columns), then the value head
            // in column 0 of the second slice, whose padding columns are zero.
            assert_eq!(tensor.size(), [2, 8, 3], "{name}");
            assert_orthogonal("policy head", &tensor.get(0).tr(), init.policy_gain);
            assert_orthogonal(
                "value head",
                &tensor.get(1).narrow(1, 0, 1).tr(),
                init.value_gain,
            );
            let padding = tensor.get(1).narrow(1, 1, 2);
            assert_eq!(padding.abs().max().double_value(&[]), 0.0);
            checked += 2;
            continue;
        }
        assert_orthogonal(&name, &tensor, gain);
        checked += 1;
    }
    assert!(
        checked >= 4,
        "{:?}: only {checked} weight matrices",
        spec.network
    );
}

/// The MLP (stacked), Nature, MinAtar and IMPALA actor-critics with `init`, on observations
/// that fit them; `share_torso` as `for_network` chooses unless `flip_sharing`.
fn every_kind(init: InitSpec, flip_sharing: bool) -> Vec<(ActorCriticSpec, &'static [i64])> {
    let cases: [(ActorCriticSpec, &'static [i64]); 4] = [
        (ActorCriticSpec { init, ..mlp_spec() }, &[5]),
        (ActorCriticSpec::for_network(NATURE, init), &[4, 84, 84]),
        (ActorCriticSpec::for_network(MINATAR, init), &[4, 10, 10]),
        (
            ActorCriticSpec::for_network(NetworkSpec::default_impala(), init),
            &[3, 16, 16],
        ),
    ];
    cases
        .into_iter()
        .map(|(spec, obs)| {
            let share_torso = spec.share_torso != flip_sharing;
            (
                ActorCriticSpec {
                    share_torso,
                    ..spec
                },
                obs,
            )
        })
        .collect()
}

#[test]
fn orthogonal_init_with_torso_policy_and_value_gains_and_zero_biases() {
    let _rng = torch_rng();
    for (spec, obs) in every_kind(orthogonal_init(), false) {
        assert_orthogonal_init(&spec, obs);
    }
}

#[test]
fn each_gain_scales_the_orthogonal_weights_of_its_own_layers() {
    let _rng = torch_rng();
    let init = InitSpec {
        torso_gain: 0.5,
        policy_gain: 2.0,
        value_gain: 3.0,
        ..orthogonal_init()
    };
    // Both layouts of every kind: the stacked MLP slices, shared MLP layers, shared and
    // separate image torsos.
    for flip_sharing in [false, true] {
        for (spec, obs) in every_kind(init, flip_sharing) {
            assert_orthogonal_init(&spec, obs);
        }
    }
}

#[test]
fn parameter_order_is_sorted_by_name_and_the_same_for_every_build() {
    let _rng = torch_rng();
    let (vs_a, _) = build(&mlp_spec(), &[5], 3);
    let (vs_b, _) = build(&mlp_spec(), &[5], 3);
    let names = |vs: &VarStore| {
        parameters_in_order(vs)
            .into_iter()
            .map(|(n, _)| n)
            .collect::<Vec<_>>()
    };
    // Separate MLP torsos are stacked: layer i of the actor's and the critic's torso in one
    // `[2, in, out]` weight and one `[2, 1, out]` bias, and the two heads likewise.
    let expected = [
        "heads.bias",
        "heads.weight",
        "torsos.fc0.bias",
        "torsos.fc0.weight",
        "torsos.fc1.bias",
        "torsos.fc1.weight",
    ];
    assert_eq!(names(&vs_a), expected);
    assert_eq!(names(&vs_a), names(&vs_b));
    let shapes: Vec<Vec<i64>> = parameters_in_order(&vs_a)
        .iter()
        .map(|(_, t)| t.size())
        .collect();
    assert_eq!(shapes[0], [2, 1, 3]);
    assert_eq!(shapes[1], [2, 8, 3]);
    assert_eq!(shapes[2], [2, 1, 16]);
    assert_eq!(shapes[3], [2, 5, 16]);
    assert_eq!(shapes[5], [2, 16, 8]);
    // An image network keeps the usual layout.
    let (vs_cnn, _) = build(
        &ActorCriticSpec::for_network(MINATAR, orthogonal_init()),
        &[4, 10, 10],
        3,
    );
    let cnn_names = names(&vs_cnn);
    assert!(
        cnn_names.contains(&"policy_head.weight".to_string()),
        "{cnn_names:?}"
    );
    assert!(
        cnn_names.contains(&"value_head.weight".to_string()),
        "{cnn_names:?}"
    );
}

#[test]
fn stacked_mlp_torsos_and_heads_compute_what_two_separate_mlps_compute() {
    let _rng = torch_rng();
    // The actor's features come from slice 0 of every stacked layer and the critic's from
    // slice 1, each slice being the transpose of a usual linear layer's weight; the heads'
    // slices likewise, the value head being column 0 of its slice.
    let (vs, model) = build(&mlp_spec(), &[5], 3);
    let vars = vs.variables();
    let obs = Tensor::randn([7, 5], (Kind::Float, Device::Cpu));
    let torso = |index: i64| {
        let mut x = obs.shallow_clone();
        for layer in ["fc0", "fc1"] {
            let w = vars[&format!("torsos.{layer}.weight")].get(index);
            let b = vars[&format!("torsos.{layer}.bias")].get(index);
            x = (x.matmul(&w) + b).tanh();
        }
        x
    };
    let head = |index: i64| {
        torso(index).matmul(&vars["heads.weight"].get(index)) + vars["heads.bias"].get(index)
    };
    let logits = head(0);
    let values = head(1).select(1, 0);
    let (got_logits, got_values) = model.forward(&obs).unwrap();
    assert_eq!(got_logits.size(), [7, 3]);
    assert_eq!(got_values.size(), [7]);
    assert!(max_abs_diff(&got_logits, &logits) < 1e-6);
    assert!(max_abs_diff(&got_values, &values) < 1e-6);
    // The two torsos really differ (independent initialisations).
    assert!(max_abs_diff(&torso(0), &torso(1)) > 1e-3);
    // Gradients reach both slices of a torso and both heads, never the value head's padding.
    let (l, v) = model.forward(&obs).unwrap();
    (l.sum(Kind::Float) + v.sum(Kind::Float)).backward();
    let magnitude = |t: &Tensor| t.abs().sum(Kind::Float).double_value(&[]);
    let grad = vars["torsos.fc0.weight"].grad();
    for index in 0..2 {
        assert!(magnitude(&grad.get(index)) > 0.0);
    }
    let heads = vars["heads.weight"].grad();
    assert!(magnitude(&heads.get(0)) > 0.0);
    assert!(magnitude(&heads.get(1).narrow(1, 0, 1)) > 0.0);
    assert_eq!(magnitude(&heads.get(1).narrow(1, 1, 2)), 0.0);
    assert_eq!(
        magnitude(&vars["heads.bias"].grad().get(1).narrow(1, 1, 2)),
        0.0
    );

    // One action: no padding at all.
    let (vs_one, one) = build(&mlp_spec(), &[5], 1);
    assert_eq!(vs_one.variables()["heads.weight"].size(), [2, 8, 1]);
    let (logits, values) = one.forward(&obs).unwrap();
    assert_eq!((logits.size(), values.size()), (vec![7, 1], vec![7]));
}

#[test]
fn every_network_maps_its_observations_to_logits_and_values() {
    let _rng = torch_rng();
    let cases: [(NetworkSpec, &[i64], &str, &[i64]); 4] = [
        (
            NetworkSpec::default_mlp(),
            &[4],
            "torsos.fc1.weight",
            &[2, 64, 64],
        ),
        // 84 -> 20 -> 9 -> 7: 64 * 7 * 7 features into the 512-unit layer.
        (NATURE, &[4, 84, 84], "torso.fc.weight", &[512, 3136]),
        // 10 -> 8: 16 * 8 * 8 = 1024 features into 128 units.
        (MINATAR, &[4, 10, 10], "torso.fc.weight", &[128, 1024]),
        // 64 -> 32 -> 16 -> 8 after the three pools: 32 * 8 * 8 = 2048 into 256.
        (
            NetworkSpec::default_impala(),
            &[3, 64, 64],
            "torso.fc.weight",
            &[256, 2048],
        ),
    ];
    for (network, obs_shape, layer, layer_shape) in cases {
        let (vs, model) = build(
            &ActorCriticSpec::for_network(network.clone(), orthogonal_init()),
            obs_shape,
            6,
        );
        assert_eq!(vs.variables()[layer].size(), layer_shape, "{network:?}");
        let mut shape = vec![2];
        shape.extend_from_slice(obs_shape);
        let obs = Tensor::rand(&shape, (Kind::Float, Device::Cpu)) * 255.0;
        let (logits, values) = model.forward(&obs).unwrap();
        assert_eq!(logits.size(), [2, 6], "{network:?}");
        assert_eq!(values.size(), [2], "{network:?}");
        assert!(bool::try_from(logits.isfinite().all()).unwrap());
    }
}

#[test]
fn unfit_observations_are_errors_that_say_why() {
    let _rng = torch_rng();
    let vs = VarStore::new(Device::Cpu);
    let spec = ActorCriticSpec::for_network(NATURE, orthogonal_init());
    let err = ActorCritic::new(
        &vs.root(),
        &spec,
        &[4, 20, 20],
        ActionSpace::Discrete { n: 4 },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("nature-cnn") && err.contains("conv2"), "{err}");
    let err = ActorCritic::new(&vs.root(), &spec, &[84, 84], ActionSpace::Discrete { n: 4 })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("C x H x W") && err.contains("[84, 84]"),
        "{err}"
    );
    let err = ActorCritic::new(
        &vs.root(),
        &mlp_spec(),
        &[5],
        ActionSpace::Discrete { n: 0 },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("at least one action"), "{err}");

    let (_, model) = build(&mlp_spec(), &[5], 3);
    let err = model
        .forward(&Tensor::zeros([2, 4], (Kind::Float, Device::Cpu)))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("[batch, 5]") && err.contains("[2, 4]"),
        "{err}"
    );
    let obs = Tensor::zeros([2, 5], (Kind::Float, Device::Cpu));
    let err = model
        .evaluate(
            &obs,
            &Tensor::zeros([3], (Kind::Int64, Device::Cpu)),
            EntropyUse::Differentiable,
        )
        .unwrap_err();
    assert!(err.to_string().contains("actions of shape [2]"), "{err}");
}

#[test]
fn act_and_evaluate_agree_and_categorical_maths_is_right() {
    let _rng = torch_rng();
    let (_, model) = build(&mlp_spec(), &[5], 3);
    let obs = Tensor::randn([64, 5], (Kind::Float, Device::Cpu));
    let taken = model.act(&obs).unwrap();
    let actions = Vec::<i64>::try_from(&taken.actions).unwrap();
    assert!(actions.iter().all(|a| (0..3).contains(a)));
    let evaluation = model
        .evaluate(&obs, &taken.actions, EntropyUse::Differentiable)
        .unwrap();
    assert!(max_abs_diff(&evaluation.log_probs, &taken.log_probs) < 1e-6);
    assert!(max_abs_diff(&evaluation.values, &taken.values) < 1e-6);
    assert!(evaluation.log_probs.requires_grad() && !taken.log_probs.requires_grad());
    // An entropy that is only reported has the same values and stays out of autograd.
    let reported = model
        .evaluate(&obs, &taken.actions, EntropyUse::ReportOnly)
        .unwrap();
    assert!(evaluation.entropy.requires_grad() && !reported.entropy.requires_grad());
    assert!(max_abs_diff(&evaluation.entropy, &reported.entropy) < 1e-7);
    assert!(reported.log_probs.requires_grad());
    assert_eq!(
        EntropyUse::for_coefficient(0.0),
        EntropyUse::ReportOnly,
        "a zero entropy bonus differentiates nothing"
    );
    assert_eq!(
        EntropyUse::for_coefficient(0.01),
        EntropyUse::Differentiable
    );

    // Uniform logits: entropy ln 4, every log-probability ln 1/4.
    let uniform = Categorical::from_logits(&Tensor::zeros([2, 4], (Kind::Float, Device::Cpu)));
    let entropy = Vec::<f32>::try_from(&uniform.entropy()).unwrap();
    assert!(
        entropy.iter().all(|h| (h - 4f32.ln()).abs() < 1e-6),
        "{entropy:?}"
    );
    // Logits ln[1, 3]: p = [0.25, 0.75].
    let skewed = Categorical::from_logits(&Tensor::from_slice(&[0f32, 3f32.ln()]).reshape([1, 2]));
    let lp = skewed
        .log_prob(&Tensor::from_slice(&[1i64]))
        .unwrap()
        .double_value(&[0]);
    let err = skewed
        .log_prob(&Tensor::from_slice(&[2i64]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("actions must lie in 0..2"), "{err}");
    let diverged = Categorical::from_logits(&Tensor::from_slice(&[f32::NAN, 0.0]).reshape([1, 2]));
    let err = diverged.sample().unwrap_err().to_string();
    assert!(err.contains("diverged"), "{err}");
    assert!((lp - 0.75f64.ln()).abs() < 1e-6, "{lp}");
    let h = skewed.entropy().double_value(&[0]);
    let expected = -(0.25f64 * 0.25f64.ln() + 0.75 * 0.75f64.ln());
    assert!((h - expected).abs() < 1e-6, "{h} vs {expected}");
    assert_eq!(skewed.mode().int64_value(&[0]), 1);
}

/// A multi-discrete action is one categorical per component over its own columns of the
/// logits: the joint log-probability and entropy are the components' sums.
#[test]
fn multi_categorical_is_independent_categoricals_over_the_logits_columns() {
    let _rng = torch_rng();
    let logits = Tensor::randn([5, 7], (Kind::Float, Device::Cpu));
    let nvec = [3i64, 2, 2];
    let multi = MultiCategorical::from_logits(&logits, &nvec).unwrap();
    let parts = [
        Categorical::from_logits(&logits.narrow(1, 0, 3)),
        Categorical::from_logits(&logits.narrow(1, 3, 2)),
        Categorical::from_logits(&logits.narrow(1, 5, 2)),
    ];
    let actions = multi.sample().unwrap();
    assert_eq!(actions.size(), [5, 3]);
    assert_eq!(actions.kind(), Kind::Int64);
    let summed = parts
        .iter()
        .enumerate()
        .map(|(i, c)| c.log_prob(&actions.select(1, i as i64)).unwrap())
        .reduce(|a, b| a + b)
        .unwrap();
    assert!(
        multi
            .log_prob(&actions)
            .unwrap()
            .allclose(&summed, 1e-6, 1e-6, false)
    );
    let entropy = parts
        .iter()
        .map(|c| c.entropy())
        .reduce(|a, b| a + b)
        .unwrap();
    assert!(multi.entropy().allclose(&entropy, 1e-6, 1e-6, false));
    let modes = Tensor::stack(&parts.iter().map(|c| c.mode()).collect::<Vec<_>>(), 1);
    assert!(multi.mode().equal(&modes));
    // Logits that do not cover the components, and actions of the wrong width, are errors.
    let err = MultiCategorical::from_logits(&logits, &[3, 3])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("need 6 logits a row, got shape [5, 7]"),
        "{err}"
    );
    let err = multi
        .log_prob(&actions.narrow(1, 0, 2))
        .unwrap_err()
        .to_string();
    assert!(err.contains("expected actions of shape [B, 3]"), "{err}");
    // An index past its component's count is an error, not a wrong gather.
    let outside = Tensor::from_slice(&[0i64, 2, 0]).reshape([1, 3]);
    let one = MultiCategorical::from_logits(&logits.narrow(0, 0, 1), &nvec).unwrap();
    let err = one.log_prob(&outside).unwrap_err().to_string();
    assert!(err.contains("actions must lie in 0..2"), "{err}");
}

/// Observations of 3 features followed by a mask of `width` entries, each row with a random
/// half (at least one per component of `nvec`) valid.
fn masked_observations(rows: i64, nvec: &[i64]) -> Tensor {
    let opts = (Kind::Float, Device::Cpu);
    let parts: Vec<Tensor> = nvec
        .iter()
        .map(|&n| {
            let mask = Tensor::rand([rows, n], opts).ge(0.5).to_kind(Kind::Float);
            // One valid action per component at least: the first where none was drawn.
            let none = mask.sum_dim_intlist(1, true, Kind::Float).eq(0.0);
            let first =
                Tensor::zeros([rows, n], opts).index_fill(1, &Tensor::from_slice(&[0i64]), 1.0);
            mask.where_self(&none.logical_not(), &first)
        })
        .collect();
    Tensor::cat(&[Tensor::randn([rows, 3], opts), Tensor::cat(&parts, 1)], 1)
}

/// With an action mask, the policy never samples, and gives no probability to, an action
/// the observation's mask rules out, for discrete and multi-discrete actions alike; valid
/// actions keep finite log-probabilities and the update's gradients stay finite.
#[test]
fn a_masked_policy_gives_invalid_actions_no_probability() {
    let _rng = torch_rng();
    for (space, nvec) in [
        (ActionSpace::Discrete { n: 4 }, vec![4i64]),
        (
            ActionSpace::MultiDiscrete {
                nvec: vec![3, 2].into(),
            },
            vec![3, 2],
        ),
    ] {
        let width: i64 = nvec.iter().sum();
        let spec = ActorCriticSpec {
            action_mask: true,
            ..mlp_spec()
        };
        let vs = VarStore::new(Device::Cpu);
        let model = ActorCritic::new(&vs.root(), &spec, &[3 + width], space.clone()).unwrap();
        let obs = masked_observations(256, &nvec);
        let mask = obs.narrow(1, 3, width);
        let taken = model.act(&obs).unwrap();
        let chosen = if nvec.len() == 1 {
            taken.actions.unsqueeze(1)
        } else {
            taken.actions.shallow_clone()
        };
        let mut offset = 0;
        for (i, &n) in nvec.iter().enumerate() {
            let picked = mask
                .narrow(1, offset, n)
                .gather(1, &chosen.narrow(1, i as i64, 1), false);
            assert!(
                bool::try_from(picked.eq(1.0).all()).unwrap(),
                "{space}: component {i} sampled an action its mask rules out"
            );
            offset += n;
        }
        assert!(bool::try_from(taken.log_probs.isfinite().all()).unwrap());
        let (logits, _) = model.forward(&obs).unwrap();
        let ruled_out = logits.masked_select(&mask.eq(0.0));
        assert!(
            bool::try_from(ruled_out.eq(tandem::nn::INVALID_LOGIT).all()).unwrap(),
            "{space}: a ruled-out action kept its logit"
        );
        let eval = model
            .evaluate(&obs, &taken.actions, EntropyUse::Differentiable)
            .unwrap();
        let loss = -(eval.log_probs.mean(Kind::Float) + eval.entropy.mean(Kind::Float));
        loss.backward();
        for p in vs.trainable_variables() {
            assert!(
                bool::try_from(p.grad().isfinite().all()).unwrap(),
                "{space}"
            );
        }
    }
    // A mask needs actions it can cover and a vector longer than itself.
    let spec = ActorCriticSpec {
        action_mask: true,
        ..mlp_spec()
    };
    let vs = VarStore::new(Device::Cpu);
    let err = ActorCritic::new(&vs.root(), &spec, &[4], ActionSpace::Discrete { n: 4 })
        .unwrap_err()
        .to_string();
    assert!(err.contains("needs more than 4 entries"), "{err}");
    let err = ActorCritic::new(
        &vs.root(),
        &spec,
        &[6],
        ActionSpace::uniform_box(2, -1.0, 1.0),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("an action mask needs discrete or multi-discrete actions"),
        "{err}"
    );
}

#[test]
fn pixel_scaling_divides_by_255_inside_the_network() {
    let _rng = torch_rng();
    let spec = ActorCriticSpec::for_network(MINATAR, orthogonal_init());
    assert!(!spec.scale_pixels);
    let scaled_spec = ActorCriticSpec {
        scale_pixels: true,
        ..spec.clone()
    };
    let (vs_raw, raw) = build(&spec, &[2, 10, 10], 3);
    let (mut vs_scaled, scaled) = build(&scaled_spec, &[2, 10, 10], 3);
    vs_scaled.copy(&vs_raw).unwrap();
    let unit = Tensor::rand([3, 2, 10, 10], (Kind::Float, Device::Cpu));
    let pixels = (&unit * 255.0).round().to_kind(Kind::Uint8);
    let (expected, _) = raw.forward(&(pixels.to_kind(Kind::Float) / 255.0)).unwrap();
    let (logits, _) = scaled.forward(&pixels).unwrap();
    assert!(max_abs_diff(&logits, &expected) < 1e-5);
}

#[test]
fn dueling_q_values_average_to_the_state_value() {
    let _rng = torch_rng();
    let vs = VarStore::new(Device::Cpu);
    // No hidden layers: the features are the observation itself, so V is a linear map we can
    // evaluate by hand.
    let linear = NetworkSpec::Mlp {
        hidden: vec![],
        activation: Activation::Relu,
    };
    let q = QNetwork::new(
        &vs.root(),
        &linear,
        &orthogonal_init(),
        false,
        &[3],
        4,
        QHead::Dueling,
    )
    .unwrap();
    let obs = Tensor::randn([5, 3], (Kind::Float, Device::Cpu));
    let values = q.forward(&obs).unwrap();
    assert_eq!(values.size(), [5, 4]);
    let vars = vs.variables();
    let state_value =
        obs.matmul(&vars["value_head.weight"].tr()).squeeze_dim(-1) + &vars["value_head.bias"];
    assert!(max_abs_diff(&values.mean_dim(-1, false, Kind::Float), &state_value) < 1e-5);

    let plain_vs = VarStore::new(Device::Cpu);
    let plain = QNetwork::new(
        &plain_vs.root(),
        &MINATAR,
        &orthogonal_init(),
        false,
        &[4, 10, 10],
        6,
        QHead::Plain,
    )
    .unwrap();
    assert_eq!(
        plain
            .forward(&Tensor::zeros([2, 4, 10, 10], (Kind::Float, Device::Cpu)))
            .unwrap()
            .size(),
        [2, 6]
    );
}

/// A fingerprint of a store's initial parameters: `(Σ_p <x_p, s_p> / ‖x_p‖, ‖x‖)`, `x_p` the
/// `p`th parameter in [`parameters_in_order`]'s order (flattened; zero ones are skipped), `s_p`
/// the sines `sin(0.7 i + p + 1)` and `‖x‖` the norm of all parameters together. Each parameter
/// contributes its own term of rms about 0.7, whatever its scale, which changes by about that
/// when any of its draws changes or moves; rounding that differs between CPUs (libtorch's
/// vectorised kernels, LAPACK's QR) moves a term by about a millionth.
fn fingerprint(vs: &VarStore) -> (f64, f64) {
    let mut weighted = 0.0;
    let mut squares = 0.0;
    for (p, (_, t)) in parameters_in_order(vs).iter().enumerate() {
        let x = t.flatten(0, -1).to_kind(Kind::Double);
        let norm = x.norm().double_value(&[]);
        if norm == 0.0 {
            continue;
        }
        let n = x.size()[0];
        let sines = (Tensor::arange(n, (Kind::Double, Device::Cpu)) * 0.7 + (p as f64 + 1.0)).sin();
        weighted += x.dot(&sines).double_value(&[]) / norm;
        squares += norm * norm;
    }
    (weighted, squares.sqrt())
}

#[test]
fn the_default_settings_draw_the_initial_weights_they_drew_as_constants() {
    let _rng = torch_rng();
    let mlp = |hidden: Vec<i64>| NetworkSpec::Mlp {
        hidden,
        activation: Activation::Tanh,
    };
    let actor_critic = |network: NetworkSpec, share: bool, obs: &[i64], n: i64| {
        let spec = ActorCriticSpec {
            share_torso: share,
            ..ActorCriticSpec::for_network(network, orthogonal_init())
        };
        build(&spec, obs, n).0
    };
    let q = |network: NetworkSpec, obs: &[i64], n: i64, head: QHead| {
        let vs = VarStore::new(Device::Cpu);
        QNetwork::new(
            &vs.root(),
            &network,
            &orthogonal_init(),
            false,
            obs,
            n,
            head,
        )
        .unwrap();
        vs
    };
    // Seed i + 1 for case i. Recorded with this code once a hash of every parameter's bits had
    // come out, for each case, equal to the one commit eee5120 (the gains constants, the conv
    // nets' widths fixed) gives.
    let cases: [FingerprintCase; 10] = [
        (
            "mlp separate",
            &|| actor_critic(mlp(vec![64, 64]), false, &[4], 2),
            (-0.2096182037291736, 16.522717238857908),
        ),
        (
            "mlp shared",
            &|| actor_critic(mlp(vec![16, 8]), true, &[5], 3),
            (0.38787171872511444, 5.196181197986556),
        ),
        (
            "nature shared",
            &|| actor_critic(NATURE, true, &[4, 84, 84], 6),
            (1.7104512887692591, 36.67424981751688),
        ),
        (
            "nature separate",
            &|| actor_critic(NATURE, false, &[4, 44, 44], 4),
            (2.377749553667404, 40.8044160895872),
        ),
        (
            "minatar shared",
            &|| actor_critic(MINATAR, true, &[4, 10, 10], 6),
            (0.6207699453223544, 17.000017491204797),
        ),
        (
            "impala shared",
            &|| actor_critic(NetworkSpec::default_impala(), true, &[3, 16, 16], 5),
            (1.1029106906673518, 32.51154366062812),
        ),
        (
            "impala separate",
            &|| actor_critic(NetworkSpec::default_impala(), false, &[3, 16, 16], 5),
            (-1.625353671888076, 45.96738494895766),
        ),
        (
            "q plain minatar",
            &|| q(MINATAR, &[4, 10, 10], 6, QHead::Plain),
            (1.3625779461884804, 17.146428056438165),
        ),
        (
            "q dueling nature",
            &|| q(NATURE, &[4, 84, 84], 6, QHead::Dueling),
            (-1.9097767176915785, 36.75595189623709),
        ),
        (
            "q dueling mlp",
            &|| q(mlp(vec![16]), &[4], 3, QHead::Dueling),
            (0.9951616416627881, 3.4641015643366146),
        ),
    ];
    for (i, (name, network, (weighted, norm))) in cases.iter().enumerate() {
        tch::manual_seed(i as i64 + 1);
        let vs = network();
        let (got_weighted, got_norm) = fingerprint(&vs);
        assert!(
            (got_weighted - weighted).abs() <= 1e-4,
            "{name}: the initial weights differ from the recorded ones: fingerprint {got_weighted}, recorded {weighted}"
        );
        assert!(
            (got_norm - norm).abs() <= 1e-5 * norm,
            "{name}: the initial weights' norm {got_norm} is not the recorded {norm}"
        );
    }
}

#[test]
fn features_and_channels_set_the_conv_nets_layer_shapes() {
    let _rng = torch_rng();
    let nature = NetworkSpec::NatureCnn { features: 100 };
    let minatar = NetworkSpec::MinAtarCnn {
        channels: 7,
        features: 33,
    };
    let cases: [ShapeCase; 2] = [
        // 64 * 7 * 7 = 3136 features into the 100-unit layer, which feeds the heads.
        (
            nature,
            &[4, 84, 84],
            &[
                ("torso.conv2.weight", &[64, 64, 3, 3]),
                ("torso.fc.weight", &[100, 3136]),
                ("policy_head.weight", &[6, 100]),
                ("value_head.weight", &[1, 100]),
            ],
        ),
        // 10 -> 8: 7 * 8 * 8 = 448 features into 33 units.
        (
            minatar,
            &[4, 10, 10],
            &[
                ("torso.conv0.weight", &[7, 4, 3, 3]),
                ("torso.conv0.bias", &[7]),
                ("torso.fc.weight", &[33, 448]),
                ("policy_head.weight", &[6, 33]),
                ("value_head.weight", &[1, 33]),
            ],
        ),
    ];
    for (network, obs_shape, layers) in cases {
        let (vs, model) = build(
            &ActorCriticSpec::for_network(network.clone(), orthogonal_init()),
            obs_shape,
            6,
        );
        let vars = vs.variables();
        for (layer, shape) in layers {
            assert_eq!(vars[*layer].size(), *shape, "{network:?}: {layer}");
        }
        let mut batch = vec![2];
        batch.extend_from_slice(obs_shape);
        let (logits, values) = model
            .forward(&Tensor::rand(&batch, (Kind::Float, Device::Cpu)))
            .unwrap();
        assert_eq!((logits.size(), values.size()), (vec![2, 6], vec![2]));
    }
    let unbuildable = [
        (
            NetworkSpec::NatureCnn { features: 0 },
            &[4, 84, 84],
            "network nature-cnn: features must be positive, got 0",
        ),
        (
            NetworkSpec::MinAtarCnn {
                channels: 0,
                features: 128,
            },
            &[4, 10, 10],
            "network minatar-cnn: channels must be positive, got 0",
        ),
        (
            NetworkSpec::MinAtarCnn {
                channels: 16,
                features: -1,
            },
            &[4, 10, 10],
            "network minatar-cnn: features must be positive, got -1",
        ),
    ];
    for (network, obs_shape, message) in unbuildable {
        let vs = VarStore::new(Device::Cpu);
        let spec = ActorCriticSpec::for_network(network, orthogonal_init());
        let err = ActorCritic::new(&vs.root(), &spec, obs_shape, ActionSpace::Discrete { n: 3 })
            .unwrap_err()
            .to_string();
        assert_eq!(err, message);
    }
}

#[test]
fn a_q_networks_heads_use_the_value_gain() {
    let _rng = torch_rng();
    let init = InitSpec {
        torso_gain: 0.5,
        policy_gain: 2.0,
        value_gain: 3.0,
        ..orthogonal_init()
    };
    let network = NetworkSpec::Mlp {
        hidden: vec![16],
        activation: Activation::Relu,
    };
    for (head, heads) in [
        (QHead::Plain, &["q_head.weight"][..]),
        (
            QHead::Dueling,
            &["value_head.weight", "advantage_head.weight"][..],
        ),
    ] {
        let vs = VarStore::new(Device::Cpu);
        QNetwork::new(&vs.root(), &network, &init, false, &[8], 4, head).unwrap();
        let vars = vs.variables();
        assert_orthogonal("torso.fc0.weight", &vars["torso.fc0.weight"], 0.5);
        for name in heads {
            assert_orthogonal(name, &vars[*name], 3.0);
        }
        for (name, tensor) in &vars {
            if name.ends_with(".bias") {
                assert_eq!(tensor.abs().max().double_value(&[]), 0.0, "{name}");
            }
        }
    }
}

fn default_init() -> InitSpec {
    InitSpec {
        scheme: Init::Default,
        ..orthogonal_init()
    }
}

#[test]
fn default_init_is_what_tchs_default_layers_draw_for_separate_and_stacked_layers() {
    let _rng = torch_rng();
    let same = |what: &str, got: &Tensor, want: &Tensor| {
        assert!(got.equal(want), "{what}: {got} is not {want}");
    };
    let reference = VarStore::new(Device::Cpu);
    let root = reference.root();
    let linear = |name: &str, inputs: i64, outputs: i64| {
        tch::nn::linear(&root / name, inputs, outputs, Default::default())
    };

    // A shared MinAtar actor-critic draws as its four layers would: conv, fc, policy, value.
    tch::manual_seed(11);
    let (vs, _) = build(
        &ActorCriticSpec::for_network(MINATAR, default_init()),
        &[4, 10, 10],
        3,
    );
    tch::manual_seed(11);
    let conv = tch::nn::conv2d(&root / "conv", 4, 16, 3, Default::default());
    let layers = [
        ("torso.fc", linear("fc", 1024, 128)),
        ("policy_head", linear("policy", 128, 3)),
        ("value_head", linear("value", 128, 1)),
    ];
    let vars = vs.variables();
    same("conv weight", &vars["torso.conv0.weight"], &conv.ws);
    same(
        "conv bias",
        &vars["torso.conv0.bias"],
        conv.bs.as_ref().unwrap(),
    );
    for (name, layer) in &layers {
        same(name, &vars[&format!("{name}.weight")], &layer.ws);
        same(
            name,
            &vars[&format!("{name}.bias")],
            layer.bs.as_ref().unwrap(),
        );
    }

    // Separate MLP torsos and heads are stacked, but each slice draws what the separate layer
    // would, in the order of layer 0 of both torsos, layer 1 of both, the policy head, the value
    // head.
    let spec = ActorCriticSpec::for_network(
        NetworkSpec::Mlp {
            hidden: vec![64, 32],
            activation: Activation::Tanh,
        },
        default_init(),
    );
    assert!(!spec.share_torso);
    tch::manual_seed(12);
    let (vs, _) = build(&spec, &[10], 3);
    tch::manual_seed(12);
    let torsos = [
        ("torsos.fc0", 0, linear("a0", 10, 64)),
        ("torsos.fc0", 1, linear("c0", 10, 64)),
        ("torsos.fc1", 0, linear("a1", 64, 32)),
        ("torsos.fc1", 1, linear("c1", 64, 32)),
        ("heads", 0, linear("p", 32, 3)),
        ("heads", 1, linear("v", 32, 1)),
    ];
    let vars = vs.variables();
    for (name, slice, layer) in &torsos {
        let outputs = layer.ws.size()[0];
        let weight = vars[&format!("{name}.weight")]
            .get(*slice)
            .narrow(1, 0, outputs);
        let bias = vars[&format!("{name}.bias")]
            .get(*slice)
            .narrow(1, 0, outputs);
        let what = format!("{name} slice {slice}");
        same(&what, &weight, &layer.ws.tr());
        same(&what, &bias, &layer.bs.as_ref().unwrap().unsqueeze(0));
    }
    // The value slice's padding stays zero.
    let padding = |name: &str| {
        vars[name]
            .get(1)
            .narrow(1, 1, 2)
            .abs()
            .max()
            .double_value(&[])
    };
    assert_eq!((padding("heads.weight"), padding("heads.bias")), (0.0, 0.0));
}

/// Weights of `fan_in` inputs within `sqrt(6 / fan_in)`, reaching near it; biases within
/// `1 / sqrt(fan_in)` (zero when `zero_bias`).
fn assert_tch_default(name: &str, weight: &Tensor, bias: &Tensor, fan_in: i64, zero_bias: bool) {
    let max = |t: &Tensor| t.abs().max().double_value(&[]);
    let bound = (6.0 / fan_in as f64).sqrt();
    let n = weight.numel();
    // The largest of n uniform draws falls below 0.95 of the bound with chance 0.95^n.
    assert!(
        max(weight) <= bound && (n < 512 || max(weight) >= 0.95 * bound),
        "{name}: weights reach {}, the bound is {bound}",
        max(weight)
    );
    let bias_bound = 1.0 / (fan_in as f64).sqrt();
    if zero_bias {
        assert_eq!(max(bias), 0.0, "{name}: bias");
    } else {
        assert!(
            max(bias) <= bias_bound && max(bias) > 0.0,
            "{name}: biases reach {}, the bound is {bias_bound}",
            max(bias)
        );
        if bias.numel() >= 256 {
            assert!(
                max(bias) >= 0.9 * bias_bound,
                "{name}: biases reach only {}",
                max(bias)
            );
        }
    }
}

#[test]
fn default_init_weights_are_uniform_within_sqrt_6_over_fan_in_separate_or_stacked() {
    let _rng = torch_rng();
    // Nature: three convs (zero biases), the fc layer and the heads (uniform biases).
    let (vs, _) = build(
        &ActorCriticSpec::for_network(NATURE, default_init()),
        &[4, 84, 84],
        6,
    );
    let vars = vs.variables();
    for (layer, fan_in) in [
        ("conv0", 4 * 8 * 8),
        ("conv1", 32 * 4 * 4),
        ("conv2", 64 * 3 * 3),
    ] {
        let name = format!("torso.{layer}");
        let [weight, bias] = [".weight", ".bias"].map(|p| &vars[&format!("{name}{p}")]);
        assert_tch_default(&name, weight, bias, fan_in, true);
    }
    for (name, fan_in) in [
        ("torso.fc", 3136),
        ("policy_head", 512),
        ("value_head", 512),
    ] {
        let [weight, bias] = [".weight", ".bias"].map(|p| &vars[&format!("{name}{p}")]);
        assert_tch_default(name, weight, bias, fan_in, false);
    }
    // Stacked: each torso slice as a 100 -> 256 layer, each head slice as a 256-input layer.
    let spec = ActorCriticSpec::for_network(
        NetworkSpec::Mlp {
            hidden: vec![256],
            activation: Activation::Relu,
        },
        default_init(),
    );
    let (vs, _) = build(&spec, &[100], 3);
    let vars = vs.variables();
    for slice in 0..2 {
        let weight = vars["torsos.fc0.weight"].get(slice);
        let bias = vars["torsos.fc0.bias"].get(slice);
        assert_tch_default(&format!("torso {slice}"), &weight, &bias, 100, false);
    }
    let [weight, bias] = ["heads.weight", "heads.bias"].map(|n| vars[n].shallow_clone());
    assert_tch_default("policy head", &weight.get(0), &bias.get(0), 256, false);
    let value = |t: &Tensor| t.get(1).narrow(1, 0, 1);
    assert_tch_default("value head", &value(&weight), &value(&bias), 256, false);
}

#[test]
fn from_experiment_maps_every_network_setting() {
    let spec_built = |text: &str, built: ObsSpace| {
        let source = tandem_config::Source::Stdin(format!("experiment \"x\" {{\n{text}\n}}\n"));
        let resolved =
            tandem_config::resolve(&source, &[]).unwrap_or_else(|d| panic!("{}", d.render(false)));
        ActorCriticSpec::from_experiment(&resolved.experiment, built).unwrap()
    };
    let frames = ObsSpace::image(210, 160, 3, Layout::Hwc, Dtype::U8);
    let vector = ObsSpace::vector(8, Dtype::F32);
    let spec = |text: &str| spec_built(text, vector);
    // Where the config knows the observation it decides; a gymnasium environment's is known
    // once built, and the built space decides.
    let atari = r#"algorithm "ppo"
        env "atari-breakout"
        network "nature-cnn""#;
    assert!(spec_built(atari, vector).scale_pixels);
    let gym = r#"algorithm "ppo"
        env "gymnasium" { id "ALE/Pong-v5"; }
        network "nature-cnn""#;
    assert!(spec_built(gym, frames).scale_pixels);
    assert!(!spec_built(gym, vector).scale_pixels);
    // An image torso on an image beside a vector reads both; the torso scales the image.
    let beside = ObsSpace::image_beside_vector(36, 40, 3, 5);
    let joined = spec_built(gym, beside);
    assert_eq!(
        (joined.network, joined.scale_pixels),
        (
            NetworkSpec::ImageBesideVector {
                image: Box::new(NetworkSpec::NatureCnn { features: 512 }),
                shape: [3, 36, 40],
            },
            false
        )
    );
    let minatar = spec(
        r#"algorithm "ppo"
        env "minatar-breakout"
        network "minatar-cnn" { channels 7; features 33; init "default"; actor-critic "separate"; }"#,
    );
    assert_eq!(
        minatar,
        ActorCriticSpec {
            network: NetworkSpec::MinAtarCnn {
                channels: 7,
                features: 33
            },
            share_torso: false,
            scale_pixels: false,
            init: default_init(),
            core: None,
            action_mask: false,
            actor_input: None,
        }
    );
    let nature = spec(
        r#"algorithm "ppo"
        env "atari-breakout"
        network "nature-cnn" { features 256; torso-gain 0.5; policy-gain 2; value-gain 3; }"#,
    );
    assert_eq!(
        nature,
        ActorCriticSpec {
            network: NetworkSpec::NatureCnn { features: 256 },
            share_torso: true,
            scale_pixels: true,
            init: InitSpec {
                scheme: Init::Orthogonal,
                torso_gain: 0.5,
                policy_gain: 2.0,
                value_gain: 3.0,
            },
            core: None,
            action_mask: false,
            actor_input: None,
        }
    );
    let recurrent = spec(
        r#"algorithm "ppo"
        env "atari-breakout"
        network "nature-cnn" { core "gru"; core-size 32; }"#,
    );
    assert_eq!(
        recurrent.core,
        Some(tandem::nn::CoreSpec {
            kind: tandem::nn::Core::Gru,
            size: 32
        })
    );
    let mlp = spec(
        r#"algorithm "ppo"
        env "cartpole"
        network "mlp" { hidden 32 16; activation "relu"; }"#,
    );
    // An actor-critic MLP without a core gets separate torsos by default (docs/defaults.md).
    assert_eq!(
        (mlp.network, mlp.share_torso, mlp.scale_pixels, mlp.init),
        (
            NetworkSpec::Mlp {
                hidden: vec![32, 16],
                activation: Activation::Relu
            },
            false,
            false,
            orthogonal_init()
        )
    );
    let impala = spec(
        r#"algorithm "ppo"
        env "minatar-breakout"
        network "impala-cnn" { channels 8 16; features 64; }"#,
    );
    assert_eq!(
        (impala.network, impala.scale_pixels),
        (
            NetworkSpec::ImpalaResNet {
                channels: vec![8, 16],
                hidden: 64
            },
            false
        )
    );
}

/// A network to build and the fingerprint its default initial weights were recorded with.
type FingerprintCase<'a> = (&'a str, &'a dyn Fn() -> VarStore, (f64, f64));
/// A network spec, its input shape, and the shapes of the named parameters it must have.
type ShapeCase<'a> = (NetworkSpec, &'a [i64], &'a [(&'a str, &'a [i64])]);

fn values(t: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(t.to_kind(Kind::Double).reshape([-1])).unwrap()
}

#[test]
fn gaussian_log_prob_entropy_and_mode_are_the_closed_forms_summed_over_dimensions() {
    let (means, sigmas) = ([[0.5, -1.0], [0.0, 2.0]], [0.5f64, 2.0]);
    let actions = [[1.0, 1.0], [-0.3, 2.5]];
    let mean = Tensor::from_slice(&[0.5f32, -1.0, 0.0, 2.0]).view([2, 2]);
    let log_std = Tensor::from_slice(&[0.5f32.ln(), 2.0f32.ln()]).view([1, 2]);
    let gaussian = Gaussian::new(&mean, &log_std).unwrap();
    let taken = Tensor::from_slice(&[1.0f32, 1.0, -0.3, 2.5]).view([2, 2]);
    let half_ln_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
    for (row, got) in values(&gaussian.log_prob(&taken).unwrap())
        .iter()
        .enumerate()
    {
        let want: f64 = (0..2)
            .map(|i| {
                let z = (actions[row][i] - means[row][i]) / sigmas[i];
                -0.5 * z * z - sigmas[i].ln() - half_ln_2pi
            })
            .sum();
        assert!((got - want).abs() < 1e-5, "row {row}: {got} vs {want}");
    }
    // H = sum_i ln(sigma_i sqrt(2 pi e)), the same for every row.
    let entropy: f64 = sigmas.iter().map(|s| s.ln() + 0.5 + half_ln_2pi).sum();
    for got in values(&gaussian.entropy()) {
        assert!((got - entropy).abs() < 1e-5, "{got} vs {entropy}");
    }
    assert_eq!(values(&gaussian.mode()), values(&mean));
    let err = gaussian.log_prob(&Tensor::zeros([2], (Kind::Float, Device::Cpu)));
    assert!(
        err.unwrap_err()
            .to_string()
            .contains("expected actions of shape [2, 2]")
    );
    let wrong = Tensor::zeros([1, 3], (Kind::Float, Device::Cpu));
    let err = Gaussian::new(&mean, &wrong).unwrap_err().to_string();
    assert!(err.contains("log standard deviations"), "{err}");
}

#[test]
fn gaussian_samples_have_the_mean_and_standard_deviation_of_each_dimension() {
    let rows = 20_000;
    let mean = Tensor::from_slice(&[1.0f32, -3.0])
        .view([1, 2])
        .repeat([rows, 1]);
    let log_std = Tensor::from_slice(&[0.5f32.ln(), 2.0f32.ln()]).view([1, 2]);
    let drawn = common::seeded(7, || Gaussian::new(&mean, &log_std).unwrap().sample()).unwrap();
    assert_eq!(drawn.size(), [rows, 2]);
    let (m, s) = (
        values(&drawn.mean_dim(0, false, Kind::Double)),
        values(&drawn.std_dim(0, true, false)),
    );
    for (i, (want_m, want_s)) in [(1.0, 0.5), (-3.0, 2.0)].into_iter().enumerate() {
        assert!((m[i] - want_m).abs() < 0.05 * want_s, "mean {i}: {}", m[i]);
        assert!((s[i] / want_s - 1.0).abs() < 0.03, "std {i}: {}", s[i]);
    }
}

fn box_space() -> ActionSpace {
    ActionSpace::Box {
        low: vec![-2.0, 0.0].into(),
        high: vec![2.0, 1.0].into(),
    }
}

#[test]
fn a_box_head_is_a_unit_space_gaussian_whose_samples_it_scores_and_maps_to_the_bounds() {
    // Separate MLPs (the stacked fast path) and a shared torso (linear heads).
    for shared in [false, true] {
        let mut spec = mlp_spec();
        spec.share_torso = shared;
        let vs = VarStore::new(Device::Cpu);
        let model = common::seeded(3, || {
            ActorCritic::new(&vs.root(), &spec, &[3], box_space()).unwrap()
        });
        let named = parameters_in_order(&vs);
        let (_, log_std) = named
            .iter()
            .find(|(n, _)| n == "policy_log_std")
            .expect("a box head has policy_log_std");
        assert_eq!(log_std.size(), [1, 2]);
        assert_eq!(values(log_std), [0.0, 0.0]);
        let obs = common::seeded(4, || Tensor::randn([64, 3], (Kind::Float, Device::Cpu)));
        let taken = common::seeded(5, || model.act(&obs)).unwrap();
        assert_eq!(taken.actions.size(), [64, 2]);
        let eval = model
            .evaluate(&obs, &taken.actions, EntropyUse::Differentiable)
            .unwrap();
        assert!(max_abs_diff(&eval.log_probs, &taken.log_probs) < 1e-5);
        // Unit standard deviations: H = 2 (1/2 + ln(2 pi)/2).
        let unit_entropy = 1.0 + (2.0 * std::f64::consts::PI).ln();
        assert!(
            values(&eval.entropy)
                .iter()
                .all(|h| (h - unit_entropy).abs() < 1e-5)
        );
        // The policy gain (0.01) starts the means near the unit box's centre.
        let mean = model.act_greedy(&obs).unwrap();
        assert_eq!(mean.size(), [64, 2]);
        assert!(mean.abs().max().double_value(&[]) < 0.1, "shared={shared}");
        // Sent actions are clip(center + half_range * u); stored ones stay as sampled.
        let unit = Tensor::from_slice(&[3.0f32, -3.0, 0.5, 0.5]).view([2, 2]);
        assert_eq!(values(&model.env_actions(&unit)), [2.0, 0.0, 1.0, 0.75]);
        let err = model
            .evaluate(&obs, &taken.actions.select(1, 0), EntropyUse::ReportOnly)
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected actions of shape [64, 2]"), "{err}");
    }
    // A discrete network has no such variable: its checkpoints are what they were. (Its draw
    // holds the generator's lock: unlocked, it once landed between two seeded draws of
    // `default_init_is_what_tchs_default_layers_draw...` on another thread.)
    let (vs, _) = common::seeded(6, || build(&mlp_spec(), &[3], 2));
    assert!(
        parameters_in_order(&vs)
            .iter()
            .all(|(n, _)| !n.contains("log_std"))
    );
}

/// A centralised critic (`actor_input`): the actor reads the observation's first entries only,
/// so changing the state after them moves the values and not the policy; the variables are an
/// actor torso over those entries and a critic torso over all of them.
#[test]
fn a_centralised_critic_reads_the_state_and_the_actor_does_not() {
    let spec = ActorCriticSpec {
        actor_input: Some(3),
        ..mlp_spec()
    };
    let _rng = torch_rng();
    tch::manual_seed(7);
    let (vs, model) = build(&spec, &[10], 5);
    let shapes: Vec<(String, Vec<i64>)> = parameters_in_order(&vs)
        .into_iter()
        .map(|(name, t)| (name, t.size()))
        .filter(|(name, _)| name.ends_with("fc0.weight"))
        .collect();
    assert_eq!(
        shapes,
        [
            ("actor_torso.fc0.weight".to_string(), vec![16, 3]),
            ("critic_torso.fc0.weight".to_string(), vec![16, 10])
        ]
    );
    let obs = Tensor::randn([4, 10], (Kind::Float, Device::Cpu));
    let other_state = obs.copy();
    let _ = other_state.narrow(1, 3, 7).fill_(0.5);
    let (logits, values) = model.forward(&obs).unwrap();
    let (same_logits, other_values) = model.forward(&other_state).unwrap();
    assert_eq!(max_abs_diff(&logits, &same_logits), 0.0);
    assert!(max_abs_diff(&values, &other_values) > 1e-3);
    // A shared torso has no actor of its own to narrow.
    let shared = ActorCriticSpec {
        actor_input: Some(3),
        share_torso: true,
        ..mlp_spec()
    };
    let vs = VarStore::new(Device::Cpu);
    let refused = ActorCritic::new(&vs.root(), &shared, &[10], ActionSpace::Discrete { n: 5 });
    assert!(refused.is_err());
}
