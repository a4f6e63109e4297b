//! What one stored action is, as experience storage and collection see it: a discrete index
//! (kept as int64), a box of `dim` f32 values, or one int64 index per component of a
//! multi-discrete space. Derived once from the environment's
//! [`ActionSpace`]; the bounds stay with the environment (it clips), storage needs only the
//! layout. Also the host form of a batch of actions, shared by the collectors and replay.

use std::fmt;

use anyhow::{Result, bail};
use tandem_env::ActionSpace;
use tch::Kind;

/// The layout of one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    Discrete,
    Box {
        dim: usize,
    },
    /// One index per component (int64, like a discrete action).
    MultiDiscrete {
        dim: usize,
    },
}

impl ActionKind {
    pub fn of(space: &ActionSpace) -> ActionKind {
        match space {
            ActionSpace::Discrete { .. } => ActionKind::Discrete,
            ActionSpace::Box { .. } => ActionKind::Box { dim: space.dim() },
            ActionSpace::MultiDiscrete { .. } => ActionKind::MultiDiscrete { dim: space.dim() },
        }
    }

    /// Values one action takes in storage.
    pub fn values_per_action(self) -> usize {
        match self {
            ActionKind::Discrete => 1,
            ActionKind::Box { dim } | ActionKind::MultiDiscrete { dim } => dim,
        }
    }

    /// The tensor type actions are stored as.
    pub fn tensor_kind(self) -> Kind {
        match self {
            ActionKind::Discrete | ActionKind::MultiDiscrete { .. } => Kind::Int64,
            ActionKind::Box { .. } => Kind::Float,
        }
    }

    /// The shape of `rows` actions: `[rows]` discrete, `[rows, dim]` box or multi-discrete.
    pub fn shape(self, rows: i64) -> Vec<i64> {
        match self {
            ActionKind::Discrete => vec![rows],
            ActionKind::Box { dim } | ActionKind::MultiDiscrete { dim } => vec![rows, dim as i64],
        }
    }
}

impl fmt::Display for ActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActionKind::Discrete => write!(f, "discrete actions"),
            ActionKind::Box { dim } => write!(f, "box actions of {dim} f32"),
            ActionKind::MultiDiscrete { dim } => {
                write!(f, "multi-discrete actions of {dim} components")
            }
        }
    }
}

/// Actions of several environments (or samples) on the host, row-major.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionBatch {
    Discrete(Vec<i64>),
    /// `values.len() / dim` actions of `dim` values each.
    Box {
        dim: usize,
        values: Vec<f32>,
    },
    /// `values.len() / dim` actions of one index per component.
    MultiDiscrete {
        dim: usize,
        values: Vec<i64>,
    },
}

/// The batch as the environments step with it.
impl<'a> From<&'a ActionBatch> for tandem_env::Actions<'a> {
    fn from(batch: &'a ActionBatch) -> Self {
        match batch {
            ActionBatch::Discrete(a) => tandem_env::Actions::Discrete(a),
            ActionBatch::Box { values, .. } => tandem_env::Actions::Box(values),
            ActionBatch::MultiDiscrete { values, .. } => tandem_env::Actions::Discrete(values),
        }
    }
}

impl ActionBatch {
    /// An empty batch of `kind` with room for `rows` actions.
    pub fn with_capacity(kind: ActionKind, rows: usize) -> ActionBatch {
        match kind {
            ActionKind::Discrete => ActionBatch::Discrete(Vec::with_capacity(rows)),
            ActionKind::Box { dim } => ActionBatch::Box {
                dim,
                values: Vec::with_capacity(rows * dim),
            },
            ActionKind::MultiDiscrete { dim } => ActionBatch::MultiDiscrete {
                dim,
                values: Vec::with_capacity(rows * dim),
            },
        }
    }

    /// `rows` zero actions of `kind` (storage to overwrite).
    pub fn zeros(kind: ActionKind, rows: usize) -> ActionBatch {
        match kind {
            ActionKind::Discrete => ActionBatch::Discrete(vec![0; rows]),
            ActionKind::Box { dim } => ActionBatch::Box {
                dim,
                values: vec![0.0; rows * dim],
            },
            ActionKind::MultiDiscrete { dim } => ActionBatch::MultiDiscrete {
                dim,
                values: vec![0; rows * dim],
            },
        }
    }

    pub fn kind(&self) -> ActionKind {
        match self {
            ActionBatch::Discrete(_) => ActionKind::Discrete,
            ActionBatch::Box { dim, .. } => ActionKind::Box { dim: *dim },
            ActionBatch::MultiDiscrete { dim, .. } => ActionKind::MultiDiscrete { dim: *dim },
        }
    }

    /// Actions held (rows, not values).
    pub fn len(&self) -> usize {
        match self {
            ActionBatch::Discrete(v) => v.len(),
            ActionBatch::Box { dim, values } => values.len() / dim.max(&1),
            ActionBatch::MultiDiscrete { dim, values } => values.len() / dim.max(&1),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The discrete indices, or an error naming `what` needed them.
    pub fn discrete(&self, what: &str) -> Result<&[i64]> {
        match self {
            ActionBatch::Discrete(v) => Ok(v),
            other => bail!("{what} needs discrete actions, got {}", other.kind()),
        }
    }

    /// Copies action `from` of `src` (same kind) into row `to` of `self`.
    pub fn copy_row(&mut self, to: usize, src: &ActionBatch, from: usize) {
        match (self, src) {
            (ActionBatch::Discrete(d), ActionBatch::Discrete(s)) => d[to] = s[from],
            (ActionBatch::Box { dim, values }, ActionBatch::Box { values: s, .. }) => {
                row_mut(values, *dim, to).copy_from_slice(row(s, *dim, from));
            }
            (
                ActionBatch::MultiDiscrete { dim, values },
                ActionBatch::MultiDiscrete { values: s, .. },
            ) => row_mut(values, *dim, to).copy_from_slice(row(s, *dim, from)),
            // Callers check kinds where the batches enter (push, sample's own storage).
            (dst, src) => unreachable!("copying {} into {}", src.kind(), dst.kind()),
        }
    }

    /// Appends action `from` of `src` (same kind).
    pub fn push_row(&mut self, src: &ActionBatch, from: usize) {
        match (self, src) {
            (ActionBatch::Discrete(d), ActionBatch::Discrete(s)) => d.push(s[from]),
            (ActionBatch::Box { dim, values }, ActionBatch::Box { values: s, .. }) => {
                values.extend_from_slice(row(s, *dim, from));
            }
            (
                ActionBatch::MultiDiscrete { dim, values },
                ActionBatch::MultiDiscrete { values: s, .. },
            ) => values.extend_from_slice(row(s, *dim, from)),
            (dst, src) => unreachable!("appending {} to {}", src.kind(), dst.kind()),
        }
    }
}

/// Row `i` of row-major `values` of `dim` a row.
fn row<T>(values: &[T], dim: usize, i: usize) -> &[T] {
    &values[i * dim..(i + 1) * dim]
}

fn row_mut<T>(values: &mut [T], dim: usize, i: usize) -> &mut [T] {
    &mut values[i * dim..(i + 1) * dim]
}
