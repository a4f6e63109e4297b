//! Moving the environments' host rows (observations, rewards, actions) in and out of tensors,
//! with as few libtorch dispatches as possible: on small games these conversions run every step
//! and their per-call overhead is a visible share of the rollout.

use anyhow::{Context, Result, ensure};
use tch::{Device, Kind, Tensor};

use crate::algo::actions::{ActionBatch, ActionKind};

/// Copies `rows` (the environments' observations, row after row) into `dst`, a contiguous f32
/// tensor of as many values: straight into its memory on the CPU, through one host tensor for a
/// device.
pub fn copy_rows_into(dst: &Tensor, rows: &[f32]) -> Result<()> {
    ensure!(
        dst.kind() == Kind::Float && dst.numel() == rows.len() && dst.is_contiguous(),
        "observation rows: {} values for a {:?} tensor of shape {:?}",
        rows.len(),
        dst.kind(),
        dst.size()
    );
    if dst.device() == Device::Cpu {
        // SAFETY: `dst` is a contiguous f32 CPU tensor of exactly `rows.len()` elements (checked
        // above), it outlives the slice, and nothing else reads or writes it during the copy.
        unsafe { std::slice::from_raw_parts_mut(dst.data_ptr() as *mut f32, rows.len()) }
            .copy_from_slice(rows);
    } else {
        tch::no_grad(|| {
            dst.shallow_clone()
                .copy_(&Tensor::from_slice(rows).view(dst.size().as_slice()))
        });
    }
    Ok(())
}

/// `n` observation rows as one `[n, ...obs_shape]` tensor on `device`.
pub fn rows_to_batch(rows: &[f32], n: usize, obs_shape: &[i64], device: Device) -> Tensor {
    let mut shape = vec![n as i64];
    shape.extend_from_slice(obs_shape);
    Tensor::from_slice(rows)
        .view(shape.as_slice())
        .to_device(device)
}

/// A per-environment row of host values as a tensor on `device` (no copy dispatched on CPU).
pub fn row_to_tensor(values: &[f32], device: Device) -> Tensor {
    let row = Tensor::from_slice(values);
    if device == Device::Cpu {
        row
    } else {
        row.to_device(device)
    }
}

/// Flags as a 0/1 row on `device`.
pub fn flags_to_tensor(flags: &[bool], device: Device) -> Tensor {
    let values: Vec<f32> = flags.iter().map(|&b| b as u8 as f32).collect();
    row_to_tensor(&values, device)
}

/// Sampled actions as host integers, without dispatching a conversion when they already are
/// int64 on the CPU (this runs every step).
pub fn actions_to_host(actions: &Tensor) -> Result<Vec<i64>> {
    Ok(
        if actions.device() == Device::Cpu && actions.kind() == Kind::Int64 {
            Vec::<i64>::try_from(actions)?
        } else {
            Vec::<i64>::try_from(actions.to_device(Device::Cpu).to_kind(Kind::Int64))?
        },
    )
}

/// A policy's `[n]` (discrete) or `[n, dim]` (box, multi-discrete) action tensor as host
/// actions of `kind`, row-major, ready for the VecEnv.
pub fn host_actions(actions: &Tensor, kind: ActionKind) -> Result<ActionBatch> {
    match kind {
        ActionKind::Discrete => Ok(ActionBatch::Discrete(actions_to_host(actions)?)),
        ActionKind::MultiDiscrete { dim } => {
            let shape = actions.size();
            ensure!(
                matches!(shape.as_slice(), [_, d] if *d == dim as i64),
                "{kind}: the policy produced a tensor of shape {shape:?}, expected [environments, {dim}]"
            );
            Ok(ActionBatch::MultiDiscrete {
                dim,
                values: actions_to_host(&actions.reshape([-1]))?,
            })
        }
        ActionKind::Box { dim } => {
            let shape = actions.size();
            ensure!(
                matches!(shape.as_slice(), [_, d] if *d == dim as i64),
                "box actions of {dim} f32: the policy produced a tensor of shape {shape:?}, \
                 expected [environments, {dim}]"
            );
            Ok(ActionBatch::Box {
                dim,
                values: box_actions_to_host(actions)?,
            })
        }
    }
}

/// Box actions as host f32 values, row-major; no conversion dispatched when they already are
/// contiguous f32 on the CPU.
fn box_actions_to_host(actions: &Tensor) -> Result<Vec<f32>> {
    let host = if actions.device() == Device::Cpu && actions.kind() == Kind::Float {
        actions.reshape([-1])
    } else {
        actions
            .to_device(Device::Cpu)
            .to_kind(Kind::Float)
            .reshape([-1])
    };
    Vec::<f32>::try_from(&host).context("copying box actions to the host")
}
