//! Checks the resolver makes so that no config it accepts fails inside a worker: each test
//! writes a config that a worker would refuse (or mishandle) and asserts the located
//! diagnostic: its code, message, the line of its label and its help.

use tandem_config::{Diagnostic, Source, resolve};

/// Resolves `text` and returns its only diagnostic.
fn only_error(text: &str) -> Diagnostic {
    let diags = resolve(&Source::Stdin(text.to_string()), &[]).expect_err("the config is refused");
    let all: Vec<&Diagnostic> = diags.iter().collect();
    assert_eq!(all.len(), 1, "{}", diags.render(false));
    all[0].clone()
}

#[test]
fn an_on_policy_global_batch_of_one_transition_is_refused() {
    // The worker: src/algo/common.rs global_batch_stats needs at least 2 samples.
    for algorithm in ["ppo", "a2c"] {
        let minibatches = if algorithm == "ppo" {
            "minibatches 1"
        } else {
            ""
        };
        let d = only_error(&format!(
            "experiment \"x\" {{\n  algorithm \"{algorithm}\" {{ {minibatches} }}\n  env \"cartpole\" {{ envs 1 }}\n  train {{\n    rollout 1\n  }}\n}}\n"
        ));
        assert_eq!(d.code(), "config::too-small");
        assert_eq!(
            d.message(),
            "a global batch of 1 transition cannot be normalised"
        );
        assert_eq!(d.line_column().unwrap().0, 5, "the label is on `rollout 1`");
        assert!(d.help().unwrap().contains("at least 2"), "{:?}", d.help());
    }
    // Two transitions are enough.
    let ok = "experiment \"x\" {\n  algorithm \"a2c\"\n  env \"cartpole\" { envs 2 }\n  train { rollout 1 }\n}\n";
    assert!(resolve(&Source::Stdin(ok.into()), &[]).is_ok());
}

#[test]
fn a_replay_ring_too_short_for_the_stack_and_n_step_is_refused() {
    // The worker: src/algo/replay.rs ReplayBuffer::new needs more rows per environment than
    // frame-stack - 1 + n-step. Here 8 transitions over 4 environments are 2 rows, and
    // n-step 3 needs more than 3.
    let d = only_error(
        "experiment \"x\" {\n  algorithm \"dqn\" {\n    buffer-capacity 8\n    batch-size 4\n    learning-starts 4\n    n-step 3\n  }\n  env \"cartpole\" { envs 4 }\n}\n",
    );
    assert_eq!(d.code(), "config::too-small");
    assert_eq!(
        d.message(),
        "the replay buffer holds 2 steps per environment, too few to sample from"
    );
    assert_eq!(
        d.line_column().unwrap().0,
        3,
        "the label is on buffer-capacity"
    );
    assert!(
        d.help()
            .unwrap()
            .contains("need more than 3 steps per environment"),
        "{:?}",
        d.help()
    );
    // With frame-stack 4 and n-step 1, 4 rows are too few and 5 enough.
    let stacked = |capacity: usize| {
        format!(
            "experiment \"x\" {{\n  algorithm \"dqn\" {{ buffer-capacity {capacity}; batch-size 1; learning-starts 1 }}\n  env \"minatar-breakout\" {{\n    envs 1\n    wrappers {{ frame-stack 4 }}\n  }}\n  network \"minatar-cnn\"\n}}\n"
        )
    };
    assert_eq!(only_error(&stacked(4)).code(), "config::too-small");
    assert!(resolve(&Source::Stdin(stacked(5)), &[]).is_ok());
}

#[test]
fn frame_skip_after_frame_stack_is_refused_for_dqn() {
    // The worker: src/algo/replay.rs ReplayBuffer::push fails when a stacked observation does
    // not continue the stored stack, which a frame skip after the stack causes.
    let text = |algorithm: &str| {
        format!(
            "experiment \"x\" {{\n  algorithm \"{algorithm}\" {{ }}\n  env \"minatar-breakout\" {{\n    wrappers {{\n      frame-stack 2\n      frame-skip 2 max-pool=#false\n    }}\n  }}\n  network \"minatar-cnn\"\n}}\n"
        )
    };
    let d = only_error(&text("dqn"));
    assert_eq!(d.code(), "config::wrapper-mismatch");
    assert_eq!(
        d.message(),
        "`frame-skip` after `frame-stack` does not fit dqn's replay"
    );
    assert_eq!(d.line_column().unwrap().0, 6, "the label is on frame-skip");
    assert!(d.help().unwrap().contains("before `frame-stack`"));
    // On-policy algorithms keep whole observations: the same chain is accepted.
    assert!(resolve(&Source::Stdin(text("ppo")), &[]).is_ok());
}

#[test]
fn a_separate_critic_is_refused_for_dqn() {
    // The worker: src/train/off_policy.rs builds one Q-network and never reads actor-critic.
    let d = only_error(
        "experiment \"x\" {\n  algorithm \"dqn\"\n  env \"cartpole\"\n  network \"mlp\" {\n    actor-critic \"separate\"\n  }\n}\n",
    );
    assert_eq!(d.code(), "config::inconsistent");
    assert_eq!(d.message(), "dqn has no critic to separate");
    assert_eq!(d.line_column().unwrap().0, 5);
    assert!(d.help().unwrap().contains("one Q-network"));
}

#[test]
fn a_resize_that_enlarges_is_refused() {
    // The worker: crates/tandem-env/src/wrappers/mod.rs output_space refuses a resize larger
    // than its input (INTER_AREA only shrinks). Atari frames are 210x160.
    let text = |size: &str| {
        format!(
            "experiment \"x\" {{\n  env \"atari-breakout\" {{\n    wrappers {{\n      grayscale\n      resize {size}\n    }}\n  }}\n  network \"nature-cnn\"\n}}\n"
        )
    };
    let d = only_error(&text("height=84 width=200"));
    assert_eq!(d.code(), "config::wrapper-mismatch");
    assert_eq!(d.message(), "wrapper `resize` does not fit atari-breakout");
    assert_eq!(d.label(), Some("larger than the frame"));
    assert_eq!(d.line_column().unwrap().0, 5, "the label is on resize");
    assert!(d.help().unwrap().contains("only shrinks"), "{:?}", d.help());
    assert!(resolve(&Source::Stdin(text("height=210 width=160")), &[]).is_ok());
}

#[test]
fn a_gain_with_init_default_is_refused_at_the_gain() {
    // tch's default initialisation takes no gain, so the value would be ignored.
    for gain in ["torso-gain", "policy-gain", "value-gain"] {
        let d = only_error(&format!(
            "experiment \"x\" {{\n  algorithm \"ppo\"\n  env \"cartpole\"\n  network \"mlp\" {{\n    init \"default\"\n    {gain} 2.0\n  }}\n}}\n"
        ));
        assert_eq!(d.code(), "config::inconsistent");
        assert_eq!(
            d.message(),
            format!("`{gain}` has no effect with init \"default\"")
        );
        assert_eq!(d.line_column().unwrap().0, 6, "the label is on `{gain}`");
        assert!(d.help().unwrap().contains("orthogonal"), "{:?}", d.help());
    }
    // Gains at their defaults (as the canonical form writes them) are fine.
    let ok = "experiment \"x\" {\n  algorithm \"ppo\"\n  env \"cartpole\"\n  network \"mlp\" { init \"default\"; }\n}\n";
    assert!(resolve(&Source::Stdin(ok.into()), &[]).is_ok());
}

#[test]
fn a_policy_gain_under_dqn_is_refused() {
    let d = only_error(
        "experiment \"x\" {\n  algorithm \"dqn\"\n  env \"cartpole\"\n  network \"mlp\" {\n    policy-gain 0.1\n  }\n}\n",
    );
    assert_eq!(d.code(), "config::inconsistent");
    assert_eq!(d.message(), "dqn has no policy head");
    assert_eq!(d.line_column().unwrap().0, 5);
    assert!(d.help().unwrap().contains("value-gain"), "{:?}", d.help());
}

#[test]
fn rmsprop_alpha_with_adam_is_refused() {
    let d = only_error(
        "experiment \"x\" {\n  algorithm \"a2c\" {\n    optimizer \"adam\"\n    rmsprop-alpha 0.9\n  }\n  env \"cartpole\"\n}\n",
    );
    assert_eq!(d.code(), "config::inconsistent");
    assert_eq!(
        d.message(),
        "`rmsprop-alpha` has no effect with optimizer \"adam\""
    );
    assert_eq!(d.line_column().unwrap().0, 4);
    let ok =
        "experiment \"x\" {\n  algorithm \"a2c\" { optimizer \"adam\"; }\n  env \"cartpole\"\n}\n";
    assert!(resolve(&Source::Stdin(ok.into()), &[]).is_ok());
}
