"""Continuous control, tandem against Stable-Baselines3 with the same settings, in one run.

Four cases: SAC and PPO on Pendulum-v1 and HalfCheetah-v5. The tandem side trains
experiments/<case>.kdl with `tandem train` (--set seed, threads, devices=cpu,
train.total-steps; env.python when the experiment runs gymnasium through the bridge);
the SB3 side trains the settings of the SB3 table below, which mirrors CleanRL's
defaults (sac_continuous_action.py, ppo_continuous_action.py) and must be kept equal to
the experiment files. Runs are sequential and alternate (tandem, SB3, tandem, ...) so
that outside load hits both alike; each side gets the same number of compute threads
(--threads, default 1: tandem's `threads` setting, torch.set_num_threads for SB3).

Reported per case and seed: environment steps per second of the training loop (tandem:
summary.json's `steps_per_second`, which excludes start-up; SB3: the wall time of
`learn`), their ratio, and the mean game score (sum of untouched rewards, so reward
normalisation does not change it) of the last 20 finished episodes. The learning curves
(every finished episode's score against the step it ended at, and the mean of the last
20 episodes there) go to <out>/curves.csv for the docs.

tandem's episode scores are read from its TensorBoard scalars (`episode/score_mean` at
each round where episodes ended, with scripts/bench/tb_scalars.py). A round can end
several episodes; the four cases' episodes all run to the time limit (Pendulum-v1 and
HalfCheetah-v5 never terminate), so with N environments stepping together and episodes
of L steps, N * floor(step / (N * L)) episodes have ended by `step`: that tells each
point's count. Checked: the counts must add up to summary.json's `episodes` and every point
must have the length L; a run that breaks this stops the script. Each episode of a point
is given the point's mean, so the curve is exact only where a point holds one episode; the
reported last-20 score is summary.json's `last_20_score_mean`, exact.

Run with the SB3 venv's python (scripts/bench/continuous_vs_sb3.sh does it):
  continuous_vs_sb3.py [--steps N] [--seeds "1 2"] [--cases pendulum-sac,halfcheetah-ppo]
                       [--sides tandem,sb3] [--threads N] [--out DIR]
Environment: TANDEM (binary, default target/release/tandem), TB_PYTHON (a python with
tensorboard, default .deps/venv-tb/bin/python), GYM_PYTHON (the workers' python for
gymnasium experiments, default .deps/venv-gym/bin/python).
"""

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Default total steps per case (--steps overrides all).
DEFAULT_STEPS = {
    "pendulum-sac": 20_000,
    "pendulum-ppo": 300_000,
    "halfcheetah-sac": 1_000_000,
    "halfcheetah-ppo": 1_000_000,
}
GYM_ID = {"pendulum": "Pendulum-v1", "halfcheetah": "HalfCheetah-v5"}

# SB3's side. Keep equal to experiments/<case>.kdl (the lead adjusts both together).
SAC = {
    # experiments/halfcheetah-sac.kdl
    "n_envs": 1,
    "net": [256, 256],  # actor and each of the two critics, ReLU
    "batch_size": 256,
    "buffer_size": 1_000_000,
    "learning_starts": 5_000,
    "policy_lr": 3e-4,  # actor
    "q_lr": 1e-3,  # critics and the entropy coefficient (CleanRL's alpha optimiser)
    "tau": 0.005,
    "gamma": 0.99,
    "train_freq": 1,
    "gradient_steps": 1,
    # Autotuned alpha towards -dim(A), starting at 1 as CleanRL's log_alpha = 0.
    "ent_coef": "auto_1.0",
    # CleanRL updates the actor twice every second step (policy_frequency 2); SB3's SAC
    # updates it every step, as tandem's does.
}
# experiments/pendulum-sac.kdl: 2 environments, 2 gradient steps per vector step (one per
# environment step), smaller networks and buffer, every learning rate 1e-3.
PENDULUM_SAC = dict(SAC, n_envs=2, net=[64, 64], batch_size=128, buffer_size=20_000,
                    learning_starts=1_000, policy_lr=1e-3, q_lr=1e-3, gradient_steps=2)
PPO = {
    # experiments/halfcheetah-ppo.kdl (include/ppo-mujoco.kdl)
    "n_envs": 1,
    "n_steps": 2048,
    "n_epochs": 10,
    "minibatches": 32,  # batch_size = n_envs * n_steps / minibatches
    "lr": 3e-4,  # annealed linearly to 0
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_range": 0.2,
    "clip_range_vf": 0.2,  # value-clip 0.2, as CleanRL's clip_vloss
    "ent_coef": 0.0,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "net": [64, 64],  # separate actor and critic, tanh
    "adam_eps": 1e-5,
    "log_std_init": 0.0,
    # VecNormalize: observations and rewards, clipped at 10 as tandem's wrappers do.
    "norm_obs": True,
    "norm_reward": True,
    "clip": 10.0,
}
# experiments/pendulum-ppo.kdl: rl-zoo's Pendulum settings without gSDE.
PENDULUM_PPO = dict(PPO, n_envs=4, n_steps=1000, minibatches=50, lr=1e-3, gamma=0.9,
                    clip_range_vf=None)
SB3_SETTINGS = {
    "pendulum-sac": PENDULUM_SAC,
    "halfcheetah-sac": SAC,
    "pendulum-ppo": PENDULUM_PPO,
    "halfcheetah-ppo": PPO,
}


def last_mean(scores, n=20):
    tail = scores[-n:]
    return statistics.mean(tail) if tail else None


def tb_series(run_dir, tags):
    tb_python = os.environ.get("TB_PYTHON", os.path.join(ROOT, ".deps", "venv-tb", "bin", "python"))
    out = subprocess.run(
        [tb_python, os.path.join(ROOT, "scripts", "bench", "tb_scalars.py"), os.path.join(run_dir, "tensorboard"), *tags],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


def expand_points(points, counts):
    """(step, mean) points, each standing for its count of episodes, as per-episode rows."""
    return [(step, value) for (step, value), n in zip(points, counts) for _ in range(n)]


def episode_counts(run_dir, summary, series):
    """How many episodes each TensorBoard point holds (see the module documentation)."""
    fail = lambda why: SystemExit(f"continuous_vs_sb3: {run_dir}: {why}")
    with open(os.path.join(run_dir, "resolved.kdl")) as f:
        envs = [int(m) for m in re.findall(r"^\s*envs\s+(\d+)", f.read(), re.M)]
    if len(envs) != 1:
        raise fail("cannot read the env block's `envs` from resolved.kdl")
    n = envs[0] * int(summary["world_size"])
    lengths = {round(v) for _, v in series["episode/length_mean"]}
    if len(lengths) != 1:
        raise fail(f"episodes of different lengths {sorted(lengths)}: cannot tell how many each point holds")
    span = n * lengths.pop()
    ended = [n * (step // span) for step, _ in series["episode/score_mean"]]
    counts = [b - a for a, b in zip([0] + ended, ended)]
    if sum(counts) != summary["episodes"] or 0 in counts:
        raise fail(f"{summary['episodes']} episodes do not fit {n} environments ending together")
    return counts


def run_tandem(binary, case, seed, steps, threads, run_root):
    config = os.path.join(ROOT, "experiments", f"{case}.kdl")
    if not os.path.exists(config):
        raise SystemExit(f"continuous_vs_sb3: {config} does not exist (the {case} experiment)")
    run_dir = os.path.join(run_root, f"tandem-{case}-seed{seed}")
    cmd = [binary, "train", config, "--run-dir", run_dir, "--quiet",
           "--set", f"seed={seed}", "--set", f"threads={threads}", "--set", "devices=cpu",
           "--set", f"train.total-steps={steps}"]
    with open(config) as f:
        if 'env "gymnasium"' in f.read():
            python = os.environ.get("GYM_PYTHON", os.path.join(ROOT, ".deps", "venv-gym", "bin", "python"))
            cmd += ["--set", f'env.python="{python}"']
    subprocess.run(cmd, check=True)
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    series = tb_series(run_dir, ["episode/score_mean", "episode/length_mean"])
    counts = episode_counts(run_dir, summary, series)
    curve = expand_points(series["episode/score_mean"], counts)
    return {
        "steps": summary["global_step"],
        "sps": summary["steps_per_second"],
        "curve": curve,
        # Exact, from the run itself: a TensorBoard point is the mean of all the episodes
        # that ended in its round, so the curve cannot tell the last 20 apart.
        "last20": summary["last_20_score_mean"],
    }


def episode_collector():
    """An SB3 callback that keeps (step, score) of every finished episode, from the
    infos of the Monitor wrapper that make_vec_env puts under any normalisation."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Collect(BaseCallback):
        def __init__(self):
            super().__init__()
            self.curve = []

        def _on_step(self):
            for info in self.locals.get("infos", []):
                if "episode" in info:
                    self.curve.append((self.num_timesteps, float(info["episode"]["r"])))
            return True

    return Collect()


def sb3_sac(env_id, seed, s):
    import torch
    from stable_baselines3 import SAC as Sb3Sac

    class SplitLrSac(Sb3Sac):
        """SAC with the critics and the entropy coefficient at q_lr (SB3 gives every
        optimiser the one learning rate, and sets it again before each update)."""

        def _update_learning_rate(self, optimizers):
            super()._update_learning_rate(optimizers)
            slow = [self.critic.optimizer] + ([self.ent_coef_optimizer] if self.ent_coef_optimizer else [])
            for optimizer in slow:
                for group in optimizer.param_groups:
                    group["lr"] = s["q_lr"]

    from stable_baselines3.common.env_util import make_vec_env

    return SplitLrSac(
        "MlpPolicy",
        make_vec_env(env_id, n_envs=s["n_envs"], seed=seed),
        learning_rate=s["policy_lr"],
        buffer_size=s["buffer_size"],
        learning_starts=s["learning_starts"],
        batch_size=s["batch_size"],
        tau=s["tau"],
        gamma=s["gamma"],
        train_freq=s["train_freq"],
        gradient_steps=s["gradient_steps"],
        ent_coef=s["ent_coef"],
        policy_kwargs=dict(net_arch=s["net"], activation_fn=torch.nn.ReLU),
        seed=seed,
        device="cpu",
        verbose=0,
    )


def sb3_ppo(env_id, seed, s):
    import torch
    from stable_baselines3 import PPO as Sb3Ppo
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    env = make_vec_env(env_id, n_envs=s["n_envs"], seed=seed)
    env = VecNormalize(env, norm_obs=s["norm_obs"], norm_reward=s["norm_reward"],
                       clip_obs=s["clip"], clip_reward=s["clip"], gamma=s["gamma"])
    return Sb3Ppo(
        "MlpPolicy",
        env,
        learning_rate=lambda progress_remaining: s["lr"] * progress_remaining,
        n_steps=s["n_steps"],
        batch_size=s["n_envs"] * s["n_steps"] // s["minibatches"],
        n_epochs=s["n_epochs"],
        gamma=s["gamma"],
        gae_lambda=s["gae_lambda"],
        clip_range=s["clip_range"],
        clip_range_vf=s["clip_range_vf"],
        normalize_advantage=True,
        ent_coef=s["ent_coef"],
        vf_coef=s["vf_coef"],
        max_grad_norm=s["max_grad_norm"],
        policy_kwargs=dict(
            net_arch=dict(pi=s["net"], vf=s["net"]),
            activation_fn=torch.nn.Tanh,
            ortho_init=True,
            log_std_init=s["log_std_init"],
            optimizer_kwargs=dict(eps=s["adam_eps"]),
        ),
        seed=seed,
        device="cpu",
        verbose=0,
    )


def run_sb3(case, seed, steps, threads):
    import torch

    torch.set_num_threads(threads)
    env_id = GYM_ID[case.split("-")[0]]
    make = sb3_sac if case.endswith("-sac") else sb3_ppo
    model = make(env_id, seed, SB3_SETTINGS[case])
    episodes = episode_collector()
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps, callback=episodes)
    wall = time.perf_counter() - t0
    return {
        "steps": model.num_timesteps,
        "sps": model.num_timesteps / wall,
        "curve": episodes.curve,
        "last20": last_mean([r for _, r in episodes.curve]),
    }


def fmt(v, spec=",.0f"):
    return "-" if v is None else format(v, spec)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, help="total environment steps of every run (default: per case)")
    p.add_argument("--seeds", default="1", help='seeds, space-separated (default "1")')
    p.add_argument("--cases", default=",".join(DEFAULT_STEPS), help="comma-separated cases")
    p.add_argument("--sides", default="tandem,sb3", help="tandem, sb3 or both (default)")
    p.add_argument("--threads", type=int, default=1,
                   help="compute threads of each side's training process (default 1)")
    p.add_argument("--out", default=os.path.join(ROOT, "target", "bench-continuous"),
                   help="folder for curves.csv and the runs (default target/bench-continuous)")
    args = p.parse_args()
    args.cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in args.cases if c not in DEFAULT_STEPS]
    if unknown:
        p.error(f"unknown case(s) {unknown}; known: {list(DEFAULT_STEPS)}")
    args.sides = [s for s in args.sides.split(",") if s]
    if not args.sides or any(s not in ("tandem", "sb3") for s in args.sides):
        p.error("--sides takes tandem, sb3 or tandem,sb3")
    args.seeds = [int(s) for s in args.seeds.split()]
    if args.threads < 1:
        p.error("--threads takes a count >= 1")
    return args


def main():
    args = parse_args()
    # Inherited by tandem's processes (its workers included) and read by this one's OpenMP and MKL.
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.threads)
    binary = os.environ.get("TANDEM", os.path.join(ROOT, "target", "release", "tandem"))
    import stable_baselines3
    import torch

    print(f"tandem: {binary}; stable-baselines3 {stable_baselines3.__version__}, torch {torch.__version__}; "
          f"seeds {args.seeds}; {args.threads} compute thread(s) a side, one run at a time")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    table = []
    loads = [os.getloadavg()[0]]
    run_root = tempfile.mkdtemp(prefix="runs-", dir=args.out)
    for case in args.cases:
        steps = args.steps or DEFAULT_STEPS[case]
        for seed in args.seeds:
            result = {}
            for side in args.sides:
                result[side] = (run_tandem(binary, case, seed, steps, args.threads, run_root) if side == "tandem"
                                else run_sb3(case, seed, steps, args.threads))
                loads.append(os.getloadavg()[0])
                r = result[side]
                print(f"{case} seed {seed} {side}: {r['steps']:,} steps, {r['sps']:,.1f} steps/s, "
                      f"last-20 score {fmt(r['last20'], '.1f')} ({len(r['curve'])} episodes)", flush=True)
                scores = []
                for step, score in r["curve"]:
                    scores.append(score)
                    rows.append([case, side, seed, step, f"{score:.4f}", f"{last_mean(scores):.4f}"])
            table.append((case, seed, steps, result))
    with open(os.path.join(args.out, "curves.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case", "side", "seed", "step", "episode_score", "last20_mean"])
        w.writerows(rows)
    print()
    print("| case | seed | steps | tandem steps/s | SB3 steps/s | ratio | tandem last-20 score | SB3 last-20 score |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for case, seed, steps, r in table:
        t, s = r.get("tandem"), r.get("sb3")
        # Two decimals: the speed target is a ratio of 2, and one decimal rounds 1.95 up to it.
        ratio = f"{t['sps'] / s['sps']:.2f}x" if t and s else "-"
        print(f"| {case} | {seed} | {steps:,} | {fmt(t and t['sps'])} | {fmt(s and s['sps'])} | {ratio} | "
              f"{fmt(t and t['last20'], '.1f')} | {fmt(s and s['last20'], '.1f')} |")
    print(f"\ncurves: {os.path.join(args.out, 'curves.csv')}; runs: {run_root}")
    print(f"load average (1 min) before/after each run: {', '.join(f'{l:.1f}' for l in loads)}")


if __name__ == "__main__":
    sys.exit(main())
