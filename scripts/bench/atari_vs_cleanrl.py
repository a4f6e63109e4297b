"""Atari Breakout PPO throughput: tandem against CleanRL 1.2.0's
`ppo_atari_envpool.py` (envpool 0.6.6), interleaved in one run.

Both sides train Breakout with the PPO Atari settings (8 environments, 128-step
rollouts, 4 epochs of 4 minibatches, Nature CNN, lr 2.5e-4 annealed over the
run, clip 0.1) for the same number of agent steps, on the same cores. Each
round runs CleanRL once, then each tandem variant once, so slow drift of the
machine's load reaches every side alike.

Reported per run: the side's own steps/s (CleanRL's last `SPS:` line, the
global steps over the time since its environments were made; tandem's
summary.json `steps_per_second`, the training loop's) and the whole process's
wall time. The ratio is of the medians of the side's own steps/s.

Run through scripts/bench/atari_vs_cleanrl.sh, which builds CleanRL's venv.
Environment: CLEANRL_PYTHON_VENV (the venv's python), TANDEM (binary, default
target/release/tandem), STEPS (default 20480), ROUNDS (default 2), VARIANTS
(tandem's `--set` lists, ';' between variants, ',' within one, 'shipped' for
none; default "shipped"), CPUS (taskset list for both sides, default all).
"""

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "scripts", "bench", "atari-breakout-ppo.kdl")


def pinned(cmd):
    cpus = os.environ.get("CPUS")
    return ["taskset", "-c", cpus, *cmd] if cpus else cmd


def cleanrl(python, steps, workdir):
    script = subprocess.run([python, "-c", "import importlib.util as u; "
                             "print(u.find_spec('cleanrl.ppo_atari_envpool').origin)"],
                            check=True, capture_output=True, text=True).stdout.strip()
    cmd = [python, "-u", script, "--env-id", "Breakout-v5", "--total-timesteps", str(steps),
           "--cuda", "False", "--seed", "1"]
    t0 = time.perf_counter()
    out = subprocess.run(pinned(cmd), cwd=workdir, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - t0
    sps = [int(m) for m in re.findall(r"^SPS: (\d+)$", out, re.M)]
    if not sps:
        sys.exit(f"atari_vs_cleanrl: CleanRL printed no SPS line:\n{out[-2000:]}")
    return sps[-1], wall


def tandem(binary, steps, sets, run_dir):
    cmd = [binary, "train", CONFIG, "--run-dir", run_dir, "--quiet",
           "--set", f"train.total-steps={steps}"]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.perf_counter()
    subprocess.run(pinned(cmd), check=True)
    wall = time.perf_counter() - t0
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    if summary["global_step"] < steps:
        sys.exit(f"atari_vs_cleanrl: tandem stopped at {summary['global_step']} of {steps} steps")
    return summary["steps_per_second"], wall


def main():
    python = os.environ["CLEANRL_PYTHON_VENV"]
    binary = os.environ.get("TANDEM", os.path.join(ROOT, "target", "release", "tandem"))
    steps = int(os.environ.get("STEPS", "20480"))
    rounds = int(os.environ.get("ROUNDS", "2"))
    variants = [v.strip() for v in os.environ.get("VARIANTS", "shipped").split(";") if v.strip()]
    sides = ["CleanRL 1.2.0 ppo_atari_envpool.py"] + [f"tandem {v}" for v in variants]
    results = {side: [] for side in sides}
    print(f"{os.cpu_count()} CPUs visible; CPUS={os.environ.get('CPUS', 'all')}; {steps} steps, "
          f"{rounds} round(s); tandem {binary}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-atari-") as tmp:
        for r in range(rounds):
            load = os.getloadavg()[0]
            sps, wall = cleanrl(python, steps, tmp)
            results[sides[0]].append((sps, wall, load))
            print(f"round {r + 1}: {sides[0]}: {sps} steps/s, process {wall:.1f} s, load {load:.2f}", flush=True)
            for v, side in zip(variants, sides[1:]):
                sets = [] if v == "shipped" else [s.strip() for s in v.split(",")]
                load = os.getloadavg()[0]
                sps, wall = tandem(binary, steps, sets, os.path.join(tmp, f"tandem-{r}-{len(results[side])}-{v}"))
                results[side].append((sps, wall, load))
                print(f"round {r + 1}: {side}: {sps:.0f} steps/s, process {wall:.1f} s, load {load:.2f}", flush=True)
    base = statistics.median(s for s, _, _ in results[sides[0]])
    print()
    print("| run | steps/s (each round) | median | process wall s | ratio to CleanRL |")
    print("|---|---:|---:|---:|---:|")
    for side in sides:
        rates = [s for s, _, _ in results[side]]
        walls = ", ".join(f"{w:.1f}" for _, w, _ in results[side])
        med = statistics.median(rates)
        print(f"| {side} | {', '.join(f'{s:.0f}' for s in rates)} | {med:.0f} | {walls} | {med / base:.2f}x |")


if __name__ == "__main__":
    sys.exit(main())
