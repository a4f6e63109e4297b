"""Learning parity suite (issue 35): tandem against CleanRL, Stable-Baselines3 and BenchMARL on
the same settings, several seeds a side, the score compared.

How to run (scripts/bench/parity/run.sh sets the interpreters and checks they exist):

  scripts/bench/parity/run.sh --cases cartpole-ppo,lunarlander-ppo --seeds 1-5 --jobs 2
  scripts/bench/parity/run.sh --report                 # only the table, from saved results
  scripts/bench/parity/run.sh --list                   # the cases, their settings and notes
  scripts/bench/parity/run.sh --progress               # runs without a result: how far they got

Each (case, side, seed) is one training process: tandem's (the binary named by TANDEM,
default .deps/parity-bin/tandem) with the case's KDL file and `--set` overrides, or the
peer's, unmodified: CleanRL 1.2.0's single file run as `python -m cleanrl.<script>` from the
installed PyPI package in a fresh working directory (it writes runs/ there), SB3 through
scripts/bench/parity/sb3_peer.py, or BenchMARL through scripts/bench/parity/benchmarl_peer.py
(its API, configured by the case; its code as installed). Every process gets one compute thread: tandem
`threads 1`; the peers OMP_NUM_THREADS=1 and MKL_NUM_THREADS=1 (CleanRL's files do not set
torch's thread count, and changing them is not allowed); gymnasium-bridge runs one worker.
`--jobs` processes run at once (default 2). A finished process leaves
scripts/bench/parity/results/<case>/<side>-seed<N>-<steps>.json (scores, curve, wall and CPU
time, the CPU, the command, the tandem binary's SHA-256 and its learner's last diagnostics); a
result already there is not run again. The results are committed: a case's seeds take hours, so
they are run over several sessions on whichever machine each has, and the report adds up what
the repository holds (.deps/ does not travel between machines). Run directories stay under
.deps/parity-runs/ for inspection. PARITY_RESULTS and PARITY_RUNS name other directories for
both (an ablation of two tandem builds on one case).

What it prints, per case: for the peer and for tandem, the number of seeds, the final score's
mean and 95% interval, the verdict, and the score at ten evenly spaced points of the run.
  - Score: the game's untransformed episodic return. CleanRL: `charts/episodic_return` of its
    TensorBoard file (its RecordEpisodeStatistics wrapper, outside every reward transform).
    SB3: the Monitor's episode return (what ep_info_buffer holds). BenchMARL (multi-agent):
    an episode's per-agent return (one agent's rewards summed over the episode), averaged over
    the agents, one value per episode of an environment. tandem: the episode
    *score* (`last_20_score_mean` of summary.json, `episode/score_mean` in TensorBoard), the
    sum of the game's rewards before clip-reward or normalize-reward; not `train/return_*`
    or `recent_return_mean`, which are the returns of the transformed rewards.
  - Final score of a seed: the mean score of the last 20 episodes that finished. Caveat:
    CleanRL 1.2.0's ppo.py and ppo_atari_envpool.py log at most one finished episode per
    vector step (their info loop stops at the first), so when two environments finish on
    the same step one is missing from its last 20.
  - 95% interval: Student-t over the seeds' final scores, mean +- t(0.975, n-1) * sd / sqrt(n);
    none with one seed.
  - Verdict: PASS when tandem's mean is inside the peer's interval or above it, FAIL when it is
    below; "n/a" until both sides have at least two seeds.
  - Curve: at each tenth of the run, the mean score of the episodes that finished in that tenth,
    averaged over seeds. tandem logs one `episode/score_mean` per update (the mean of the
    episodes that ended in that update); those per-update means are averaged unweighted, so
    where several episodes end in one update the curve is approximate (the final score is not:
    summary.json's is exact).
"""

import argparse
import glob
import hashlib
import json
import math
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
DEPS = os.path.join(ROOT, ".deps")
# PARITY_RESULTS and PARITY_RUNS move both elsewhere: an ablation (two tandem builds on the
# same case) keeps each build's results apart from the suite's.
RESULTS = os.environ.get("PARITY_RESULTS", os.path.join(HERE, "results"))
RUNS = os.environ.get("PARITY_RUNS", os.path.join(DEPS, "parity-runs"))

PYTHONS = {
    # CleanRL 1.2.0 files on gym 0.23.1 (ppo.py, sac/td3_continuous_action.py): venv.sh cleanrl.
    "cleanrl": os.path.join(DEPS, "venv-parity-cleanrl", "bin", "python"),
    # CleanRL 1.2.0 files on gymnasium 0.28 (dqn.py, ppo_continuous_action.py): venv.sh
    # cleanrl-gymnasium.
    "cleanrl-gymnasium": os.path.join(DEPS, "venv-parity-cleanrl-gymnasium", "bin", "python"),
    # ppo_atari_envpool.py: scripts/bench/cleanrl_venv.sh.
    "cleanrl-envpool": os.path.join(DEPS, "venv-cleanrl", "bin", "python"),
    # SB3 2.9.2: scripts/bench/sb3_venv.sh.
    "sb3": os.path.join(DEPS, "venv-sb3", "bin", "python"),
    # BenchMARL 1.5.2 (torchrl 0.11.1, PettingZoo 1.27.0 with mpe2 1.1.1): benchmarl_venv.sh.
    "benchmarl": os.path.join(DEPS, "venv-benchmarl", "bin", "python"),
    # tandem's gymnasium bridge workers: Box2D (venv.sh gym) and MuJoCo (scripts/gym-venv-setup.sh).
    "bridge-box2d": os.path.join(DEPS, "venv-parity-gym", "bin", "python"),
    "bridge-mujoco": os.path.join(DEPS, "venv-gym", "bin", "python"),
}
MAKE_VENV = {
    "cleanrl": "scripts/bench/parity/venv.sh cleanrl",
    "cleanrl-gymnasium": "scripts/bench/parity/venv.sh cleanrl-gymnasium",
    "cleanrl-envpool": "scripts/bench/cleanrl_venv.sh",
    "sb3": "scripts/bench/sb3_venv.sh",
    "benchmarl": "scripts/bench/parity/benchmarl_venv.sh",
    "bridge-box2d": "scripts/bench/parity/venv.sh gym",
    "bridge-mujoco": "scripts/gym-venv-setup.sh",
}

LAST_N = 20
POINTS = 10


def case(peer, peer_python, peer_args, kdl, steps, seeds, tandem_set=(), bridge=None, notes="",
         peer_from=None):
    return {
        # A variant that changes only tandem's side shares the peer runs of this case.
        "peer_from": peer_from,
        "peer": peer,                # "cleanrl:<module>", "sb3:<algo>" or "benchmarl:<algo>"
        "peer_python": peer_python,  # key of PYTHONS
        "peer_args": list(peer_args),
        "kdl": kdl,                  # under scripts/bench/parity/
        "tandem_set": list(tandem_set),
        "bridge": bridge,            # key of PYTHONS for env.python, or None
        "steps": steps,
        "seeds": seeds,              # default seed count
        "notes": notes,
    }


# tandem's default layout for PPO's MLPs was one shared torso until issue 35; these variants
# keep the cases that showed it failing CleanRL's settings.
SHARED = ['network.actor-critic="shared"']

# network.precision "bfloat16" (issue 39): the same cases with tandem's image torso computing on
# bfloat16 copies; a speed setting, so it must learn as float32 does against the same peer.
BF16 = ['network.precision="bfloat16"']

# BenchMARL's side of the simple_spread cases (spread-ippo, spread-mappo): the task, the
# experiment and the algorithm's settings, and the model, as benchmarl_peer.py takes them.
BENCHMARL_SPREAD = [
    "--env", "pettingzoo", "--task", "simple_spread", "--mpe2", "simple_spread_v3",
    "--task-config", json.dumps({"N": 3, "local_ratio": 0.5, "max_cycles": 25}),
    "--experiment", json.dumps({
        "share_policy_params": True, "prefer_continuous_actions": False,
        "on_policy_collected_frames_per_batch": 3200, "on_policy_n_envs_per_worker": 25,
        "on_policy_n_minibatch_iters": 4, "on_policy_minibatch_size": 800,
        "lr": 2.5e-4, "gamma": 0.99, "clip_grad_norm": True, "clip_grad_val": 0.5}),
    "--algorithm", json.dumps({
        "share_param_critic": True, "clip_epsilon": 0.2, "entropy_coef": 0.01,
        "critic_coef": 1.0, "loss_critic_type": "l2", "lmbda": 0.95,
        "minibatch_advantage": False}),
    "--model", json.dumps({"num_cells": [64, 64], "activation_class": "Tanh",
                           "layer_class": "Linear"}),
]

# Settings are each peer's defaults written as values (reading the peer's source for its
# defaults; nothing of its code is here). Where tandem cannot express a peer setting, the
# KDL file or the note says so.
CASES = {
    "cartpole-ppo": case(
        "cleanrl:ppo", "cleanrl", ["--env-id", "CartPole-v1"],
        "ppo-classic.kdl", 500_000, 5,
        notes="ppo.py defaults; tandem's default network (separate MLPs, ppo.py's layout)"),
    "cartpole-ppo-shared": case(
        "cleanrl:ppo", "cleanrl", ["--env-id", "CartPole-v1"],
        "ppo-classic.kdl", 500_000, 5, SHARED, peer_from="cartpole-ppo",
        notes="as cartpole-ppo with actor-critic \"shared\" (tandem's default before issue 35)"),
    "acrobot-ppo": case(
        "cleanrl:ppo", "cleanrl", ["--env-id", "Acrobot-v1"],
        "ppo-classic.kdl", 500_000, 5, ['env="acrobot"'],
        notes="ppo.py defaults; built-in acrobot (exact to gymnasium's Acrobot-v1)"),
    "acrobot-ppo-shared": case(
        "cleanrl:ppo", "cleanrl", ["--env-id", "Acrobot-v1"],
        "ppo-classic.kdl", 500_000, 5, ['env="acrobot"'] + SHARED, peer_from="acrobot-ppo"),
    "lunarlander-ppo": case(
        "cleanrl:ppo", "cleanrl",
        ["--env-id", "LunarLander-v2", "--learning-rate", "3e-4"],
        "ppo-lunarlander.kdl", 200_000, 5, bridge="bridge-box2d",
        notes="issue 35's settings (ppo.py defaults, lr 3e-4); peer gym 0.23.1 LunarLander-v2, "
              "tandem gymnasium 1.4.0 LunarLander-v3 (same dynamics with wind off); "
              "tandem's default network"),
    "lunarlander-ppo-shared": case(
        "cleanrl:ppo", "cleanrl",
        ["--env-id", "LunarLander-v2", "--learning-rate", "3e-4"],
        "ppo-lunarlander.kdl", 200_000, 5, SHARED, bridge="bridge-box2d",
        peer_from="lunarlander-ppo",
        notes="as lunarlander-ppo with actor-critic \"shared\" (issue 35's finding)"),
    "pendulum-ppo": case(
        "cleanrl:ppo_continuous_action", "cleanrl-gymnasium", ["--env-id", "Pendulum-v1"],
        "ppo-continuous.kdl", 1_000_000, 5, ['env="pendulum"'],
        notes="ppo_continuous_action.py defaults (gymnasium 0.28.1 Pendulum-v1); built-in "
              "pendulum, exact to gymnasium's"),
    "pendulum-ppo-shared": case(
        "cleanrl:ppo_continuous_action", "cleanrl-gymnasium", ["--env-id", "Pendulum-v1"],
        "ppo-continuous.kdl", 1_000_000, 5, ['env="pendulum"'] + SHARED,
        peer_from="pendulum-ppo"),
    "halfcheetah-ppo": case(
        "cleanrl:ppo_continuous_action", "cleanrl-gymnasium", ["--env-id", "HalfCheetah-v4"],
        "ppo-continuous.kdl", 1_000_000, 5,
        ['env="gymnasium"', 'env.id="HalfCheetah-v5"', "env.workers=1", "env.envs=1"],
        bridge="bridge-mujoco",
        notes="ppo_continuous_action.py defaults; the peer's gymnasium 0.28 has HalfCheetah-v4, "
              "tandem runs gymnasium 1.4's v5 (same model and reward; v5 fixes details)"),
    "halfcheetah-ppo-shared": case(
        "cleanrl:ppo_continuous_action", "cleanrl-gymnasium", ["--env-id", "HalfCheetah-v4"],
        "ppo-continuous.kdl", 1_000_000, 5,
        ['env="gymnasium"', 'env.id="HalfCheetah-v5"', "env.workers=1", "env.envs=1"] + SHARED,
        bridge="bridge-mujoco", peer_from="halfcheetah-ppo"),
    "cartpole-dqn": case(
        "cleanrl:dqn", "cleanrl-gymnasium", ["--env-id", "CartPole-v1"],
        "dqn-cartpole.kdl", 500_000, 5,
        notes="dqn.py defaults (gymnasium 0.28.1 CartPole-v1)"),
    "minatar-breakout-dqn": case(
        "sb3:dqn", "sb3", ["--env-id", "MinAtar/Breakout-v1", "--import", "minatar.gym:register_envs",
                           "--json", json.dumps({"learning_rate": 2.5e-4, "buffer_size": 100_000,
                                                 "learning_starts": 5000, "batch_size": 32,
                                                 "train_freq": 1, "target_update_interval": 1000,
                                                 "exploration_fraction": 0.1,
                                                 "exploration_final_eps": 0.01,
                                                 "gradient_steps": 1, "gamma": 0.99})],
        "dqn-minatar.kdl", 3_000_000, 3,
        notes="CleanRL 1.2.0 has no MinAtar script: the peer is SB3's DQN on minatar 1.0.15's "
              "gymnasium env (sb3_venv.sh installs it; the same game as tandem's: 3 actions, "
              "sticky actions 0.1, no time limit). SB3's CNN is NatureCNN-shaped and refuses "
              "10x10 planes, so both sides use the same MLP on the flattened planes"),
    "hopper-sac": case(
        "sb3:sac", "sb3", ["--env-id", "Hopper-v5"], "sac.kdl", 200_000, 3,
        ['env.id="Hopper-v5"'], bridge="bridge-mujoco",
        notes="SB3 SAC defaults (CleanRL 1.2.0's sac_continuous_action.py needs gym 0.23 with "
              "mujoco-py, not installable from PyPI alone)"),
    "halfcheetah-sac": case(
        "sb3:sac", "sb3", ["--env-id", "HalfCheetah-v5"], "sac.kdl", 200_000, 3,
        ['env.id="HalfCheetah-v5"'], bridge="bridge-mujoco", notes="SB3 SAC defaults"),
    "hopper-td3": case(
        "sb3:td3", "sb3", ["--env-id", "Hopper-v5"], "td3.kdl", 200_000, 3,
        ['env.id="Hopper-v5"'], bridge="bridge-mujoco",
        notes="SB3 TD3 defaults plus Gaussian exploration noise 0.1 (CleanRL's and rl-zoo's; "
              "SB3's own default is none)"),
    "halfcheetah-td3": case(
        "sb3:td3", "sb3", ["--env-id", "HalfCheetah-v5"], "td3.kdl", 200_000, 3,
        ['env.id="HalfCheetah-v5"'], bridge="bridge-mujoco",
        notes="as hopper-td3"),
    "breakout-ppo-atari": case(
        "cleanrl:ppo_atari_envpool", "cleanrl-envpool", ["--env-id", "Breakout-v5"],
        "ppo-atari.kdl", 10_000_000, 3,
        notes="ppo_atari_envpool.py defaults; hours a seed on CPU: state the steps run "
              "(--steps)"),
    "pong-ppo-atari": case(
        "cleanrl:ppo_atari_envpool", "cleanrl-envpool", ["--env-id", "Pong-v5"],
        "ppo-atari.kdl", 10_000_000, 3, ['env="atari-pong"'],
        notes="as breakout-ppo-atari; Pong has no lives, so the preset's episodic-life is "
              "left out of tandem's resolved chain (CleanRL's EpisodicLifeEnv does nothing there)"),
    "breakout-ppo-atari-bf16": case(
        "cleanrl:ppo_atari_envpool", "cleanrl-envpool", ["--env-id", "Breakout-v5"],
        "ppo-atari.kdl", 10_000_000, 3, BF16, peer_from="breakout-ppo-atari",
        notes="as breakout-ppo-atari with tandem's Nature CNN in bfloat16 "
              "(network.precision; float32 weights and gradients), against the same peer runs"),
    # Multi-agent: tandem's one PPO policy over MPE simple_spread's three agents against
    # BenchMARL's IPPO with shared parameters. Steps are agent steps on both sides (tandem's
    # unit; benchmarl_peer.py runs steps / 3 of BenchMARL's environment frames).
    "spread-ippo": case(
        "benchmarl:ippo", "benchmarl", BENCHMARL_SPREAD,
        "ppo-mpe-spread.kdl", 1_920_000, 3,
        notes="BenchMARL 1.5.2 IPPO (torchrl 0.11.1, tensordict 0.11.0, torch 2.13.0 CPU; "
              "benchmarl_venv.sh) on PettingZoo 1.27's simple_spread_v3 from mpe2 1.1.1 (the "
              "same MPE tandem's port is exact to; benchmarl_peer.py puts it in PettingZoo's "
              "table of environments, where torchrl's PettingZooEnv looks it up). "
              "Mapping, BenchMARL -> tandem (ppo-mpe-spread.kdl): N 3, local_ratio 0.5, "
              "max_cycles 25, discrete (prefer_continuous_actions False) -> env "
              "mpe-simple-spread defaults; share_policy_params, share_param_critic -> one "
              "policy and one critic over the agents' rows; 25 envs (SerialEnv), "
              "frames_per_batch 3200 environment frames -> envs 25, rollout 128 (9,600 agent "
              "rows: BenchMARL's frames count environment steps, tandem's steps agent steps, "
              "x3); n_minibatch_iters 4 (passes over the batch) x minibatch_size 800 frames "
              "-> epochs 4, minibatches 4 (2,400 rows); lr 2.5e-4, no schedule -> anneal-lr "
              "#false; adam_eps 1e-6 (default) -> adam-eps 1e-6; gamma 0.99, lmbda 0.95, "
              "clip_epsilon 0.2, entropy_coef 0.01 -> the same; critic_coef 1.0 on torchrl's "
              "unhalved squared error -> value-coef 2.0 (tandem halves it); ClipPPOLoss "
              "normalize_advantage False, clip_value None -> normalize-advantages #false, "
              "value-clip #null; advantages once over the batch before the passes "
              "(minibatch_advantage False) -> tandem's GAE; clip_grad_norm 0.5 -> "
              "max-grad-norm 0.5; MLP 64x64 Tanh, separate actor and critic -> network mlp "
              "64 64 tanh separate. Not matched: BenchMARL has an Adam and a gradient-norm "
              "clip per network (actor, critic), tandem one Adam and one global clip over "
              "both; BenchMARL's MLPs keep torch's default Linear init, tandem's are "
              "orthogonal; BenchMARL's minibatches are environment frames (3 agents "
              "together), tandem's agent rows. Score: the peer's is an episode's agent "
              "returns averaged (last 20 = 20 episodes), tandem's a row's, one agent's "
              "(last 20 = 20 agent-episodes, about 7 episodes); the same mean, not the same "
              "spread"),
    # MAPPO: the same settings with a centralised critic on both sides. BenchMARL's MAPPO critic
    # reads the game's state (PettingZoo's state(): every agent's observation, concatenated);
    # tandem's reads the agent's own observation, every agent's and the agent's index.
    "spread-mappo": case(
        "benchmarl:mappo", "benchmarl", BENCHMARL_SPREAD,
        "ppo-mpe-spread.kdl", 1_920_000, 3, ['network.critic-input="state"'],
        notes="spread-ippo's settings and mapping (its notes) with a centralised critic on both "
              "sides: BenchMARL 1.5.2 MAPPO (share_param_critic: one centralised critic, whose "
              "input is the game's state where the task has one, PettingZoo's state(), every "
              "agent's observation concatenated, and whose one value serves every agent) -> "
              "network.critic-input \"state\" (tandem's critic reads the agent's own "
              "observation, every agent's in the game's order and a one-hot of the agent's "
              "index, so each agent has a value of its own). The actor reads the agent's own "
              "observation on both sides"),
    "pong-ppo-atari-bf16": case(
        "cleanrl:ppo_atari_envpool", "cleanrl-envpool", ["--env-id", "Pong-v5"],
        "ppo-atari.kdl", 10_000_000, 3, ['env="atari-pong"', *BF16], peer_from="pong-ppo-atari",
        notes="as pong-ppo-atari with tandem's Nature CNN in bfloat16, against the same peer runs"),
}


def die(msg):
    sys.exit(f"parity: {msg}")


# ---------------------------------------------------------------- statistics

# t(0.975, df) for df 1..30; beyond, the normal quantile is close enough for a 95% interval.
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t_interval(values):
    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return mean, None, None
    half = (T975[n - 2] if n - 1 <= len(T975) else 1.96) * statistics.stdev(values) / math.sqrt(n)
    return mean, mean - half, mean + half


def curve(episodes, steps):
    """Mean score of the episodes ending in each tenth of the run; None where none ended."""
    out = []
    for k in range(POINTS):
        lo, hi = steps * k / POINTS, steps * (k + 1) / POINTS
        vals = [s for step, s in episodes if lo < step <= hi or (k == POINTS - 1 and step > hi)]
        out.append(statistics.fmean(vals) if vals else None)
    return out


# ---------------------------------------------------------------- reading results

def tb_scalars(path, tags):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # size_guidance 0 keeps every event instead of a reservoir sample.
    acc = EventAccumulator(path, size_guidance={"scalars": 0})
    acc.Reload()
    have = acc.Tags()["scalars"]
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in tags if t in have}, have


def read_cleanrl(run_dir):
    found = glob.glob(os.path.join(run_dir, "runs", "*"))
    if len(found) != 1:
        raise RuntimeError(f"expected one CleanRL run under {run_dir}/runs, found {found}")
    series, have = tb_scalars(found[0], ["charts/episodic_return"])
    if "charts/episodic_return" not in series:
        raise RuntimeError(f"{found[0]} has no charts/episodic_return (tags: {have})")
    episodes = [(int(s), float(v)) for s, v in series["charts/episodic_return"]]
    episodes.sort(key=lambda e: e[0])
    last = [v for _, v in episodes[-LAST_N:]]
    diag, _ = tb_scalars(found[0], CLEANRL_DIAG_TAGS)
    steps = max(s for s, _ in episodes) if episodes else 0
    return {
        "episodes": episodes,
        "final": statistics.fmean(last) if last else None,
        "final_n": len(last),
        "diagnostics": {t: v[-1][1] for t, v in diag.items() if v},
        "diagnostic_curves": {t: curve(v, steps) for t, v in diag.items() if v},
    }


CLEANRL_DIAG_TAGS = ["losses/entropy", "losses/approx_kl", "losses/value_loss",
                     "losses/explained_variance", "losses/clipfrac"]


# tandem's names, the first one found wins: summary.json's exact last-20 game score, and the
# per-update game score in TensorBoard (newer builds may lead with other names; add them here).
TANDEM_FINAL_KEYS = ["last_20_score_mean"]
TANDEM_SCORE_TAGS = ["episode/score_mean"]
TANDEM_DIAG_TAGS = ["loss/entropy", "ppo/approx_kl", "loss/value", "ppo/explained_variance",
                    "optim/grad_norm", "ppo/clip_fraction"]


def read_tandem(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    key = next((k for k in TANDEM_FINAL_KEYS if k in summary), None)
    if key is None:
        raise RuntimeError(f"{run_dir}/summary.json has none of {TANDEM_FINAL_KEYS}: {summary}")
    tb = os.path.join(run_dir, "tensorboard")
    series, have = tb_scalars(tb, TANDEM_SCORE_TAGS + TANDEM_DIAG_TAGS)
    tag = next((t for t in TANDEM_SCORE_TAGS if t in series), None)
    if tag is None:
        raise RuntimeError(f"{tb} has none of {TANDEM_SCORE_TAGS} (tags: {have})")
    # Where the learner's diagnostics are at each tenth of the run: the LunarLander finding is
    # about entropy and approx-KL collapsing, which the last value alone hides.
    steps = summary["global_step"]
    diag_curves = {}
    for t in TANDEM_DIAG_TAGS:
        if t in series:
            diag_curves[t] = curve(series[t], steps)
    return {
        "episodes": [(int(s), float(v)) for s, v in series[tag]],
        "final": summary[key],
        "final_n": min(LAST_N, summary.get("episodes", LAST_N)),
        "episodes_total": summary.get("episodes"),
        "diagnostics": {t: v[-1][1] for t, v in series.items() if t in TANDEM_DIAG_TAGS and v},
        "diagnostic_curves": diag_curves,
        "summary": summary,
    }


# ---------------------------------------------------------------- running

def result_dir(name, side):
    if side == "peer" and CASES[name]["peer_from"]:
        name = CASES[name]["peer_from"]
    return os.path.join(RESULTS, name)


def result_path(name, side, seed, steps):
    return os.path.join(result_dir(name, side), f"{side}-seed{seed}-{steps}.json")


def tandem_binary():
    return os.environ.get("TANDEM", os.path.join(DEPS, "parity-bin", "tandem"))


def need_python(key):
    path = PYTHONS[key]
    if not os.access(path, os.X_OK):
        die(f"{path} is missing: make it with {MAKE_VENV[key]}")
    return path


def command(name, c, side, seed, steps):
    """The argv, environment and working directory of one run."""
    run_dir = os.path.join(RUNS, name, f"{side}-seed{seed}-{steps}")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if side == "tandem":
        binary = tandem_binary()
        if not os.access(binary, os.X_OK):
            die(f"no tandem binary at {binary} (build it and copy it there, or set TANDEM)")
        argv = [binary, "train", os.path.join(HERE, c["kdl"]), "--run-dir", run_dir, "--quiet",
                "--set", f"seed={seed}", "--set", "threads=1",
                "--set", f"train.total-steps={steps}"]
        for s in c["tandem_set"]:
            argv += ["--set", s]
        if c["bridge"]:
            argv += ["--set", f'env.python="{need_python(c["bridge"])}"']
        return argv, env, ROOT, run_dir
    kind, what = c["peer"].split(":")
    python = need_python(c["peer_python"])
    if kind == "cleanrl":
        argv = [python, "-m", f"cleanrl.{what}", "--seed", str(seed), "--total-timesteps",
                str(steps), "--cuda", "False", "--track", "False", "--capture-video", "False",
                *c["peer_args"]]
    else:
        script = {"sb3": "sb3_peer.py", "benchmarl": "benchmarl_peer.py"}[kind]
        argv = [python, os.path.join(HERE, script), "--algo", what, "--seed", str(seed),
                "--steps", str(steps), "--out", os.path.join(run_dir, "episodes.json"),
                *c["peer_args"]]
    return argv, env, run_dir, run_dir


def start(name, c, side, seed, steps):
    argv, env, cwd, run_dir = command(name, c, side, seed, steps)
    if os.path.exists(run_dir):
        shutil.rmtree(run_dir)  # a run cut short earlier: start it again from nothing
    os.makedirs(run_dir if side != "tandem" else os.path.dirname(run_dir), exist_ok=True)
    log = open(run_dir + ".log", "w")
    log.write(" ".join(argv) + "\n")
    log.flush()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    # Which build ran, by content: the binary's path is a local copy's name and says nothing
    # on another machine.
    build = {"tandem_binary_sha256": file_sha256(argv[0])} if side == "tandem" else {}
    return {"proc": proc, "log": log, "t0": time.time(), "argv": argv, "run_dir": run_dir,
            "name": name, "side": side, "seed": seed, "steps": steps, "build": build}


def finish(job, rusage):
    wall = time.time() - job["t0"]
    job["log"].close()
    rc = job["proc"].returncode
    label = f"{job['name']} {job['side']} seed {job['seed']}"
    if rc != 0:
        print(f"parity: {label} failed (exit {rc}); see {job['run_dir']}.log", flush=True)
        return
    try:
        if job["side"] == "tandem":
            r = read_tandem(job["run_dir"])
        elif CASES[job["name"]]["peer"].startswith(("sb3:", "benchmarl:")):
            with open(os.path.join(job["run_dir"], "episodes.json")) as f:
                r = json.load(f)
        else:
            r = read_cleanrl(job["run_dir"])
    except Exception as e:  # noqa: BLE001 - a broken run is reported, the others go on
        print(f"parity: {label}: cannot read its scores: {e}", flush=True)
        return
    r.update(case=job["name"], side=job["side"], seed=job["seed"], steps=job["steps"],
             wall_seconds=wall, cpu_seconds=rusage.ru_utime + rusage.ru_stime,
             command=job["argv"], finished=datetime.now(timezone.utc).isoformat(timespec="seconds"),
             host_cpu=cpu_model(), **job["build"])
    path = result_path(job["name"], job["side"], job["seed"], job["steps"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(r, f)
    os.replace(path + ".tmp", path)
    print(f"parity: {label}: final {r['final']:.1f} in {wall:.0f} s", flush=True)


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


class Stop(Exception):
    pass


def run(todo, jobs, stop_at):
    running = {}

    def on_signal(signum, _frame):
        # Raised, not recorded: os.wait4 is retried after a handler that returns, so a flag
        # would only be seen once a run ends by itself.
        raise Stop(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        while todo or running:
            while todo and len(running) < jobs:
                if stop_at and datetime.now(timezone.utc) >= stop_at:
                    print(f"parity: past --stop-launching-at; {len(todo)} run(s) not started: "
                          + ", ".join(f"{n} {s} seed {d}" for n, s, d, _ in todo), flush=True)
                    todo = []
                    break
                name, side, seed, steps = todo.pop(0)
                if os.path.exists(result_path(name, side, seed, steps)):
                    # Saved meanwhile by another run of the suite: starting it again would
                    # remove that run's directory.
                    print(f"parity: {name} {side} seed {seed} has a result already; not started",
                          flush=True)
                    continue
                job = start(name, CASES[name], side, seed, steps)
                running[job["proc"].pid] = job
                print(f"parity: started {name} {side} seed {seed} ({steps} steps)", flush=True)
            if not running:
                break
            try:
                pid, status, rusage = os.wait4(-1, 0)
            except ChildProcessError:
                break
            job = running.pop(pid, None)
            if job:
                job["proc"].returncode = os.waitstatus_to_exitcode(status)
                finish(job, rusage)
    except Stop:
        pass
    for job in running.values():
        # Each run is its own session: stop it with everything it started (bridge workers).
        os.killpg(job["proc"].pid, signal.SIGTERM)
        job["proc"].wait()
        print(f"parity: stopped {job['name']} {job['side']} seed {job['seed']} unfinished",
              flush=True)


# ---------------------------------------------------------------- report

def fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def side_stats(rows):
    finals = [r["final"] for r in rows if r["final"] is not None]
    if not finals:
        return None
    mean, lo, hi = t_interval(finals)
    return {"n": len(finals), "mean": mean, "lo": lo, "hi": hi, "finals": finals}


def report(names, steps_override):
    print("Final score: mean of the last 20 episodes' game score; interval: 95% Student-t over "
          "seeds. PASS: tandem's mean inside the peer's interval or above it.\n")
    print("| case | steps | peer | peer n | peer mean [95% CI] | tandem n | tandem mean [95% CI] "
          "| verdict |")
    print("|---|---:|---|---:|---|---:|---|---|")
    detail = []
    for name in names:
        c = CASES[name]
        steps = steps_override or c["steps"]
        rows = {}
        for side in ("peer", "tandem"):
            rows[side] = []
            for p in sorted(glob.glob(os.path.join(result_dir(name, side),
                                                   f"{side}-seed*-{steps}.json"))):
                with open(p) as f:
                    rows[side].append(json.load(f))
            rows[side].sort(key=lambda r: r["seed"])
        if not rows["peer"] and not rows["tandem"]:
            continue
        st = {s: side_stats(rows[s]) for s in rows}
        verdict = "n/a"
        if st["peer"] and st["tandem"] and st["peer"]["lo"] is not None and st["tandem"]["n"] >= 2:
            verdict = "PASS" if st["tandem"]["mean"] >= st["peer"]["lo"] else "FAIL"

        def cell(s):
            if not s:
                return "0", "-"
            ci = f" [{fmt(s['lo'])}, {fmt(s['hi'])}]" if s["lo"] is not None else ""
            return str(s["n"]), f"{fmt(s['mean'])}{ci}"

        pn, pc = cell(st["peer"])
        tn, tc = cell(st["tandem"])
        print(f"| {name} | {steps:,} | {c['peer']} | {pn} | {pc} | {tn} | {tc} | {verdict} |")
        detail.append((name, steps, rows))
    for name, steps, rows in detail:
        print(f"\n{name} ({steps:,} steps): score at each tenth of the run (mean over seeds)")
        for side in ("peer", "tandem"):
            curves = [curve([tuple(e) for e in r["episodes"]], steps) for r in rows[side]]
            if not curves:
                continue
            pts = []
            for k in range(POINTS):
                vals = [cv[k] for cv in curves if cv[k] is not None]
                pts.append(fmt(statistics.fmean(vals) if vals else None, ".0f"))
            print(f"  {side:6} " + " ".join(f"{p:>6}" for p in pts))
        for side in ("peer", "tandem"):
            tags = sorted({t for r in rows[side] for t in r.get("diagnostic_curves", {})})
            for t in tags:
                cvs = [r["diagnostic_curves"][t] for r in rows[side] if t in r.get("diagnostic_curves", {})]
                pts = []
                for k in range(POINTS):
                    vals = [cv[k] for cv in cvs if cv[k] is not None]
                    pts.append(fmt(statistics.fmean(vals) if vals else None, ".3g"))
                print(f"  {side:6} {t:26} " + " ".join(f"{p:>8}" for p in pts))
        for side in ("peer", "tandem"):
            for r in rows[side]:
                diag = ", ".join(f"{k} {v:.3g}" for k, v in sorted(r.get("diagnostics", {}).items()))
                print(f"  {side:6} seed {r['seed']}: final {fmt(r['final'])} "
                      f"(last {r.get('final_n')}), wall {r['wall_seconds']:.0f} s, "
                      f"cpu {r['cpu_seconds']:.0f} s" + (f"; last {diag}" if diag else ""))


# ---------------------------------------------------------------- progress

def tail_lines(path, size=1 << 20):
    """The whole lines of the last `size` bytes of a file that may still be growing."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        end = f.tell()
        f.seek(max(0, end - size))
        data = f.read()
    lines = data.split(b"\n")
    if end > size:
        lines = lines[1:]  # the first may be cut
    return [l for l in lines if l.strip()]


def progress_tandem(run_dir):
    """(steps reached, score at the last update that had one) from scalars.jsonl."""
    steps, score = 0, None
    for line in tail_lines(os.path.join(run_dir, "scalars.jsonl")):
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line being written
        steps = max(steps, row.get("step", 0))
        score = row.get(TANDEM_SCORE_TAGS[0], score)
    return steps, score


def progress_peer(name, run_dir):
    """(steps reached, mean of the last 20 scores) of a peer's run in progress."""
    if not CASES[name]["peer"].startswith(("sb3:", "benchmarl:")):
        r = read_cleanrl(run_dir)
        return (r["episodes"][-1][0] if r["episodes"] else 0), r["final"]
    for f in ("episodes.json", "episodes.partial.json"):
        path = os.path.join(run_dir, f)
        if os.path.exists(path):
            with open(path) as fh:
                episodes = json.load(fh)["episodes"]
            if not episodes:
                return 0, None
            return episodes[-1][0], statistics.fmean(s for _, s in episodes[-LAST_N:])
    return None, None


def progress(names):
    """Where the runs without a saved result stand: a session that ends stops its runs, and
    this says which were still going and how far they got."""
    print("| case | side | seed | steps reached | of | score (last 20, or last update) "
          "| last written |")
    print("|---|---|---:|---:|---:|---:|---|")
    now = time.time()
    for name in names:
        for run_dir in sorted(glob.glob(os.path.join(RUNS, name, "*-seed*-*"))):
            if not os.path.isdir(run_dir):
                continue
            side, seed, steps = re.fullmatch(r"(\w+)-seed(\d+)-(\d+)",
                                             os.path.basename(run_dir)).groups()
            if os.path.exists(result_path(name, side, int(seed), int(steps))):
                continue
            try:
                reached, score = (progress_tandem(run_dir) if side == "tandem"
                                  else progress_peer(name, run_dir))
            except (OSError, ValueError, KeyError, RuntimeError) as e:
                reached, score = None, f"unreadable: {e}"
            files = [run_dir + ".log"] + [os.path.join(d, f) for d, _, fs in os.walk(run_dir)
                                          for f in fs]
            written = max((os.path.getmtime(f) for f in files if os.path.exists(f)), default=None)
            ago = "-" if written is None else f"{(now - written) / 60:.0f} min ago"
            cell = score if isinstance(score, str) else fmt(score)
            print(f"| {name} | {side} | {seed} | {fmt(reached, ',')} | {int(steps):,} | {cell} "
                  f"| {ago} |")


# ---------------------------------------------------------------- main

def parse_seeds(text):
    seeds = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            seeds += range(int(a), int(b) + 1)
        elif part:
            seeds.append(int(part))
    return seeds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", help="comma-separated case names (default: all)")
    ap.add_argument("--seeds", help="e.g. 1-5 or 1,3 (default: each case's seed count from 1)")
    ap.add_argument("--sides", default="peer,tandem", help="peer,tandem (default both)")
    ap.add_argument("--jobs", type=int, default=2, help="concurrent runs (default 2)")
    ap.add_argument("--steps", type=int, help="total steps of every case (default: the case's)")
    ap.add_argument("--report", action="store_true", help="only print the table of saved results")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--progress", action="store_true",
                    help="where the runs without a saved result stand (steps, score so far)")
    ap.add_argument("--reread", action="store_true",
                    help="read the saved results' scores and diagnostics again from their run "
                         "directories (after a change to what is read), keeping their timings")
    ap.add_argument("--stop-launching-at", help="UTC time HH:MM after which no run is started")
    args = ap.parse_args()

    names = args.cases.split(",") if args.cases else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        die(f"unknown case(s) {unknown}; cases: {', '.join(CASES)}")
    if args.list:
        for n in names:
            c = CASES[n]
            print(f"{n}: peer {c['peer']} {' '.join(c['peer_args'])}; tandem {c['kdl']} "
                  f"{' '.join(c['tandem_set'])}; {c['steps']:,} steps, {c['seeds']} seeds. "
                  f"{c['notes']}")
        return
    if args.reread:
        reread(names)
        return
    if args.report:
        report(names, args.steps)
        return
    if args.progress:
        progress(names)
        return

    sides = args.sides.split(",")
    stop_at = None
    if args.stop_launching_at:
        h, m = map(int, args.stop_launching_at.split(":"))
        stop_at = datetime.now(timezone.utc).replace(hour=h, minute=m, second=0, microsecond=0)
    todo = []
    planned = set()
    for n in names:
        c = CASES[n]
        steps = args.steps or c["steps"]
        seeds = parse_seeds(args.seeds) if args.seeds else list(range(1, c["seeds"] + 1))
        # Sides alternate seed by seed so that outside load falls on both alike.
        for seed in seeds:
            for side in sides:
                path = result_path(n, side, seed, steps)
                if not os.path.exists(path) and path not in planned:
                    planned.add(path)
                    command(n, c, side, seed, steps)  # fails early on a missing venv or binary
                    todo.append((n, side, seed, steps))
    print(f"parity: {len(todo)} run(s) to do, {args.jobs} at a time", flush=True)
    run(todo, args.jobs, stop_at)
    report(names, args.steps)


if __name__ == "__main__":
    main()
