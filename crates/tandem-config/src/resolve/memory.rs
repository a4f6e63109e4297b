//! Where a resolution's values were written ([`Labels`], which every cross-setting check reads
//! to point at a line), and the check that an experiment's ranks on one machine fit in its
//! memory: made by the resolver when the caller knows the machine ([`crate::resolve_on`]) and
//! again, without resolving, once the launcher knows how many ranks the machine runs
//! ([`crate::Resolved::fits`]).

use std::collections::BTreeMap;

use miette::SourceSpan;

use super::apply::Applier;
use crate::Machine;
use crate::budget::{Bytes, MemoryPart, memory_estimate};
use crate::diag::{DiagBuilder, SourceId, Sources, error};
use crate::model::Experiment;

/// Where each value of a resolved experiment was written, and the texts it was read from.
#[derive(Debug, Clone)]
pub(crate) struct Labels {
    pub(crate) sources: Sources,
    written: BTreeMap<String, (SourceId, SourceSpan)>,
    main_source: SourceId,
    experiment_span: SourceSpan,
}

impl Labels {
    pub(super) fn of(
        applier: &Applier,
        main_source: SourceId,
        experiment_span: SourceSpan,
    ) -> Labels {
        Labels {
            sources: applier.sources().clone(),
            written: applier
                .entries
                .iter()
                .map(|(path, e)| (path.clone(), (e.source, e.span)))
                .collect(),
            main_source,
            experiment_span,
        }
    }

    /// Where a value was written; defaults point at the experiment's name.
    pub(super) fn at(&self, path: &str) -> (SourceId, SourceSpan, bool) {
        match self.written.get(path) {
            Some(&(source, span)) => (source, span, true),
            None => (self.main_source, self.experiment_span, false),
        }
    }

    /// [`Labels::at`] with the label's text, which says so where the value is a default.
    pub(crate) fn label(&self, path: &str, text: &str) -> (SourceId, SourceSpan, String) {
        let (source, span, written) = self.at(path);
        let text = if written {
            text.to_string()
        } else {
            format!("{text} (`{path}` is the default here)")
        };
        (source, span, text)
    }
}

/// The error of an experiment whose ranks on `machine` need more memory than it has.
pub(crate) fn misfit(e: &Experiment, labels: &Labels, machine: &Machine) -> Option<DiagBuilder> {
    let estimate = memory_estimate(e);
    let ranks = machine.ranks_here(e.job_ranks());
    let needed = estimate.per_rank().saturating_mul(ranks as u64);
    if needed <= machine.available_bytes {
        return None;
    }
    let (part, largest) = estimate.dominant();
    let path = part.setting();
    let label = format!("{} of {} a rank", Bytes(largest), part.describe());
    let (source, span, text) = labels.label(path, &label);
    let mut b = error(
        "config::out-of-memory",
        format!(
            "this experiment needs at least {} of memory on this machine, and {} is available",
            Bytes(needed),
            Bytes(machine.available_bytes)
        ),
    )
    .at(source, span, text);
    if part == MemoryPart::Rollout
        && let (s, span, true) = labels.at("train.rollout")
    {
        b = b.also(s, span, "steps kept per environment");
    }
    let lever = match part {
        MemoryPart::Environments | MemoryPart::Rollout if e.algorithm.is_on_policy() => {
            "lower `envs` or `rollout`"
        }
        MemoryPart::Environments | MemoryPart::Rollout => "lower `envs`",
        MemoryPart::Replay => "lower `buffer-capacity`",
        MemoryPart::Networks => "use a smaller network",
    };
    let help = format!(
        "{ranks} rank(s) here, each needing at least {} ({}); {lever}, or spread the \
         ranks over more machines",
        Bytes(estimate.per_rank()),
        estimate.breakdown()
    );
    Some(b.help(help))
}
