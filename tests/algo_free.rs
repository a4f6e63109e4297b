//! Free sampling's exchange between a collector thread and the learner (`tandem::algo::free`):
//! parameters published between two steps are taken up before the next one, each step keeps
//! the version that chose it (the older one for a group whose actions were chosen before the
//! copy), a stopped round ends the collector after its batch, and the lag of a batch is what
//! its versions say.

use std::collections::VecDeque;
use std::sync::mpsc;

use tandem::algo::actions::ActionKind;
use tandem::algo::learner::Phases;
use tandem::algo::sampling::collect::StepHook;
use tandem::algo::sampling::free::exchange::{Exchange, Lag, LagTally, collect_until_stopped};
use tandem::algo::storage::rollout::RolloutBuffer;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// A variable store holding one scalar `w`, as the learner's and the collector's networks
/// would hold the same variables.
fn store(value: f64) -> VarStore {
    let vs = VarStore::new(Device::Cpu);
    let w = vs.root().zeros("w", &[1]);
    tch::no_grad(|| {
        let _ = w.shallow_clone().fill_(value);
    });
    vs
}

fn w(vs: &VarStore) -> f64 {
    vs.variables()["w"].double_value(&[0])
}

fn buffer() -> RolloutBuffer {
    RolloutBuffer::new(4, 1, &[1], ActionKind::Discrete, Device::Cpu).unwrap()
}

/// Collects one batch of four steps of three groups through a fake collection that, before
/// step 2, lets the learner publish version 1 (w = 7) and waits for it; `chosen_at_2` says
/// whether step 2's first group had its actions already. Returns the batch's versions (one a
/// group and step) and the w the collector's network holds after it.
fn one_batch_with_a_publish_before_step_2(chosen_at_2: bool) -> (Vec<u64>, f64) {
    let exchange = Exchange::new(VecDeque::new(), vec![buffer()], store(0.0), 0);
    let (at_step_2, go_on) = (mpsc::channel(), mpsc::channel::<()>());
    let (to_learner, from_collector) = at_step_2;
    let (to_collector, published) = go_on;
    let mut behaviour = store(0.0);
    let collector_store = &mut behaviour;
    let shared = &exchange;
    let versions = std::thread::scope(|scope| {
        let collector = scope.spawn(move || {
            let mut version = 0;
            collect_until_stopped(
                shared,
                collector_store,
                &mut version,
                0,
                &mut Phases::default(),
                move |_buffer, hook: &mut dyn StepHook, _index, _phases| {
                    for t in 0..4 {
                        if t == 2 {
                            to_learner.send(()).unwrap();
                            published.recv().unwrap();
                        }
                        hook.before_step(t == 2 && chosen_at_2, 3)?;
                    }
                    Ok(Tensor::zeros([1], (Kind::Float, Device::Cpu)))
                },
            )
        });
        from_collector.recv().unwrap();
        exchange.publish(&store(7.0), 1).unwrap();
        to_collector.send(()).unwrap();
        let batch = exchange.take_full().unwrap();
        exchange.stop();
        let report = collector.join().unwrap().unwrap();
        assert_eq!(report.batches, 1, "the collector stops after its batch");
        batch.versions
    });
    (versions, w(&behaviour))
}

#[test]
fn parameters_published_between_steps_are_taken_up_before_the_next() {
    let (versions, w_after) = one_batch_with_a_publish_before_step_2(false);
    assert_eq!(versions, [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]);
    assert_eq!(
        w_after, 7.0,
        "the collector's network holds the published parameters"
    );
}

#[test]
fn a_group_chosen_before_the_copy_keeps_the_older_version() {
    let (versions, _) = one_batch_with_a_publish_before_step_2(true);
    assert_eq!(versions, [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
}

#[test]
fn batches_not_learned_from_come_back_at_the_round_end() {
    // Two spare buffers, a learner that takes nothing: the collector fills both, then waits
    // for a spare one until the round stops.
    let exchange = Exchange::new(VecDeque::new(), vec![buffer(), buffer()], store(0.0), 3);
    let mut behaviour = store(0.0);
    let (filled, wait_filled) = mpsc::channel();
    std::thread::scope(|scope| {
        let collector = scope.spawn(|| {
            let mut version = 3;
            collect_until_stopped(
                &exchange,
                &mut behaviour,
                &mut version,
                10,
                &mut Phases::default(),
                |_buffer, hook: &mut dyn StepHook, index, _phases| {
                    hook.before_step(false, 1)?;
                    filled.send(index).unwrap();
                    Ok(Tensor::zeros([1], (Kind::Float, Device::Cpu)))
                },
            )
        });
        assert_eq!(wait_filled.recv().unwrap(), 10);
        assert_eq!(wait_filled.recv().unwrap(), 11);
        exchange.stop();
        assert_eq!(collector.join().unwrap().unwrap().batches, 2);
    });
    let (carried, spare, _published) = exchange.into_parts();
    assert_eq!(carried.len(), 2);
    assert!(spare.is_empty());
    assert!(carried.iter().all(|batch| batch.versions == [3]));
}

#[test]
fn a_failed_collection_ends_the_learners_wait() {
    let exchange = Exchange::new(VecDeque::new(), vec![buffer()], store(0.0), 0);
    let mut behaviour = store(0.0);
    std::thread::scope(|scope| {
        let collector = scope.spawn(|| {
            let mut version = 0;
            collect_until_stopped(
                &exchange,
                &mut behaviour,
                &mut version,
                0,
                &mut Phases::default(),
                |_buffer, _hook: &mut dyn StepHook, _index, _phases| {
                    anyhow::bail!("the environment died")
                },
            )
        });
        let waited = exchange.take_full();
        assert!(
            waited.is_err(),
            "the learner's wait ends when the collector is gone"
        );
        let error = collector
            .join()
            .unwrap()
            .expect_err("the collection failed");
        assert!(
            format!("{error:#}").contains("the environment died"),
            "{error:#}"
        );
    });
}

#[test]
fn a_batch_lags_by_its_versions() {
    let lag = Lag::of(&[3, 4, 5, 4], 5);
    assert_eq!(
        lag,
        Lag {
            min: 0,
            mean: 1.0,
            max: 2
        }
    );
    let mut tally = LagTally::default();
    tally.add(lag);
    tally.add(Lag::of(&[6, 6, 6, 6], 7));
    tally.dropped = 2;
    assert_eq!(
        tally.scalars(),
        [
            ("train/policy_lag", 1.0),
            ("train/policy_lag_min", 0.0),
            ("train/policy_lag_max", 2.0),
            ("train/dropped_batches", 2.0),
        ]
    );
}
