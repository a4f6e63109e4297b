//! Applying the assignments in order (later wins; changing a section's kind drops
//! the settings of the previous kind), checking each against its setting, then
//! filling every default explicitly and recording where each value came from.

use std::collections::{BTreeMap, BTreeSet};

use kdl::KdlValue;
use miette::SourceSpan;

use super::check::Checker;
use super::{Assignment, Entry, Target, found, kind_noun};
use crate::Origin;
use crate::diag::Severity;
use crate::diag::{DiagBuilder, Diagnostic, SourceId, SourceKind, Sources, did_you_mean, error};
use crate::schema::{Kind, SECTIONS, Section};
use crate::values::{Val, Values};

/// The state of the sequential application of assignments.
pub(super) struct Applier<'a> {
    sources: &'a Sources,
    pub(super) diags: Vec<Diagnostic>,
    /// What runs but not as written; reported beside the errors, or with the result.
    pub(super) warnings: Vec<Diagnostic>,
    pub(super) entries: BTreeMap<String, Entry>,
    /// The kind currently in effect per section (`None` until one is assigned).
    current: Vec<Option<&'static Kind>>,
    /// The last valid kind assigned per section in the whole input.
    final_kind: Vec<Option<&'static Kind>>,
    /// A section whose kind was invalid: its settings are not checked (avoids noise).
    broken: Vec<bool>,
    /// Paths whose value was invalid: cross-field checks skip them.
    pub(super) failed: BTreeSet<String>,
}

impl<'a> Applier<'a> {
    pub(super) fn new(sources: &'a Sources, diags: Vec<Diagnostic>) -> Self {
        Applier {
            sources,
            diags,
            warnings: Vec::new(),
            entries: BTreeMap::new(),
            current: vec![None; SECTIONS.len()],
            final_kind: vec![None; SECTIONS.len()],
            broken: vec![false; SECTIONS.len()],
            failed: BTreeSet::new(),
        }
    }

    /// Applies every assignment in order, knowing first which kind each section
    /// ends with (so settings given before a later kind are checked against it).
    pub(super) fn apply_all(&mut self, assignments: &[Assignment]) {
        for a in assignments {
            if let (Target::Kind { section }, [(KdlValue::String(s), _)]) =
                (&a.target, a.raw.args.as_slice())
                && let Some(k) = SECTIONS[*section].kind(s)
            {
                self.final_kind[*section] = Some(k);
            }
        }
        for a in assignments {
            self.apply(a);
        }
    }

    /// The texts this resolution read.
    pub(super) fn sources(&self) -> &Sources {
        self.sources
    }

    pub(super) fn push(&mut self, b: DiagBuilder) {
        let d = b.finish(self.sources);
        match d.severity() {
            Severity::Error => self.diags.push(d),
            Severity::Warning => self.warnings.push(d),
        }
    }

    fn effective_kind(&self, section: usize) -> Option<&'static Kind> {
        let s = SECTIONS[section];
        self.current[section]
            .or(self.final_kind[section])
            .or_else(|| s.default_kind.and_then(|k| s.kind(k)))
    }

    fn apply(&mut self, a: &Assignment) {
        match &a.target {
            Target::Kind { section } => self.apply_kind(*section, a),
            Target::Field {
                section,
                name,
                name_span,
            } => self.apply_field(*section, name, *name_span, a),
        }
    }

    fn apply_kind(&mut self, index: usize, a: &Assignment) {
        let section = SECTIONS[index];
        let noun = kind_noun(section);
        let kind = match a.raw.args.as_slice() {
            [(KdlValue::String(s), span)] => match section.kind(s) {
                Some(k) => Ok((k, *span)),
                None => Err(
                    error("config::unknown-kind", format!("unknown {noun} `{s}`"))
                        .at(a.source, *span, format!("not a known {noun}"))
                        .help(suggest_kind(section, s)),
                ),
            },
            [(other, span)] => Err(error(
                "config::type",
                format!("wrong type for `{}`", section.name),
            )
            .at(
                a.source,
                *span,
                format!("expected a {noun} name (a string), found {}", found(other)),
            )
            .help(suggest_kind(section, ""))),
            _ => Err(error(
                "config::missing-value",
                format!("`{}` needs one {noun}", section.name),
            )
            .at(a.source, a.raw.value_span, "expected one value")),
        };
        match kind {
            Ok((kind, span)) => {
                let changed = self.current[index].is_some_and(|k| !std::ptr::eq(k, kind));
                if changed {
                    let prefix = format!("{}.", section.name);
                    let common: Vec<String> = section
                        .common
                        .iter()
                        .map(|f| section.path(f.name))
                        .collect();
                    self.entries
                        .retain(|path, _| !path.starts_with(&prefix) || common.contains(path));
                }
                self.current[index] = Some(kind);
                self.broken[index] = false;
                self.failed.remove(section.name);
                self.entries.insert(
                    section.name.to_string(),
                    Entry {
                        val: Val::Str(kind.name.to_string()),
                        source: a.source,
                        span,
                        items: Vec::new(),
                    },
                );
            }
            Err(b) => {
                self.push(b);
                self.broken[index] = true;
                self.failed.insert(section.name.to_string());
            }
        }
    }

    fn apply_field(&mut self, index: usize, name: &str, name_span: SourceSpan, a: &Assignment) {
        let section = SECTIONS[index];
        let kind = self.effective_kind(index);
        let path = section.path(name);
        let field = section.fields(kind).find(|f| f.name == name);
        let Some(field) = field else {
            if self.broken[index] {
                return;
            }
            let label;
            let help;
            let place = match kind {
                Some(k) => format!("`{} \"{}\"`", section.name, k.name),
                None => format!("`{}`", section.name),
            };
            let other_kind = section
                .kinds
                .iter()
                .find(|k| k.fields.iter().any(|f| f.name == name));
            if let (Some(other), Some(kind)) = (other_kind, kind) {
                label = format!("not a setting of {}", kind.name);
                help = format!(
                    "`{name}` is a setting of `{} \"{}\"`",
                    section.name, other.name
                );
            } else {
                label = "unknown setting".to_string();
                help = self.unknown_help(index, kind, name);
            }
            let message = if section.name.is_empty() {
                format!("unknown setting `{name}`")
            } else {
                format!("unknown setting `{name}` in {place}")
            };
            self.push(
                error("config::unknown-setting", message)
                    .at(a.source, name_span, label)
                    .help(help),
            );
            return;
        };
        let checker = Checker {
            source: a.source,
            path: &path,
        };
        match checker.value(field, &a.raw) {
            Ok((val, items)) => {
                self.failed.remove(&path);
                let span = if items.is_empty() {
                    a.raw.value_span
                } else {
                    name_span
                };
                self.entries.insert(
                    path,
                    Entry {
                        val,
                        source: a.source,
                        span,
                        items,
                    },
                );
            }
            Err(errs) => {
                for e in errs {
                    self.push(e);
                }
                self.failed.insert(path);
            }
        }
    }

    /// The help for a name that is no setting of `section`'s `kind`: tandem's name where
    /// Stable-Baselines3 or CleanRL call a setting so, else the likely typo or the list.
    fn unknown_help(&self, index: usize, kind: Option<&Kind>, name: &str) -> String {
        let section = SECTIONS[index];
        let algorithm = SECTIONS
            .iter()
            .position(|s| s.name == "algorithm")
            .and_then(|a| self.effective_kind(a))
            .map(|k| k.name);
        crate::foreign::help(name, section.name, algorithm).unwrap_or_else(|| {
            let names: Vec<&str> = section.fields(kind).map(|f| f.name).collect();
            did_you_mean(name, names.iter().copied())
        })
    }

    /// Fills every default explicitly: the kind of each section (reporting a
    /// missing required one) and every setting not written. Returns the values
    /// and the origin of each.
    pub(super) fn fill_defaults(
        &mut self,
        main_source: SourceId,
        experiment_span: SourceSpan,
    ) -> (Values, BTreeMap<String, Origin>) {
        let mut provenance = BTreeMap::new();
        let mut values = Values::new();
        for (index, section) in SECTIONS.iter().enumerate() {
            if section.has_kinds() {
                self.fill_kind(
                    index,
                    (main_source, experiment_span),
                    &mut values,
                    &mut provenance,
                );
            }
            let kind = section.kind(self.kind_name(&values, section.name));
            // The algorithm's section comes before the ones whose defaults depend on it.
            let algorithm = self.kind_name(&values, "algorithm");
            let box_actor = crate::model::Algorithm::facts_of(algorithm)
                .is_some_and(|facts| facts.acts == crate::model::Acts::SquashedBox);
            for field in section.fields(kind) {
                let path = section.path(field.name);
                if self.entries.contains_key(&path) {
                    continue;
                }
                match Val::from_default(field.default.for_learner(box_actor)) {
                    Some(v) => {
                        values.insert(path.clone(), v);
                        provenance.insert(path, Origin::Default);
                    }
                    // A value written but invalid has had its own error.
                    None if !section.name.is_empty()
                        && !self.broken[index]
                        && !self.failed.contains(&path) =>
                    {
                        self.missing_required(section, kind, field, (main_source, experiment_span))
                    }
                    None => {}
                }
            }
        }
        for (path, entry) in &self.entries {
            values.insert(path.clone(), entry.val.clone());
            provenance.insert(path.clone(), self.origin(entry));
        }
        derive_defaults(&mut values, &provenance);
        (values, provenance)
    }

    /// The kind of the section `name`, written or filled in already; empty when it has none.
    fn kind_name<'v>(&'v self, values: &'v Values, name: &str) -> &'v str {
        match values.get(name).or(self.entries.get(name).map(|e| &e.val)) {
            Some(Val::Str(s)) => s,
            _ => "",
        }
    }

    /// A setting without default that was not written: pointed at the kind that needs it.
    fn missing_required(
        &mut self,
        section: &Section,
        kind: Option<&Kind>,
        field: &crate::schema::Field,
        (main_source, experiment_span): (SourceId, SourceSpan),
    ) {
        let path = section.path(field.name);
        let (source, span) = self
            .entries
            .get(section.name)
            .map_or((main_source, experiment_span), |e| (e.source, e.span));
        let owner = match kind {
            Some(k) => format!("`{} \"{}\"`", section.name, k.name),
            None => format!("`{}`", section.name),
        };
        self.push(
            error(
                "config::missing-value",
                format!("{owner} needs `{}`", field.name),
            )
            .at(source, span, format!("no `{}` in its block", field.name))
            .help(format!("add `{}` to its block: {}", field.name, field.doc)),
        );
        self.failed.insert(path);
    }

    /// The kind of one section: as written, its default, or an error.
    fn fill_kind(
        &mut self,
        index: usize,
        (main_source, experiment_span): (SourceId, SourceSpan),
        values: &mut Values,
        provenance: &mut BTreeMap<String, Origin>,
    ) {
        let section = SECTIONS[index];
        let kind =
            self.current[index].or_else(|| section.default_kind.and_then(|k| section.kind(k)));
        if let Some(k) = kind {
            if !self.entries.contains_key(section.name) {
                values.insert(section.name.to_string(), Val::Str(k.name.to_string()));
                provenance.insert(section.name.to_string(), Origin::Default);
            }
            return;
        }
        if !self.broken[index] {
            self.push(missing_kind(section, main_source, experiment_span));
        }
        self.failed.insert(section.name.to_string());
        values.insert(
            section.name.to_string(),
            Val::Str(section.kinds[0].name.to_string()),
        );
    }

    fn origin(&self, entry: &Entry) -> Origin {
        let src = self.sources.get(entry.source);
        match src.kind {
            SourceKind::File => Origin::File {
                path: src.name.clone(),
                line: src.line_col(entry.span.offset()).0,
            },
            SourceKind::Set => Origin::Set {
                text: src.text.to_string(),
            },
        }
    }
}

/// The help for a kind that is not one of `section`'s: the likely one, or the list (for games,
/// the catalogue's summary rather than a hundred names).
fn suggest_kind(section: &Section, name: &str) -> String {
    if section.name == "env" {
        crate::catalogue::suggest(name)
    } else {
        did_you_mean(name, section.kinds.iter().map(|k| k.name))
    }
}

fn missing_kind(
    section: &Section,
    main_source: SourceId,
    experiment_span: SourceSpan,
) -> DiagBuilder {
    let mut kinds: Vec<String> = section
        .kinds
        .iter()
        .map(|k| format!("\"{}\"", k.name))
        .collect();
    let known = if section.name == "env" {
        crate::catalogue::summary()
    } else {
        kinds.join(", ")
    };
    kinds.truncate(1);
    error(
        "config::missing-kind",
        format!("the experiment has no {}", kind_noun(section)),
    )
    .at(
        main_source,
        experiment_span,
        format!("no `{} \"<{}>\"`", section.name, section.kind_key),
    )
    .help(format!(
        "add e.g. `{} {}` inside the experiment; known: {known}",
        section.name, kinds[0],
    ))
}

/// The defaults that depend on other settings, filled once every setting has its value (those
/// that depend on the algorithm alone, `Dflt::Learner`, are picked as they are filled).
fn derive_defaults(values: &mut Values, provenance: &BTreeMap<String, Origin>) {
    const ACTOR_CRITIC: &str = "network.actor-critic";
    const ENVS: &str = "env.envs";
    const WORKERS: &str = "env.workers";
    let defaulted = |path: &str| provenance.get(path) == Some(&Origin::Default);
    let text = |values: &Values, path: &str| match values.get(path) {
        Some(Val::Str(s)) => s.clone(),
        _ => String::new(),
    };
    let algorithm = text(values, "algorithm");
    let ranks = match values.get("devices") {
        Some(Val::Devices(devices)) => devices.len().max(1),
        _ => 1,
    };
    if defaulted(ACTOR_CRITIC) {
        let reads_vectors = match text(values, "network").as_str() {
            "mlp" => true,
            "layers" => match values.get("network.layers") {
                Some(Val::Layers(list)) => !tandem_spec::layer::convolves(list),
                _ => true,
            },
            _ => false,
        };
        let derived = crate::schema::actor_critic_default(
            &algorithm,
            reads_vectors,
            &text(values, "network.core"),
        );
        values.insert(ACTOR_CRITIC.into(), Val::Str(derived.into()));
    }
    if defaulted(ENVS) {
        let derived = crate::schema::envs_default(&algorithm, ranks);
        values.insert(ENVS.into(), Val::Int(derived as i64));
    }
    // After the environments: each of a rank's workers steps at least one of them.
    if defaulted(WORKERS) {
        let per_rank = match values.get(ENVS) {
            Some(Val::Int(envs)) => (*envs as usize / ranks).max(1),
            _ => crate::setting::GYM_WORKERS,
        };
        let derived = crate::setting::GYM_WORKERS.min(per_rank);
        values.insert(WORKERS.into(), Val::Int(derived as i64));
    }
}
