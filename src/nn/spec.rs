//! The one mapping of an experiment's `network` section (tandem_config's resolved model) onto
//! the specs this module builds networks from (torso, recurrent core, initialisation): [`ActorCriticSpec::from_experiment`].

use anyhow::{Context, Result};
use tandem_config::{ActionMask, Experiment, Network, ObsSpace, Precision, Torso};

use super::actor_critic::ActorCriticSpec;
use super::init::InitSpec;
use super::recurrent::CoreSpec;
use super::torso::NetworkSpec;

impl ActorCriticSpec {
    /// The network `experiment` declares: its torso, shared or separate, the number format its
    /// layers compute in, its initialisation, and whether the network scales pixels (the Nature and IMPALA torsos reading raw 0..255
    /// image frames do; MinAtar planes are already 0/1 and vectors are left alone). An image
    /// torso on an image observed beside a vector reads both
    /// ([`NetworkSpec::ImageBesideVector`]). A DQN learner takes the `network`, `init` and
    /// `scale_pixels` fields for its Q-network.
    ///
    /// `built` is what the built environments observe; it decides only where the config
    /// cannot (a gymnasium environment's space is known once built).
    pub fn from_experiment(experiment: &Experiment, built: ObsSpace) -> Result<ActorCriticSpec> {
        let config = &experiment.network;
        let observation = experiment.observation().unwrap_or(built);
        let torso =
            declared_preset(&config.torso, observation).unwrap_or_else(|| config.torso.clone());
        let network = match (network_spec(&torso)?, observation.image_entry()) {
            (image, Some(entry)) if image.is_image() => NetworkSpec::ImageBesideVector {
                image: Box::new(image),
                shape: entry.shape.map(|d| d as i64),
            },
            (network, _) => network,
        };
        let network = match config.precision {
            Precision::Float32 => network,
            Precision::Bfloat16 => NetworkSpec::Bfloat16(Box::new(network)),
        };
        let scale_pixels = observation.is_pixel_image() && network.reads_raw_pixels();
        Ok(ActorCriticSpec {
            network,
            share_torso: config.shared(),
            scale_pixels,
            init: init_spec(config),
            core: core_spec(config)?,
            action_mask: experiment.env.game.action_mask() != ActionMask::None,
            // Set where the learner knows its seats (`network_for_seats`).
            actor_input: None,
        })
    }
}

/// The built-in torso a declared list of layers spells out exactly ([`Torso::preset_of`]), so
/// that it builds as that torso does: the same variables, draws and fast paths (the host MLP,
/// channels-last convolutions), and so the same run. Not on an image observed beside a vector,
/// which an image preset would read differently from the list (the list reads the flat row).
fn declared_preset(torso: &Torso, observation: ObsSpace) -> Option<Torso> {
    let Torso::Layers { layers } = torso else {
        return None;
    };
    if observation.image_entry().is_some() {
        return None;
    }
    Torso::preset_of(layers, observation.is_pixel_image())
}

fn core_spec(config: &Network) -> Result<Option<CoreSpec>> {
    let Some(core) = config.core else {
        return Ok(None);
    };
    Ok(Some(CoreSpec {
        kind: core,
        size: size(config.torso.name(), "core-size", config.core_size)?,
    }))
}

fn network_spec(torso: &Torso) -> Result<NetworkSpec> {
    let name = torso.name();
    Ok(match torso {
        Torso::Mlp { hidden, activation } => NetworkSpec::Mlp {
            hidden: sizes(name, "hidden", hidden)?,
            activation: *activation,
        },
        Torso::NatureCnn { features } => NetworkSpec::NatureCnn {
            features: size(name, "features", *features)?,
        },
        Torso::MinatarCnn { channels, features } => NetworkSpec::MinAtarCnn {
            channels: size(name, "channels", *channels)?,
            features: size(name, "features", *features)?,
        },
        Torso::Layers { layers } => NetworkSpec::Layers(layers.clone()),
        Torso::ImpalaCnn { channels, features } => NetworkSpec::ImpalaResNet {
            channels: sizes(name, "channels", channels)?,
            hidden: size(name, "features", *features)?,
        },
    })
}

fn init_spec(config: &Network) -> InitSpec {
    InitSpec {
        scheme: config.init,
        torso_gain: config.torso_gain,
        policy_gain: config.policy_gain,
        value_gain: config.value_gain,
    }
}

/// A layer size as libtorch takes it. The schema bounds every size far below `i64::MAX`, so
/// this fails only for a hand-built `Experiment`.
fn size(network: &str, field: &str, value: usize) -> Result<i64> {
    i64::try_from(value).with_context(|| format!("network {network}: {field} {value} is too large"))
}

fn sizes(network: &str, field: &str, values: &[usize]) -> Result<Vec<i64>> {
    values.iter().map(|&v| size(network, field, v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_beyond_i64_is_an_error_that_names_the_setting() {
        let torso = Torso::MinatarCnn {
            channels: 16,
            features: usize::MAX,
        };
        let err = network_spec(&torso).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("network minatar-cnn: features {} is too large", usize::MAX)
        );
    }
}
