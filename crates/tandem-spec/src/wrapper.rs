//! The wrappers an environment's chain may hold, with their parameters.

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
            Wrapper::FrameStack { .. } => "frame-stack",
            Wrapper::TimeLimit { .. } => "time-limit",
            Wrapper::StickyActions { .. } => "sticky-actions",
            Wrapper::NormalizeObs { .. } => "normalize-obs",
            Wrapper::NormalizeReward { .. } => "normalize-reward",
            Wrapper::KeepObs { .. } => "keep-obs",
        }
    }
}
