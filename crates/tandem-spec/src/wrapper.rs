//! The wrappers an environment's chain may hold ([`Wrapper`]), each declared once with its
//! name, meaning and parameters ([`WRAPPERS`]: how a config writes them, their ranges and
//! defaults): the config's schema, its parser and its canonical form read that table, the
//! fit rule checks the ranges by it, and the env crate builds the typed value.

/// One wrapper of an environment's chain, with its parameters as the config states them; a
/// chain applies them in list order, the first wrapping the game.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wrapper {
    /// On reset, take between 1 and `max` (uniform) no-op actions (action 0).
    NoopReset { max: u32 },
    /// On reset, press FIRE (action 1) then action 2, as games that wait for FIRE need.
    FireReset,
    /// Repeat each action `n` times, summing rewards; with `max_pool` the observation is the
    /// element-wise max of the last two frames.
    FrameSkip { n: u32, max_pool: bool },
    /// A lost life ends the agent's episode; reset then continues the same game.
    EpisodicLife,
    /// Shrink u8 images to `height` x `width` exactly as OpenCV's INTER_AREA does.
    Resize { height: u32, width: u32 },
    /// u8 RGB to one luma channel exactly as OpenCV's RGB2GRAY does on u8.
    Grayscale,
    /// Rewards become their sign (-1, 0, 1).
    ClipReward,
    /// Rewards are multiplied by `factor`.
    ScaleReward { factor: f64 },
    /// Rewards are clamped to `[low, high]` (`low < 0 < high`).
    ClampReward { low: f64, high: f64 },
    /// The observation is the last `n` observations stacked on the channel axis (oldest
    /// first), channels-first for images.
    FrameStack { n: u32 },
    /// Truncate episodes after `max_steps` steps.
    TimeLimit { max_steps: u64 },
    /// With `probability` the previous action is repeated instead of the new one.
    StickyActions { probability: f64 },
    /// Observations become `(x - mean) / sqrt(var + 1e-8)` from running statistics, clipped
    /// to `[-clip, clip]`; the output is f32.
    NormalizeObs { clip: f64 },
    /// Rewards are divided by the running standard deviation of the discounted return
    /// (discount `gamma`), clipped to `[-clip, clip]`.
    NormalizeReward { gamma: f64, clip: f64 },
    /// Observe only the entries of a vector observation whose bits `mask` sets (bit i:
    /// entry i), in ascending order.
    KeepObs { mask: u64 },
}

impl Wrapper {
    /// The name a config writes it by.
    pub fn name(&self) -> &'static str {
        match self {
            Wrapper::NoopReset { .. } => "noop-reset",
            Wrapper::FireReset => "fire-reset",
            Wrapper::FrameSkip { .. } => "frame-skip",
            Wrapper::EpisodicLife => "episodic-life",
            Wrapper::Resize { .. } => "resize",
            Wrapper::Grayscale => "grayscale",
            Wrapper::ClipReward => "clip-reward",
            Wrapper::ScaleReward { .. } => "scale-reward",
            Wrapper::ClampReward { .. } => "clamp-reward",
            Wrapper::FrameStack { .. } => "frame-stack",
            Wrapper::TimeLimit { .. } => "time-limit",
            Wrapper::StickyActions { .. } => "sticky-actions",
            Wrapper::NormalizeObs { .. } => "normalize-obs",
            Wrapper::NormalizeReward { .. } => "normalize-reward",
            Wrapper::KeepObs { .. } => "keep-obs",
        }
    }
}

impl Wrapper {
    /// Whether the observation after this wrapper differs from the one before it (in values or
    /// shape); the others change actions, rewards or episode ends only.
    pub fn changes_observation(&self) -> bool {
        match self {
            Wrapper::FrameSkip { max_pool, .. } => *max_pool,
            Wrapper::Resize { .. }
            | Wrapper::Grayscale
            | Wrapper::FrameStack { .. }
            | Wrapper::NormalizeObs { .. }
            | Wrapper::KeepObs { .. } => true,
            Wrapper::NoopReset { .. }
            | Wrapper::FireReset
            | Wrapper::EpisodicLife
            | Wrapper::ClipReward
            | Wrapper::ScaleReward { .. }
            | Wrapper::ClampReward { .. }
            | Wrapper::TimeLimit { .. }
            | Wrapper::StickyActions { .. }
            | Wrapper::NormalizeReward { .. } => false,
        }
    }
}

impl Wrapper {
    /// Whether it changes the reward the learner sees and nothing else (the game's score, its
    /// raw reward, stays), so an evaluation, which reports scores, leaves it out.
    pub fn transforms_reward(&self) -> bool {
        matches!(
            self,
            Wrapper::ClipReward
                | Wrapper::ScaleReward { .. }
                | Wrapper::ClampReward { .. }
                | Wrapper::NormalizeReward { .. }
        )
    }
}

/// How a config writes a wrapper: its name, what it does, its parameters in order (the first
/// may be written as the wrapper's only argument).
#[derive(Debug, Clone, Copy)]
pub struct WrapperInfo {
    pub name: &'static str,
    pub doc: &'static str,
    pub params: &'static [Param],
}

/// One parameter of a wrapper.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub range: Range,
    /// `None`: the config must state it.
    pub default: Option<Value>,
    pub doc: &'static str,
}

/// The values a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Range {
    Int {
        min: i64,
        max: i64,
    },
    Float {
        min: f64,
        min_open: bool,
        max: f64,
        max_open: bool,
    },
    Bool,
    /// A list of distinct integers, each in `min..=max`.
    Indices {
        min: i64,
        max: i64,
    },
}

/// One parameter's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A keep-obs mask: bit i keeps entry i (written as the list of kept entries).
    Indices(u64),
}

/// `1 to 64`, `at least 1`, `(0, 1]`, `distinct entries of 0 to 63`.
impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Range::Int { min, max: i64::MAX } => write!(f, "at least {min}"),
            Range::Int { min, max } => write!(f, "{min} to {max}"),
            Range::Float {
                min, min_open, max, ..
            } if max == f64::INFINITY => {
                let word = if min_open { "above" } else { "at least" };
                write!(f, "{word} {min}")
            }
            Range::Float {
                min,
                min_open,
                max,
                max_open,
            } => {
                let open = if min_open { '(' } else { '[' };
                let close = if max_open { ')' } else { ']' };
                write!(f, "{open}{min}, {max}{close}")
            }
            Range::Bool => write!(f, "#true or #false"),
            Range::Indices { min, max } => {
                write!(f, "one or more distinct entries of {min} to {max}")
            }
        }
    }
}

/// As a config writes it: `4`, `0.25`, `#true`, `0 2`.
impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Bool(b) => write!(f, "#{b}"),
            Value::Indices(mask) => {
                let kept: Vec<String> = (0..64)
                    .filter(|i| mask >> i & 1 == 1)
                    .map(|i| i.to_string())
                    .collect();
                write!(f, "{}", kept.join(" "))
            }
        }
    }
}

impl Range {
    /// Whether `value` is of this range.
    pub fn holds(&self, value: Value) -> bool {
        match (*self, value) {
            (Range::Int { min, max }, Value::Int(i)) => (min..=max).contains(&i),
            (
                Range::Float {
                    min,
                    min_open,
                    max,
                    max_open,
                },
                Value::Float(x),
            ) => {
                let above = if min_open { x > min } else { x >= min };
                let below = if max_open { x < max } else { x <= max };
                above && below
            }
            (Range::Bool, Value::Bool(_)) => true,
            (Range::Indices { min, max }, Value::Indices(mask)) => {
                mask != 0 && (0..64).all(|i| mask >> i & 1 == 0 || (min..=max).contains(&i))
            }
            _ => false,
        }
    }
}

pub(crate) const fn param(
    name: &'static str,
    range: Range,
    default: Option<Value>,
    doc: &'static str,
) -> Param {
    Param {
        name,
        range,
        default,
        doc,
    }
}

const POSITIVE: Range = Range::Float {
    min: 0.0,
    min_open: true,
    max: f64::INFINITY,
    max_open: true,
};

const NEGATIVE: Range = Range::Float {
    min: f64::NEG_INFINITY,
    min_open: true,
    max: 0.0,
    max_open: true,
};

/// Every wrapper, in the order the docs list them.
pub const WRAPPERS: &[WrapperInfo] = &[
    WrapperInfo {
        name: "noop-reset",
        doc: "After a reset, take a random number (1 to max) of no-op actions (Atari).",
        params: &[param(
            "max",
            Range::Int { min: 1, max: 1000 },
            Some(Value::Int(30)),
            "Largest number of no-ops.",
        )],
    },
    WrapperInfo {
        name: "fire-reset",
        doc: "After a reset, press FIRE, then action 2 (games with a FIRE action).",
        params: &[],
    },
    WrapperInfo {
        name: "frame-skip",
        doc: "Repeat each action n frames and sum the rewards.",
        params: &[
            param(
                "n",
                Range::Int { min: 1, max: 100 },
                Some(Value::Int(4)),
                "Frames per action.",
            ),
            param(
                "max-pool",
                Range::Bool,
                Some(Value::Bool(true)),
                "Observe the maximum of the last two frames (image observations only).",
            ),
        ],
    },
    WrapperInfo {
        name: "episodic-life",
        doc: "End an episode for learning when a life is lost (games with lives).",
        params: &[],
    },
    WrapperInfo {
        name: "resize",
        doc: "Shrink image observations by area averaging (bit for bit as OpenCV's INTER_AREA); it cannot enlarge.",
        params: &[
            param(
                "height",
                Range::Int { min: 1, max: 4096 },
                Some(Value::Int(84)),
                "Output height.",
            ),
            param(
                "width",
                Range::Int { min: 1, max: 4096 },
                Some(Value::Int(84)),
                "Output width.",
            ),
        ],
    },
    WrapperInfo {
        name: "grayscale",
        doc: "Convert RGB image observations to one luminance channel.",
        params: &[],
    },
    WrapperInfo {
        name: "clip-reward",
        doc: "Replace each reward by its sign, for learning only (episode returns stay raw).",
        params: &[],
    },
    WrapperInfo {
        name: "scale-reward",
        doc: "Multiply each reward by a factor, for learning only (Stable-Baselines3 users' reward scale; the episode score stays the game's).",
        params: &[param(
            "factor",
            POSITIVE,
            None,
            "What each reward is multiplied by (`scale-reward 0.01`).",
        )],
    },
    WrapperInfo {
        name: "clamp-reward",
        doc: "Clamp each reward to [low, high], for learning only (gymnasium's `ClipReward`; `clip-reward` keeps only the sign): large rewards keep their sign and a bound, small ones their size. The episode score stays the game's.",
        params: &[
            param(
                "low",
                NEGATIVE,
                Some(Value::Float(-1.0)),
                "The least reward the learner sees.",
            ),
            param(
                "high",
                POSITIVE,
                Some(Value::Float(1.0)),
                "The greatest reward the learner sees.",
            ),
        ],
    },
    WrapperInfo {
        name: "frame-stack",
        doc: "Stack the last n observations along the channel axis.",
        params: &[param(
            "n",
            Range::Int { min: 1, max: 64 },
            Some(Value::Int(4)),
            "Observations stacked.",
        )],
    },
    WrapperInfo {
        name: "time-limit",
        doc: "Truncate episodes after a number of agent steps.",
        params: &[param(
            "max-steps",
            Range::Int {
                min: 1,
                max: i64::MAX,
            },
            None,
            "Agent steps per episode.",
        )],
    },
    WrapperInfo {
        name: "sticky-actions",
        doc: "With this probability, repeat the previous action instead of the chosen one.",
        params: &[param(
            "probability",
            Range::Float {
                min: 0.0,
                min_open: false,
                max: 1.0,
                max_open: true,
            },
            Some(Value::Float(0.25)),
            "Repeat probability.",
        )],
    },
    WrapperInfo {
        name: "normalize-obs",
        doc: "Normalise vector observations by running mean and variance (synchronised across ranks; kept in checkpoints, and frozen at the checkpoint's values by `tandem play`).",
        params: &[param(
            "clip",
            POSITIVE,
            Some(Value::Float(10.0)),
            "Clip normalised values to [-clip, clip].",
        )],
    },
    WrapperInfo {
        name: "normalize-reward",
        doc: "Scale rewards by the running standard deviation of the discounted return.",
        params: &[
            param(
                "gamma",
                Range::Float {
                    min: 0.0,
                    min_open: true,
                    max: 1.0,
                    max_open: false,
                },
                Some(Value::Float(0.99)),
                "Discount of the return whose variance is tracked.",
            ),
            param(
                "clip",
                POSITIVE,
                Some(Value::Float(10.0)),
                "Clip scaled rewards to [-clip, clip].",
            ),
        ],
    },
    WrapperInfo {
        name: "keep-obs",
        doc: "Observe only the listed entries of a vector observation, in ascending order (`keep-obs 0 2`: CartPole's position and angle without their velocities, a task that needs memory).",
        params: &[param(
            "indices",
            Range::Indices { min: 0, max: 63 },
            None,
            "Entries kept, each once, all inside the observation.",
        )],
    },
];

impl Wrapper {
    /// What [`WRAPPERS`] says of this wrapper.
    pub fn info(&self) -> &'static WrapperInfo {
        info(self.name()).expect("every wrapper is in WRAPPERS")
    }

    /// The parameters' values, in [`WRAPPERS`]' order.
    pub fn params(&self) -> Vec<Value> {
        match *self {
            Wrapper::NoopReset { max } => vec![Value::Int(max.into())],
            Wrapper::FrameSkip { n, max_pool } => vec![Value::Int(n.into()), Value::Bool(max_pool)],
            Wrapper::Resize { height, width } => {
                vec![Value::Int(height.into()), Value::Int(width.into())]
            }
            Wrapper::FrameStack { n } => vec![Value::Int(n.into())],
            Wrapper::TimeLimit { max_steps } => {
                vec![Value::Int(i64::try_from(max_steps).unwrap_or(i64::MAX))]
            }
            Wrapper::StickyActions { probability } => vec![Value::Float(probability)],
            Wrapper::ScaleReward { factor } => vec![Value::Float(factor)],
            Wrapper::ClampReward { low, high } => vec![Value::Float(low), Value::Float(high)],
            Wrapper::NormalizeObs { clip } => vec![Value::Float(clip)],
            Wrapper::NormalizeReward { gamma, clip } => {
                vec![Value::Float(gamma), Value::Float(clip)]
            }
            Wrapper::KeepObs { mask } => vec![Value::Indices(mask)],
            Wrapper::FireReset
            | Wrapper::EpisodicLife
            | Wrapper::Grayscale
            | Wrapper::ClipReward => Vec::new(),
        }
    }

    /// The wrapper called `name` with `values`, its parameters in [`WRAPPERS`]' order; `None`
    /// for an unknown name or values not of its parameters' kinds (a config checks both
    /// first). Integers out of the field's range saturate; the ranges refuse them.
    pub fn from_params(name: &str, values: &[Value]) -> Option<Wrapper> {
        let int = |i: usize| match values.get(i) {
            Some(Value::Int(v)) => Some(*v),
            _ => None,
        };
        let small = |i: usize| int(i).map(|v| u32::try_from(v).unwrap_or(u32::MAX));
        let float = |i: usize| match values.get(i) {
            Some(Value::Float(v)) => Some(*v),
            _ => None,
        };
        Some(match name {
            "noop-reset" => Wrapper::NoopReset { max: small(0)? },
            "fire-reset" => Wrapper::FireReset,
            "frame-skip" => Wrapper::FrameSkip {
                n: small(0)?,
                max_pool: match values.get(1)? {
                    Value::Bool(b) => *b,
                    _ => return None,
                },
            },
            "episodic-life" => Wrapper::EpisodicLife,
            "resize" => Wrapper::Resize {
                height: small(0)?,
                width: small(1)?,
            },
            "grayscale" => Wrapper::Grayscale,
            "clip-reward" => Wrapper::ClipReward,
            "scale-reward" => Wrapper::ScaleReward { factor: float(0)? },
            "clamp-reward" => Wrapper::ClampReward {
                low: float(0)?,
                high: float(1)?,
            },
            "frame-stack" => Wrapper::FrameStack { n: small(0)? },
            "time-limit" => Wrapper::TimeLimit {
                max_steps: u64::try_from(int(0)?).unwrap_or(0),
            },
            "sticky-actions" => Wrapper::StickyActions {
                probability: float(0)?,
            },
            "normalize-obs" => Wrapper::NormalizeObs { clip: float(0)? },
            "normalize-reward" => Wrapper::NormalizeReward {
                gamma: float(0)?,
                clip: float(1)?,
            },
            "keep-obs" => match values.first()? {
                Value::Indices(mask) => Wrapper::KeepObs { mask: *mask },
                _ => return None,
            },
            _ => return None,
        })
    }
}

/// What [`WRAPPERS`] says of the wrapper called `name`.
pub fn info(name: &str) -> Option<&'static WrapperInfo> {
    WRAPPERS.iter().find(|w| w.name == name)
}

/// How wrappers are written, for help texts and the reference: a chain in a KDL block, one
/// wrapper with its first parameter as its argument and in the canonical form (every parameter
/// named), and one wrapper in the JSON form.
pub mod written {
    pub const CHAIN: &str = "grayscale; frame-stack 4";
    pub const SHORT: &str = "frame-stack 4";
    pub const CANONICAL: &str = "frame-stack n=4";
    pub const JSON: &str = r#"{"kind": "frame-stack", "n": 4}"#;
}

/// Frames per stored observation that an off-policy replay can rebuild from single frames: the
/// last stack's frame count when no later wrapper (a normaliser, a resize, grayscale) changes
/// the stacked observation, else 1 (whole observations are stored).
pub fn replay_stack(chain: &[Wrapper]) -> usize {
    let mut stack = 1;
    for wrapper in chain {
        match wrapper {
            Wrapper::FrameStack { n } => stack = *n as usize,
            Wrapper::NormalizeObs { .. } | Wrapper::Resize { .. } | Wrapper::Grayscale => stack = 1,
            _ => {}
        }
    }
    stack.max(1)
}

/// Whether the chain stacks frames (its observations hold more than one).
pub fn stacks_frames(chain: &[Wrapper]) -> bool {
    chain
        .iter()
        .any(|wrapper| matches!(wrapper, Wrapper::FrameStack { .. }))
}

/// A replay rebuilds a stack from the previous steps' newest frames, one frame per step; a frame
/// skip after the stack moves it by several frames per step, so it cannot be rebuilt. Returns
/// the positions of the first such skip and of the stack before it.
pub fn skip_after_stack(chain: &[Wrapper]) -> Option<(usize, usize)> {
    let mut stacked = None;
    for (i, wrapper) in chain.iter().enumerate() {
        match wrapper {
            Wrapper::FrameStack { n } if *n > 1 => stacked = Some(i),
            Wrapper::NormalizeObs { .. } => stacked = None,
            Wrapper::FrameSkip { n, .. } if *n > 1 => {
                if let Some(stack) = stacked {
                    return Some((i, stack));
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each wrapper with every parameter at its default (or 1 where it has none).
    fn every_wrapper() -> Vec<Wrapper> {
        WRAPPERS
            .iter()
            .map(|w| {
                let values: Vec<Value> = w
                    .params
                    .iter()
                    .map(|p| match (p.default, p.range) {
                        (Some(v), _) => v,
                        (None, Range::Indices { .. }) => Value::Indices(0b101),
                        (None, Range::Float { .. }) => Value::Float(1.0),
                        (None, _) => Value::Int(1),
                    })
                    .collect();
                Wrapper::from_params(w.name, &values).expect(w.name)
            })
            .collect()
    }

    #[test]
    fn every_wrapper_is_declared_once_and_round_trips() {
        let wrappers = every_wrapper();
        assert_eq!(wrappers.len(), WRAPPERS.len());
        for (wrapper, info) in wrappers.iter().zip(WRAPPERS) {
            assert_eq!(wrapper.name(), info.name);
            let values = wrapper.params();
            assert_eq!(values.len(), info.params.len(), "{}", info.name);
            for (value, param) in values.iter().zip(info.params) {
                assert!(param.range.holds(*value), "{}.{}", info.name, param.name);
            }
            assert_eq!(Wrapper::from_params(info.name, &values), Some(*wrapper));
        }
        assert_eq!(Wrapper::from_params("frame-stak", &[Value::Int(4)]), None);
        let not_a_flag = [Value::Int(4), Value::Int(1)];
        assert_eq!(Wrapper::from_params("frame-skip", &not_a_flag), None);
    }

    #[test]
    fn ranges_hold_what_they_say() {
        let unit = Range::Float {
            min: 0.0,
            min_open: true,
            max: 1.0,
            max_open: false,
        };
        assert!(unit.holds(Value::Float(1.0)) && !unit.holds(Value::Float(0.0)));
        assert!(!unit.holds(Value::Float(f64::NAN)));
        assert!(!unit.holds(Value::Int(1)));
        let entries = Range::Indices { min: 0, max: 3 };
        assert!(entries.holds(Value::Indices(0b1001)));
        assert!(!entries.holds(Value::Indices(0b10000)) && !entries.holds(Value::Indices(0)));
    }
}
