#!/usr/bin/env bash
# Mutation testing of the numerical core (docs/mutants.md): cargo-mutants changes one operator,
# constant or function body at a time in the files below and runs the tests that hold each file;
# a mutant no test fails on ("missed") is either a test to write or a change that cannot be seen
# (equivalent), and docs/mutants.md says which. Not in CI: the files below hold about 1,500
# mutants, and each costs an incremental build of release code (the `mutants` profile of
# Cargo.toml) and its tests: about 7 s on 2 cores, after a first build of about 3 minutes.
#
#   scripts/mutants.sh GROUP...      estimators ppo ppo-host a2c optim ddp sac td3 dqn host-mlp
#                                    population league
#   MUTANTS_RE='fn_a|fn_b' scripts/mutants.sh GROUP      only the mutants whose names match
#
# Each group runs in a git worktree of HEAD (MUTANTS_TREE, default /tmp/tandem-mutants) with its
# own target directory, so the checkout it was started from can go on building; its results go
# to mutants.out/GROUP/ there (outcomes.json, missed.txt, caught.txt, timeout.txt).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tree=${MUTANTS_TREE:-/tmp/tandem-mutants}
export PATH="$HOME/.cargo/bin:$PATH"
export LIBTORCH=${LIBTORCH:-$root/.deps/libtorch}
export TORCH_CPP_LOG_LEVEL=ERROR

command -v cargo-mutants >/dev/null || cargo install --locked cargo-mutants

# GROUP -> "file;regex of the mutants to examine (empty: all);test targets"
group() {
    case "$1" in
    estimators) echo "src/algo/storage/rollout.rs;vtrace|generalized_advantages|n_step_returns|bootstrap|Waiting::|flat_batch;--lib --test algo_rollout --test algo_ppo" ;;
    ppo) echo "src/algo/ppo/mod.rs;;--lib --test algo_ppo --test algo_ppo_host --test algo_ppo_host_update --test algo_recurrent --test dist_ppo" ;;
    ppo-host) echo "src/algo/ppo/host.rs;;--test algo_ppo_host --test algo_ppo" ;;
    a2c) echo "src/algo/a2c.rs;;--lib --test algo_ppo" ;;
    optim) echo "src/algo/optim.rs;;--lib --test algo_ppo --test algo_ppo_host --test sac_equivalence --test td3_equivalence --test dqn_equivalence" ;;
    ddp) echo "src/dist/ddp.rs;;--lib --test dist_ddp --test dist_ppo" ;;
    sac) echo "src/algo/sac/mod.rs;;--lib --test sac_equivalence --test algo_sac_host" ;;
    td3) echo "src/algo/td3/mod.rs;;--lib --test td3_equivalence" ;;
    dqn) echo "src/algo/dqn/mod.rs;;--test algo_dqn --test dqn_equivalence --test dqn_replay" ;;
    host-mlp) echo "src/nn/host_mlp.rs;;--test algo_ppo_host --test nn_host_gemm --test algo_nn" ;;
    population) echo "src/train/population.rs;unit|starting_values|plan|perturb|best|due;--lib --test population" ;;
    league) echo "src/algo/league.rs;;--lib --test league" ;;
    *) echo "unknown group $1" >&2; return 2 ;;
    esac
}

if [ $# -eq 0 ]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi

if [ ! -e "$tree/.git" ]; then
    git -C "$root" worktree add --detach "$tree" HEAD
    # A copy of the release build, so the first build there is of tandem's own crates only.
    [ -d "$root/target" ] && [ ! -d "$tree/target" ] && cp -a "$root/target" "$tree/target"
else
    git -C "$tree" checkout --detach --quiet "$(git -C "$root" rev-parse HEAD)"
fi
[ -e "$tree/.deps" ] || ln -s "$root/.deps" "$tree/.deps"

for name in "$@"; do
    spec=$(group "$name")
    IFS=';' read -r file re tests <<<"$spec"
    # MUTANTS_RE narrows a group to some functions (a second look at what a first run missed).
    re=${MUTANTS_RE:-$re}
    args=(--in-place --profile mutants --file "$file" --output "mutants.out/$name"
          --baseline skip --timeout 60 --build-timeout 900)
    [ -n "$re" ] && args+=(--re "$re")
    # shellcheck disable=SC2206
    targets=($tests)
    test_args=()
    for t in "${targets[@]}"; do test_args+=(--cargo-arg="$t"); done
    echo "== $name: $file ${re:+(matching $re)} with ${tests}"
    mkdir -p "$tree/mutants.out/$name"
    (cd "$tree" && nice -n 10 cargo mutants "${args[@]}" "${test_args[@]}") || true
    out="$tree/mutants.out/$name/mutants.out"
    for kind in caught missed timeout unviable; do
        n=0
        [ -f "$out/$kind.txt" ] && n=$(wc -l <"$out/$kind.txt")
        printf '%s %s\n' "$n" "$kind"
    done
done
