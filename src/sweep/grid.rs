//! The variants a sweep runs: each experiment file crossed with every combination of the
//! `--set PATH=V1,V2,...` value lists and the `--seeds`, each variant a file and the `--set`s its
//! `tandem train` gets. Without lists or seeds, the files are the variants, as written.

use anyhow::{Result, bail, ensure};

/// One `--set PATH=V1,V2,...`: a setting and the values the sweep gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub path: String,
    pub values: Vec<String>,
}

impl Axis {
    /// Parses `PATH=V1,V2,...`; a value holding a comma cannot be swept this way (write a file
    /// per value instead).
    pub fn parse(arg: &str) -> Result<Axis> {
        let Some((path, values)) = arg.split_once('=') else {
            bail!("--set {arg:?}: expected PATH=VALUE[,VALUE...], e.g. algorithm.lr=1e-3,3e-4");
        };
        let path = path.trim();
        ensure!(
            !path.is_empty(),
            "--set {arg:?} names no setting before `=`"
        );
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
        if let Some(empty) = values.iter().position(String::is_empty) {
            bail!(
                "--set {arg:?}: value {} is empty; separate values with single commas",
                empty + 1
            );
        }
        ensure!(
            path != "seed",
            "--set seed=...: give seeds with --seeds (e.g. --seeds 1..5), which names the runs by them"
        );
        Ok(Axis {
            path: path.to_string(),
            values,
        })
    }

    /// The last part of the path, what a run's name shows (`lr` for `algorithm.lr`).
    fn short(&self) -> &str {
        self.path.rsplit('.').next().unwrap_or(&self.path)
    }
}

/// Parses `--seeds`: `A..B` (both included), `A,B,C`, or one seed.
pub fn parse_seeds(arg: &str) -> Result<Vec<u64>> {
    let number = |text: &str| -> Result<u64> {
        text.trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("--seeds {arg:?}: `{text}` is not a seed (0 or more)"))
    };
    let seeds: Vec<u64> = match arg.split_once("..") {
        Some((from, to)) => {
            let (from, to) = (number(from)?, number(to.trim_start_matches('='))?);
            ensure!(from <= to, "--seeds {arg:?}: the range runs backwards");
            (from..=to).collect()
        }
        None => arg.split(',').map(number).collect::<Result<_>>()?,
    };
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = seeds.iter().find(|s| !seen.insert(**s)) {
        bail!("--seeds {arg:?} names seed {twice} twice");
    }
    Ok(seeds)
}

/// One variant before it is resolved: its file, its `--set`s, and the parts of its run's name
/// that tell it from the others.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub file: String,
    pub sets: Vec<String>,
    /// `lr=1e-3`, ..., `seed3`: appended to the experiment's name.
    pub name_parts: Vec<String>,
}

/// Every file crossed with every combination of the axes' values and the seeds, in order: the
/// first axis varies slowest, the seeds fastest. A run's name shows only what tells it from the
/// others: an axis of one value (the same for every variant) is set but not named.
pub fn plan(files: &[String], axes: &[Axis], seeds: Option<&[u64]>) -> Vec<Planned> {
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for axis in axes {
        combos = combos
            .into_iter()
            .flat_map(|combo| {
                axis.values.iter().map(move |value| {
                    let mut next = combo.clone();
                    let part = if axis.values.len() > 1 {
                        format!("{}={value}", axis.short())
                    } else {
                        String::new()
                    };
                    next.push((format!("{}={value}", axis.path), part));
                    next
                })
            })
            .collect();
    }
    if let Some(seeds) = seeds {
        combos = combos
            .into_iter()
            .flat_map(|combo| {
                seeds.iter().map(move |seed| {
                    let mut next = combo.clone();
                    next.push((format!("seed={seed}"), format!("seed{seed}")));
                    next
                })
            })
            .collect();
    }
    files
        .iter()
        .flat_map(|file| {
            combos.iter().map(move |combo| Planned {
                file: file.clone(),
                sets: combo.iter().map(|(set, _)| set.clone()).collect(),
                name_parts: (combo.iter())
                    .filter(|(_, part)| !part.is_empty())
                    .map(|(_, part)| part.clone())
                    .collect(),
            })
        })
        .collect()
}

/// A run directory's name for a variant: the experiment's name and its parts, with every
/// character a file name should not hold replaced by `_`.
pub fn run_name(experiment: &str, parts: &[String]) -> String {
    std::iter::once(experiment)
        .chain(parts.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("-")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.=+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_ranges_lists_or_one() {
        assert_eq!(parse_seeds("1..3").unwrap(), [1, 2, 3]);
        assert_eq!(parse_seeds("1..=2").unwrap(), [1, 2]);
        assert_eq!(parse_seeds("4,2").unwrap(), [4, 2]);
        assert_eq!(parse_seeds("7").unwrap(), [7]);
        for bad in ["3..1", "a..3", "1,,2", "1,1", "-1"] {
            assert!(parse_seeds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn axes_cross_in_order_with_seeds_fastest() {
        let lr = Axis::parse("algorithm.lr=1e-3, 3e-4").unwrap();
        let envs = Axis::parse("env.envs=8").unwrap();
        let planned = plan(&["a.kdl".into()], &[lr, envs], Some(&[1, 2]));
        let names: Vec<String> = planned
            .iter()
            .map(|p| run_name("x", &p.name_parts))
            .collect();
        assert_eq!(
            names,
            [
                "x-lr=1e-3-seed1",
                "x-lr=1e-3-seed2",
                "x-lr=3e-4-seed1",
                "x-lr=3e-4-seed2"
            ]
        );
        assert_eq!(
            planned[3].sets,
            ["algorithm.lr=3e-4", "env.envs=8", "seed=2"]
        );
        assert_eq!(plan(&["a".into(), "b".into()], &[], None).len(), 2);
    }

    #[test]
    fn bad_axes_say_what_is_wrong() {
        assert!(
            Axis::parse("lr")
                .unwrap_err()
                .to_string()
                .contains("PATH=VALUE")
        );
        assert!(
            Axis::parse("a.lr=1,,2")
                .unwrap_err()
                .to_string()
                .contains("value 2 is empty")
        );
        assert!(
            Axis::parse("seed=1,2")
                .unwrap_err()
                .to_string()
                .contains("--seeds")
        );
        assert_eq!(
            run_name("x", &["devices=\"cpu\" \"cpu\"".into()]),
            "x-devices=_cpu___cpu_"
        );
    }
}
