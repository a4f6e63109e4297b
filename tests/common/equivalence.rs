//! The DDP equivalence harness of the off-policy box learners (tests/sac_equivalence.rs,
//! tests/td3_equivalence.rs): a learner trained on a fixed global batch on 1 rank and on its
//! halves over 2 real ranks (Gloo, child processes) ends with the same state within 1e-5 and
//! synchronised the same gradients every step within 1e-4 of the largest (a sum where the
//! average belongs is off by all of it), and both ranks end bitwise equal.

use std::time::Duration;

use tandem::algo::{Collective, Local};
use tandem::dist::{Ddp, ProcessGroup, SyncPolicy};
use tch::Tensor;

use super::{
    assert_same_gradients, child_options, parse_params, parse_values, print_params, print_values,
    run_two_ranks,
};

/// A learner as the harness trains it.
pub struct Harness<L> {
    /// The learner of a seed (ranks start from different seeds; the broadcast equalises them).
    pub learner: fn(i64) -> L,
    /// Trains on rows `[start, start + len)` of the global batch; returns each step's
    /// synchronised gradient.
    pub train: fn(&mut L, &mut dyn Collective, i64, i64) -> Vec<Vec<f32>>,
    /// DDP's parameter list, the named state (networks and targets) and the optimizer state.
    pub trainable: fn(&L) -> Vec<Tensor>,
    pub named: fn(&L) -> Vec<(String, Tensor)>,
    pub optimizer: fn(&L) -> Vec<(String, Tensor)>,
    pub global_batch: i64,
}

fn flat(named: &[(String, Tensor)]) -> Vec<f32> {
    named
        .iter()
        .flat_map(|(_, t)| Vec::<f32>::try_from(t.detach().flatten(0, -1)).unwrap())
        .collect()
}

impl<L> Harness<L> {
    /// A child rank: broadcast from rank 0, train on this rank's half, check fingerprints,
    /// print the state and the gradients.
    pub fn run_rank(&self) {
        let pg = ProcessGroup::connect(&child_options()).expect("rendezvous");
        let rank = pg.rank() as i64;
        let mut learner = (self.learner)(100 + rank);
        let policy = SyncPolicy::Allreduce {
            bucket_mb: 512.0 / (1024.0 * 1024.0),
            compression: tandem_config::Compression::None,
        };
        let mut ddp = Ddp::new(pg, &(self.trainable)(&learner), policy).unwrap();
        let mut state: Vec<Tensor> = (self.named)(&learner).into_iter().map(|(_, t)| t).collect();
        state.extend((self.optimizer)(&learner).into_iter().map(|(_, t)| t));
        ddp.broadcast_from_rank0(&state).unwrap();
        let half = self.global_batch / 2;
        let grads = (self.train)(&mut learner, &mut ddp, rank * half, half);
        ddp.check_fingerprints(&(self.named)(&learner)).unwrap();
        print_params(&flat(&(self.named)(&learner)));
        print_values("GRADS", &grads.concat());
    }

    /// The parent: runs `test` as 2 ranks and compares them with each other and with 1 rank on
    /// the whole batch; every tensor moved, and tensors named with each of `prefixes` exist.
    pub fn assert_two_ranks_equal_one(&self, test: &str, prefixes: &[&str]) {
        let outputs = run_two_ranks(test, 20_000, &[], Duration::from_secs(60));
        let [(p0, g0), (p1, g1)] = [0, 1].map(|r| {
            (
                parse_params(&outputs[r]),
                parse_values("GRADS", &outputs[r]),
            )
        });
        assert_eq!(
            p0.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            p1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "ranks differ bitwise"
        );
        assert_eq!(g0, g1, "ranks synchronised different gradients");
        let names = (self.named)(&(self.learner)(100));
        let before = flat(&names);
        let mut reference = (self.learner)(100);
        let one_grads = (self.train)(&mut reference, &mut Local, 0, self.global_batch);
        let one = flat(&(self.named)(&reference));
        assert_same_gradients(&g0, &one_grads, 1e-4);
        assert_eq!(p0.len(), one.len());
        for (i, (a, b)) in p0.iter().zip(&one).enumerate() {
            assert!((a - b).abs() <= 1e-5, "value {i}: 2 ranks {a}, 1 rank {b}");
        }
        // Every part moved (the comparison is not between initial states).
        let mut at = 0;
        for (name, t) in &names {
            let n = t.numel();
            let moved = (at..at + n)
                .map(|i| (p0[i] - before[i]).abs())
                .fold(0f32, f32::max);
            assert!(moved > 1e-4, "{name} did not move");
            at += n;
        }
        for p in prefixes {
            assert!(
                names.iter().any(|(n, _)| n.starts_with(p)),
                "no {p}* tensors"
            );
        }
    }
}
