//! The one rule for whether a wrapper fits where a chain puts it: given the wrapper, what is
//! known of the game at the bottom of the chain ([`GameFacts`]) and the observation the
//! wrapper receives, the observation it produces or a [`Misfit`] with a label and a help line.
//! The resolver turns a misfit into a diagnostic at the wrapper's span; the env crate refuses
//! to build the chain with the same words.
//!
//! The rule has two halves. [`fits_game`] needs only the game: what a wrapper does to the
//! stepping (no-ops, FIRE, lives, repeated actions) and whether the game allows it.
//! [`fits_input`] needs the observation: shapes, element types, layouts. A gymnasium
//! environment's observation is known only once its workers start, so the resolver can
//! check the first half of it alone.

use crate::space::{ActionSpace, Dtype, Layout, ObsShape, ObsSpace};
use crate::wrapper::Wrapper;

/// Where a game comes from; some wrappers only make sense for some.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    ClassicControl,
    MinAtar,
    /// An Atari 2600 ROM run by the ALE.
    Atari,
    /// A gymnasium environment run by the bridge's Python workers.
    Gymnasium,
    /// A multi-particle game (MPE) of several agents.
    Mpe,
}

/// What the rule knows of the game at the bottom of a chain. `None` is "not known": a chain
/// built by hand on an environment outside the catalogue; the rule then checks what it can.
#[derive(Debug, Clone, PartialEq)]
pub struct GameFacts {
    /// How messages name the game: `atari-pong`, `a gymnasium environment`.
    pub name: String,
    pub family: Option<Family>,
    pub actions: Option<ActionSpace>,
    /// The game reports lives (`episodic-life` needs them).
    pub lives: Option<bool>,
    /// FIRE is one of the game's actions (`fire-reset` presses it).
    pub fire: Option<bool>,
}

impl GameFacts {
    /// A gymnasium environment: its spaces, lives and FIRE are the bridge's to find out.
    pub fn gymnasium() -> Self {
        GameFacts {
            name: "a gymnasium environment".into(),
            family: Some(Family::Gymnasium),
            actions: None,
            lives: None,
            fire: None,
        }
    }
}

/// Why a wrapper does not fit where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misfit {
    /// It cannot take what it receives: `label` says what it needs (for the wrapper's span),
    /// `help` what the chain holds there or how to mend it.
    Input { label: String, help: String },
    /// One of its own parameters is out of range.
    Parameter(String),
}

impl Misfit {
    fn input(label: impl Into<String>, help: impl Into<String>) -> Self {
        Misfit::Input {
            label: label.into(),
            help: help.into(),
        }
    }
}

/// Whether `wrapper` fits a chain on `game` at all, whatever it observes there.
pub fn fits_game(wrapper: &Wrapper, game: &GameFacts) -> Result<(), Misfit> {
    parameters(wrapper)?;
    if game.family == Some(Family::Gymnasium) {
        return fits_gymnasium(wrapper);
    }
    let name = &game.name;
    if game.family == Some(Family::Mpe) {
        return Err(Misfit::input(
            "wraps one agent's environment",
            format!(
                "{name} is played by several agents at once; the wrappers act on one agent's \
                 environment and none fits a multi-agent game (its episode length is its own \
                 `max-cycles`)"
            ),
        ));
    }
    match wrapper {
        Wrapper::NoopReset { .. } if game.family.is_some_and(|f| f != Family::Atari) => {
            return Err(Misfit::input(
                "needs an Atari game",
                format!("no-op resets randomise Atari starts; {name} is not an Atari game"),
            ));
        }
        Wrapper::FireReset if game.fire == Some(false) => {
            return Err(Misfit::input(
                "needs a FIRE action",
                format!("{name} has no FIRE action"),
            ));
        }
        Wrapper::EpisodicLife if game.lives == Some(false) => {
            return Err(Misfit::input(
                "needs a game with lives",
                format!("{name} has no lives"),
            ));
        }
        _ => {}
    }
    fits_actions(wrapper, game)
}

/// The wrappers that choose actions themselves need a discrete game; fire-reset, of a game
/// whose FIRE is not known, at least the 3 actions its presses use.
fn fits_actions(wrapper: &Wrapper, game: &GameFacts) -> Result<(), Misfit> {
    let Some(actions) = &game.actions else {
        return Ok(());
    };
    let chooses = matches!(
        wrapper,
        Wrapper::NoopReset { .. } | Wrapper::FireReset | Wrapper::StickyActions { .. }
    );
    match actions {
        ActionSpace::Box { .. } if chooses => Err(Misfit::input(
            "needs discrete actions",
            format!(
                "`{}` picks discrete actions itself; {} takes {actions}",
                wrapper.name(),
                game.name
            ),
        )),
        ActionSpace::Discrete { n }
            if *wrapper == Wrapper::FireReset && game.fire.is_none() && *n < 3 =>
        {
            Err(Misfit::input(
                "needs a FIRE action",
                format!(
                    "fire-reset presses actions 1 and 2; {} has {n} actions",
                    game.name
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// The bridge steps a gymnasium environment once per agent step with the agent's action:
/// wrappers that step it otherwise, or read lives or FIRE, do not fit.
fn fits_gymnasium(wrapper: &Wrapper) -> Result<(), Misfit> {
    let why = match wrapper {
        Wrapper::NoopReset { .. } => "steps the game with no-ops the agent did not choose",
        Wrapper::FireReset => "presses FIRE, which a gymnasium environment need not have",
        Wrapper::FrameSkip { .. } => "steps the game several times per agent step",
        Wrapper::EpisodicLife => "needs lives, which the bridge does not read",
        Wrapper::StickyActions { .. } => "steps the game with an action the agent did not choose",
        _ => return Ok(()),
    };
    Err(Misfit::input(
        why,
        format!(
            "remove `{}`; a gymnasium environment that needs it applies gymnasium's own wrapper (e.g. in a module named by `import` that registers the wrapped environment)",
            wrapper.name()
        ),
    ))
}

/// The wrapper's own parameters, each within its range ([`WRAPPERS`](crate::wrapper::WRAPPERS)).
fn parameters(wrapper: &Wrapper) -> Result<(), Misfit> {
    for (param, value) in wrapper.info().params.iter().zip(wrapper.params()) {
        if !param.range.holds(value) {
            return Err(Misfit::Parameter(format!(
                "{} {value} is outside {}",
                param.name, param.range
            )));
        }
    }
    Ok(())
}

/// The observation `wrapper` produces from `input`, the observation it receives on a chain
/// on `game`; [`fits_game`] is checked first.
pub fn fits(wrapper: &Wrapper, game: &GameFacts, input: &ObsSpace) -> Result<ObsSpace, Misfit> {
    fits_game(wrapper, game)?;
    fits_input(wrapper, game, input)
}

/// The observation-dependent half of [`fits`].
fn fits_input(wrapper: &Wrapper, game: &GameFacts, input: &ObsSpace) -> Result<ObsSpace, Misfit> {
    let here = || {
        format!(
            "{} observes {} at this point of the chain",
            game.name,
            input.describe()
        )
    };
    match *wrapper {
        Wrapper::Grayscale | Wrapper::Resize { .. } if input.frames > 1 => Err(Misfit::input(
            "after frame-stack",
            format!(
                "`{}` works on single frames: move it before `frame-stack`",
                wrapper.name()
            ),
        )),
        Wrapper::Grayscale => grayscale(input, here),
        Wrapper::Resize { height, width } => resize(input, height as usize, width as usize, here),
        Wrapper::FrameSkip { max_pool: true, .. } if !input.is_image() => Err(Misfit::input(
            "max-pool needs image observations",
            format!("{}; write `max-pool=#false`", here()),
        )),
        Wrapper::FrameStack { n } => stack(input, n as usize, here),
        Wrapper::NormalizeObs { .. } if !input.is_vector() => Err(Misfit::input(
            "needs vector observations",
            format!("{}; networks scale images and planes themselves", here()),
        )),
        Wrapper::NormalizeObs { .. } => Ok(ObsSpace {
            dtype: Dtype::F32,
            ..*input
        }),
        Wrapper::KeepObs { mask } => keep(input, mask, here),
        _ => Ok(*input),
    }
}

fn grayscale(input: &ObsSpace, here: impl Fn() -> String) -> Result<ObsSpace, Misfit> {
    match input.shape {
        ObsShape::Image {
            height,
            width,
            channels: 3,
            layout: Layout::Hwc,
        } if input.dtype == Dtype::U8 => {
            Ok(ObsSpace::image(height, width, 1, Layout::Chw, Dtype::U8))
        }
        _ if input.is_rgb() => Err(Misfit::input(
            "needs RGB frames in height x width x channels order",
            format!("{}; put `grayscale` first among the image wrappers", here()),
        )),
        _ if input.is_pixel_image() => Err(Misfit::input("already grayscale", here())),
        _ => Err(Misfit::input("needs RGB image observations", here())),
    }
}

fn resize(
    input: &ObsSpace,
    height: usize,
    width: usize,
    here: impl Fn() -> String,
) -> Result<ObsSpace, Misfit> {
    let ObsShape::Image {
        height: h,
        width: w,
        channels,
        layout,
    } = input.shape
    else {
        return Err(Misfit::input("needs image observations", here()));
    };
    if input.dtype != Dtype::U8 {
        return Err(Misfit::input("needs image observations", here()));
    }
    if layout == Layout::Chw && channels != 1 {
        return Err(Misfit::input(
            "needs frames in height x width x channels order",
            format!("{}; put `resize` before `frame-stack`", here()),
        ));
    }
    if height > h || width > w {
        return Err(Misfit::input(
            "larger than the frame",
            format!(
                "{}; resize only shrinks (area averaging, as OpenCV's INTER_AREA)",
                here()
            ),
        ));
    }
    Ok(ObsSpace::image(height, width, channels, layout, Dtype::U8))
}

/// `n` observations stacked: vectors end to end, images on the channel axis, channels first.
fn stack(input: &ObsSpace, n: usize, here: impl Fn() -> String) -> Result<ObsSpace, Misfit> {
    let stacked = match input.shape {
        ObsShape::Vector { len } => ObsSpace::vector(len * n, input.dtype),
        ObsShape::Image {
            height,
            width,
            channels,
            ..
        } => ObsSpace::image(height, width, channels * n, Layout::Chw, input.dtype),
        ObsShape::ImageAndVector { .. } => {
            return Err(Misfit::input(
                "stacks images or vectors, not an image beside a vector",
                format!(
                    "{}; remove `frame-stack`, or stack in the environment (gymnasium's FrameStackObservation on the image entry)",
                    here()
                ),
            ));
        }
    };
    Ok(ObsSpace {
        frames: input.frames * n,
        ..stacked
    })
}

fn keep(input: &ObsSpace, mask: u64, here: impl Fn() -> String) -> Result<ObsSpace, Misfit> {
    let ObsShape::Vector { len } = input.shape else {
        return Err(Misfit::input("needs vector observations", here()));
    };
    if let Some(outside) = (0..64).find(|i| mask >> i & 1 == 1 && *i >= len) {
        return Err(Misfit::input(
            format!("entry {outside} is outside the observation"),
            format!("{}; keep entries 0 to {}", here(), len.saturating_sub(1)),
        ));
    }
    Ok(ObsSpace::vector(mask.count_ones() as usize, input.dtype))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(family: Family, actions: &ActionSpace) -> GameFacts {
        GameFacts {
            name: "the game".into(),
            family: Some(family),
            actions: Some(actions.clone()),
            lives: Some(false),
            fire: Some(false),
        }
    }

    #[test]
    fn the_atari_chain_ends_in_four_stacked_grayscale_frames() {
        let actions = ActionSpace::discrete(4);
        let game = GameFacts {
            lives: Some(true),
            fire: Some(true),
            ..facts(Family::Atari, &actions)
        };
        let chain = [
            Wrapper::NoopReset { max: 30 },
            Wrapper::FireReset,
            Wrapper::FrameSkip {
                n: 4,
                max_pool: true,
            },
            Wrapper::EpisodicLife,
            Wrapper::Grayscale,
            Wrapper::Resize {
                height: 84,
                width: 84,
            },
            Wrapper::ClipReward,
            Wrapper::FrameStack { n: 4 },
        ];
        let mut space = ObsSpace::image(210, 160, 3, Layout::Hwc, Dtype::U8);
        for wrapper in &chain {
            space = fits(wrapper, &game, &space).unwrap();
        }
        assert_eq!(space.network_shape(), vec![4, 84, 84]);
        assert_eq!(space.describe(), "4 stacked 84x84 grayscale images");
    }

    #[test]
    fn what_the_game_lacks_is_named() {
        let actions = ActionSpace::discrete(3);
        let minatar = facts(Family::MinAtar, &actions);
        for (wrapper, label) in [
            (Wrapper::NoopReset { max: 30 }, "needs an Atari game"),
            (Wrapper::FireReset, "needs a FIRE action"),
            (Wrapper::EpisodicLife, "needs a game with lives"),
        ] {
            let Err(Misfit::Input { label: got, .. }) = fits_game(&wrapper, &minatar) else {
                panic!("{wrapper:?} fits");
            };
            assert_eq!(got, label);
        }
        let pendulum = ActionSpace::uniform_box(1, -2.0, 2.0);
        let sticky = Wrapper::StickyActions { probability: 0.25 };
        let Err(Misfit::Input { help, .. }) =
            fits_game(&sticky, &facts(Family::ClassicControl, &pendulum))
        else {
            panic!("sticky actions fit a box");
        };
        assert!(
            help.contains("takes a box of 1 number in [-2, 2]"),
            "{help}"
        );
    }

    #[test]
    fn unknown_games_are_held_to_what_is_known() {
        let two = ActionSpace::discrete(2);
        let unknown = GameFacts {
            name: "cartpole".into(),
            family: None,
            actions: Some(two),
            lives: None,
            fire: None,
        };
        assert!(fits_game(&Wrapper::NoopReset { max: 30 }, &unknown).is_ok());
        assert!(fits_game(&Wrapper::EpisodicLife, &unknown).is_ok());
        assert!(fits_game(&Wrapper::FireReset, &unknown).is_err());
    }

    #[test]
    fn gymnasium_refuses_the_wrappers_that_step_the_game() {
        let game = GameFacts {
            name: "a gymnasium environment".into(),
            family: Some(Family::Gymnasium),
            actions: None,
            lives: None,
            fire: None,
        };
        assert!(
            fits_game(
                &Wrapper::FrameSkip {
                    n: 4,
                    max_pool: false
                },
                &game
            )
            .is_err()
        );
        assert!(fits_game(&Wrapper::StickyActions { probability: 0.25 }, &game).is_err());
        assert!(fits_game(&Wrapper::ClipReward, &game).is_ok());
    }

    #[test]
    fn shapes_are_checked_and_changed() {
        let actions = ActionSpace::discrete(2);
        let game = facts(Family::ClassicControl, &actions);
        let vector = ObsSpace::vector(4, Dtype::F32);
        let kept = fits(&Wrapper::KeepObs { mask: 0b101 }, &game, &vector).unwrap();
        assert_eq!(kept, ObsSpace::vector(2, Dtype::F32));
        let outside = fits(&Wrapper::KeepObs { mask: 1 << 4 }, &game, &vector);
        assert!(
            matches!(outside, Err(Misfit::Input { label, .. }) if label == "entry 4 is outside the observation")
        );
        assert!(fits(&Wrapper::Grayscale, &game, &vector).is_err());
        let stacked = fits(&Wrapper::FrameStack { n: 3 }, &game, &vector).unwrap();
        assert_eq!((stacked.len(), stacked.frames), (12, 3));
        assert_eq!(
            fits(&Wrapper::FrameStack { n: 0 }, &game, &vector),
            Err(Misfit::Parameter("n 0 is outside 1 to 64".into()))
        );
        let planes = ObsSpace::image(10, 10, 4, Layout::Chw, Dtype::F32);
        assert!(fits(&Wrapper::NormalizeObs { clip: 5.0 }, &game, &planes).is_err());
        // An image beside a vector passes the wrappers that leave observations alone only.
        let beside = ObsSpace::image_beside_vector(6, 5, 3, 7);
        let label = |w: Wrapper| match fits(&w, &game, &beside) {
            Err(Misfit::Input { label, .. }) => label,
            other => panic!("{w:?} on an image beside a vector: {other:?}"),
        };
        assert_eq!(
            label(Wrapper::FrameStack { n: 2 }),
            "stacks images or vectors, not an image beside a vector"
        );
        assert_eq!(
            label(Wrapper::NormalizeObs { clip: 5.0 }),
            "needs vector observations"
        );
        assert_eq!(
            label(Wrapper::KeepObs { mask: 1 }),
            "needs vector observations"
        );
        assert_eq!(label(Wrapper::Grayscale), "needs RGB image observations");
        let limited = Wrapper::TimeLimit { max_steps: 9 };
        assert_eq!(fits(&limited, &game, &beside), Ok(beside));
        assert!(
            fits(
                &Wrapper::Resize {
                    height: 5,
                    width: 5
                },
                &game,
                &planes
            )
            .is_err()
        );
    }
}
