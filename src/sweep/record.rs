//! A sweep's record, `sweep.json` in its folder, written before its first member starts: the
//! sweep's name, its `--max-steps`, and per variant the file (an absolute path), its `--set`s,
//! its run directory's name, its seed and its config hash. It is what lets a stopped sweep be
//! continued: `tandem sweep --resume DIR` trains the variants it records, and the same command
//! again with `--dir DIR` continues the sweep when it plans exactly what the record holds (it is
//! refused, saying what differs, when it does not). A variant whose file now resolves to another
//! config is refused the same way: the resumed sweep trains what the stopped one started.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::Sweep;

/// The record's file name in the sweep's folder.
pub const RECORD: &str = "sweep.json";

/// One variant as the record keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub file: String,
    pub sets: Vec<String>,
    pub name: String,
    pub seed: u64,
    pub hash: String,
}

/// What a sweep trains, as `sweep.json` keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub name: String,
    pub max_steps: Option<u64>,
    pub variants: Vec<Recorded>,
}

impl Record {
    pub fn of(sweep: &Sweep) -> Record {
        Record {
            name: sweep.name.clone(),
            max_steps: sweep.max_steps,
            variants: sweep
                .variants
                .iter()
                .map(|v| Recorded {
                    file: v.file.clone(),
                    sets: v.sets.clone(),
                    name: v.name.clone(),
                    seed: v.seed,
                    hash: v.hash.clone(),
                })
                .collect(),
        }
    }

    pub fn to_json(&self) -> String {
        let variants: Vec<Value> = self
            .variants
            .iter()
            .map(|v| {
                json!({"file": v.file, "sets": v.sets, "name": v.name, "seed": v.seed,
                       "config_hash": v.hash})
            })
            .collect();
        let record = json!({"name": self.name, "max_steps": self.max_steps, "variants": variants});
        format!(
            "{}\n",
            serde_json::to_string_pretty(&record).expect("JSON of strings")
        )
    }

    /// Reads `dir`'s record; `None` where the folder holds none.
    pub fn read(dir: &Path) -> Result<Option<Record>> {
        let path = dir.join(RECORD);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        Record::parse(&text).map(Some).with_context(|| {
            format!(
                "{} is not a sweep's record (tandem writes it when a sweep starts)",
                path.display()
            )
        })
    }

    fn parse(text: &str) -> Result<Record> {
        let json: Value = serde_json::from_str(text)?;
        let string = |v: &Value, key: &str| -> Result<String> {
            match v[key].as_str() {
                Some(s) => Ok(s.to_string()),
                None => bail!("`{key}` is not a string"),
            }
        };
        let max_steps = match &json["max_steps"] {
            Value::Null => None,
            v => Some(v.as_u64().context("`max_steps` is not a number of steps")?),
        };
        let Some(list) = json["variants"].as_array() else {
            bail!("`variants` is not a list");
        };
        let mut variants = Vec::new();
        for v in list {
            let Some(sets) = v["sets"].as_array() else {
                bail!("a variant's `sets` is not a list");
            };
            variants.push(Recorded {
                file: string(v, "file")?,
                sets: sets
                    .iter()
                    .map(|s| {
                        s.as_str()
                            .map(String::from)
                            .context("a `set` is not a string")
                    })
                    .collect::<Result<_>>()?,
                name: string(v, "name")?,
                seed: v["seed"]
                    .as_u64()
                    .context("a variant's `seed` is not a number")?,
                hash: string(v, "config_hash")?,
            });
        }
        if variants.is_empty() {
            bail!("it records no variant");
        }
        Ok(Record {
            name: string(&json, "name")?,
            max_steps,
            variants,
        })
    }

    /// What `planned` would train differently from this record, one line each (empty: the same
    /// sweep).
    pub fn differences(&self, planned: &Record) -> Vec<String> {
        let mut said = Vec::new();
        if self.max_steps != planned.max_steps {
            said.push(format!(
                "--max-steps: {} recorded, {} now",
                steps(self.max_steps),
                steps(planned.max_steps)
            ));
        }
        let names = |r: &Record| {
            r.variants
                .iter()
                .map(|v| v.name.clone())
                .collect::<Vec<_>>()
        };
        if names(self) != names(planned) {
            said.push(format!(
                "the variants: {} recorded, {} now",
                names(self).join(", "),
                names(planned).join(", ")
            ));
            return said;
        }
        for (was, now) in self.variants.iter().zip(&planned.variants) {
            if was.file != now.file || was.sets != now.sets {
                said.push(format!(
                    "{}: {} recorded, {} now",
                    was.name,
                    command_part(was),
                    command_part(now)
                ));
            } else if was.hash != now.hash {
                said.push(format!(
                    "{}: {} resolves to another config than when the sweep started \
                     (config hash {} recorded, {} now)",
                    was.name,
                    was.file,
                    &was.hash[..12.min(was.hash.len())],
                    &now.hash[..12.min(now.hash.len())]
                ));
            }
        }
        said
    }
}

fn steps(max_steps: Option<u64>) -> String {
    max_steps.map_or("none".to_string(), |n| n.to_string())
}

/// A variant's file and `--set`s as a command line would give them.
fn command_part(v: &Recorded) -> String {
    let sets: String = v.sets.iter().map(|s| format!(" --set {s}")).collect();
    format!("`{}{sets}`", v.file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            name: "lr".into(),
            max_steps: Some(4096),
            variants: vec![Recorded {
                file: "/x/cartpole.kdl".into(),
                sets: vec!["algorithm.lr=1e-3".into(), "seed=2".into()],
                name: "cartpole-lr=1e-3-seed2".into(),
                seed: 2,
                hash: "ab".repeat(32),
            }],
        }
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let r = record();
        assert_eq!(Record::parse(&r.to_json()).unwrap(), r);
        let mut none = r.clone();
        none.max_steps = None;
        assert_eq!(Record::parse(&none.to_json()).unwrap(), none);
    }

    #[test]
    fn what_differs_is_named() {
        let r = record();
        assert!(r.differences(&r).is_empty());
        let mut other = r.clone();
        other.variants[0].hash = "cd".repeat(32);
        let said = r.differences(&other).join("\n");
        assert!(said.contains("resolves to another config"), "{said}");
        assert!(
            said.contains("abababababab recorded, cdcdcdcdcdcd now"),
            "{said}"
        );
        other = r.clone();
        other.max_steps = None;
        other.variants[0].sets.pop();
        let said = r.differences(&other).join("\n");
        assert!(
            said.contains("--max-steps: 4096 recorded, none now"),
            "{said}"
        );
        assert!(
            said.contains("`/x/cartpole.kdl --set algorithm.lr=1e-3` now"),
            "{said}"
        );
    }

    #[test]
    fn a_damaged_record_says_what_is_wrong() {
        assert!(Record::parse("{").is_err());
        let text = record()
            .to_json()
            .replace("\"seed\": 2", "\"seed\": \"two\"");
        let e = Record::parse(&text).unwrap_err().to_string();
        assert!(e.contains("seed"), "{e}");
        let e = Record::parse(r#"{"name": "x", "variants": []}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no variant"), "{e}");
    }
}
