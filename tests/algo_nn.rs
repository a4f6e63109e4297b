//! Networks: shapes for every torso, orthogonal initialisation with the right gains,
//! deterministic parameter order, distribution maths, pixel scaling, dueling heads.

use tandem::nn::{
    ActionSpace, Activation, ActorCritic, ActorCriticSpec, Categorical, EntropyUse, NetworkSpec,
    QHead, QNetwork, parameters_in_order,
};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

fn build(spec: &ActorCriticSpec, obs_shape: &[i64], n: i64) -> (VarStore, ActorCritic) {
    let vs = VarStore::new(Device::Cpu);
    let model = ActorCritic::new(&vs.root(), spec, obs_shape, ActionSpace::Discrete { n }).unwrap();
    (vs, model)
}

fn mlp_spec() -> ActorCriticSpec {
    ActorCriticSpec::for_network(NetworkSpec::Mlp {
        hidden: vec![16, 8],
        activation: Activation::Tanh,
    })
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

#[test]
fn orthogonal_init_with_torso_policy_and_value_gains_and_zero_biases() {
    let cases: [(ActorCriticSpec, &[i64]); 4] = [
        (mlp_spec(), &[5]),
        (
            ActorCriticSpec::for_network(NetworkSpec::NatureCnn),
            &[4, 84, 84],
        ),
        (
            ActorCriticSpec::for_network(NetworkSpec::MinAtarCnn),
            &[4, 10, 10],
        ),
        (
            ActorCriticSpec::for_network(NetworkSpec::default_impala()),
            &[3, 16, 16],
        ),
    ];
    for (spec, obs) in cases {
        let (vs, _) = build(&spec, obs, 3);
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
                0.01
            } else if name.starts_with("value_head") {
                1.0
            } else {
                std::f64::consts::SQRT_2
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
                assert_orthogonal("policy head", &tensor.get(0).tr(), 0.01);
                assert_orthogonal("value head", &tensor.get(1).narrow(1, 0, 1).tr(), 1.0);
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
}

#[test]
fn parameter_order_is_sorted_by_name_and_the_same_for_every_build() {
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
        &ActorCriticSpec::for_network(NetworkSpec::MinAtarCnn),
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
    let cases: [(NetworkSpec, &[i64], &str, &[i64]); 4] = [
        (
            NetworkSpec::default_mlp(),
            &[4],
            "torsos.fc1.weight",
            &[2, 64, 64],
        ),
        // 84 -> 20 -> 9 -> 7: 64 * 7 * 7 features into the 512-unit layer.
        (
            NetworkSpec::NatureCnn,
            &[4, 84, 84],
            "torso.fc.weight",
            &[512, 3136],
        ),
        // 10 -> 8: 16 * 8 * 8 = 1024 features into 128 units.
        (
            NetworkSpec::MinAtarCnn,
            &[4, 10, 10],
            "torso.fc.weight",
            &[128, 1024],
        ),
        // 64 -> 32 -> 16 -> 8 after the three pools: 32 * 8 * 8 = 2048 into 256.
        (
            NetworkSpec::default_impala(),
            &[3, 64, 64],
            "torso.fc.weight",
            &[256, 2048],
        ),
    ];
    for (network, obs_shape, layer, layer_shape) in cases {
        let (vs, model) = build(&ActorCriticSpec::for_network(network.clone()), obs_shape, 6);
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
    let vs = VarStore::new(Device::Cpu);
    let spec = ActorCriticSpec::for_network(NetworkSpec::NatureCnn);
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

#[test]
fn pixel_scaling_divides_by_255_inside_the_network() {
    let spec = ActorCriticSpec::for_network(NetworkSpec::MinAtarCnn);
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
    let vs = VarStore::new(Device::Cpu);
    // No hidden layers: the features are the observation itself, so V is a linear map we can
    // evaluate by hand.
    let linear = NetworkSpec::Mlp {
        hidden: vec![],
        activation: Activation::Relu,
    };
    let q = QNetwork::new(&vs.root(), &linear, false, &[3], 4, QHead::Dueling).unwrap();
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
        &NetworkSpec::MinAtarCnn,
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
