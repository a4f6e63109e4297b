//! The one place that maps the config's `algorithm` onto a learner ([`build`]), after checking
//! that the algorithm can act in the environments ([`takes_the_action_space`]).
//!
//! Adding a learner touches seven places, each but the first two found by the compiler (an
//! exhaustive `match` over tandem-config's algorithm table; `tests/architecture.rs` holds the
//! count): its room under `src/algo/` implementing [`Learner`] and taking its config section as
//! its settings; its `mod` line in `algo/mod.rs`; its row and section in the table
//! (tandem-config's `model.rs`); its memory estimate (`budget.rs`); its cross-checks
//! (`resolve/cross.rs`); its arm in [`build`]; and how it acts in `play` and evaluation
//! (`src/policy.rs`).

use anyhow::{Result, bail};

use tandem_config::{Acts, Algorithm};
use tandem_env::ActionSpace;

use crate::algo::learner::{Learner, Setting};

/// This rank's learner for the experiment's algorithm, its networks initialised from the
/// current torch seed (the skeleton seeds it, then broadcasts rank 0's state).
pub fn build(setting: &Setting) -> Result<Box<dyn Learner>> {
    let (experiment, envs) = (setting.experiment, setting.envs);
    takes_the_action_space(&experiment.algorithm, envs.action_space())?;
    Ok(match &experiment.algorithm {
        Algorithm::Ppo(config) => Box::new(crate::algo::on_policy::OnPolicy::new(setting, |vs| {
            crate::algo::ppo::Ppo::from_config(vs, config)
        })?),
        Algorithm::A2c(config) => Box::new(crate::algo::on_policy::OnPolicy::new(setting, |vs| {
            crate::algo::a2c::A2c::from_config(vs, config)
        })?),
        Algorithm::Dqn(config) => Box::new(crate::algo::dqn::DqnRule::learner(setting, config)?),
        Algorithm::Sac(config) => Box::new(crate::algo::sac::SacRule::learner(setting, config)?),
        Algorithm::Td3(config) => Box::new(crate::algo::td3::Td3Rule::learner(setting, config)?),
    })
}

/// Refuses an environment whose actions the algorithm cannot choose (the algorithm table's
/// `Acts`: any kind, discrete only, or bounded boxes only). The resolver refuses this for games
/// it knows; a gymnasium environment's space is known only once it is built.
pub fn takes_the_action_space(algorithm: &Algorithm, space: &ActionSpace) -> Result<()> {
    let name = algorithm.name();
    match algorithm.facts().acts {
        Acts::AnySpace => Ok(()),
        Acts::SquashedBox if !space.is_box() => bail!(
            "{name} chooses box actions, but the environment takes {space}; pick an environment \
             with a box action space, or {} for discrete actions",
            Algorithm::names_where(|f| f.acts != Acts::SquashedBox, "or")
        ),
        Acts::Discrete if !space.is_discrete() => bail!(
            "{name} chooses discrete actions, but the environment takes {space}; pick an \
             environment with a discrete action space, or {} for others",
            Algorithm::names_where(|f| f.acts == Acts::AnySpace, "or")
        ),
        Acts::SquashedBox | Acts::Discrete => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn algorithm(name: &str) -> Algorithm {
        let text =
            format!("experiment \"x\" {{\n    algorithm \"{name}\"\n    env \"cartpole\"\n}}\n");
        tandem_config::resolve(&tandem_config::Source::Stdin(text), &[])
            .expect("resolves")
            .experiment
            .algorithm
    }

    #[test]
    fn dqn_refuses_a_box_space_and_the_actor_critics_take_both() {
        let discrete = ActionSpace::discrete(2);
        let boxed = ActionSpace::uniform_box(1, -2.0, 2.0);
        for name in ["ppo", "a2c"] {
            let algorithm = algorithm(name);
            assert!(takes_the_action_space(&algorithm, &discrete).is_ok());
            assert!(takes_the_action_space(&algorithm, &boxed).is_ok(), "{name}");
        }
        let dqn = algorithm("dqn");
        assert!(takes_the_action_space(&dqn, &discrete).is_ok());
        let err = takes_the_action_space(&dqn, &boxed)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("dqn chooses discrete actions")
                && err.contains("a box of 1 number in [-2, 2]"),
            "{err}"
        );
    }

    #[test]
    fn sac_and_td3_refuse_a_discrete_space_and_take_a_box() {
        for name in ["sac", "td3"] {
            let text = format!(
                "experiment \"x\" {{\n    algorithm \"{name}\"\n    env \"pendulum\"\n}}\n"
            );
            let experiment = tandem_config::resolve(&tandem_config::Source::Stdin(text), &[])
                .expect("resolves")
                .experiment;
            let algorithm = &experiment.algorithm;
            let boxed = ActionSpace::uniform_box(1, -2.0, 2.0);
            assert!(takes_the_action_space(algorithm, &boxed).is_ok());
            let err = takes_the_action_space(algorithm, &ActionSpace::discrete(2))
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(&format!("{name} chooses box actions")),
                "{err}"
            );
        }
    }
}
