#!/usr/bin/env bash
# Ready order's policy worker serving every group that has stepped in one forward pass, against
# a build that served one group a pass (docs/sampling.md, "Ready order"): a CPU-bound game
# (experiments/minatar-breakout.kdl, 16 environments, one thread) under free sampling with
# GROUP_COUNTS groups each, both builds interleaved for ROUNDS rounds; each run's steps/s (whole run,
# summary.json) and its time by phase, then each round's ratio of this build to BEFORE.
#
# Usage (repo root, after `cargo build --release`):
#   BEFORE=<a tandem binary from before batching> [GROUP_COUNTS="4 8"] [ROUNDS=2] [STEPS=200000] \
#   [SETS="algorithm.epochs=1;..." (more --set overrides, both builds)] \
#   [OUT=/tmp/tandem-inference-batching] scripts/bench/inference_batching.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
tandem="${TANDEM:-$root/target/release/tandem}"
[ -x "$tandem" ] || { echo "inference_batching.sh: no $tandem; run cargo build --release first" >&2; exit 2; }
[ -x "${BEFORE:-}" ] || { echo "inference_batching.sh: set BEFORE to a tandem binary from before batching" >&2; exit 2; }
rounds="${ROUNDS:-2}"
steps="${STEPS:-200000}"
out="${OUT:-/tmp/tandem-inference-batching}"
mkdir -p "$out"
extra=()
IFS=';' read -r -a sets <<< "${SETS:-}"
for set in "${sets[@]}"; do extra+=(--set "$set"); done
: > "$out/runs.txt.new"
for round in $(seq 1 "$rounds"); do
    for groups in ${GROUP_COUNTS:-4 8}; do
        for build in "this|$tandem" "BEFORE|$BEFORE"; do
            IFS='|' read -r label binary <<< "$build"
            dir="$out/r$round-g$groups-$label"
            rm -rf "$dir"
            "$binary" train experiments/minatar-breakout.kdl --run-dir "$dir" --quiet \
                --set threads=1 --set "train.max-steps=$steps" --set train.sampling=free \
                --set "train.env-groups=$groups" "${extra[@]}"
            echo "$round|$groups|$label|$dir" >> "$out/runs.txt.new"
        done
    done
done
mv "$out/runs.txt.new" "$out/runs.txt"
PYTHONPATH="$root/scripts/bench" python3 - "$out/runs.txt" <<'PY'
import sys
import run_phases
runs = [line.rstrip("\n").split("|") for line in open(sys.argv[1])]
rate = {}
for round_, groups, label, d in runs:
    rate[(round_, groups, label)], line = run_phases.rate_and_line(d)
    print(f"round {round_}, {groups} groups, {label}: {line}")
for (round_, groups, label), r in sorted(rate.items()):
    if label == "this":
        print(f"round {round_}, {groups} groups: {r / rate[(round_, groups, 'BEFORE')]:.2f}x BEFORE")
PY
