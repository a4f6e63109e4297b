"""Training throughput of tandem's PPO on CartPole, MinAtar Breakout and Atari
Breakout, and where the wall time of each run goes.

For each game and thread count it runs `tandem train` once (one CPU rank) and
reports: environment steps per second of the training loop (summary.json), and
the phase times that tandem writes to TensorBoard per logging interval
(time/rollout_s, which contains time/inference_s; time/env_s; time/learn_s;
time/sync_s; time/log_s), summed over the run. The libtorch share is
(inference + learn) / wall time of the training loop: inference is the policy's
forward pass during the rollout, learn is the PPO update (GAE, forward,
backward, optimizer); the rest of the rollout is the environment stepping that
the forward pass does not hide, and copying observations into tensors. With
train.env-groups 2 (the Atari config's setting) the environments step on a
second thread while the policy runs, so time/env_s overlaps time/inference_s
and the rest of the rollout is what the wall clock still waits for.

Run with the TensorBoard venv's python (scripts/bench/training_throughput.sh).
Environment: TANDEM (binary, default target/release/tandem), THREADS (default
"1"; "auto" is tandem's own choice, the machine's cores divided by the ranks), ENV_GROUPS
(train.env-groups values to run, default: each config's own), GAMES (default "cartpole
minatar-breakout atari-breakout"; also "breakout-a2c" and "breakout-ppo", the shipped
experiments/breakout.kdl on its 2 ranks and experiments/breakout-ppo.kdl), ROUNDS (default 1:
every variant once per round, rounds one after the other, so variants interleave),
CARTPOLE_STEPS, MINATAR_STEPS, ATARI_STEPS, BREAKOUT_STEPS (global step limits, see defaults).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "scripts", "bench")
TAGS = ["time/rollout_s", "time/inference_s", "time/env_s", "time/learn_s", "time/sync_s", "time/log_s"]

GAMES = {
    # game: (config, default step limit, description)
    "cartpole": ("scripts/bench/ppo-cartpole.kdl", 100_000,
                 "8 envs x 32 steps, 20 epochs x 1 minibatch, MLP 64x64"),
    "minatar-breakout": ("experiments/minatar-breakout.kdl", 200_704,
                         "16 envs x 128 steps, 4 epochs x 8 minibatches, MinAtar CNN"),
    "atari-breakout": ("scripts/bench/atari-breakout-ppo.kdl", 65_536,
                       "8 envs x 128 steps, 4 epochs x 4 minibatches, Nature CNN, DeepMind wrappers"),
    "breakout-a2c": ("experiments/breakout.kdl", 20_480,
                     "the README's example: A2C, 2 CPU ranks x 32 envs x 8 steps, Nature CNN, RMSprop"),
    "breakout-ppo": ("experiments/breakout-ppo.kdl", 20_480,
                     "8 envs x 128 steps, 4 epochs x 4 minibatches, Nature CNN, DeepMind wrappers"),
}


def scalars(tb_dir):
    out = subprocess.run([sys.executable, os.path.join(HERE, "tb_scalars.py"), tb_dir, *TAGS],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def run(binary, game, threads, groups, steps, run_root):
    config, _, _ = GAMES[game]
    run_dir = os.path.join(run_root, f"{game}-t{threads}-g{groups}-{len(os.listdir(run_root))}")
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    group_set = [] if groups is None else ["--set", f"train.env-groups={groups}"]
    subprocess.run([binary, "train", os.path.join(ROOT, config), "--run-dir", run_dir, "--quiet",
                    "--set", f'threads="{threads}"' if threads == "auto" else f"threads={threads}", "--set", f"train.max-steps={steps}",
                    "--set", "checkpoint.every=#null", *group_set], check=True)
    process_wall = time.perf_counter() - t0
    load1 = os.getloadavg()[0]
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    phases = {tag: sum(v for _, v in series) for tag, series in scalars(os.path.join(run_dir, "tensorboard")).items()}
    return summary, phases, process_wall, (load0, load1)


def main():
    binary = os.environ.get("TANDEM", os.path.join(ROOT, "target", "release", "tandem"))
    threads_list = [t if t == "auto" else int(t) for t in os.environ.get("THREADS", "1").split()]
    rounds = int(os.environ.get("ROUNDS", "1"))
    games = os.environ.get("GAMES", " ".join(GAMES)).split()
    unknown = [g for g in games if g not in GAMES]
    if unknown:
        sys.exit(f"training_throughput: unknown game(s) {unknown}; known: {list(GAMES)}")
    groups_list = [None] if "ENV_GROUPS" not in os.environ else \
        [int(g) for g in os.environ["ENV_GROUPS"].split()]
    print(f"tandem: {binary}; {os.cpu_count()} CPUs visible")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-train-") as run_root:
        variants = [(game, threads, groups) for game in games for threads in threads_list
                    for groups in groups_list]
        for game, threads, groups in (v for _ in range(rounds) for v in variants):
            steps = int(os.environ.get(game.split("-")[0].upper() + "_STEPS", GAMES[game][1]))
            summary, ph, process_wall, loads = run(binary, game, threads, groups, steps, run_root)
            wall = summary["wall_seconds"]
            torch_s = ph["time/inference_s"] + ph["time/learn_s"]
            rest_s = ph["time/rollout_s"] - ph["time/inference_s"]
            label = "config's" if groups is None else str(groups)
            rows.append((game, threads, label, summary, ph, wall, torch_s, rest_s, loads))
            print(f"{game}, {threads} thread(s), env-groups {label}: {summary['global_step']} steps in "
                  f"{wall:.1f} s ({summary['steps_per_second']:,.0f} steps/s; process {process_wall:.1f} s), "
                  f"libtorch share {torch_s / wall:.1%}, load {loads[0]:.1f} -> {loads[1]:.1f}", flush=True)
    print()
    print("| game | threads | env-groups | steps | loop wall s | loop CPU s | steps/s | inference s | env stepping s | learn s | rest of rollout (wall) s | sync + log s | libtorch share (inference + learn) / wall | final return (last 20) | load avg |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for game, threads, label, summary, ph, wall, torch_s, rest_s, loads in rows:
        ret = summary["last_20_return_mean"]
        print(f"| {game} | {threads} | {label} | {summary['global_step']:,} | {wall:.1f} | {summary['cpu_seconds']:.1f} | "
              f"{summary['steps_per_second']:,.0f} | {ph['time/inference_s']:.1f} | {ph['time/env_s']:.1f} | "
              f"{ph['time/learn_s']:.1f} | {rest_s:.1f} | {ph['time/sync_s'] + ph['time/log_s']:.2f} | "
              f"{torch_s / wall:.1%} | {'-' if ret is None else f'{ret:.1f}'} | {loads[0]:.1f}-{loads[1]:.1f} |")
    print("\nsettings: " + "; ".join(f"{g}: {GAMES[g][2]}" for g in games))


if __name__ == "__main__":
    sys.exit(main())
