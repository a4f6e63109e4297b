//! The timing of one PPO update of the Nature-CNN actor-critic on a rank: the update the DDP
//! benchmark (`benches/ddp.rs`) measures, also behind the hidden `tandem __bench-update`, so a
//! machine without cargo (the lent GPU machine, scripts/device-check) runs the same code.
//!
//! Each timed update is split in two: copying the batch from the host to the rank's device (in
//! training the rollout reaches the device one step at a time, the same bytes per update), and
//! the update itself (forward, backward, gradient all-reduce, optimizer step). On CUDA both are
//! closed by a device synchronise, so a time includes the kernels it queued.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::algo::{Batch, Ppo};
use crate::dist::{Ddp, ProcessGroup, SyncPolicy};
use crate::nn::{ActorCritic, ActorCriticSpec, Init, InitSpec, NetworkSpec};
use tandem_env::ActionSpace;

/// Seconds per update, averaged over the timed updates.
#[derive(Debug, Clone, Copy)]
pub struct UpdateTiming {
    /// Host-to-device copy of the batch (zero work on CPU, where the batch stays put).
    pub copy_s: f64,
    /// The update on the device-resident batch.
    pub update_s: f64,
    /// Of `update_s`, the time in gradient collectives.
    pub sync_s: f64,
    /// Bytes of the batch copied to the device per update.
    pub batch_bytes: u64,
}

impl UpdateTiming {
    /// The share of a step (copy + update) spent copying the batch to the device.
    pub fn copy_share(&self) -> f64 {
        self.copy_s / (self.copy_s + self.update_s)
    }
}

/// The Nature-CNN actor-critic of the Atari benchmark (4 stacked 84x84 frames, 4 actions), its
/// parameters on `device`.
pub fn nature_model(device: Device) -> Result<(VarStore, ActorCritic)> {
    tch::manual_seed(0);
    let vs = VarStore::new(device);
    let spec = ActorCriticSpec::for_network(
        NetworkSpec::NatureCnn { features: 512 },
        InitSpec {
            scheme: Init::Orthogonal,
            torso_gain: std::f64::consts::SQRT_2,
            policy_gain: 0.01,
            value_gain: 1.0,
        },
    );
    let model = ActorCritic::new(
        &vs.root(),
        &spec,
        &[4, 84, 84],
        ActionSpace::Discrete { n: 4 },
    )?;
    Ok((vs, model))
}

/// The host batch of `rows` random Atari transitions (float observations, as the rollout
/// buffer stores them).
fn host_batch(rows: i64) -> [Tensor; 6] {
    let opts = (Kind::Float, Device::Cpu);
    [
        Tensor::randint(256, [rows, 4, 84, 84], opts),
        Tensor::randint(4, [rows], (Kind::Int64, Device::Cpu)),
        Tensor::full([rows], -1.386, opts),
        Tensor::zeros([rows], opts),
        Tensor::randn([rows], opts),
        Tensor::randn([rows], opts),
    ]
}

fn settle(device: Device) {
    if let Device::Cuda(index) = device {
        tch::Cuda::synchronize(index as i64);
    }
}

/// Times `updates` PPO updates (after `warmup` untimed ones) of `rows` transitions each on
/// `device`, one minibatch and one epoch per update, gradients all-reduced over `pg`.
pub fn time_ppo_updates(
    pg: ProcessGroup,
    config: tandem_config::Ppo,
    device: Device,
    rows: i64,
    warmup: usize,
    updates: usize,
) -> Result<(UpdateTiming, ProcessGroup)> {
    ensure!(
        rows > 0 && updates > 0,
        "update bench: rows and updates must be positive"
    );
    let (vs, model) = nature_model(device)?;
    let config = tandem_config::Ppo {
        epochs: 1,
        minibatches: 1,
        ..config
    };
    // The learner first, as the trainer does: its optimizer lays the gradients out flat, and
    // DDP all-reduces slices of that buffer.
    let mut ppo = Ppo::new(&vs, config, 0)?;
    let mut ddp = Ddp::new(
        pg,
        ppo.optimizer().parameters(),
        SyncPolicy::Allreduce {
            bucket_mb: 25.0,
            compression: tandem_config::Compression::None,
        },
    )?;
    let host = host_batch(rows);
    let batch_bytes = host
        .iter()
        .map(|t| t.numel() as u64 * t.kind().elt_size_in_bytes() as u64)
        .sum();
    let (mut copy, mut update) = (Duration::ZERO, Duration::ZERO);
    for round in 0..warmup + updates {
        if round == warmup {
            let _ = ddp.take_sync_time();
        }
        settle(device);
        let start = Instant::now();
        let [obs, actions, log_probs, values, advantages, returns] =
            host.each_ref().map(|t| t.to_device(device));
        let batch = Batch::new(obs, actions, log_probs, values, advantages, returns)?;
        settle(device);
        let copied = Instant::now();
        ppo.update(&model, &batch, 0.0, &mut ddp)
            .context("update bench: PPO update")?;
        settle(device);
        if round >= warmup {
            copy += copied - start;
            update += copied.elapsed();
        }
    }
    let n = updates as f64;
    let timing = UpdateTiming {
        copy_s: copy.as_secs_f64() / n,
        update_s: update.as_secs_f64() / n,
        sync_s: ddp.take_sync_time().as_secs_f64() / n,
        batch_bytes,
    };
    Ok((timing, ddp.into_group()))
}

/// `tandem __bench-update`: on one rank (a group of one, over NCCL on CUDA and Gloo on CPU, as
/// training picks), times the update at each of `rows` with the PPO settings of the experiment
/// `config`, and prints one JSON object per size.
pub fn run_cli(
    device: &str,
    rows: &[i64],
    config: &std::path::Path,
    warmup: usize,
    updates: usize,
) -> Result<()> {
    let device = crate::dist::bind_device(device)?;
    let resolved = tandem_config::resolve(&tandem_config::Source::Path(config.into()), &[])
        .map_err(|d| anyhow::anyhow!("{}", d.render(false)))?;
    let tandem_config::Algorithm::Ppo(ppo) = resolved.experiment.algorithm else {
        anyhow::bail!(
            "update bench: {} trains {}, not ppo",
            config.display(),
            resolved.experiment.algorithm.name()
        );
    };
    let port = crate::dist::free_loopback_port()?;
    let backend = crate::dist::Backend::for_device(device);
    let mut pg = ProcessGroup::connect(&crate::dist::GroupOptions {
        rank: 0,
        world_size: 1,
        master_addr: "127.0.0.1".into(),
        master_port: port,
        rendezvous_timeout: Duration::from_secs(60),
        collective_timeout: Duration::from_secs(120),
        backend,
        identity: vec![("bench".into(), "update".into())],
        gloo_interfaces: Vec::new(),
        secret: crate::dist::JobSecret::derive(&["bench update"]),
    })?;
    for &n in rows {
        let (t, back) = time_ppo_updates(pg, ppo.clone(), device, n, warmup, updates)?;
        pg = back;
        let line = serde_json::json!({
            "device": match device {
                Device::Cuda(i) => format!("cuda:{i}"),
                _ => "cpu".to_string(),
            },
            "backend": backend.name(),
            "rows": n,
            "updates": updates,
            "update_s": t.update_s,
            "sync_s": t.sync_s,
            "copy_s": t.copy_s,
            "copy_share": t.copy_share(),
            "batch_bytes": t.batch_bytes,
            "samples_per_s": n as f64 / (t.copy_s + t.update_s),
        });
        println!("{line}");
    }
    let _ = pg.shutdown(Duration::from_secs(30));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_of_copying_is_copy_over_copy_plus_update() {
        let t = UpdateTiming {
            copy_s: 1.0,
            update_s: 3.0,
            sync_s: 0.5,
            batch_bytes: 0,
        };
        assert_eq!(t.copy_share(), 0.25);
    }
}
