#!/usr/bin/env bash
# Throughput of tandem's three sampling modes against sample-factory 2.1.1's asynchronous PPO
# on Atari Breakout, same CPU, interleaved rounds (docs/sampling.md):
#   tandem: scripts/bench/atari-breakout-ppo.kdl (8 environments x 128 steps, 4 epochs of 4
#           minibatches of 256) with train.sampling synchronous, pipelined and free;
#   sample-factory: sf_examples.atari.train_atari --async_rl True with its Atari defaults
#           (8 rollout workers x 1 environment, rollout 128, batches of 256, 4 per epoch,
#           4 epochs: the same batch and epochs), on the venv of scripts/bench/sf_venv.sh.
# Both count agent steps (sample-factory reports frames, 4 per agent step; it is divided).
# Prints per run: agent steps/s over the whole process (start to exit) and as the tool reports
# it, and where the time went (tandem: time by phase and role; sample-factory: its own timing
# lines).
#
# Usage (repo root, after `cargo build --release`):
#   [STEPS=40960 agent steps] [ROUNDS=2] [OUT=/tmp/tandem-appo] [SIDES="synchronous pipelined free sf"] \
#   [SF_ASYNC=True|False: sample-factory's --async_rl; False runs its synchronous sampling] \
#   [REPORT=1: only print the runs already in OUT] scripts/bench/appo_vs_sf.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
steps="${STEPS:-40960}"
rounds="${ROUNDS:-2}"
out="${OUT:-/tmp/tandem-appo}"
sides="${SIDES:-synchronous pipelined free sf}"
tandem="${TANDEM:-$root/target/release/tandem}"
[ -x "$tandem" ] || { echo "appo_vs_sf.sh: no $tandem; run cargo build --release first" >&2; exit 2; }
sf_python=""
case " $sides " in *" sf "*) sf_python="$("$root/scripts/bench/sf_venv.sh")" ;; esac
mkdir -p "$out"

# Runs a command, recording its whole-process wall time in seconds into $1/wall.
timed() {
    local dir="$1"; shift
    local start end
    start=$(date +%s.%N)
    "$@"
    end=$(date +%s.%N)
    python3 -c "print($end - $start)" > "$dir/wall"
}

for round in $(seq 1 "$rounds"); do
    [ -n "${REPORT:-}" ] && break
    for side in $sides; do
        dir="$out/$side-$round"
        rm -rf "$dir"
        mkdir -p "$dir"
        echo "round $round: $side" >&2
        if [ "$side" = sf ]; then
            timed "$dir" "$sf_python" "$root/scripts/bench/sf_atari.py" --env=atari_breakout \
                --device=cpu --async_rl="${SF_ASYNC:-True}" --with_wandb=False --seed=1 \
                --train_for_env_steps=$((steps * 4)) --train_dir="$dir/train" \
                --experiment=breakout > "$dir/log" 2>&1
        else
            timed "$dir" "$tandem" train "$root/scripts/bench/atari-breakout-ppo.kdl" \
                --run-dir "$dir/run" --quiet --set "train.max-steps=$steps" \
                --set "train.sampling=$side"
        fi
    done
done

PYTHONPATH="$root/scripts/bench" python3 - "$out" "$rounds" "$sides" <<'EOF'
import json, re, sys
import run_phases
out, rounds, sides = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
ansi = re.compile(r"\x1b\[[0-9;]*m")
for round in range(1, rounds + 1):
    for side in sides:
        d = f"{out}/{side}-{round}"
        wall = float(open(f"{d}/wall").read())
        if side == "sf":
            log = ansi.sub("", open(f"{d}/log").read())
            collected = re.findall(r"Collected \{0: (\d+)\}, FPS: ([\d.]+)", log)
            frames, fps = int(collected[-1][0]), float(collected[-1][1])
            print(f"round {round} sample-factory: {frames // 4} agent steps in {wall:.0f} s: "
                  f"{frames / 4 / wall:.1f} steps/s whole process, {fps / 4:.1f} as it reports")
            # Its profile trees, per role (seconds): the inference worker, the learner, one
            # rollout worker, the main loop.
            showing = False
            for line in log.splitlines():
                if line.startswith("["):
                    role = line.split("] ", 1)[-1]
                    showing = "profile tree view" in role and not role.startswith(("Batcher", "RolloutWorker_w1", "RolloutWorker_w2", "RolloutWorker_w3", "RolloutWorker_w4", "RolloutWorker_w5", "RolloutWorker_w6", "RolloutWorker_w7"))
                    if showing:
                        print("    " + role)
                elif showing:
                    print("      " + line[:160])
            continue
        s = json.load(open(f"{d}/run/summary.json"))
        print(f"round {round} tandem {side}: {s['global_step']} agent steps in {wall:.0f} s: "
              f"{s['global_step'] / wall:.1f} steps/s whole process, "
              f"{s['steps_per_second']:.1f} as it reports")
        lag = [row["train/policy_lag"] for row in map(json.loads, open(f"{d}/run/scalars.jsonl"))
               if "train/policy_lag" in row]
        print("    time by phase (s): " + run_phases.shown(run_phases.phases(f"{d}/run")))
        if lag:
            print(f"    policy lag: mean {sum(lag) / len(lag):.2f} over {len(lag)} rounds")
EOF
