#!/usr/bin/env bash
# A population of N members against N separate runs of the same members (issue 68): the
# population FILE (default experiments/cartpole-pbt.kdl, with `population.exploit=0` so that the
# members' work is the same as alone) in one job, then each member's `resolved.kdl` as a run of its
# own, all N started at once; whole processes, wall-clock seconds, ROUNDS interleaved rounds.
# Prints each round's times and the ratio (separate / population: above 1, the population is
# faster).
#   scripts/bench/population_throughput.sh [--rounds 2] [--file FILE] [--out DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
rounds=2
file="$root/experiments/cartpole-pbt.kdl"
out="$root/runs/population-throughput"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --file) file="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) echo "population_throughput.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
tandem="${TANDEM:-$out/tandem}"
[[ -n "${TANDEM:-}" ]] || cp "$root/target/release/tandem" "$tandem"
now() { date +%s.%N; }
for round in $(seq 1 "$rounds"); do
    pop="$out/round-$round-population"
    rm -rf "$pop" "$out/round-$round-separate"
    start=$(now)
    "$tandem" train "$file" --run-dir "$pop" --set population.exploit=0 --set log.console=quiet
    population=$(echo "$(now) - $start" | bc)
    members=$(ls "$pop/members" | wc -l)
    start=$(now)
    pids=()
    for k in $(seq 0 $((members - 1))); do
        "$tandem" train "$pop/members/$k/resolved.kdl" --run-dir "$out/round-$round-separate/$k" \
            --set log.console=quiet 2>/dev/null &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    separate=$(echo "$(now) - $start" | bc)
    ratio=$(echo "scale=3; $separate / $population" | bc)
    steps=$(python3 -c "import json; print(json.load(open('$pop/summary.json'))['population_steps'])")
    echo "round $round: population ${population}s, $members separate runs ${separate}s; ratio $ratio; $steps steps in all"
done
