//! The flat, schema-shaped view of an experiment (value path -> checked value) and
//! the two conversions between it and the typed [`Experiment`]. The resolver fills
//! this map; the canonical printers walk it in schema order.

use std::collections::BTreeMap;

use crate::model::*;
use crate::schema;
use crate::setting::{Reader, SectionKind, Writer};

pub(crate) use crate::setting::Val;

pub(crate) type Values = BTreeMap<String, Val>;

/// The typed experiment of a complete, checked map. Each section reads itself (its
/// declaration in `model.rs` names its settings); a mismatch with the schema is a bug, read as a
/// zero-like value rather than a panic, which the round-trip tests guard against.
pub(crate) fn to_experiment(values: &Values) -> Experiment {
    let section = |prefix| Reader { values, prefix };
    let top = section("");
    Experiment {
        name: top.read("name"),
        seed: top.read("seed"),
        devices: match top.get("devices") {
            Some(Val::Devices(d)) => d.clone(),
            _ => vec![Device::Cpu],
        },
        threads: match top.get("threads") {
            Some(Val::Threads(t)) => *t,
            _ => Threads::Auto,
        },
        pin_cores: top.read("pin-cores"),
        algorithm: Algorithm::read(&section("algorithm")),
        env: Env::read(&section("env")),
        network: Network::read(&section("network")),
        sync: Sync::read(&section("sync")),
        train: Train::read(&section("train")),
        log: Log::read(&section("log")),
        checkpoint: Checkpoint::read(&section("checkpoint")),
    }
}

/// The map of `e`: every setting of every section, under its path.
pub(crate) fn from_experiment(e: &Experiment) -> Values {
    let mut values = Values::new();
    let mut top = Writer::new(&mut values, "");
    top.write("name", &e.name);
    top.write("seed", &e.seed);
    top.put("devices", Val::Devices(e.devices.clone()));
    top.put("threads", Val::Threads(e.threads));
    top.write("pin-cores", &e.pin_cores);

    e.algorithm
        .write(&mut Writer::new(&mut values, "algorithm"));
    e.env.write(&mut Writer::new(&mut values, "env"));
    e.network.write(&mut Writer::new(&mut values, "network"));
    e.sync.write(&mut Writer::new(&mut values, "sync"));
    e.train.write(&mut Writer::new(&mut values, "train"));
    e.log.write(&mut Writer::new(&mut values, "log"));
    e.checkpoint
        .write(&mut Writer::new(&mut values, "checkpoint"));
    values
}

/// The kind in effect for a section of a complete map.
pub(crate) fn kind_of<'a>(values: &'a Values, section: &schema::Section) -> Option<&'a str> {
    match values.get(section.name) {
        Some(Val::Str(s)) if section.has_kinds() => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::SECTIONS;
    use crate::{Source, resolve};

    /// `from_experiment` must write exactly the paths the schema expects for every
    /// kind; a forgotten nullable field would otherwise print as `#null` unnoticed.
    #[test]
    fn every_schema_path_is_written_for_every_kind() {
        let text = "experiment \"x\" {\n    env \"atari-breakout\"\n}\n";
        let combos = [
            ["algorithm=ppo", "network=nature-cnn", "sync=allreduce"],
            ["algorithm=a2c", "network=impala-cnn", "sync=periodic"],
            ["algorithm=dqn", "network=mlp", "sync=broadcast"],
            ["algorithm=dqn", "network=nature-cnn", "sync=none"],
        ];
        for combo in combos {
            let sets: Vec<String> = combo.iter().map(|s| s.to_string()).collect();
            let e = resolve(&Source::Stdin(text.into()), &sets)
                .unwrap()
                .experiment;
            let values = from_experiment(&e);
            let mut expected: Vec<String> = Vec::new();
            for section in SECTIONS {
                let kind = kind_of(&values, section).and_then(|k| section.kind(k));
                if section.has_kinds() {
                    expected.push(section.name.to_string());
                }
                expected.extend(section.fields(kind).map(|f| section.path(f.name)));
            }
            expected.sort();
            let written: Vec<String> = values.keys().cloned().collect();
            assert_eq!(written, expected, "{combo:?}");
            assert_eq!(to_experiment(&values), e, "{combo:?}");
        }
        for text in [
            "experiment \"x\" {\n    env \"minatar-breakout\"\n    network \"minatar-cnn\"\n}\n",
            "experiment \"x\" {\n    env \"gymnasium\" { id \"A-v0\"; import \"m\"; make-args { a 1 } }\n}\n",
        ] {
            let e = resolve(&Source::Stdin(text.into()), &[])
                .unwrap()
                .experiment;
            let values = from_experiment(&e);
            let env_paths = values.keys().filter(|k| k.starts_with("env")).count();
            let kind = kind_of(&values, &schema::ENV).and_then(|k| schema::ENV.kind(k));
            assert_eq!(env_paths, 1 + schema::ENV.fields(kind).count(), "{text}");
            assert_eq!(to_experiment(&values), e);
        }
    }
}
