#!/usr/bin/env bash
# Population-based training against the same population without exchange (issue 68): each seed
# trains FILE (a population experiment, default experiments/cartpole-pbt.kdl) as it is and with
# `population.exploit=0`, one after the other, and prints each member's final score, the best and
# the median member, and their means over the seeds.
#   scripts/bench/population_pbt.sh [--seeds 1-5] [--file FILE] [--out DIR] [-- --set ...]
# tandem: TANDEM, default a copy of target/release/tandem (so that rebuilding does not change the
# binary under a run). Runs are niced; results stay in DIR (default runs/population-pbt).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
seeds="1-5"
file="$root/experiments/cartpole-pbt.kdl"
out="$root/runs/population-pbt"
extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seeds) seeds="$2"; shift 2 ;;
        --file) file="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) echo "population_pbt.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
tandem="${TANDEM:-}"
if [[ -z "$tandem" ]]; then
    tandem="$out/tandem"
    cp "$root/target/release/tandem" "$tandem"
fi
first="${seeds%-*}"
last="${seeds#*-}"
for seed in $(seq "$first" "$last"); do
    for exploit in 0.25 0; do
        dir="$out/seed-$seed-exploit-$exploit"
        if [[ ! -f "$dir/summary.json" ]]; then
            rm -rf "$dir"
            nice -n 10 "$tandem" train "$file" --run-dir "$dir" --set "seed=$seed" \
                --set "population.exploit=$exploit" --set log.console=quiet "${extra[@]}"
        fi
    done
done
python3 - "$out" "$first" "$last" <<'PY'
import json, statistics, sys
out, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = {"0.25": [], "0": []}
print("| seed | PBT members | PBT best | PBT median | fixed members | fixed best | fixed median |")
print("|---|---|---|---|---|---|---|")
for seed in range(first, last + 1):
    cells = [str(seed)]
    for exploit in ("0.25", "0"):
        with open(f"{out}/seed-{seed}-exploit-{exploit}/summary.json") as f:
            scores = [s if s is not None else float("nan") for s in json.load(f)["member_final_scores"]]
        best, median = max(scores), statistics.median(scores)
        rows[exploit].append((best, median))
        cells += [" ".join(f"{s:.1f}" for s in scores), f"{best:.1f}", f"{median:.1f}"]
    print("| " + " | ".join(cells) + " |")
mean = lambda xs: sum(xs) / len(xs)
p, q = rows["0.25"], rows["0"]
print(f"| mean | | {mean([b for b, _ in p]):.1f} | {mean([m for _, m in p]):.1f} | | {mean([b for b, _ in q]):.1f} | {mean([m for _, m in q]):.1f} |")
PY
