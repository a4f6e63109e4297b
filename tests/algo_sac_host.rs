//! SAC's host step (`tandem::algo::sac::host`, over `tandem::nn::{HostMlp, HostActor}`) against
//! autograd: on random batches, the gradient it adds to every parameter (actor, both critics,
//! log α) and the losses it reports equal those of `Sac::losses` and a backward of their sum,
//! within float tolerance: tanh and ReLU networks, α tuned and fixed, terminal and non-terminal
//! samples, and twin critics that tie everywhere (autograd's `minimum` then gives each half).

use tandem::algo::off_policy::box_rule::BoxLearner;
use tandem::algo::sac::{GROUPS, Sac, SacBatch, Settings};
use tandem::nn::{Activation, Init, InitSpec, NetworkSpec};
use tch::{Device, Kind, Tensor};

const ROWS: i64 = 23;
const OBS: i64 = 5;
const ACTIONS: i64 = 3;

fn sac(activation: Activation, tuned: bool) -> Sac {
    tch::manual_seed(11);
    let alpha = match tuned {
        true => tandem_config::AutoOr::Auto,
        false => tandem_config::AutoOr::Value(0.3),
    };
    Sac::new(
        Device::Cpu,
        &NetworkSpec::Mlp {
            hidden: vec![16, 12],
            activation,
        },
        &InitSpec {
            scheme: Init::Default,
            torso_gain: 1.0,
            policy_gain: 1.0,
            value_gain: 1.0,
        },
        &[OBS],
        ACTIONS,
        Settings {
            alpha,
            initial_alpha: 0.7,
            ..Settings::default()
        },
    )
    .unwrap()
}

fn batch(seed: i64) -> SacBatch {
    tch::manual_seed(seed);
    let f = (Kind::Float, Device::Cpu);
    let terminal = Tensor::rand([ROWS], f).lt(0.3);
    SacBatch {
        obs: Tensor::randn([ROWS, OBS], f),
        actions: Tensor::rand([ROWS, ACTIONS], f) * 1.8 - 0.9,
        rewards: Tensor::randn([ROWS], f),
        discounts: Tensor::full([ROWS], 0.99, f).masked_fill(&terminal, 0.0),
        next_obs: Tensor::randn([ROWS, OBS], f),
        eps_next: Tensor::randn([ROWS, ACTIONS], f),
        eps_now: Tensor::randn([ROWS, ACTIONS], f),
    }
}

fn close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-3);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 2e-5 * scale + 1e-4 * w.abs(),
            "{what}[{i}]: host {g} against autograd {w} (largest {scale})"
        );
    }
}

/// Gradients and loss values of one step, by autograd and by the host step.
fn compare(mut sac: Sac, seed: i64) {
    let b = batch(seed);
    let (_, optimizer) = sac.counters_mut();
    optimizer.zero_grad();
    let losses = sac.losses(&b).unwrap();
    (&losses.critic + &losses.actor + &losses.alpha).backward();
    let want = sac.group_gradients().unwrap();
    let want_values = losses.values();

    let mut host = sac
        .host_step()
        .unwrap()
        .expect("MLP networks have a host step");
    let (_, optimizer) = sac.counters_mut();
    optimizer.zero_grad();
    let got_values = host.accumulate(&b, sac.target_entropy()).unwrap();
    let got = sac.group_gradients().unwrap();

    assert_eq!(got.len(), want.len());
    for (g, (got, want)) in GROUPS.iter().zip(got.iter().zip(&want)) {
        close(g, got, want);
        assert!(
            want.iter().any(|&x| x != 0.0),
            "{g}: autograd's gradient is zero, so the comparison shows nothing"
        );
    }
    for (name, g, w) in [
        ("critic loss", got_values.critic, want_values.critic),
        ("actor loss", got_values.actor, want_values.actor),
        ("alpha loss", got_values.alpha, want_values.alpha),
        ("q mean", got_values.q_mean, want_values.q_mean),
        ("entropy", got_values.entropy, want_values.entropy),
    ] {
        assert!(
            (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "{name}: host {g} against autograd {w}"
        );
    }
}

#[test]
fn the_host_step_has_autograds_gradients_with_tanh_and_a_tuned_temperature() {
    compare(sac(Activation::Tanh, true), 1);
}

#[test]
fn the_host_step_has_autograds_gradients_with_relu_and_a_fixed_temperature() {
    let sac = sac(Activation::Relu, false);
    assert!(
        sac.group_parameters("alpha").is_err(),
        "a fixed α has no group"
    );
    compare(sac, 2);
}

#[test]
fn twin_critics_that_tie_share_the_actors_gradient_as_autograd_does() {
    let sac = sac(Activation::Tanh, true);
    // Q₂ := Q₁, so min(Q₁, Q₂) ties on every sample.
    let critics = sac.group_parameters("critic").unwrap();
    let half = critics.len() / 2;
    tch::no_grad(|| {
        for i in 0..half {
            critics[half + i].shallow_clone().copy_(&critics[i]);
        }
    });
    compare(sac, 3);
}
