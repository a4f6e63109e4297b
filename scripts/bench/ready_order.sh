#!/usr/bin/env bash
# Ready order against groups stepped in turn and against no groups, where environments'
# step times vary (docs/sampling.md, "Ready order"): scripts/bench/jittery-cartpole.kdl (16
# gymnasium CartPoles in 4 worker processes, 5% of steps sleeping 20 ms) under each variant,
# ROUNDS rounds interleaved, each variant's steps/s (whole run, summary.json) and its time by
# phase, then each round's ratio of ready order to the others.
#
# Usage (repo root, after `cargo build --release` and scripts/gym-venv-setup.sh):
#   [ROUNDS=2] [STEPS=32768] [OUT=/tmp/tandem-ready-order] \
#   [BEFORE=<an earlier tandem binary> [BEFORE_LABEL="free, 4 groups <how it served them>"]: adds
#    that build's free sampling with 4 groups, labelled BEFORE_LABEL (BEFORE), default "free,
#    4 groups in turn", which builds before ready order gave] \
#   scripts/bench/ready_order.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
tandem="${TANDEM:-$root/target/release/tandem}"
[ -x "$tandem" ] || { echo "ready_order.sh: no $tandem; run cargo build --release first" >&2; exit 2; }
rounds="${ROUNDS:-2}"
steps="${STEPS:-32768}"
out="${OUT:-/tmp/tandem-ready-order}"
mkdir -p "$out"
# label|binary|sampling|groups
variants=(
    "synchronous, all at once|$tandem|synchronous|1"
    "synchronous, 4 groups in turn|$tandem|synchronous|4"
    "free, all at once|$tandem|free|1"
    "free, 4 groups in ready order|$tandem|free|4"
)
if [ -n "${BEFORE:-}" ]; then
    variants+=("${BEFORE_LABEL:-free, 4 groups in turn} (BEFORE)|$BEFORE|free|4")
fi
for round in $(seq 1 "$rounds"); do
    for v in "${variants[@]}"; do
        IFS='|' read -r label binary sampling groups <<< "$v"
        dir="$out/r$round-$sampling-$groups-$(basename "$binary")"
        rm -rf "$dir"
        "$binary" train scripts/bench/jittery-cartpole.kdl --run-dir "$dir" --quiet \
            --set "train.total-steps=$steps" --set "train.sampling=$sampling" \
            --set "train.env-groups=$groups"
        echo "$round|$label|$dir" >> "$out/runs.txt.new"
    done
done
mv "$out/runs.txt.new" "$out/runs.txt"
PYTHONPATH="$root/scripts/bench" python3 - "$out/runs.txt" <<'PY'
import sys
import run_phases
runs = [line.rstrip("\n").split("|") for line in open(sys.argv[1])]
rate = {}
for round_, label, d in runs:
    rate[(round_, label)], line = run_phases.rate_and_line(d)
    print(f"round {round_}, {label}: {line}")
ready = "free, 4 groups in ready order"
for round_ in sorted({r for r, _, _ in runs}):
    ratios = [f"{rate[(round_, ready)] / rate[(round_, label)]:.2f}x {label}"
              for (r, label) in rate if r == round_ and label != ready]
    print(f"round {round_}: ready order is " + "; ".join(ratios))
PY
