//! The flat, schema-shaped view of an experiment (value path -> checked value) and
//! the two conversions between it and the typed [`Experiment`]. The resolver fills
//! this map; the canonical printers walk it in schema order.

use std::collections::BTreeMap;

use crate::model::*;
use crate::schema;
use crate::setting::{Reader, Writer};

pub(crate) use crate::setting::Val;

pub(crate) type Values = BTreeMap<String, Val>;

/// The typed experiment of a complete, checked map (each section reads itself: its declaration
/// in `model.rs` names its settings). A mismatch with the schema is a bug, read as a zero-like
/// value rather than a panic, which the round-trip tests below guard against.
pub(crate) fn to_experiment(values: &Values) -> Experiment {
    Experiment::read(&Reader { values, prefix: "" })
}

/// The map of `e`: every setting of every section, under its path.
pub(crate) fn from_experiment(e: &Experiment) -> Values {
    let mut values = Values::new();
    e.write(&mut Writer::new(&mut values, ""));
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
