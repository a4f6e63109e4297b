#!/usr/bin/env bash
# Env steps per second of tandem's gymnasium bridge against gymnasium's
# AsyncVectorEnv(shared_memory=True) and Stable-Baselines3's SubprocVecEnv, with the same
# number of processes and environments (one environment per process) and random actions,
# for CartPole-v1 (the exchange dominates) and HalfCheetah-v5 (the simulation dominates),
# plus a bare in-process env.step loop (one process) to show the bridge's overhead.
# Every mode runs in the SB3 venv's interpreter (scripts/bench/sb3_venv.sh, which adds
# MuJoCo), so all of them step the same gymnasium.
# Usage: scripts/bench/gym_bridge.sh [PROCESSES] [CARTPOLE_STEPS] [CHEETAH_STEPS]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
procs="${1:-2}"
cartpole_steps="${2:-20000}"
cheetah_steps="${3:-2000}"
python="$("$root/scripts/bench/sb3_venv.sh")"
export LIBTORCH="${LIBTORCH:-$root/.deps/libtorch}"
cargo build --release -j 1 -q -p tandem-env --example gym_bench --manifest-path "$root/Cargo.toml"
bench="$root/target/release/examples/gym_bench"
for case in "CartPole-v1 $cartpole_steps" "HalfCheetah-v5 $cheetah_steps"; do
    read -r id steps <<<"$case"
    "$bench" "$python" "$id" "$procs" "$procs" "$steps"
    for mode in async sb3 bare; do
        "$python" "$root/scripts/bench/gym_bridge.py" "$mode" "$id" "$procs" "$steps"
    done
done 2> >(grep -v -e settotalmass -e '^$' -e '^gym worker [0-9]*: $' >&2)
