//! One final score, by one rule (the mean game score of a run's last 100 episodes), reported
//! alike by the four places that report it: each run's console (its last lines), its
//! `summary.json` (`final_score`), `tandem sweep`'s table, and `tandem plot`'s printed values;
//! each names the rule, and the console's progress says its window.

mod common;

use std::time::Duration;

use common::binary::{fresh_dir, tandem};

const RULE: &str = "mean game score of the last 100 episodes";

#[test]
fn the_console_summary_sweep_table_and_plot_report_the_same_final_score() {
    let dir = fresh_dir("final-score");
    let sweep = dir.join("sweep");
    let config = format!(
        "{}/tests/configs/ppo-cartpole.kdl",
        env!("CARGO_MANIFEST_DIR")
    );
    // Two seeds side by side (each console to its own file), not quiet: 16,384 steps are
    // about 500 CartPole episodes, so the last 100 are a window of a longer run.
    let done = common::finish(
        tandem()
            .args(["sweep", &config, "--seeds", "1..2", "--parallel", "2"])
            .args(["--max-steps", "16384", "--dir"])
            .arg(&sweep)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        Duration::from_secs(600),
    );
    assert!(done.status.success(), "{}", done.output);
    let table = std::fs::read_to_string(sweep.join("sweep.txt")).unwrap();
    assert!(
        table.contains(&format!("final score: {RULE} (summary.json final_score)")),
        "{table}"
    );
    let plotted = tandem()
        .arg("plot")
        .arg(&sweep)
        .arg("-o")
        .arg(dir.join("plot.svg"))
        .output()
        .unwrap();
    let plot = String::from_utf8_lossy(&plotted.stdout);
    assert!(plotted.status.success(), "{plot}");
    assert!(
        plot.contains(&format!("final score: {RULE} (summary.json final_score)")),
        "{plot}"
    );
    for seed in 1..=2 {
        let name = format!("ppo-cartpole-seed{seed}");
        let run = sweep.join(&name);
        let score = common::summary_number(&run, "final_score").unwrap();
        let episodes = common::summary_number(&run, "episodes").unwrap();
        assert!(episodes > 100.0, "{name}: {episodes} episodes");
        assert_eq!(
            common::summary_number(&run, "final_score_episodes"),
            Some(100.0)
        );
        let summary = std::fs::read_to_string(run.join("summary.json")).unwrap();
        assert!(
            summary.contains(&format!("\"final_score_rule\": \"{RULE}\"")),
            "{summary}"
        );
        // The curves' logged window and the old field agree where they should.
        assert_eq!(
            common::summary_number(&run, "recent_score_mean"),
            Some(score)
        );
        let shown = format!("{score:.3}");

        // The console: the final line says the rule, its window and the figure.
        let console = std::fs::read_to_string(sweep.join(format!("{name}.console.log"))).unwrap();
        assert!(
            console.contains(&format!(
                "final score {shown}: {RULE} (100 episodes averaged; summary.json final_score)"
            )),
            "{name}:\n{console}"
        );
        assert!(
            console.lines().any(
                |l| l.contains("training finished") && l.contains("over the last 100 episodes")
            ),
            "{name}:\n{console}"
        );
        let log = std::fs::read_to_string(run.join("logs/rank-0.log")).unwrap();
        assert!(
            log.lines().any(|l| l.contains("| recent score ")
                && l.contains(" (last ")
                && l.ends_with(" episodes)")),
            "the progress lines say their window:\n{log}"
        );

        // The sweep's table.
        let row: Vec<&str> = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("no row for {name}:\n{table}"))
            .split_whitespace()
            .collect();
        assert_eq!(row[4], shown, "{table}");

        // `tandem plot`.
        assert!(
            plot.contains(&format!("  {name} (seed {seed}): {shown}\n")),
            "{plot}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
