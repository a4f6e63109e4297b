"""PPO on CartPole: tandem against Stable-Baselines3 with the same settings, in one run.

Both sides train the same experiment (scripts/bench/ppo-cartpole.kdl): 8 CartPole
environments, 32-step rollouts, 20 epochs of one 256-sample minibatch, 100k steps,
64x64 tanh separate actor and critic, lr 1e-3 decaying linearly to 0, gamma 0.99,
GAE lambda 0.95, clip 0.2, no value clipping, entropy 0, value coef 0.5, max grad
norm 0.5, Adam eps 1e-5, orthogonal init (gains sqrt 2 / 0.01 / 1). Each side gets
one compute thread. Runs alternate (tandem, SB3, tandem, SB3, ...) so that outside
load hits both alike.

Throughput is environment steps per second of the training loop (tandem: the
`steps_per_second` of summary.json, which excludes process start-up; SB3: the time
of `model.learn`), and per CPU-second of that same loop, because the machine is
shared (tandem: the `cpu_seconds` of summary.json, its process's CPU time over the
loop; SB3: `time.process_time()` around `learn`). Each side's whole process, start-up
included, is reported too (wall, and CPU from getrusage of children): SB3 runs in a
fresh Python process per seed, as a user's script would. Final return: mean of the
last 20 finished episodes.

Run with the SB3 venv's python (scripts/bench/cartpole_vs_sb3.sh does it).
Environment: TANDEM (binary, default target/release/tandem), SEEDS (default "1 2 3").
"""

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "scripts", "bench", "ppo-cartpole.kdl")
TOTAL_STEPS = 100_000


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_tandem(binary, seed, run_root):
    run_dir = os.path.join(run_root, f"tandem-seed{seed}")
    cpu0 = children_cpu()
    t0 = time.perf_counter()
    subprocess.run(
        [binary, "train", CONFIG, "--run-dir", run_dir, "--quiet",
         "--set", f"seed={seed}", "--set", "threads=1"],
        check=True,
    )
    process_wall = time.perf_counter() - t0
    cpu = children_cpu() - cpu0
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    steps = summary["global_step"]
    return {
        "steps": steps,
        "sps": summary["steps_per_second"],
        "sps_process": steps / process_wall,
        "sps_cpu": steps / summary["cpu_seconds"],
        "sps_process_cpu": steps / cpu,
        "final_return": summary["last_20_return_mean"],
        "episodes": summary["episodes"],
    }


def run_sb3(seed):
    import torch
    from torch import nn
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO(
        "MlpPolicy",
        env,
        learning_rate=lambda progress_remaining: 1e-3 * progress_remaining,
        n_steps=32,
        batch_size=256,
        n_epochs=20,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        clip_range_vf=None,
        normalize_advantage=True,
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
        policy_kwargs=dict(
            net_arch=dict(pi=[64, 64], vf=[64, 64]),
            activation_fn=nn.Tanh,
            ortho_init=True,
            share_features_extractor=True,  # the flatten "extractor" has no parameters
            optimizer_kwargs=dict(eps=1e-5),
        ),
        seed=seed,
        device="cpu",
        verbose=0,
    )
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    model.learn(total_timesteps=TOTAL_STEPS)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    returns = [e["r"] for e in model.ep_info_buffer]
    steps = model.num_timesteps
    return {
        "steps": steps,
        "sps": steps / wall,
        "sps_cpu": steps / cpu,
        "final_return": statistics.mean(returns[-20:]),
        "episodes": None,
    }


def run_sb3_process(seed):
    """run_sb3 in a fresh Python process, as a user runs it: the whole process (interpreter,
    imports, environments, learn) is timed like tandem's, and the loop's figures come back on
    its last line of output."""
    cpu0 = children_cpu()
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--sb3-seed", str(seed)],
        check=True, capture_output=True, text=True,
    ).stdout
    process_wall = time.perf_counter() - t0
    cpu = children_cpu() - cpu0
    result = json.loads(out.strip().splitlines()[-1])
    result["sps_process"] = result["steps"] / process_wall
    result["sps_process_cpu"] = result["steps"] / cpu
    return result


def fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def main():
    binary = os.environ.get("TANDEM", os.path.join(ROOT, "target", "release", "tandem"))
    seeds = [int(s) for s in os.environ.get("SEEDS", "1 2 3").split()]
    import stable_baselines3
    import torch

    print(f"tandem: {binary}; stable-baselines3 {stable_baselines3.__version__}, torch {torch.__version__}")
    print(f"seeds {seeds}, {TOTAL_STEPS} steps each, one thread per side")
    results = {"tandem": [], "sb3": []}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench-cartpole-") as run_root:
        for seed in seeds:
            results["tandem"].append(run_tandem(binary, seed, run_root))
            loads.append(os.getloadavg()[0])
            results["sb3"].append(run_sb3_process(seed))
            loads.append(os.getloadavg()[0])
            t, s = results["tandem"][-1], results["sb3"][-1]
            print(f"seed {seed}: tandem {t['sps']:,.0f} steps/s ({t['sps_cpu']:,.0f} per CPU-s), "
                  f"final return {t['final_return']:.1f} | SB3 {s['sps']:,.0f} steps/s "
                  f"({s['sps_cpu']:,.0f} per CPU-s), final return {s['final_return']:.1f}", flush=True)
    print()
    print("| seed | tandem steps/s (loop / per loop CPU-s / process / per process CPU-s) | SB3 steps/s (learn / per learn CPU-s / process / per process CPU-s) | ratio loop | ratio loop CPU | ratio whole process | tandem final return | SB3 final return |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    four = lambda r: " / ".join(fmt(r[k]) for k in ("sps", "sps_cpu", "sps_process", "sps_process_cpu"))
    for seed, t, s in zip(seeds, results["tandem"], results["sb3"]):
        print(f"| {seed} | {four(t)} | {four(s)} | {t['sps'] / s['sps']:.1f}x | "
              f"{t['sps_cpu'] / s['sps_cpu']:.1f}x | {t['sps_process'] / s['sps_process']:.1f}x | "
              f"{t['final_return']:.1f} | {s['final_return']:.1f} |")
    mean = lambda side, key: statistics.mean(r[key] for r in results[side])
    means = lambda side: {k: mean(side, k) for k in ("sps", "sps_cpu", "sps_process", "sps_process_cpu")}
    t, s = means("tandem"), means("sb3")
    print(f"| mean | {four(t)} | {four(s)} | {t['sps'] / s['sps']:.1f}x | "
          f"{t['sps_cpu'] / s['sps_cpu']:.1f}x | {t['sps_process'] / s['sps_process']:.1f}x | "
          f"{mean('tandem', 'final_return'):.1f} | {mean('sb3', 'final_return'):.1f} |")
    print(f"\nload average (1 min) before/during: {', '.join(f'{l:.1f}' for l in loads)}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--sb3-seed":
        print(json.dumps(run_sb3(int(sys.argv[2]))))
        sys.exit(0)
    sys.exit(main())
