//! A population's side of a rank (`population { members N }`, docs/population.md): which
//! member this rank trains, with its own ranks, seed and hyperparameters ([`Member`]), and
//! population-based training between the members ([`Population`]): every `period` of steps the
//! members' objectives are gathered over the job's group, rank 0 of the job draws the plan (who
//! copies whom, and the copies' new hyperparameters) and broadcasts it, each copying member
//! receives its source's parameters, optimiser state and normalisers from the source's first
//! rank, and takes its new hyperparameters. The rules themselves are pure functions
//! ([`starting_values`], [`plan`]), so every choice follows from the seed and the objectives.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tch::{Kind, Tensor};

use tandem_config::{Experiment, ExploreRule, Objective};

use crate::algo::league::Taken;
use crate::dist::{PendingSum, ProcessGroup};
use crate::seeds::{Purpose, derived_seed};

/// The member a rank trains: its index, and its run as the population's config derives it.
pub struct Member {
    pub index: usize,
    /// The member's own experiment: its devices, seed and starting hyperparameters.
    pub experiment: Experiment,
    /// Its explored hyperparameters, in `population.explore`'s order.
    pub values: Vec<f64>,
    /// Its files: `members/<index>/` of the run directory.
    pub run_dir: PathBuf,
}

impl Member {
    /// The member world rank `rank` trains in `population` (member k on ranks k*m..k*m+m-1),
    /// at its start, or, resuming, with the hyperparameters of its newest readable checkpoint.
    pub fn of_rank(
        population: &Experiment,
        rank: usize,
        run_dir: &Path,
        resume: bool,
    ) -> Result<Member> {
        let index = rank / population.world_size();
        let member_dir = run_dir.join("members").join(index.to_string());
        let values = match resume {
            false => starting_values(population, index),
            true => resumed_values(population, &member_dir)?,
        };
        let experiment = member_experiment(population, index, &values)?;
        Ok(Member {
            index,
            experiment,
            values,
            run_dir: member_dir,
        })
    }
}

/// Member `member`'s experiment with its explored hyperparameters at `values`.
pub fn member_experiment(
    population: &Experiment,
    member: usize,
    values: &[f64],
) -> Result<Experiment> {
    let seed = derived_seed(population.seed, Purpose::Member, member as u64, 0);
    let explored = &population.population.explore.0;
    let sets: Vec<(String, f64)> = (explored.iter().zip(values))
        .map(|(e, &v)| (e.path.clone(), v))
        .collect();
    population.for_member(member, seed, &sets).map_err(|d| {
        anyhow::anyhow!(
            "member {member}'s experiment does not resolve:\n{}",
            d.render(false)
        )
    })
}

/// The explored hyperparameters a member's newest readable checkpoint was written with (its
/// config holds them: a member's experiment is retuned at every copy).
fn resumed_values(population: &Experiment, member_dir: &Path) -> Result<Vec<f64>> {
    use super::checkpoint;
    let newest = (checkpoint::newest_first(member_dir)?.into_iter())
        .find_map(|path| checkpoint::load(&path).ok().map(|c| (path, c)));
    let Some((path, ckpt)) = newest else {
        anyhow::bail!(
            "{} holds no readable checkpoint to resume",
            member_dir.display()
        );
    };
    let place = path.display().to_string();
    let saved =
        tandem_config::parse_stored(&ckpt.resolved_config, &place).map_err(anyhow::Error::msg)?;
    (population.population.explore.0.iter())
        .map(|e| {
            saved
                .number_at(&e.path)
                .with_context(|| format!("{place} holds no {}", e.path))
        })
        .collect()
}

/// A uniform draw in [0, 1) from the population's `Explore` stream at (`a`, `b`).
fn unit(seed: u64, a: u64, b: u64) -> f64 {
    (derived_seed(seed, Purpose::Explore, a, b) >> 11) as f64 / (1u64 << 53) as f64
}

/// Member `member`'s starting hyperparameters, one per explored setting: drawn log-uniformly
/// from a factor rule's range or uniformly from a list where the setting spreads, the
/// experiment's own value where it does not.
pub fn starting_values(population: &Experiment, member: usize) -> Vec<f64> {
    let explored = &population.population.explore.0;
    let draw = |i: usize| unit(population.seed, member as u64, i as u64);
    (explored.iter().enumerate())
        .map(|(i, explore)| match (&explore.rule, explore.spread) {
            (_, false) => population.number_at(&explore.path).unwrap_or(f64::NAN),
            (ExploreRule::Factor { min, max, .. }, true) => (min.ln()
                + draw(i) * (max.ln() - min.ln()))
            .exp()
            .clamp(*min, *max),
            (ExploreRule::Values(values), true) => {
                values[((draw(i) * values.len() as f64) as usize).min(values.len() - 1)]
            }
        })
        .collect()
}

/// What one member does at an exploit: copy `source` (itself where it keeps its own) and
/// train on with `values`.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub source: usize,
    pub values: Vec<f64>,
}

/// Population-based training's decision at exploit number `exploit`: members ranked by
/// `objectives` (higher is better; NaN, a member without a score yet, lowest; ties to the
/// lower index), the bottom `fraction` (rounded up, at least one) each copying a member drawn
/// uniformly from the top as many, and perturbing the copy's hyperparameters by `rules`
/// (explore); the others keep their own.
pub fn plan(
    seed: u64,
    exploit: u64,
    fraction: f64,
    objectives: &[f64],
    values: &[Vec<f64>],
    rules: &[ExploreRule],
) -> Vec<Step> {
    let n = objectives.len();
    let mut order: Vec<usize> = (0..n).collect();
    let key = |i: usize| {
        if objectives[i].is_nan() {
            f64::NEG_INFINITY
        } else {
            objectives[i]
        }
    };
    order.sort_by(|&a, &b| key(b).total_cmp(&key(a)).then(a.cmp(&b)));
    let moving = if fraction > 0.0 {
        ((fraction * n as f64).ceil() as usize).clamp(1, n / 2)
    } else {
        0
    };
    let (top, bottom) = (&order[..moving], &order[n - moving..]);
    let mut steps: Vec<Step> = (0..n)
        .map(|i| Step {
            source: i,
            values: values[i].clone(),
        })
        .collect();
    for &member in bottom {
        // Each draw has coordinates of its own, apart from the starting values' (whose first
        // is a member, below 2^32): (exploit, member) with 0 picks the source, with i + 1 moves
        // setting i.
        let stream = ((exploit + 1) << 32) | member as u64;
        let pick = unit(seed, stream, 0);
        let source = top[((pick * top.len() as f64) as usize).min(top.len() - 1)];
        let moved = (rules.iter().zip(&values[source]).enumerate())
            .map(|(i, (rule, &v))| perturb(rule, v, unit(seed, stream, i as u64 + 1)))
            .collect();
        steps[member] = Step {
            source,
            values: moved,
        };
    }
    steps
}

/// A hyperparameter after one exploration move, `u` a uniform draw: a factor rule multiplies
/// (u < 1/2) or divides by its factor, within its range; a list steps to the next value up
/// (u < 1/2) or down, staying put at an end it cannot pass.
pub fn perturb(rule: &ExploreRule, value: f64, u: f64) -> f64 {
    let up = u < 0.5;
    match rule {
        ExploreRule::Factor { factor, min, max } => {
            let moved = if up { value * factor } else { value / factor };
            moved.clamp(*min, *max)
        }
        ExploreRule::Values(values) => {
            // The nearest listed value stands for one the list does not hold.
            let at = (0..values.len())
                .min_by(|&a, &b| {
                    (values[a] - value)
                        .abs()
                        .total_cmp(&(values[b] - value).abs())
                })
                .unwrap_or(0);
            let to = if up {
                (at + 1).min(values.len() - 1)
            } else {
                at.saturating_sub(1)
            };
            values[to]
        }
    }
}

/// The population's side of a rank's run: the job's group (every member's ranks), this
/// rank's member and its place, and the lineage file rank 0 of the job keeps.
pub struct Population {
    world: ProcessGroup,
    pub member: usize,
    members: usize,
    ranks_per_member: usize,
    population: Experiment,
    pub values: Vec<f64>,
    exploits: u64,
    /// The stop requests of the last round, being summed over the job.
    pending: Option<PendingSum>,
    /// `population.jsonl` in the run directory, written by rank 0 of the job.
    lineage: Option<PathBuf>,
}

impl Population {
    pub fn new(
        world: ProcessGroup,
        population: Experiment,
        member: &Member,
        run_dir: &Path,
    ) -> Population {
        let members = population.population.members.unwrap_or(1) as usize;
        Population {
            lineage: (world.rank() == 0).then(|| run_dir.join("population.jsonl")),
            ranks_per_member: population.world_size(),
            members,
            member: member.index,
            values: member.values.clone(),
            exploits: 0,
            pending: None,
            population,
            world,
        }
    }

    /// The explored settings' paths, in order.
    pub fn paths(&self) -> Vec<String> {
        self.population
            .population
            .explore
            .0
            .iter()
            .map(|e| e.path.clone())
            .collect()
    }

    /// Whether every member's snapshots join every member's league (`league.pool
    /// "population"`).
    pub fn shares_league(&self) -> bool {
        self.population.league.pool == tandem_config::LeaguePool::Population
    }

    /// The tag of the scalar members are ranked by, with `objective "scalar"`.
    pub fn objective_scalar(&self) -> Option<&str> {
        self.population.population.objective_scalar.as_deref()
    }

    pub fn objective(&self) -> Objective {
        self.population.population.objective
    }

    /// Whether the update from `before` to `now` (the member's steps, the same on every member)
    /// crossed the end of a period.
    pub fn due(&self, before: u64, now: u64) -> bool {
        let period = self.population.population.period.max(1);
        now / period > before / period
    }

    /// This rank's stop requests of this round are started on their sum over the job, and the
    /// sums started the round before are returned (none for the first round): every rank takes
    /// the same decision after the same round, one round after the request, and no rank waits
    /// for the others to finish their round unless they lag it by a whole round.
    pub fn stop_votes_of_last_round(&mut self, votes: [f64; 2]) -> Result<[f64; 2]> {
        let started = self.world.start_sum(&votes)?;
        let last = match self.pending.replace(started) {
            Some(pending) => pending.wait()?,
            None => vec![0.0, 0.0],
        };
        Ok([last[0], last[1]])
    }

    /// The exploit's plan, the same on every rank: each rank's objective and values gathered,
    /// rank 0's draw broadcast (as `[source, values...]` a member).
    pub fn agree_on_plan(&mut self, objective: f64, step: u64) -> Result<Vec<Step>> {
        let width = 1 + self.values.len();
        let mut mine = vec![objective];
        mine.extend(&self.values);
        let gathered = self.world.all_gather(&Tensor::from_slice(&mine))?;
        let first_ranks = (0..self.members).map(|k| k * self.ranks_per_member);
        let rows: Vec<Vec<f64>> = first_ranks
            .map(|r| Vec::<f64>::try_from(&gathered[r]))
            .collect::<std::result::Result<_, _>>()?;
        let explore = &self.population.population;
        let rules: Vec<ExploreRule> = explore.explore.0.iter().map(|e| e.rule.clone()).collect();
        let mut flat = match self.world.rank() {
            0 => {
                let objectives: Vec<f64> = rows.iter().map(|r| r[0]).collect();
                let values: Vec<Vec<f64>> = rows.iter().map(|r| r[1..].to_vec()).collect();
                let steps = plan(
                    self.population.seed,
                    self.exploits,
                    explore.exploit,
                    &objectives,
                    &values,
                    &rules,
                );
                let flat: Vec<f64> = (steps.iter())
                    .flat_map(|s| std::iter::once(s.source as f64).chain(s.values.iter().copied()))
                    .collect();
                Tensor::from_slice(&flat)
            }
            _ => Tensor::zeros(
                [(self.members * width) as i64],
                (Kind::Double, tch::Device::Cpu),
            ),
        };
        self.world.broadcast(&mut flat, 0)?;
        let flat = Vec::<f64>::try_from(&flat)?;
        let steps: Vec<Step> = flat
            .chunks(width)
            .map(|c| Step {
                source: c[0] as usize,
                values: c[1..].to_vec(),
            })
            .collect();
        if let Some(path) = &self.lineage {
            append_lineage(path, (self.exploits, step), &rows, &steps, &self.paths())?;
        }
        self.exploits += 1;
        Ok(steps)
    }

    /// Sends `tensors` from member `source`'s first rank to every rank of the job; the ranks
    /// of member `to` keep what they receive (written into `tensors` in place), the others
    /// receive into scratch copies. Every rank calls it with tensors of the same layout.
    pub fn copy_member(&self, source: usize, to: usize, tensors: &[Tensor]) -> Result<()> {
        let root = source * self.ranks_per_member;
        let receives = self.member == to;
        tch::no_grad(|| -> Result<()> {
            for t in tensors {
                let mut t = match receives || self.world.rank() == root {
                    true => t.shallow_clone(),
                    false => t.copy(),
                };
                self.world.broadcast(&mut t, root)?;
            }
            Ok(())
        })
    }

    /// Every member's league snapshot (`league.pool "population"`), on every rank of the job:
    /// each member's first rank sends its `mine` (networks and rating) in turn. Every rank calls
    /// it with networks of the same layout; its own are copied, never written.
    pub fn gather_snapshots(&self, mine: &Taken) -> Result<Vec<Taken>> {
        let mut taken = Vec::with_capacity(self.members);
        tch::no_grad(|| -> Result<()> {
            for member in 0..self.members {
                let root = member * self.ranks_per_member;
                let mut networks = Vec::with_capacity(mine.networks.len());
                for (name, t) in &mine.networks {
                    let mut copy = t.copy();
                    self.world.broadcast(&mut copy, root)?;
                    networks.push((name.clone(), copy));
                }
                let mut rating = Tensor::from_slice(&[mine.rating]);
                self.world.broadcast(&mut rating, root)?;
                taken.push(Taken {
                    member: Some(member),
                    networks,
                    rating: rating.double_value(&[0]),
                });
            }
            Ok(())
        })?;
        Ok(taken)
    }

    /// The first lines of the lineage (every member's starting hyperparameters), by rank 0.
    pub fn record_start(&self) -> Result<()> {
        let Some(path) = &self.lineage else {
            return Ok(());
        };
        let starting = (0..self.members).map(|k| starting_values(&self.population, k));
        let paths = self.paths();
        let mut line = String::new();
        for (member, values) in starting.enumerate() {
            let entry = serde_json::json!({
                "exploit": serde_json::Value::Null,
                "step": 0,
                "member": member,
                "values": named(&paths, &values),
            });
            line.push_str(&format!("{entry}\n"));
        }
        let mut file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        file.write_all(line.as_bytes())?;
        Ok(())
    }

    /// The member's experiment with `values` (after it explored).
    pub fn experiment_with(&self, values: &[f64]) -> Result<Experiment> {
        member_experiment(&self.population, self.member, values)
    }

    /// The population's end, after the member's own: every member's final score gathered and
    /// the population's `summary.json` written by rank 0 of the job (its `final_score` the
    /// best member's, by the final-score rule), then the job's group left.
    pub fn finish(mut self, end: PopulationEnd) -> Result<()> {
        if let Some(pending) = self.pending.take() {
            pending.wait()?;
        }
        let mine = [end.final_score.unwrap_or(f64::NAN), end.episodes as f64];
        let gathered = self.world.all_gather(&Tensor::from_slice(&mine))?;
        let first = |k: usize, i: i64| gathered[k * self.ranks_per_member].double_value(&[i]);
        let scores: Vec<f64> = (0..self.members).map(|k| first(k, 0)).collect();
        let episodes: f64 = (0..self.members).map(|k| first(k, 1)).sum();
        let end = PopulationEnd {
            episodes: episodes as u64,
            ..end
        };
        if let Some(lineage) = &self.lineage {
            let dir = lineage.parent().unwrap_or(Path::new("."));
            write_summary(dir, &scores, &end)?;
            report(dir, &scores, &end);
        }
        let timeout = std::time::Duration::from_secs_f64(self.population.sync.collective_timeout);
        self.world.shutdown(timeout)?;
        Ok(())
    }

    /// After every member resumed: all at the same step (else the members' checkpoints do not
    /// belong together), and rank 0's lineage cut back to that step, its exploits counted.
    pub fn resumed_at(&mut self, step: u64) -> Result<()> {
        let steps = self.world.all_gather(&Tensor::from_slice(&[step as i64]))?;
        let steps: Vec<i64> = steps.iter().map(|t| t.int64_value(&[0])).collect();
        let first = |k: usize| steps[k * self.ranks_per_member];
        if let Some(k) = (0..self.members).find(|&k| first(k) != step as i64) {
            anyhow::bail!(
                "member {} resumed at step {step} but member {k} at step {}: the members' \
                 checkpoints do not belong together (one damaged or missing?)",
                self.member,
                first(k)
            );
        }
        let Some(path) = &self.lineage else {
            return Ok(());
        };
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let kept: Vec<&str> = (text.lines())
            .filter(|line| {
                serde_json::from_str::<serde_json::Value>(line)
                    .is_ok_and(|v| v["step"].as_u64().is_some_and(|s| s <= step))
            })
            .collect();
        let exploits = kept
            .iter()
            .filter(|l| !l.contains("\"exploit\":null"))
            .count();
        self.exploits = (exploits / self.members) as u64;
        let body: String = kept.iter().map(|l| format!("{l}\n")).collect();
        crate::atomic::write_atomic(path, body.as_bytes())
            .with_context(|| format!("writing {}", path.display()))
    }

    /// The member's hyperparameters `values` in words: `algorithm.lr 0.0012, ...`.
    pub fn describe(&self, values: &[f64]) -> String {
        let each = self
            .paths()
            .into_iter()
            .zip(values)
            .map(|(p, v)| format!("{p} {v}"));
        each.collect::<Vec<_>>().join(", ")
    }

    /// The scalars of the member's hyperparameters `values`: `population/<path>`.
    pub fn scalars(&self, values: &[f64]) -> Vec<(String, f64)> {
        let paths = self.paths().into_iter();
        paths
            .zip(values)
            .map(|(p, &v)| (format!("population/{p}"), v))
            .collect()
    }

    /// This rank's place in the whole job.
    pub fn job_rank(&self) -> usize {
        self.world.rank()
    }
}

/// Where a member's run ended, for the population's summary.
pub struct PopulationEnd {
    pub final_score: Option<f64>,
    /// The member's episodes (in the population's summary: every member's).
    pub episodes: u64,
    pub global_step: u64,
    pub interrupted: bool,
    /// The final-score rule's words.
    pub rule: &'static str,
}

/// The population's `summary.json`: the best member's final score as the population's (the
/// member PBT yields), which member that is, every member's, the steps of each and of all.
fn write_summary(dir: &Path, scores: &[f64], end: &PopulationEnd) -> Result<()> {
    let score = |x: f64| {
        if x.is_finite() {
            serde_json::json!(x)
        } else {
            serde_json::Value::Null
        }
    };
    let best = best(scores);
    let scores_json: Vec<serde_json::Value> = scores.iter().map(|&x| score(x)).collect();
    // Flat, one line, in this order: as a run's summary.json is written.
    let fields = [
        (
            "final_score",
            best.map_or(serde_json::Value::Null, |k| score(scores[k])),
        ),
        ("final_score_member", serde_json::json!(best)),
        (
            "final_score_rule",
            serde_json::json!(format!("the best member's {}", end.rule)),
        ),
        ("members", serde_json::json!(scores.len())),
        ("member_final_scores", serde_json::Value::Array(scores_json)),
        ("global_step", serde_json::json!(end.global_step)),
        (
            "population_steps",
            serde_json::json!(end.global_step * scores.len() as u64),
        ),
        ("episodes", serde_json::json!(end.episodes)),
        ("interrupted", serde_json::json!(end.interrupted)),
    ];
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("\"{k}\": {v}"))
        .collect();
    let text = format!("{{{}}}\n", body.join(", "));
    let path = dir.join("summary.json");
    crate::atomic::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// The member of the highest final score (the lowest index among equals); `None` where no
/// member finished an episode.
fn best(scores: &[f64]) -> Option<usize> {
    (0..scores.len())
        .filter(|&k| scores[k].is_finite())
        .max_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(b.cmp(&a)))
}

/// The population's closing lines on the console (rank 0 of the job's).
fn report(dir: &Path, scores: &[f64], end: &PopulationEnd) {
    let how = if end.interrupted {
        "stopped on request"
    } else {
        "finished"
    };
    let each: Vec<String> = (scores.iter().enumerate())
        .map(|(k, s)| match s.is_finite() {
            true => format!("{k}: {s:.2}"),
            false => format!("{k}: none"),
        })
        .collect();
    tracing::info!(
        "population {how}: {} members of {} steps each; final scores {}",
        scores.len(),
        end.global_step,
        each.join(", ")
    );
    if let Some(k) = best(scores) {
        tracing::info!(
            "final score {:.3}: member {k}'s, the best member's {} (summary.json final_score)",
            scores[k],
            end.rule
        );
    }
    tracing::info!("run directory: {} (members in members/<k>/)", dir.display());
}

fn named(paths: &[String], values: &[f64]) -> serde_json::Value {
    let map = paths
        .iter()
        .zip(values)
        .map(|(p, v)| (p.clone(), serde_json::json!(v)));
    serde_json::Value::Object(map.collect())
}

/// One line per member of exploit `exploit`: its objective, whom it copied (itself where it
/// kept its own) and the hyperparameters it goes on with. Appended whole, as `scalars.jsonl`'s
/// records are.
fn append_lineage(
    path: &Path,
    (exploit, step): (u64, u64),
    rows: &[Vec<f64>],
    steps: &[Step],
    paths: &[String],
) -> Result<()> {
    let mut text = String::new();
    for (member, (row, decided)) in rows.iter().zip(steps).enumerate() {
        let objective = if row[0].is_finite() {
            serde_json::json!(row[0])
        } else {
            serde_json::Value::Null
        };
        let entry = serde_json::json!({
            "exploit": exploit,
            "step": step,
            "member": member,
            "objective": objective,
            "source": decided.source,
            "values": named(paths, &decided.values),
        });
        text.push_str(&format!("{entry}\n"));
    }
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("appending to {}", path.display()))?;
    file.write_all(text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What seed 7 drew when these rules were written ([`a_seeds_draws_stay_what_they_were`]).
    const DRAWN: [(usize, bool); 8] = [
        (0, false),
        (0, false),
        (0, true),
        (0, false),
        (1, true),
        (1, true),
        (0, false),
        (0, true),
    ];
    const START: u64 = 702018;

    fn factor() -> ExploreRule {
        ExploreRule::Factor {
            factor: 1.25,
            min: 1e-4,
            max: 1e-2,
        }
    }

    #[test]
    fn a_factor_multiplies_or_divides_within_its_range() {
        assert_eq!(perturb(&factor(), 1e-3, 0.1), 1e-3 * 1.25);
        assert_eq!(perturb(&factor(), 1e-3, 0.9), 1e-3 / 1.25);
        assert_eq!(perturb(&factor(), 9e-3, 0.1), 1e-2);
        assert_eq!(perturb(&factor(), 1.1e-4, 0.9), 1e-4);
    }

    #[test]
    fn a_list_steps_to_a_neighbour_and_stays_at_its_ends() {
        let list = ExploreRule::Values(vec![0.0, 0.001, 0.01]);
        assert_eq!(perturb(&list, 0.001, 0.1), 0.01);
        assert_eq!(perturb(&list, 0.001, 0.9), 0.0);
        assert_eq!(perturb(&list, 0.01, 0.1), 0.01);
        assert_eq!(perturb(&list, 0.0, 0.9), 0.0);
        // A value the list does not hold moves from its nearest.
        assert_eq!(perturb(&list, 0.002, 0.1), 0.01);
    }

    #[test]
    fn the_bottom_fraction_copies_the_top_and_the_rest_keep_their_own() {
        let values: Vec<Vec<f64>> = (0..8).map(|k| vec![1e-3 * (k + 1) as f64 / 8.0]).collect();
        let objectives = [5.0, 1.0, f64::NAN, 7.0, 3.0, 8.0, 2.0, 6.0];
        let steps = plan(1, 0, 0.25, &objectives, &values, &[factor()]);
        // Ranked 5, 3, 7, 0, 4, 6, 1, 2 (NaN last): the bottom two copy one of the top two.
        for (member, step) in steps.iter().enumerate() {
            match member {
                1 | 2 => {
                    assert!([5, 3].contains(&step.source), "{member}: {step:?}");
                    let ratio = step.values[0] / values[step.source][0];
                    assert!((ratio - 1.25).abs() < 1e-12 || (ratio - 0.8).abs() < 1e-12);
                }
                _ => assert_eq!(
                    step,
                    &Step {
                        source: member,
                        values: values[member].clone()
                    }
                ),
            }
        }
        assert_eq!(steps, plan(1, 0, 0.25, &objectives, &values, &[factor()]));
        // Another exploit draws afresh: over several, both sources and both moves occur.
        let draws: Vec<Vec<Step>> = (0..16)
            .map(|e| plan(1, e, 0.25, &objectives, &values, &[factor()]))
            .collect();
        let sources: std::collections::BTreeSet<usize> =
            draws.iter().map(|s| s[1].source).collect();
        assert_eq!(sources.into_iter().collect::<Vec<_>>(), vec![3, 5]);
        let ups = draws
            .iter()
            .filter(|s| s[1].values[0] > values[s[1].source][0])
            .count();
        assert!(ups > 0 && ups < 16, "{ups}");
        // No exploit: everyone keeps its own; two members and any fraction: one copies.
        let kept = plan(1, 0, 0.0, &objectives, &values, &[factor()]);
        assert!(kept.iter().enumerate().all(|(k, s)| s.source == k));
        let two = plan(1, 0, 0.5, &[1.0, 2.0], &values[..2], &[factor()]);
        assert_eq!((two[0].source, two[1].source), (1, 1));
    }

    /// Over many members, a factor rule's starting values are log-uniform (their logarithms'
    /// median near the range's middle, the quarters near a quarter each) and a list's uniform.
    #[test]
    fn spread_starts_are_log_uniform_over_a_range_and_uniform_over_a_list() {
        let text = r#"experiment "p" {
            devices count=64 kind="cpu"
            algorithm "ppo"
            env "cartpole" { envs 64; }
            population {
                members 64
                explore {
                    algorithm.lr factor=1.25 min=1e-5 max=1e-1
                    algorithm.entropy-coef 0 0.001 0.01
                }
            }
        }"#;
        let exp = tandem_config::resolve(&tandem_config::Source::Stdin(text.into()), &[])
            .unwrap()
            .experiment;
        let all: Vec<Vec<f64>> = (0..64).map(|k| starting_values(&exp, k)).collect();
        // ln 1e-5 .. ln 1e-1, in quarters of the logarithm's range.
        let quarter = |x: f64| (((x.ln() - 1e-5f64.ln()) / (1e4f64.ln() / 4.0)) as usize).min(3);
        let mut quarters = [0; 4];
        for v in &all {
            quarters[quarter(v[1])] += 1;
        }
        assert!(
            quarters.iter().all(|&n| (8..=24).contains(&n)),
            "{quarters:?}"
        );
        let mut listed = [0; 3];
        for v in &all {
            listed[[0.0, 0.001, 0.01].iter().position(|&x| x == v[0]).unwrap()] += 1;
        }
        assert!(listed.iter().all(|&n| (10..=32).contains(&n)), "{listed:?}");
    }

    /// At most half the members move, however the fraction rounds (three members at 0.5: one).
    #[test]
    fn at_most_half_the_members_copy() {
        let values: Vec<Vec<f64>> = (0..3).map(|k| vec![1e-3 * (k + 1) as f64]).collect();
        let steps = plan(1, 0, 0.5, &[1.0, 2.0, 3.0], &values, &[factor()]);
        let moved: Vec<usize> = (0..3).filter(|&k| steps[k].source != k).collect();
        assert_eq!(moved, [0]);
        assert_eq!(steps[0].source, 2);
        // The second keeps its own values too: a bottom that reached it would move them, even
        // where it drew itself as its source.
        let second = Step {
            source: 1,
            values: values[1].clone(),
        };
        assert_eq!(steps[1], second);
    }

    /// A seed's draws are the same from version to version, so that a run resumed by another
    /// tandem continues its lineage: over eight exploits of seed 7, the worst member's source
    /// (one of the top two) and its move (up or down), and member 0's start, as this version
    /// first drew them.
    #[test]
    fn a_seeds_draws_stay_what_they_were() {
        let values: Vec<Vec<f64>> = (0..8).map(|k| vec![1e-3 * (k + 1) as f64]).collect();
        let objectives = [8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0];
        let drawn: Vec<(usize, bool)> = (0..8)
            .map(|e| {
                let step = &plan(7, e, 0.25, &objectives, &values, &[factor()])[7];
                (step.source, step.values[0] > values[step.source][0])
            })
            .collect();
        assert_eq!(drawn, DRAWN);
        let start = (unit(7, 0, 0) * 1e6) as u64;
        assert_eq!(start, START);
    }

    #[test]
    fn members_start_spread_over_the_rule_or_from_the_experiment() {
        let text = r#"experiment "p" {
            devices "cpu" "cpu" "cpu" "cpu"
            algorithm "ppo" { lr 3e-4; }
            env "cartpole"
            population {
                members 4
                explore {
                    algorithm.lr factor=1.25 min=1e-4 max=1e-2
                    algorithm.entropy-coef 0 0.001 0.01
                    algorithm.clip factor=1.2 min=0.1 max=0.3 spread=#false
                }
            }
        }"#;
        let exp = tandem_config::resolve(&tandem_config::Source::Stdin(text.into()), &[])
            .unwrap()
            .experiment;
        // Sorted by path: clip, entropy-coef, lr.
        let all: Vec<Vec<f64>> = (0..4).map(|k| starting_values(&exp, k)).collect();
        assert!(all.iter().all(|v| v[0] == 0.2), "{all:?}");
        assert!(
            all.iter().all(|v| [0.0, 0.001, 0.01].contains(&v[1])),
            "{all:?}"
        );
        assert!(all.iter().all(|v| (1e-4..=1e-2).contains(&v[2])), "{all:?}");
        let lrs: std::collections::BTreeSet<u64> = all.iter().map(|v| v[2].to_bits()).collect();
        assert_eq!(lrs.len(), 4, "each member draws its own: {all:?}");
        let member = member_experiment(&exp, 2, &all[2]).unwrap();
        match &member.algorithm {
            tandem_config::Algorithm::Ppo(p) => {
                assert_eq!((p.lr, p.entropy_coef, p.clip), (all[2][2], all[2][1], 0.2))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(member.devices.len(), 1);
        assert_eq!(member.population.members, None);
        assert_ne!(
            member.seed,
            member_experiment(&exp, 1, &all[2]).unwrap().seed
        );
    }
}
