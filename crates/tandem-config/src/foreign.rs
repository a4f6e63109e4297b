//! Stable-Baselines3's and CleanRL's names for tandem's settings, declared once: a user who
//! writes `ent_coef` or `n_steps` is told tandem's name (and its section, where it lives in
//! another) instead of a list of every setting. Only unknown names are looked up here, so a
//! name tandem knows never reaches this table. docs/defaults.md compares the values.

use crate::model::{Algorithm, Learns};

/// One of tandem's settings (or a pair of them) as the other libraries name it.
struct Row {
    /// Stable-Baselines3's names for it, as its constructors spell them.
    sb3: &'static [&'static str],
    /// CleanRL's names, as its scripts' `Args` fields spell them (`--ent-coef` on its
    /// command line; kebab-case is matched too).
    cleanrl: &'static [&'static str],
    /// The algorithms whose learners have it.
    algorithms: Which,
    /// tandem's settings, `section.setting`.
    to: &'static [&'static str],
    /// What differs, when the meaning is not quite the same.
    note: Option<&'static str>,
    /// Whether tandem's setting means the same (else it is only the nearest, and the note
    /// says how to get their meaning from it).
    exact: bool,
}

/// The algorithms a row applies to.
#[derive(Debug, Clone, Copy)]
enum Which {
    /// Every algorithm: a setting outside the `algorithm` section, or one all of them have.
    Every,
    /// Those the algorithm table says learn so (on or off policy).
    Learning(Learns),
    /// These, by name: a setting only they have.
    Only(&'static [&'static str]),
}
use Which::{Every, Only};

const ON_POLICY: Which = Which::Learning(Learns::OnPolicy);
const OFF_POLICY: Which = Which::Learning(Learns::OffPolicy);

impl Which {
    fn includes(self, algorithm: &str) -> bool {
        match self {
            Every => true,
            Which::Learning(learns) => {
                Algorithm::facts_of(algorithm).is_some_and(|f| f.learns == learns)
            }
            Only(names) => names.contains(&algorithm),
        }
    }

    /// Their names, as a sentence lists them ("ppo, a2c and dqn"); empty for every algorithm.
    fn names(self) -> Vec<&'static str> {
        match self {
            Every => Vec::new(),
            Which::Learning(learns) => Algorithm::TABLE
                .iter()
                .filter(|(_, f)| f.learns == learns)
                .map(|&(name, _)| name)
                .collect(),
            Only(names) => names.to_vec(),
        }
    }
}

const fn row(
    sb3: &'static [&'static str],
    cleanrl: &'static [&'static str],
    algorithms: Which,
    to: &'static [&'static str],
) -> Row {
    Row {
        sb3,
        cleanrl,
        algorithms,
        to,
        note: None,
        exact: true,
    }
}

/// The same meaning, with a remark.
const fn noted(row: Row, note: &'static str) -> Row {
    Row {
        note: Some(note),
        ..row
    }
}

/// Not the same meaning: tandem's nearest setting, and how it relates.
const fn nearest(row: Row, note: &'static str) -> Row {
    Row {
        note: Some(note),
        exact: false,
        ..row
    }
}

static ROWS: &[Row] = &[
    row(
        &["learning_rate"],
        &["learning_rate"],
        Only(&["ppo", "a2c", "dqn"]),
        &["algorithm.lr"],
    ),
    noted(
        row(
            &["learning_rate"],
            &["learning_rate"],
            Only(&["sac", "td3"]),
            &["algorithm.actor-lr", "algorithm.critic-lr"],
        ),
        "tandem gives the actor and the critics a rate each",
    ),
    row(&[], &["policy_lr"], Only(&["sac"]), &["algorithm.actor-lr"]),
    row(&[], &["q_lr"], Only(&["sac"]), &["algorithm.critic-lr"]),
    row(
        &["ent_coef"],
        &["ent_coef"],
        ON_POLICY,
        &["algorithm.entropy-coef"],
    ),
    noted(
        row(&["ent_coef"], &[], Only(&["sac"]), &["algorithm.alpha"]),
        "`alpha \"auto\"` tunes it as \"auto\" does; \"auto_0.1\" is `alpha \"auto\"` with `initial-alpha 0.1`",
    ),
    nearest(
        row(&[], &["autotune"], Only(&["sac"]), &["algorithm.alpha"]),
        "`alpha \"auto\"` tunes the temperature, a number fixes it",
    ),
    row(
        &["vf_coef"],
        &["vf_coef"],
        ON_POLICY,
        &["algorithm.value-coef"],
    ),
    row(&["n_steps"], &["num_steps"], ON_POLICY, &["train.rollout"]),
    row(&["n_steps"], &[], Only(&["dqn"]), &["algorithm.n-step"]),
    nearest(
        row(
            &["batch_size"],
            &[],
            Only(&["ppo"]),
            &["algorithm.minibatches"],
        ),
        "tandem has no minibatch size but `minibatches`, a count: the count that gives minibatches \
         of batch_size transitions is envs * rollout / batch_size",
    ),
    row(
        &[],
        &["num_minibatches"],
        Only(&["ppo"]),
        &["algorithm.minibatches"],
    ),
    row(
        &["batch_size"],
        &["batch_size"],
        OFF_POLICY,
        &["algorithm.batch-size"],
    ),
    row(
        &["n_epochs"],
        &["update_epochs"],
        Only(&["ppo"]),
        &["algorithm.epochs"],
    ),
    row(
        &["clip_range"],
        &["clip_coef"],
        Only(&["ppo"]),
        &["algorithm.clip"],
    ),
    row(
        &["clip_range_vf"],
        &[],
        Only(&["ppo"]),
        &["algorithm.value-clip"],
    ),
    nearest(
        row(
            &[],
            &["clip_vloss"],
            Only(&["ppo"]),
            &["algorithm.value-clip"],
        ),
        "tandem's is the clip range itself (CleanRL clips at clip_coef), `#null` for none",
    ),
    row(
        &["gae_lambda"],
        &["gae_lambda"],
        ON_POLICY,
        &["algorithm.gae-lambda"],
    ),
    row(
        &["max_grad_norm"],
        &["max_grad_norm"],
        Every,
        &["algorithm.max-grad-norm"],
    ),
    row(
        &["target_kl"],
        &["target_kl"],
        Only(&["ppo"]),
        &["algorithm.target-kl"],
    ),
    row(
        &["normalize_advantage"],
        &["norm_adv"],
        ON_POLICY,
        &["algorithm.normalize-advantages"],
    ),
    nearest(
        row(
            &["use_rms_prop"],
            &[],
            Only(&["a2c"]),
            &["algorithm.optimizer"],
        ),
        "`optimizer \"rmsprop\"` or `optimizer \"adam\"`",
    ),
    row(
        &["rms_prop_eps"],
        &[],
        Only(&["a2c"]),
        &["algorithm.optimizer-eps"],
    ),
    row(
        &["total_timesteps"],
        &["total_timesteps"],
        Every,
        &["train.total-steps"],
    ),
    row(&["n_envs"], &["num_envs"], Every, &["env.envs"]),
    row(
        &["buffer_size"],
        &["buffer_size"],
        OFF_POLICY,
        &["algorithm.buffer-capacity"],
    ),
    row(
        &["learning_starts"],
        &["learning_starts"],
        OFF_POLICY,
        &["algorithm.learning-starts"],
    ),
    row(
        &["train_freq"],
        &["train_frequency"],
        OFF_POLICY,
        &["algorithm.train-frequency"],
    ),
    row(
        &["gradient_steps"],
        &[],
        OFF_POLICY,
        &["algorithm.gradient-steps"],
    ),
    nearest(
        row(
            &["target_update_interval"],
            &["target_network_frequency"],
            Only(&["dqn"]),
            &["algorithm.target-every"],
        ),
        "theirs counts environment steps, tandem's gradient steps: at one environment, \
         `train-frequency 4` and `gradient-steps 1`, their 1000 is tandem's 250",
    ),
    row(
        &["exploration_fraction"],
        &["exploration_fraction"],
        Only(&["dqn"]),
        &["algorithm.epsilon-fraction"],
    ),
    row(
        &["exploration_initial_eps"],
        &["start_e"],
        Only(&["dqn"]),
        &["algorithm.epsilon-start"],
    ),
    row(
        &["exploration_final_eps"],
        &["end_e"],
        Only(&["dqn"]),
        &["algorithm.epsilon-end"],
    ),
    row(
        &["policy_delay"],
        &["policy_frequency"],
        Only(&["td3"]),
        &["algorithm.policy-delay"],
    ),
    row(
        &["target_policy_noise"],
        &["policy_noise"],
        Only(&["td3"]),
        &["algorithm.target-policy-noise"],
    ),
    row(
        &["target_noise_clip"],
        &["noise_clip"],
        Only(&["td3"]),
        &["algorithm.target-noise-clip"],
    ),
    nearest(
        row(
            &["action_noise"],
            &["exploration_noise"],
            Only(&["td3"]),
            &["algorithm.exploration-noise"],
        ),
        "a standard deviation in units of the action box's half-range, not a noise object",
    ),
    row(
        &["target_entropy"],
        &[],
        Only(&["sac"]),
        &["algorithm.target-entropy"],
    ),
    noted(
        row(&["net_arch"], &[], Every, &["network.hidden"]),
        "`network \"mlp\" { hidden 64 64 }`; `actor-critic` says whether actor and critic share it",
    ),
    row(&["activation_fn"], &[], Every, &["network.activation"]),
    nearest(
        row(&["eval_freq"], &[], Every, &["eval.every"]),
        "counted in updates, or in global environment steps with `unit \"steps\"`",
    ),
    row(&["n_eval_episodes"], &[], Every, &["eval.episodes"]),
];

/// The help line for the unknown setting `name`, written in the section `written_in` (`""`
/// for the experiment's top level), when another library calls one of tandem's settings so;
/// `algorithm` is the algorithm in effect where it is known.
pub(crate) fn help(name: &str, written_in: &str, algorithm: Option<&str>) -> Option<String> {
    let snake = name.replace('-', "_");
    let rows: Vec<&Row> = ROWS.iter().filter(|r| r.names(&snake)).collect();
    let first = *rows.first()?;
    let Some(algorithm) = algorithm else {
        return Some(anywhere(&rows, &snake, written_in));
    };
    match rows.iter().find(|r| r.applies_to(algorithm)) {
        Some(row) => Some(row.help(&snake, written_in, "")),
        None => Some(format!(
            "{}; `algorithm \"{algorithm}\"` has no such setting",
            first.help(&snake, written_in, &first.for_algorithms())
        )),
    }
}

/// The help where the algorithm is not known yet (a top-level node, a `--set` path): the
/// first row, and what the others say for their algorithms.
fn anywhere(rows: &[&Row], snake: &str, written_in: &str) -> String {
    let mut text = rows[0].help(snake, written_in, &rows[0].for_algorithms());
    for other in &rows[1..] {
        text += &format!("; {}{}", other.targets(), other.for_algorithms());
    }
    text
}

impl Row {
    fn names(&self, snake: &str) -> bool {
        self.sb3.contains(&snake) || self.cleanrl.contains(&snake)
    }

    fn applies_to(&self, algorithm: &str) -> bool {
        self.algorithms.includes(algorithm)
    }

    /// ` for ppo and a2c`, or nothing for a setting of every algorithm.
    fn for_algorithms(&self) -> String {
        match &self.algorithms.names()[..] {
            [] => String::new(),
            names => format!(" for {}", crate::model::listed(names, "and")),
        }
    }

    /// `` `lr` ``, or `` `actor-lr` and `critic-lr` ``: tandem's names, without their section.
    fn targets(&self) -> String {
        let names: Vec<String> = self
            .to
            .iter()
            .map(|path| format!("`{}`", setting_of(path)))
            .collect();
        names.join(" and ")
    }

    /// `tandem calls this `entropy-coef` (Stable-Baselines3's and CleanRL's `ent_coef`)`, with
    /// the section it goes in when that is not where it was written, and the note.
    fn help(&self, snake: &str, written_in: &str, qualifier: &str) -> String {
        let whose = match (self.sb3.contains(&snake), self.cleanrl.contains(&snake)) {
            (true, true) => "Stable-Baselines3's and CleanRL's",
            (true, false) => "Stable-Baselines3's",
            _ => "CleanRL's",
        };
        let calls = if self.exact {
            "tandem calls this"
        } else {
            "tandem's nearest setting is"
        };
        let mut text = format!("{calls} {}{qualifier} ({whose} `{snake}`)", self.targets());
        let section = section_of(self.to[0]);
        if section != written_in {
            let paths: Vec<String> = self.to.iter().map(|p| format!("`{p}`")).collect();
            text += &format!(
                "; it goes in the `{section}` section: {}",
                paths.join(" and ")
            );
        }
        if let Some(note) = self.note {
            text += &format!("; {note}");
        }
        text
    }
}

fn section_of(path: &str) -> &str {
    path.split_once('.').map_or("", |(section, _)| section)
}

fn setting_of(path: &str) -> &str {
    path.split_once('.').map_or(path, |(_, setting)| setting)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    /// Every row names settings the schema has, for each algorithm it lists, so a renamed
    /// setting or algorithm cannot leave the table pointing at nothing.
    #[test]
    fn every_row_names_a_setting_of_its_algorithms() {
        for row in ROWS {
            for path in row.to {
                let section = schema::section(section_of(path)).expect(path);
                let name = setting_of(path);
                let kinds: Vec<Option<&schema::Kind>> = if section.name == "algorithm" {
                    let algorithms = match row.algorithms {
                        Every => section.kinds.iter().map(|k| k.name).collect(),
                        some => some.names(),
                    };
                    let kinds = algorithms.iter().map(|a| section.kind(a));
                    kinds
                        .map(|k| Some(k.expect("an algorithm of the table")))
                        .collect()
                } else {
                    vec![None]
                };
                for kind in kinds {
                    let fields: Vec<&str> = match kind {
                        Some(k) => section.fields(Some(k)).map(|f| f.name).collect(),
                        None => section
                            .common
                            .iter()
                            .chain(section.kinds.iter().flat_map(|k| k.fields.iter()))
                            .map(|f| f.name)
                            .collect(),
                    };
                    assert!(fields.contains(&name), "{path} for {:?}", row.algorithms);
                }
            }
        }
    }

    /// A foreign name tandem also uses would never be looked up (only unknown names are):
    /// its row would be dead.
    #[test]
    fn no_foreign_name_is_one_of_tandems() {
        let tandem: Vec<String> = schema::schema_settings()
            .iter()
            .map(|s| s.path.rsplit('.').next().unwrap_or_default().to_string())
            .collect();
        for row in ROWS {
            for name in row.sb3.iter().chain(row.cleanrl) {
                assert!(!tandem.contains(&name.to_string()), "{name}");
            }
        }
    }

    /// Two rows for one name and one algorithm would make the second unreachable.
    #[test]
    fn one_row_per_name_and_algorithm() {
        let algorithms: Vec<&str> = Algorithm::TABLE.iter().map(|&(name, _)| name).collect();
        for (i, a) in ROWS.iter().enumerate() {
            for b in &ROWS[i + 1..] {
                for name in a.sb3.iter().chain(a.cleanrl) {
                    let both = algorithms
                        .iter()
                        .any(|alg| a.applies_to(alg) && b.applies_to(alg));
                    assert!(!(b.names(name) && both), "{name}");
                }
            }
        }
    }
}
