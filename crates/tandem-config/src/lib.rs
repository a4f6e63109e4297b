//! The tandem experiment language: experiments declared in KDL v2, resolved (with
//! includes, `--set` overrides and explicit defaults) into a typed [`Experiment`],
//! serialised into a canonical text whose sha256 identifies the run, and checked
//! with diagnostics that point at the exact span of every mistake, all at once.
//!
//! ```text
//! let resolved = tandem_config::resolve(&Source::Path("experiments/cartpole.kdl".into()), &[])?;
//! let text = tandem_config::canonical_kdl(&resolved.experiment); // what every rank receives
//! let same = tandem_config::parse_canonical(&text)?;             // what a worker does
//! ```
//!
//! No environment variable or file outside the named ones changes a resolution.

mod budget;
mod canonical;
mod catalogue;
pub mod cli;
mod devices;
mod diag;
mod foreign;
mod json;
mod model;
mod nesting;
mod resolve;
mod schema;
mod setting;
mod values;

use std::collections::BTreeMap;
use std::fmt;

pub use budget::{
    Bytes, Machine, MemoryEstimate, MemoryPart, memory_estimate, steps_run, update_formula,
    update_steps,
};
pub use canonical::{
    OTHER_VERSION_HELP, canonical_json, canonical_kdl, config_hash, parse_canonical, parse_stored,
};
pub use catalogue::games;
pub use diag::{Diagnostic, Diagnostics, Severity};
pub use model::*;
pub use nesting::MAX_WORDS;
pub use resolve::resolutions;
pub use schema::{SettingInfo, SettingRole, reference_markdown, schema_settings};

/// The most bytes a config file (or standard input, or an included file) may hold: far above
/// any experiment (the shipped ones are a few kilobytes), and small enough that reading and
/// checking one stays under a second (docs/design.md, "Config size").
pub const MAX_CONFIG_BYTES: usize = 256 << 10;

/// Reads a config from `reader` (standard input) up to one byte past [`MAX_CONFIG_BYTES`]:
/// enough for [`resolve`] to refuse a text that is too large, without holding all of it.
pub fn read_capped(reader: impl std::io::Read) -> std::io::Result<String> {
    std::io::read_to_string(reader.take(MAX_CONFIG_BYTES as u64 + 1))
}

/// Where an experiment comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file; its includes resolve relative to its folder.
    Path(std::path::PathBuf),
    /// Text read from standard input; includes resolve relative to the current directory.
    Stdin(String),
}

/// Where one resolved value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A file (as named on the command line or joined from includes) and 1-based line.
    File { path: String, line: usize },
    /// A `--set` argument, verbatim.
    Set { text: String },
    /// The schema default.
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line } => write!(f, "{path}:{line}"),
            Origin::Set { text } => write!(f, "--set {text}"),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// Value path (`seed`, `algorithm`, `algorithm.lr`, `env.wrappers`, ...) -> origin.
/// A section's own path (e.g. `algorithm`) holds the origin of its kind.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Provenance {
    origins: BTreeMap<String, Origin>,
}

impl Provenance {
    pub(crate) fn new(origins: BTreeMap<String, Origin>) -> Self {
        Provenance { origins }
    }

    pub fn get(&self, path: &str) -> Option<&Origin> {
        self.origins.get(path)
    }

    /// Every value path in sorted order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Origin)> {
        self.origins.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.origins.len()
    }

    pub fn is_empty(&self) -> bool {
        self.origins.is_empty()
    }
}

/// A resolved experiment and where each of its values came from.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub experiment: Experiment,
    pub provenance: Provenance,
    /// What runs, but not as written (e.g. `total-steps` below one update); to be shown.
    pub warnings: Diagnostics,
    /// Where each value was written, for checks made after resolution ([`Resolved::fits`]).
    labels: resolve::Labels,
}

impl Resolved {
    /// Refuses an experiment whose ranks on `machine` need more memory than it has available
    /// ([`memory_estimate`]), as [`resolve_on`] does, without resolving again: for a caller that
    /// learns how many ranks the machine runs only once the experiment is resolved (the
    /// launcher under a scheduler).
    pub fn fits(&self, machine: &Machine) -> Result<(), Diagnostics> {
        match resolve::memory::misfit(&self.experiment, &self.labels, machine) {
            None => Ok(()),
            Some(b) => Err(Diagnostics::new(vec![b.finish(&self.labels.sources)])),
        }
    }

    /// A finding about the setting at `path` (`env.python`, `devices`), located where it was
    /// written (at the experiment's name where it is a default, and the label says so), for a
    /// check its caller makes after resolution: what this build and this machine can do, which
    /// the resolver does not look at.
    pub fn finding_at(
        &self,
        severity: Severity,
        path: &str,
        code: &'static str,
        message: impl Into<String>,
        label: &str,
        help: impl Into<String>,
    ) -> Diagnostic {
        let (source, span, text) = self.labels.label(path, label);
        let builder = match severity {
            Severity::Error => diag::error(code, message),
            Severity::Warning => diag::warning(code, message),
        };
        builder
            .at(source, span, text)
            .help(help)
            .finish(&self.labels.sources)
    }
}

/// Resolves an experiment: reads the source and its includes, applies `--set`
/// overrides (`path.to.value=VALUE`, checked exactly like file values) after them
/// in order, fills every default and checks everything. Returns every problem at
/// once.
pub fn resolve(source: &Source, sets: &[String]) -> Result<Resolved, Diagnostics> {
    resolve::run(source, sets, true, None)
}

impl Experiment {
    /// The experiment policy `name` of `train.policies` learns by: this one with the policy's
    /// own settings set (the canonical form resolved again with them as `--set`s, so they are
    /// checked as any value is); this one itself for a policy of no settings of its own, or a
    /// name no policy has.
    pub fn for_policy(&self, name: &str) -> Result<Experiment, Diagnostics> {
        let policies = &self.train.policies.0;
        let Some(policy) = policies.iter().find(|p| p.name == name) else {
            return Ok(self.clone());
        };
        if policy.settings.is_empty() {
            return Ok(self.clone());
        }
        let mut shared = self.clone();
        for p in &mut shared.train.policies.0 {
            p.settings.clear();
        }
        let sets: Vec<String> = (policy.settings.iter())
            .map(|(path, value)| format!("{path}={value}"))
            .collect();
        resolve(&Source::Stdin(canonical_kdl(&shared)), &sets).map(|r| r.experiment)
    }
}

/// [`resolve`], and also refuses an experiment whose ranks on one machine need more memory
/// than `machine` has available ([`memory_estimate`]), pointing at the setting that needs most.
pub fn resolve_on(
    source: &Source,
    sets: &[String],
    machine: &Machine,
) -> Result<Resolved, Diagnostics> {
    resolve::run(source, sets, true, Some(machine))
}

impl Experiment {
    /// The number at `path` (`algorithm.lr`): a number setting's value; `None` for `#null` or
    /// a path that holds no number.
    pub fn number_at(&self, path: &str) -> Option<f64> {
        match values::from_experiment(self).get(path) {
            Some(values::Val::Float(x)) => Some(*x),
            Some(values::Val::Int(i)) => Some(*i as f64),
            _ => None,
        }
    }

    /// Member `member` of this experiment's population, as a run of its own: its share of the
    /// devices (member k holds devices k*m..k*m+m-1), `seed` (the member's, which the caller
    /// derives), no population, and the explored hyperparameters at `values` (path and value,
    /// set as `--set`s are, so each is checked as any value is). Its sizes are divided over
    /// its own ranks, as the population's resolution already checked.
    pub fn for_member(
        &self,
        member: usize,
        seed: u64,
        values: &[(String, f64)],
    ) -> Result<Experiment, Diagnostics> {
        let mut alone = self.clone();
        let ranks = self.world_size();
        alone.devices = self.devices[member * ranks..(member + 1) * ranks].to_vec();
        alone.seed = seed;
        alone.population = Population::default();
        // Alone, a member's league holds its own snapshots; the population's are the
        // population's to send (its `resolved.kdl` says so).
        alone.league.pool = LeaguePool::Own;
        let sets: Vec<String> = (values.iter())
            .map(|(path, value)| {
                format!(
                    "{path}={}",
                    canonical::kdl_value(&values::Val::Float(*value))
                )
            })
            .collect();
        resolve(&Source::Stdin(canonical_kdl(&alone)), &sets).map(|r| r.experiment)
    }
}
