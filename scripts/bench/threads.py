#!/usr/bin/env python3
"""Issue 35's thread benchmark: the wall time of tandem's training loop under three thread
settings (1, the default "auto", every core), on a quiet machine, with a busy loop taking
one core ("busy"), and with such a loop at nice 19 ("niced": a background job, which gives its
core way), for three workloads: the shipped experiments/cartpole.kdl (an MLP),
experiments/halfcheetah-sac.kdl (a MuJoCo MLP through the gymnasium bridge) and
experiments/breakout-ppo.kdl (a Nature CNN), each shortened by --set. Rounds interleave the
settings; a setting's figure is the median of its rounds' loop wall seconds (summary.json's
wall_seconds), and each is reported as its ratio to the best setting of the same case and
mode, measured in the same run of this script.

    python3 scripts/bench/threads.py [--cases cartpole,breakout] [--modes quiet,busy,niced] [--rounds 3]

Needs target/release/tandem (or TANDEM=...) and, for halfcheetah, the MuJoCo venv
(scripts/gym-venv-setup.sh makes .deps/venv-gym). Leave the machine otherwise idle.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TANDEM = os.environ.get("TANDEM", os.path.join(ROOT, "target", "release", "tandem"))
CORES = os.cpu_count() or 1

CASES = {
    "cartpole": ("experiments/cartpole.kdl", 300_000, []),
    "halfcheetah": ("experiments/halfcheetah-sac.kdl", 3_000, [
        "algorithm.learning-starts=1000",
        f'env.python="{os.path.join(ROOT, ".deps", "venv-gym", "bin", "python")}"']),
    "breakout": ("experiments/breakout-ppo.kdl", 8_192, []),
}


def run_once(case, threads, work):
    file, steps, sets = CASES[case]
    run_dir = tempfile.mkdtemp(prefix=f"{case}-{threads}-", dir=work)
    os.rmdir(run_dir)
    cmd = [TANDEM, "train", os.path.join(ROOT, file), "--run-dir", run_dir, "--quiet",
           "--set", f"threads={threads}", "--set", f"train.max-steps={steps}",
           "--set", "checkpoint.every=#null"]
    for s in sets:
        cmd += ["--set", s]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"threads: {case} with threads={threads} failed:\n{done.stderr[-2000:]}")
    with open(os.path.join(run_dir, "summary.json")) as f:
        wall = json.load(f)["wall_seconds"]
    # The count the rank ran with, from its log line `rank 0/1 on cpu (N thread(s))`.
    with open(os.path.join(run_dir, "logs", "rank-0.log")) as f:
        ran = re.search(r"on cpu \((\d+) thread", f.read())
    return wall, int(ran.group(1)) if ran else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--modes", default="quiet,busy,niced")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    settings = ["1", "auto"] + ([str(CORES)] if CORES > 1 else [])
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                  if l.startswith("model name")), "unknown CPU")
    print(f"machine: {model}, {CORES} cores; {args.rounds} rounds, median loop wall seconds")
    print("| case | mode | threads (auto: the count each round ran) | loop wall s (median) | rounds | ratio to the best |")
    print("|---|---|---|---:|---|---:|")
    with tempfile.TemporaryDirectory() as work:
        for mode in args.modes.split(","):
            busy = None
            if mode in ("busy", "niced"):
                # One core's worth of someone else's work, not pinned: the scheduler places it.
                # Niced, it runs in this script's session (so its autogroup) and gives way.
                nice = ["nice", "-n", "19"] if mode == "niced" else []
                busy = subprocess.Popen([*nice, "sh", "-c", "while :; do :; done"])
            try:
                for case in args.cases.split(","):
                    walls = {t: [] for t in settings}
                    ran = {t: [] for t in settings}
                    for _ in range(args.rounds):
                        for t in settings:
                            wall, threads = run_once(case, t, work)
                            walls[t].append(wall)
                            ran[t].append(threads)
                    medians = {t: statistics.median(v) for t, v in walls.items()}
                    best = min(medians.values())
                    for t in settings:
                        label = {"auto": "auto (default)", str(CORES): f"{CORES} (all cores)"}.get(t, t)
                        if t == "auto":
                            label += ": " + " ".join(str(n) for n in ran[t])
                        rounds = " ".join(f"{w:.1f}" for w in walls[t])
                        print(f"| {case} | {mode} | {label} | {medians[t]:.1f} | {rounds} | "
                              f"{medians[t] / best:.2f} |", flush=True)
            finally:
                if busy:
                    busy.kill()
                    busy.wait()


if __name__ == "__main__":
    main()
