//! One exit code per kind of outcome, for every subcommand, held by one table (issue 70): the
//! user's mistakes found before anything runs exit 2 with words that name the path or setting,
//! and every subcommand's help states its exit status. (A run's failure is 1, an interruption
//! 130, a preemption 75: tests/train_signals.rs and the distributed tests hold those.)

mod common;

use std::time::Duration;

use common::binary::*;

#[test]
fn every_subcommand_exits_2_for_the_users_mistakes_and_says_so_in_its_help() {
    let dir = fresh_dir("exit-codes");
    let out = train(
        &config("ppo-cartpole.kdl"),
        &dir,
        &["train.max-steps=512"],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out));
    let run_dir = dir.to_str().unwrap().to_string();
    let empty = fresh_dir("exit-codes-empty");
    std::fs::create_dir_all(&empty).unwrap();
    let empty = empty.to_str().unwrap().to_string();
    let cartpole = config("ppo-cartpole.kdl");
    let missing = "/nonexistent/tandem-exit-codes";
    let bmp = format!("{run_dir}/plot.bmp");
    let png = format!("{run_dir}/plot.png");
    let module = format!("{run_dir}/policy.pt");
    let onnx = format!("{run_dir}/policy.onnx");
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec!["train", missing],
            2,
            "cannot read /nonexistent/tandem-exit-codes",
        ),
        (
            vec!["train", &cartpole, "--set", "algorithm.nope=1"],
            2,
            "unknown setting `nope`",
        ),
        (
            vec!["validate", missing],
            1,
            "cannot read /nonexistent/tandem-exit-codes",
        ),
        (
            vec!["resolve", missing],
            1,
            "cannot read /nonexistent/tandem-exit-codes",
        ),
        (
            vec!["play", missing],
            2,
            "/nonexistent/tandem-exit-codes does not exist",
        ),
        (vec!["play", &empty], 2, "holds no checkpoint"),
        (
            vec!["play", &run_dir, "--checkpoint", "99"],
            2,
            "holds no checkpoint of update 99",
        ),
        (
            vec!["play", &run_dir, "--checkpoint", "abc"],
            2,
            "--checkpoint takes an update number",
        ),
        (
            vec!["play", &run_dir, "--episodes", "0"],
            2,
            "--episodes must be at least 1",
        ),
        (
            vec!["play", &run_dir, "--random", "prey"],
            2,
            "the run trained one policy",
        ),
        (
            vec!["play", &run_dir, "--random-agents", "x"],
            2,
            "has one agent",
        ),
        (vec!["export", missing, "-o", &module], 2, "does not exist"),
        (
            vec!["export", &run_dir, "--checkpoint", "99", "-o", &module],
            2,
            "holds no checkpoint of update 99",
        ),
        (
            vec![
                "export",
                &run_dir,
                "--python",
                "/nonexistent/python",
                "-o",
                &onnx,
            ],
            2,
            "--python /nonexistent/python: cannot run it",
        ),
        (vec!["plot", missing, "-o", &png], 2, "does not exist"),
        (
            vec!["plot", &run_dir, "-o", &png, "--smooth", "0"],
            2,
            "--smooth must be at least 1",
        ),
        (
            vec!["plot", &run_dir, "-o", &bmp],
            2,
            "name a .png, .svg or .pdf file",
        ),
        (vec!["sweep", missing], 2, "the sweep did not start"),
        (
            vec!["sweep", "--resume", &run_dir],
            2,
            "holds no sweep.json (a sweep writes it when it starts)",
        ),
        (
            vec!["sweep", &cartpole, "--parallel", "0"],
            2,
            "--parallel must be at least 1",
        ),
        (
            vec!["sweep", &cartpole, "--seeds", "5..1"],
            2,
            "the range runs backwards",
        ),
    ];
    let mut wrong = Vec::new();
    for (args, code, words) in &cases {
        let out = run(tandem().args(args), Duration::from_secs(60));
        let said = text(&out);
        if out.status.code() != Some(*code) || !said.contains(words) {
            wrong.push(format!(
                "{args:?}: exit {:?}, expected {code} and `{words}`:\n{said}",
                out.status.code()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    for command in [
        "train", "validate", "resolve", "sweep", "plot", "play", "export",
    ] {
        let out = run(tandem().args([command, "--help"]), Duration::from_secs(30));
        let help = text(&out);
        assert!(
            help.contains("Exit status:") && help.contains("2    a mistake on the command line"),
            "{command} --help:\n{help}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
