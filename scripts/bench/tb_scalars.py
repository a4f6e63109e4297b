"""Prints the scalars of a tandem run's TensorBoard events as JSON:
{"tag": [[step, value], ...], ...}, read with TensorBoard's own EventAccumulator.

Usage: .deps/venv-tb/bin/python scripts/bench/tb_scalars.py RUN_DIR/tensorboard [TAG ...]
"""

import json
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    path, wanted = sys.argv[1], sys.argv[2:]
    # size_guidance 0 keeps every event instead of a reservoir sample.
    acc = EventAccumulator(path, size_guidance={"scalars": 0})
    acc.Reload()
    tags = wanted or acc.Tags()["scalars"]
    missing = [t for t in tags if t not in acc.Tags()["scalars"]]
    if missing:
        sys.exit(f"tb_scalars: {path} has no scalar tag(s) {missing}; it has {acc.Tags()['scalars']}")
    json.dump({t: [[e.step, e.value] for e in acc.Scalars(t)] for t in tags}, sys.stdout)


if __name__ == "__main__":
    main()
