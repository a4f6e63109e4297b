//! What rank 0 shows while training: a progress bar (steps, steps/s, recent score, ETA) on a
//! terminal, or one plain line per logging interval otherwise, and a one-screen summary at the
//! end. Other ranks show nothing here (their warnings reach the console through logging).
//!
//! The headline is the game's score (the sum of its untouched rewards, what CleanRL and
//! Stable-Baselines3 report); the return of the rewards the learner saw follows it, named as
//! such, only where a wrapper changed them (clip-reward, normalize-reward).

use std::path::Path;
use std::time::{Duration, Instant};

use tracing_indicatif::span_ext::IndicatifSpanExt;

use super::metrics::{self, RecentEpisodes};

pub struct Console {
    kind: tandem_config::Console,
    active: bool,
    span: Option<tracing::Span>,
    total_steps: u64,
    start: Instant,
    start_step: u64,
    /// When the console last showed a plain progress line.
    last_line: Option<Instant>,
}

/// The least time between two plain progress lines on the console: an off-policy learner logs
/// every few steps (SAC printed 376 lines for 6,000), and the rank's log keeps every line.
const PLAIN_LINE_EVERY: Duration = Duration::from_secs(5);

impl Console {
    /// What this console shows.
    pub fn kind(&self) -> tandem_config::Console {
        self.kind
    }

    /// `active` is true on rank 0 only; `kind` is what logging set up for this rank.
    pub fn new(
        active: bool,
        kind: tandem_config::Console,
        total_steps: u64,
        start_step: u64,
    ) -> Console {
        let kind = if active {
            kind
        } else {
            tandem_config::Console::Quiet
        };
        let span = (kind == tandem_config::Console::Progress).then(|| {
            let span = tracing::info_span!("train");
            span.pb_set_style(
                &indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} steps {msg} (eta {eta})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            span.pb_set_length(total_steps);
            span.pb_set_position(start_step);
            span.pb_start();
            span
        });
        Console {
            kind,
            active,
            span,
            total_steps,
            start: Instant::now(),
            start_step,
            last_line: None,
        }
    }

    fn steps_per_second(&self, step: u64) -> f64 {
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        (step.saturating_sub(self.start_step)) as f64 / secs
    }

    /// Called after every update; `log_line` is true at the logging interval.
    pub fn update(&mut self, step: u64, recent: &RecentEpisodes, log_line: bool) {
        if !self.active {
            return;
        }
        let sps = self.steps_per_second(step);
        let score = headline(recent).unwrap_or_else(|| "score -".into());
        match self.kind {
            tandem_config::Console::Progress => {
                if let Some(span) = &self.span {
                    span.pb_set_position(step.min(self.total_steps));
                    span.pb_set_message(&format!(
                        "| {sps:.0} steps/s | {score} (last {})",
                        window(recent)
                    ));
                }
            }
            tandem_config::Console::Plain if log_line => {
                let line = format!(
                    "step {step}/{} | {sps:.0} steps/s | recent {score} (last {})",
                    self.total_steps,
                    window(recent)
                );
                let now = Instant::now();
                if self
                    .last_line
                    .is_none_or(|last| now.duration_since(last) >= PLAIN_LINE_EVERY)
                {
                    self.last_line = Some(now);
                    tracing::info!("{line}");
                } else {
                    tracing::info!(target: crate::logging::LOG_ONLY, "{line}");
                }
            }
            _ => {}
        }
    }

    /// The end-of-run summary.
    /// Ends the progress bar without the run's closing lines (a population member's: the
    /// population reports the whole).
    pub fn close(&mut self) {
        self.span = None;
    }

    pub fn finish(
        &mut self,
        step: u64,
        recent: &RecentEpisodes,
        run_dir: &Path,
        interrupted: bool,
    ) {
        self.span = None;
        if !self.active {
            return;
        }
        let wall = self.start.elapsed();
        let sps = self.steps_per_second(step);
        let score = headline(recent).map_or("no finished episode".into(), |s| {
            format!("recent {s} over the last {}", window(recent))
        });
        let episodes = recent.total();
        let how = if interrupted {
            "stopped on request"
        } else {
            "finished"
        };
        tracing::info!(
            "training {how}: {step} steps in {} ({sps:.0} steps/s), {episodes} episodes, {score}",
            human(wall)
        );
        if let Some(score) = metrics::final_score(recent) {
            tracing::info!(
                "final score {score:.3}: {} ({} averaged; summary.json final_score)",
                metrics::FINAL_SCORE_RULE,
                window(recent)
            );
        }
        tracing::info!("run directory: {}", run_dir.display());
    }
}

/// The episodes the recent score averages: `100 episodes` ([`metrics::final_score_window`]).
fn window(recent: &RecentEpisodes) -> String {
    let n = metrics::final_score_window(recent);
    format!("{n} episode{}", if n == 1 { "" } else { "s" })
}

/// `score S` for the recent episodes' mean game score ([`metrics::final_score`]), then `train return R` where the
/// rewards the learner saw sum to something else; `None` before the first episode ends.
fn headline(recent: &RecentEpisodes) -> Option<String> {
    let score = metrics::final_score(recent)?;
    let mut text = format!("score {score:.2}");
    if let Some(ret) = recent.mean_return()
        && (ret - score).abs() > 1e-9 * score.abs().max(1.0)
    {
        text.push_str(&format!(", train return {ret:.2}"));
    }
    Some(text)
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m{:02}s", s / 3600, (s % 3600) / 60, s % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
