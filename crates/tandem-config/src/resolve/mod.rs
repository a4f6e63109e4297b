//! The resolver: reads the main file and its includes, turns every setting (and
//! every `--set`) into an ordered list of assignments, applies them in order (later
//! wins, node by node), checks each value against the schema, fills every default,
//! runs the cross-field checks and records where each value came from.
//!
//! This module owns what the steps share (the raw, untyped form of a setting, the
//! assignments and stored entries) and the order of the steps:
//! - [`load`]: files, includes and `--set` texts into assignments (JSON files through
//!   [`from_json`], into the same KDL document their KDL form parses to);
//! - [`check`]: one value against its setting's type and range;
//! - [`apply`]: the assignments in order, then every default;
//! - [`paths`]: relative file paths made relative to the file that wrote them;
//! - [`per_game`]: the wrappers the chosen Atari game gives nothing to do, left out;
//! - [`cross`]: the checks that involve more than one setting.

mod apply;
mod check;
mod cross;
mod from_json;
mod load;
pub(crate) mod memory;
mod paths;
mod per_game;

use kdl::{KdlDocument, KdlNode, KdlValue};
use miette::SourceSpan;

use crate::diag::{Diagnostics, SourceId};
use crate::schema::{SECTIONS, Section};
use crate::values::{self, Val};
use crate::{Machine, Provenance, Resolved, Source};

/// The entries of one KDL node (or one property, or one `--set`), not yet typed.
#[derive(Debug, Clone)]
pub(super) struct Raw {
    pub(super) args: Vec<(KdlValue, SourceSpan)>,
    pub(super) props: Vec<(String, KdlValue, SourceSpan)>,
    pub(super) children: Option<KdlDocument>,
    /// Where to point when the value as a whole is wrong.
    pub(super) value_span: SourceSpan,
}

#[derive(Debug)]
pub(super) enum Target {
    Kind {
        section: usize,
    },
    Field {
        section: usize,
        name: String,
        name_span: SourceSpan,
    },
}

#[derive(Debug)]
pub(super) struct Assignment {
    pub(super) target: Target,
    pub(super) raw: Raw,
    pub(super) source: SourceId,
}

/// Where a stored value was written.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) val: Val,
    pub(super) source: SourceId,
    pub(super) span: SourceSpan,
    /// For wrappers: the span of each wrapper node.
    pub(super) items: Vec<SourceSpan>,
}

pub(super) fn join(a: SourceSpan, b: SourceSpan) -> SourceSpan {
    let start = a.offset().min(b.offset());
    let end = (a.offset() + a.len()).max(b.offset() + b.len());
    SourceSpan::new(start.into(), end - start)
}

pub(super) fn section_index(section: &Section) -> usize {
    SECTIONS
        .iter()
        .position(|s| std::ptr::eq(*s, section))
        .unwrap_or(0)
}

pub(super) fn raw_of_node(node: &KdlNode) -> Raw {
    let mut raw = Raw {
        args: Vec::new(),
        props: Vec::new(),
        children: node.children().cloned(),
        value_span: node.name().span(),
    };
    let mut whole: Option<SourceSpan> = None;
    for entry in node.entries() {
        let span = entry.span();
        whole = Some(whole.map_or(span, |w| join(w, span)));
        match entry.name() {
            Some(key) => raw
                .props
                .push((key.value().to_string(), entry.value().clone(), span)),
            None => raw.args.push((entry.value().clone(), span)),
        }
    }
    if let Some(w) = whole {
        raw.value_span = w;
    }
    raw
}

pub(super) fn kind_noun(section: &Section) -> &'static str {
    match section.name {
        "env" => "game",
        "sync" => "sync policy",
        "network" => "network",
        _ => "algorithm",
    }
}

pub(super) fn found(value: &KdlValue) -> String {
    match value {
        KdlValue::String(s) => format!("the string \"{s}\""),
        KdlValue::Integer(i) => format!("the integer {i}"),
        KdlValue::Float(x) if x.abs() >= 1e16 => format!("the number {x:e}"),
        KdlValue::Float(x) => format!("the number {x}"),
        KdlValue::Bool(b) => format!("#{b}"),
        KdlValue::Null => "#null".to_string(),
    }
}

pub(crate) use memory::Labels;

/// Resolutions this process has run (any source, succeeded or not).
static RESOLUTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many times this process has run the resolver: what holds docs/architecture.md's
/// counts of who resolves a run's config (the launcher once, each rank once to check the text
/// it was handed).
pub fn resolutions() -> u64 {
    RESOLUTIONS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Runs the whole resolution; with a `machine`, also checks that the experiment fits it.
pub(crate) fn run(
    source: &Source,
    sets: &[String],
    allow_includes: bool,
    machine: Option<&Machine>,
) -> Result<Resolved, Diagnostics> {
    RESOLUTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let loaded = load::load(source, sets, allow_includes);
    let Some((main_source, experiment_span)) = loaded.experiment_at else {
        return Err(Diagnostics::new(loaded.diags));
    };
    let mut applier = apply::Applier::new(&loaded.sources, loaded.diags);
    applier.apply_all(&loaded.assignments);
    paths::anchor(&mut applier.entries, &loaded.folders);
    let (mut values, provenance) = applier.fill_defaults(main_source, experiment_span);
    per_game::drop_idle_wrappers(&mut applier, &mut values);
    let experiment = values::to_experiment(&values);
    let labels = Labels::of(&applier, main_source, experiment_span);
    let cross = cross::CrossCheck {
        applier: &mut applier,
        experiment: &experiment,
        labels: &labels,
        machine,
    };
    cross.run();
    let warnings = std::mem::take(&mut applier.warnings);
    if applier.diags.is_empty() {
        Ok(Resolved {
            labels,
            experiment,
            provenance: Provenance::new(provenance),
            warnings: Diagnostics::new(warnings),
        })
    } else {
        let mut all = applier.diags;
        all.extend(warnings);
        Err(Diagnostics::new(all))
    }
}
