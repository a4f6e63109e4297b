"""Learning curve of a longer PPO run on MinAtar Breakout (experiments/minatar-breakout.kdl).

Trains with `tandem train` (one CPU rank, one thread, --set train.max-steps=STEPS)
unless RUN_DIR names a finished run to read, then prints, from the run's TensorBoard
scalars, the mean episode score (tandem's `episode/recent_score_mean`, the untouched rewards) and the
throughput at evenly spaced step counts, as a Markdown table.

Run with the TensorBoard venv's python (scripts/bench/minatar_curve.sh).
Environment: TANDEM (binary, default target/release/tandem), STEPS (default
1000000), POINTS (rows in the table, default 10), RUN_DIR (read instead of train).
"""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "experiments", "minatar-breakout.kdl")
TAGS = ["episode/recent_score_mean", "perf/steps_per_second"]


def nearest_at_or_before(series, step):
    best = None
    for s, v in series:
        if s <= step:
            best = (s, v)
    return best


def report(run_dir, points):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench", "tb_scalars.py"),
                          os.path.join(run_dir, "tensorboard"), *TAGS],
                         check=True, capture_output=True, text=True).stdout
    data = json.loads(out)
    scores, sps = data[TAGS[0]], data[TAGS[1]]
    if not scores:
        sys.exit(f"minatar_curve: {run_dir} logged no episode scores")
    last_step = scores[-1][0]
    summary_path = os.path.join(run_dir, "summary.json")
    summary = json.load(open(summary_path)) if os.path.exists(summary_path) else None
    print("| environment steps | mean episode score (recent episodes) | steps/s over the preceding interval |")
    print("|---:|---:|---:|")
    for i in range(1, points + 1):
        target = last_step * i // points
        step, score = nearest_at_or_before(scores, target)
        rate = nearest_at_or_before(sps, step)
        print(f"| {step:,} | {score:.2f} | {rate[1]:,.0f} |")
    if summary:
        print(f"\nfinal: {summary['global_step']:,} steps in {summary['wall_seconds']:.0f} s "
              f"({summary['steps_per_second']:,.0f} steps/s), {summary['episodes']} episodes, "
              f"mean score of the last 20 episodes {summary['last_20_score_mean']}")


def main():
    points = int(os.environ.get("POINTS", "10"))
    run_dir = os.environ.get("RUN_DIR")
    if run_dir:
        report(run_dir, points)
        return
    binary = os.environ.get("TANDEM", os.path.join(ROOT, "target", "release", "tandem"))
    steps = int(os.environ.get("STEPS", "1000000"))
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-minatar-") as root:
        run_dir = os.path.join(root, "run")
        subprocess.run([binary, "train", CONFIG, "--run-dir", run_dir, "--quiet",
                        "--set", "threads=1", "--set", f"train.max-steps={steps}"], check=True)
        print(f"load average (1 min) before/after: {load0:.1f} / {os.getloadavg()[0]:.1f}")
        report(run_dir, points)


if __name__ == "__main__":
    sys.exit(main())
