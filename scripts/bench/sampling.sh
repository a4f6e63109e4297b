#!/usr/bin/env bash
# Sampling modes against each other (train.sampling: synchronous, pipelined, free) on one
# experiment: the same seeds and settings for each, run one after the other, interleaved by
# seed; prints each run's final score (summary.json's last_20_score_mean), wall time, steps/s
# and time by phase, then the mean and 95% Student-t interval of each mode's final scores
# (docs/sampling.md).
#
# Usage (repo root, after `cargo build --release`):
#   [EXPERIMENT=experiments/minatar-breakout.kdl] [STEPS=1000000] [SEEDS="1 2 3"] \
#   [SETS="threads=1;devices=cpu cpu" (--set values, ';' between)] [MODES="synchronous pipelined free"] [OUT=/tmp/tandem-sampling] \
#   [REPORT=1: only print the table of the runs already in OUT] scripts/bench/sampling.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
experiment="${EXPERIMENT:-$root/experiments/minatar-breakout.kdl}"
steps="${STEPS:-1000000}"
seeds="${SEEDS:-1 2 3}"
modes="${MODES:-synchronous pipelined}"
out="${OUT:-/tmp/tandem-sampling}"
tandem="${TANDEM:-$root/target/release/tandem}"
[ -x "$tandem" ] || { echo "sampling.sh: no $tandem; run cargo build --release first" >&2; exit 2; }
mkdir -p "$out"
extra=()
IFS=';' read -r -a sets <<< "${SETS:-threads=1}"
for s in "${sets[@]}"; do extra+=(--set "$s"); done
for seed in $seeds; do
    [ -n "${REPORT:-}" ] && break
    for mode in $modes; do
        dir="$out/$mode-$seed"
        rm -rf "$dir"
        "$tandem" train "$experiment" --run-dir "$dir" --quiet --set "seed=$seed" \
            --set "train.max-steps=$steps" --set "train.sampling=$mode" "${extra[@]}"
    done
done
PYTHONPATH="$root/scripts/bench" python3 - "$out" "$seeds" "$modes" <<'EOF'
import json, math, statistics, sys
import run_phases
out, seeds, modes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
# t(0.975, n - 1) for n = 2..10
T = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
for mode in modes:
    scores = []
    for seed in seeds:
        s = json.load(open(f"{out}/{mode}-{seed}/summary.json"))
        scores.append(s["last_20_score_mean"])
        print(f"{mode} seed {seed}: score {s['last_20_score_mean']:.2f} at step {s['global_step']}, "
              f"{s['wall_seconds']:.0f} s, {s['steps_per_second']:.0f} steps/s")
        phases = run_phases.phases(f"{out}/{mode}-{seed}")
        print("    time by phase (s): " + run_phases.shown(phases, digits=0))
    mean = statistics.mean(scores)
    half = T[len(scores) - 1] * statistics.stdev(scores) / math.sqrt(len(scores)) if len(scores) > 1 else float("nan")
    print(f"{mode}: {mean:.2f} [{mean - half:.2f}, {mean + half:.2f}] over seeds {' '.join(seeds)}")
EOF
