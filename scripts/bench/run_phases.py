"""A tandem run's time by phase, read back from its scalars.jsonl: the benchmark scripts'
one reader of it (ready_order.sh, inference_batching.sh, sampling.sh, appo_vs_sf.sh).

Each `time/<phase>_s` scalar is that phase's time in one logging interval; a run's time in a
phase is their sum."""
import json


def phases(run_dir):
    """{phase: seconds} over the whole run in `run_dir`."""
    total = {}
    for line in open(f"{run_dir}/scalars.jsonl"):
        for key, value in json.loads(line).items():
            if key.startswith("time/") and isinstance(value, (int, float)):
                total[key[5:-2]] = total.get(key[5:-2], 0.0) + value
    return total


def shown(total, digits=1):
    """`phase seconds, ...` in name order, leaving out phases that round to zero."""
    return ", ".join(
        f"{name} {seconds:.{digits}f}"
        for name, seconds in sorted(total.items())
        if round(seconds, digits) > 0
    )


def rate_and_line(run_dir):
    """The run's steps/s (summary.json) and a line of it for the benchmark's table: steps/s,
    wall time and time by phase."""
    summary = json.load(open(f"{run_dir}/summary.json"))
    rate = summary["steps_per_second"]
    return rate, (f"{rate:.0f} steps/s ({summary['wall_seconds']:.1f} s); "
                  f"time by phase (s): {shown(phases(run_dir))}")
