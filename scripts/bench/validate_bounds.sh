#!/usr/bin/env bash
# The worst inputs `tandem validate` reads inside the config limits (docs/design.md, "Config
# size"): each one's wall time and peak memory, beside those of a shipped experiment measured in
# the same run (the binary's own memory, libtorch mapped, is most of the baseline).
#
#   scripts/bench/validate_bounds.sh [path/to/tandem]
set -euo pipefail
tandem=${1:-target/release/tandem}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" <<'PY'
import sys, os
d = sys.argv[1]
cap = 256 << 10   # tandem_config::MAX_CONFIG_BYTES
words = 20_000    # tandem_config::MAX_WORDS
head = 'experiment "x" {\n    env "cartpole"\n'
def write(name, text):
    open(os.path.join(d, name), "w").write(text)
# The most values one resolution parses: 20,000 words in one list.
write("dense.kdl", head + '    network "mlp" {\n        hidden' + " 1" * (words - 7) + "\n    }\n}\n")
# The most bytes: two files at the cap of comments without spaces (few words, every byte parsed).
comment = "// " + "x" * (cap - 4) + "\n"
write("comment.kdl", comment)
write("comments.kdl", head + '    include "comment.kdl"\n}\n' + comment[: cap - 80])
# The same with words: refused by the word budget before parsing.
write("prose.kdl", head + "}\n" + ("// many words of prose\n" * (cap // 24)))
# A string as long as the cap.
write("string.kdl", head + '    name "' + "a" * (cap - 60) + '"\n}\n')
# JSON: one array of 20,000 numbers.
write("dense.json", '{"name": "x", "env": {"game": "cartpole"}, "network": {"hidden": ['
      + ",".join(["1"] * (words - 7)) + "]}}")
PY
printf '%-34s %8s %10s %s\n' input seconds "peak MiB" verdict
for f in experiments/cartpole.kdl "$dir"/dense.kdl "$dir"/comments.kdl "$dir"/prose.kdl \
         "$dir"/string.kdl "$dir"/dense.json; do
    /usr/bin/time -o "$dir/time" -f '%e %M' "$tandem" validate "$f" >"$dir/out" 2>&1 || true
    read -r secs kib < <(tail -n1 "$dir/time")
    verdict=$(grep -E 'checked' "$dir/out" | head -n1 || true)
    printf '%-34s %8s %10.1f %s\n' "$(basename "$f")" "$secs" "$(echo "$kib / 1024" | bc -l)" "$verdict"
done
