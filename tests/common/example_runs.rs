//! End-to-end runs of a shipped example through the built `tandem` binary, shared by the
//! off-policy box learners' tests (tests/sac_train.rs, tests/td3_train.rs): training with
//! `--set`s, reading summary.json and checkpoints, refused configs, a resume that must end
//! where the uninterrupted run ends, and `tandem play`'s default and `--sample` acting.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tandem::algo::actions::ActionKind;
use tandem::algo::storage::replay::{ReplayBuffer, ReplaySpec};

/// A shipped experiment file, and the tag its tests' run directories carry.
pub struct Example {
    pub file: &'static str,
    pub tag: &'static str,
}

pub fn tandem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(args)
        .output()
        .expect("the tandem binary runs")
}

/// The number under `key` in summary.json's text.
pub fn number(summary: &str, key: &str) -> f64 {
    summary
        .split(&format!("\"{key}\": "))
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {summary}"))
}

/// The tensors of the newest checkpoint file of the run in `dir`, by name.
pub fn last_checkpoint(dir: &Path) -> Vec<(String, tch::Tensor)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pt"))
        .collect();
    files.sort();
    tch::Tensor::load_multi(files.last().unwrap()).unwrap()
}

impl Example {
    pub fn path(&self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(self.file)
    }

    /// A fresh run directory for test `name`.
    pub fn run_dir(&self, name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("tandem-{}-{name}-{}", self.tag, std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// Trains the example with `sets` into `dir`, asserting success; summary.json's text.
    pub fn train(&self, dir: &Path, sets: &[&str]) -> String {
        let file = self.path();
        let mut args = vec![
            "train",
            file.to_str().unwrap(),
            "--run-dir",
            dir.to_str().unwrap(),
        ];
        for s in ["log.console=quiet", "log.tensorboard=#false"]
            .iter()
            .chain(sets)
        {
            args.extend(["--set", s]);
        }
        let out = tandem(&args);
        assert!(
            out.status.success(),
            "training failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(dir.join("summary.json")).expect("summary.json")
    }

    /// Trains the example with `sets` on `world` ranks into a fresh directory and asserts the
    /// mean return of the last 20 episodes reaches `floor` after `gradient_steps` gradient
    /// steps; on more than one rank also that the ranks end bitwise identical.
    pub fn assert_learns(&self, sets: &[&str], world: usize, floor: f64, gradient_steps: u64) {
        let dir = self.run_dir(&format!("learns-{world}"));
        let devices = format!("devices={}", vec!["\"cpu\""; world].join(" "));
        let mut all = vec![devices.as_str()];
        all.extend(sets);
        let summary = self.train(&dir, &all);
        let last_20 = number(&summary, "last_20_return_mean");
        assert!(
            last_20 >= floor,
            "last-20 mean return {last_20} < {floor}: {summary}"
        );
        assert_eq!(number(&summary, "world_size"), world as f64);
        assert_eq!(number(&summary, "gradient_steps"), gradient_steps as f64);
        if world > 1 {
            let log = std::fs::read_to_string(dir.join("logs/rank-0.log")).unwrap();
            assert!(
                log.contains(&format!(
                    "all {world} ranks hold bitwise identical copies of"
                )),
                "no final agreement in the log:\n{log}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The refusals every box learner `algorithm` shares, each located: a discrete game, a
    /// warm-up shorter than a batch, a batch that does not split over the ranks, an image
    /// network, a game observed in pixels, a recurrent core, a separate torso.
    pub fn assert_refuses_what_a_box_learner_cannot_run(&self, algorithm: &str) {
        let err = self.refused(&["env=\"cartpole\""]);
        assert!(
            err.contains("config::action-mismatch")
                && err.contains(&format!("{algorithm} cannot act in cartpole"))
                && err.contains("takes box actions only"),
            "{err}"
        );
        let err = self.refused(&["algorithm.learning-starts=10"]);
        assert!(err.contains("learning starts before one batch"), "{err}");
        let err = self.refused(&["devices=\"cpu\" \"cpu\"", "algorithm.batch-size=127"]);
        assert!(
            err.contains("batch-size 127 cannot be split evenly"),
            "{err}"
        );
        let err = self.refused(&["network=\"nature-cnn\""]);
        assert!(
            err.contains(&format!("{algorithm} takes an mlp network")),
            "{err}"
        );
        let err = self.refused(&["env=\"minatar-breakout\""]);
        assert!(
            err.contains(&format!(
                "{algorithm} cannot read the pixel observations of minatar-breakout"
            )),
            "{err}"
        );
        let err = self.refused(&["network.core=\"lstm\""]);
        assert!(
            err.contains(&format!("{algorithm} has no recurrent policy")),
            "{err}"
        );
        let err = self.refused(&["network.actor-critic=\"separate\""]);
        assert!(
            err.contains(&format!(
                "{algorithm}'s actor and critics never share a torso"
            )),
            "{err}"
        );
    }

    /// Resolves the example with `sets` and returns stderr, asserting it was refused.
    pub fn refused(&self, sets: &[&str]) -> String {
        let file = self.path();
        let mut args = vec!["resolve", file.to_str().unwrap()];
        for s in sets {
            args.extend(["--set", s]);
        }
        let out = tandem(&args);
        assert!(!out.status.success(), "{sets:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// A run of a Pendulum example (2 environments) checkpointed at 1000 steps with its replay
    /// buffer (learning from step 500) and resumed to 2000 continues with the buffer and ends
    /// with every learner tensor bitwise equal to the uninterrupted run's.
    pub fn assert_resume_ends_where_the_uninterrupted_run_does(&self) {
        let spec = ReplaySpec {
            capacity: 4000,
            num_envs: 2,
            obs_len: 3,
            stack: 1,
            pixels: false,
            n_step: 1,
            gamma: 0.99,
            priority_alpha: None,
            actions: ActionKind::Box { dim: 1 },
        };
        let sets = [
            "algorithm.checkpoint-replay=#true",
            "algorithm.learning-starts=500",
            "algorithm.buffer-capacity=4000",
        ];
        let straight = self.run_dir("straight");
        let mut all = sets.to_vec();
        all.push("train.max-steps=2000");
        self.train(&straight, &all);
        let resumed = self.run_dir("resumed");
        all.pop();
        all.push("train.max-steps=1000");
        self.train(&resumed, &all);
        let replay = resumed.join("checkpoints/replay-rank0.bin");
        let saved = ReplayBuffer::load(spec.clone(), &replay).unwrap();
        assert_eq!((saved.steps_pushed(), saved.tag()), (500, 1000));
        let d = resumed.to_str().unwrap();
        let out = tandem(&["train", "--resume", d, "--max-steps", "2000", "--quiet"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let after = ReplayBuffer::load(spec, &replay).unwrap();
        // 1000 vector steps: 500 from before the resume and 500 new (an empty buffer would
        // hold 500).
        assert_eq!(after.steps_pushed(), 1000);
        let (a, b) = (last_checkpoint(&straight), last_checkpoint(&resumed));
        assert_eq!(a.len(), b.len());
        for ((na, ta), (nb, tb)) in a.iter().zip(&b) {
            assert_eq!(na, nb);
            if na.starts_with("meta.") {
                // The run's bookkeeping, not the learner's state: the config text (the resumed
                // run's says max-steps 1000) and the episodes this process saw (a resume counts
                // them afresh, as for DQN).
                continue;
            }
            assert!(
                ta.equal(tb),
                "{na} differs between the resumed and the uninterrupted run"
            );
        }
        assert!(
            a.iter().any(|(n, _)| n.contains("actor")),
            "{:?}",
            a.iter().map(|x| &x.0).collect::<Vec<_>>()
        );
        std::fs::remove_dir_all(&straight).unwrap();
        std::fs::remove_dir_all(&resumed).unwrap();
    }

    /// `tandem play` of a checkpoint after 2000 steps: the deterministic action by default
    /// (what `--greedy` also asks for), a reproducible stochastic one with `--sample`.
    pub fn assert_play_is_deterministic_and_samples_on_request(&self) {
        let dir = self.run_dir("play");
        self.train(&dir, &["train.max-steps=2000"]);
        let played = |flag: Option<&str>| {
            let mut args = vec!["play", dir.to_str().unwrap(), "--episodes", "1"];
            args.extend(flag);
            let out = tandem(&args);
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        // The first line says how play acts and why (the experiment's rule or the flag); the
        // episodes after it are what must agree.
        let episodes = |out: String| {
            let (how, rest) = out.split_once('\n').unwrap_or_default();
            (
                how.split(' ').take(2).collect::<Vec<_>>().join(" "),
                rest.to_string(),
            )
        };
        let mean = episodes(played(None));
        assert_eq!(mean.0, "acting greedy");
        assert_eq!(mean, episodes(played(Some("--greedy"))));
        let sampled = episodes(played(Some("--sample")));
        assert_eq!(sampled.0, "acting sampled");
        assert_ne!(
            mean.1, sampled.1,
            "a sample is not the deterministic action"
        );
        assert_eq!(
            sampled,
            episodes(played(Some("--sample"))),
            "a seeded sample repeats"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
