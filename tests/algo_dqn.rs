//! DQN's update on its own: the TD loss worked row by row on the host against the learner's
//! (plain and double targets, squared and Huber losses, importance weights, terminal rows),
//! ε-greedy acting, the ε and β schedules, and the gradient-step count. The equivalence test
//! (tests/dqn_equivalence.rs) compares ranks, which a changed formula keeps equal; these hold
//! the formulas themselves.

mod common;

use common::seeded;
use tandem::algo::Local;
use tandem::algo::dqn::{Dqn, DqnStats, TransitionBatch, annealed, beta_at, epsilon_at};
use tandem::nn::{Activation, ActorCriticSpec, NetworkSpec};
use tandem_config::Loss;
use tch::{Device, Kind, Tensor};

const ROWS: i64 = 6;

fn learner(double: bool, loss: Loss) -> Dqn {
    seeded(11, || {
        Dqn::new(
            Device::Cpu,
            &ActorCriticSpec::for_network(
                NetworkSpec::Mlp {
                    hidden: vec![8],
                    activation: Activation::Tanh,
                },
                common::orthogonal_init(),
            ),
            &[3],
            4,
            tandem_config::Dqn {
                lr: 0.05,
                double,
                loss,
                max_grad_norm: None,
                // The target stays the initial network through these tests' steps.
                target_every: 1000,
                ..Default::default()
            },
        )
        .unwrap()
    })
}

/// Terminal rows (discount 0), uneven importance weights, TD errors past the Huber loss's
/// quadratic range.
fn batch() -> TransitionBatch {
    let f = (Kind::Float, Device::Cpu);
    TransitionBatch {
        obs: Tensor::arange(ROWS * 3, f).reshape([ROWS, 3]).sin(),
        actions: Tensor::from_slice(&[0i64, 3, 1, 2, 3, 0]),
        returns: Tensor::from_slice(&[2.5f32, -1.0, 0.3, 4.0, -3.0, 0.0]),
        discounts: Tensor::from_slice(&[0.99f32, 0.0, 0.9, 0.99, 0.0, 0.5]),
        next_obs: Tensor::arange(ROWS * 3, f).reshape([ROWS, 3]).cos() * 2.0,
        weights: Tensor::from_slice(&[1.0f32, 0.5, 0.25, 1.0, 0.8, 0.6]),
    }
}

fn rows(t: &Tensor) -> Vec<Vec<f64>> {
    let t = t.to_kind(Kind::Double);
    (0..t.size()[0])
        .map(|i| Vec::<f64>::try_from(t.get(i)).unwrap())
        .collect()
}

fn argmax(row: &[f64]) -> usize {
    (0..row.len()).fold(0, |best, a| if row[a] > row[best] { a } else { best })
}

/// y = G + γ^m Q⁻(s', a*) with a* the target's own argmax (Mnih et al. 2015) or the online
/// network's (double DQN, van Hasselt et al. 2016); δ = y - Q(s, a); the loss is the mean of
/// each row's importance weight times δ² or Huber(δ), worked row by row on the host. The
/// online network has moved one step from the target, so the two argmaxes can differ.
#[test]
fn the_td_loss_is_worked_row_by_row() {
    for (double, loss) in [(false, Loss::Mse), (true, Loss::Mse), (true, Loss::Huber)] {
        let target_net = learner(double, loss);
        let mut dqn = learner(double, loss);
        dqn.update(&batch(), &mut Local).unwrap();
        let b = batch();
        let (got_loss, got_delta, got_q) = dqn.td_loss(&b).unwrap();

        let q = rows(&dqn.q_values(&b.obs).unwrap());
        let next_online = rows(&dqn.q_values(&b.next_obs).unwrap());
        let next_target = rows(&target_net.q_values(&b.next_obs).unwrap());
        let [actions, returns, discounts, weights] =
            [&b.actions, &b.returns, &b.discounts, &b.weights]
                .map(|t| Vec::<f64>::try_from(t.to_kind(Kind::Double)).unwrap());
        let (mut sum, mut deltas, mut taken, mut argmaxes_differ) = (0.0, vec![], vec![], false);
        for i in 0..ROWS as usize {
            let pick = if double {
                argmax(&next_online[i])
            } else {
                argmax(&next_target[i])
            };
            argmaxes_differ |= argmax(&next_online[i]) != argmax(&next_target[i]);
            let y = returns[i] + discounts[i] * next_target[i][pick];
            let q_a = q[i][actions[i] as usize];
            let delta = y - q_a;
            let per_row = match loss {
                Loss::Mse => delta * delta,
                Loss::Huber if delta.abs() <= 1.0 => 0.5 * delta * delta,
                Loss::Huber => delta.abs() - 0.5,
            };
            sum += weights[i] * per_row;
            deltas.push(delta);
            taken.push(q_a);
        }
        assert!(argmaxes_differ, "the case cannot tell the targets apart");
        let close = |what: &str, got: &[f64], want: &[f64]| {
            for (g, w) in got.iter().zip(want) {
                assert!(
                    (g - w).abs() < 1e-5,
                    "{double} {loss:?} {what}: {got:?} vs {want:?}"
                );
            }
        };
        close("loss", &[got_loss.double_value(&[])], &[sum / ROWS as f64]);
        close(
            "delta",
            &Vec::<f64>::try_from(got_delta.to_kind(Kind::Double)).unwrap(),
            &deltas,
        );
        close(
            "Q(s, a)",
            &Vec::<f64>::try_from(got_q.to_kind(Kind::Double)).unwrap(),
            &taken,
        );
        assert!(
            deltas.iter().any(|d| d.abs() > 1.0),
            "no δ outside Huber's quadratic range"
        );
    }
}

/// The update reports the loss it stepped on and counts its steps, which a resume sets.
#[test]
fn an_update_counts_its_gradient_steps() {
    let mut dqn = learner(true, Loss::Huber);
    let (loss, delta, _) = dqn.td_loss(&batch()).unwrap();
    let stats = dqn.update(&batch(), &mut Local).unwrap();
    assert_eq!(stats.loss, loss.double_value(&[]));
    // |δ| for the priorities, and its mean for the log.
    let delta = Vec::<f32>::try_from(&delta.abs()).unwrap();
    assert_eq!(stats.td_errors, delta);
    let mean = delta.iter().map(|&d| d as f64).sum::<f64>() / ROWS as f64;
    assert!(
        (stats.td_abs_mean - mean).abs() < 1e-9,
        "{}",
        stats.td_abs_mean
    );
    assert!(!stats.diverged());
    assert!(
        DqnStats {
            loss: f64::NAN,
            ..stats.clone()
        }
        .diverged()
    );
    assert!(
        DqnStats {
            grad_norm: f64::INFINITY,
            ..stats.clone()
        }
        .diverged()
    );
    dqn.update(&batch(), &mut Local).unwrap();
    assert_eq!(dqn.gradient_steps(), 2);
    dqn.set_gradient_steps(40);
    assert_eq!(dqn.gradient_steps(), 40);
}

/// ε = 0 acts greedily on Q; ε = 1 draws every action uniformly, whatever Q says.
#[test]
fn epsilon_greedy_acts_on_q_or_at_random() {
    let dqn = learner(false, Loss::Mse);
    let obs = Tensor::randn([400, 3], (Kind::Float, Device::Cpu));
    let greedy = dqn.q_values(&obs).unwrap().argmax(-1, false);
    assert!(dqn.act(&obs, 0.0).unwrap().equal(&greedy));
    let random = seeded(5, || dqn.act(&obs, 1.0).unwrap());
    let counts = random.bincount(None::<Tensor>, 4);
    let counts = Vec::<i64>::try_from(&counts).unwrap();
    assert!(
        counts.iter().all(|&c| (60..=140).contains(&c)),
        "{counts:?}"
    );
}

/// ε falls linearly from its start to its end over the first `fraction` of the steps, then
/// stays; β (or any annealed value) moves linearly with progress, clamped to [0, 1].
#[test]
fn the_schedules_are_linear_then_flat() {
    let eps = |step| epsilon_at(1.0, 0.05, 0.1, step, 1000);
    assert_eq!(eps(0), 1.0);
    assert!((eps(50) - 0.525).abs() < 1e-12, "{}", eps(50));
    assert!((eps(100) - 0.05).abs() < 1e-12);
    assert!((eps(900) - 0.05).abs() < 1e-12);
    assert!((annealed(0.4, 1.0, 0.25) - 0.55).abs() < 1e-12);
    let cfg = tandem_config::Dqn {
        priority_beta_start: 0.4,
        priority_beta_end: 1.0,
        ..Default::default()
    };
    assert!((beta_at(&cfg, 250, 1000) - 0.55).abs() < 1e-12);
    assert_eq!(beta_at(&cfg, 1000, 1000), 1.0);
    assert_eq!(annealed(0.4, 1.0, -1.0), 0.4);
    assert_eq!(annealed(0.4, 1.0, 3.0), 1.0);
}
