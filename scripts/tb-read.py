"""Reads a log directory with TensorBoard's own readers and prints JSON.

Used by crates/tandem-summary/tests to check that tandem's event files read
back exactly. Run with the venv made by scripts/tb-read-setup.sh:

    .deps/venv-tb/bin/python scripts/tb-read.py LOG_DIR

Two views are printed:
- "accumulator": the raw protos, via
  tensorboard.backend.event_processing.event_accumulator.EventAccumulator;
- "provider": what the TensorBoard UI's plugins get, via the multiplexer data
  provider (after TensorBoard's own migration of legacy summaries), so a value
  that is stored but that a plugin would not show is caught too.
"""

import json
import sys

from tensorboard import context
from tensorboard.backend.event_processing import data_provider
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import plugin_event_accumulator
from tensorboard.backend.event_processing import plugin_event_multiplexer
from tensorboard.util import tensor_util

# Keep every event: TensorBoard samples down to a reservoir by default.
KEEP_ALL = 0
EVERYTHING = 10**9


def read_accumulator(log_dir):
    accumulator = event_accumulator.EventAccumulator(
        log_dir,
        size_guidance={
            event_accumulator.SCALARS: KEEP_ALL,
            event_accumulator.HISTOGRAMS: KEEP_ALL,
            event_accumulator.IMAGES: KEEP_ALL,
            event_accumulator.TENSORS: KEEP_ALL,
        },
    )
    accumulator.Reload()
    tags = accumulator.Tags()
    out = {
        "file_version": accumulator.file_version,
        "scalars": {},
        "histograms": {},
        "images": {},
        "tensors": {},
        "plugins": {},
    }
    for tag in tags["scalars"]:
        out["scalars"][tag] = [[e.step, e.value] for e in accumulator.Scalars(tag)]
    for tag in tags["histograms"]:
        out["histograms"][tag] = [
            {
                "step": e.step,
                "min": e.histogram_value.min,
                "max": e.histogram_value.max,
                "num": e.histogram_value.num,
                "sum": e.histogram_value.sum,
                "sum_squares": e.histogram_value.sum_squares,
                "bucket_limit": list(e.histogram_value.bucket_limit),
                "bucket": list(e.histogram_value.bucket),
            }
            for e in accumulator.Histograms(tag)
        ]
    for tag in tags["images"]:
        out["images"][tag] = [
            {
                "step": e.step,
                "width": e.width,
                "height": e.height,
                "png_hex": e.encoded_image_string.hex(),
            }
            for e in accumulator.Images(tag)
        ]
    for tag in tags["tensors"]:
        out["tensors"][tag] = [
            [e.step, tensor_util.make_ndarray(e.tensor_proto).item().decode("utf-8")]
            for e in accumulator.Tensors(tag)
        ]
        out["plugins"][tag] = accumulator.SummaryMetadata(tag).plugin_data.plugin_name
    return out


def read_provider(log_dir):
    multiplexer = plugin_event_multiplexer.EventMultiplexer(
        size_guidance={plugin_event_accumulator.TENSORS: KEEP_ALL},
        tensor_size_guidance={
            "scalars": KEEP_ALL,
            "histograms": KEEP_ALL,
            "images": KEEP_ALL,
            "text": KEEP_ALL,
        },
    )
    multiplexer.AddRunsFromDirectory(log_dir)
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, log_dir)
    ctx = context.RequestContext()
    experiment = "tandem"
    out = {"scalars": {}, "histograms": {}, "images": {}, "text": {}}

    for run, tags in provider.read_scalars(
        ctx, experiment_id=experiment, plugin_name="scalars", downsample=EVERYTHING
    ).items():
        for tag, points in tags.items():
            out["scalars"][tag] = [[p.step, p.value] for p in points]

    for run, tags in provider.read_tensors(
        ctx, experiment_id=experiment, plugin_name="histograms", downsample=EVERYTHING
    ).items():
        for tag, points in tags.items():
            # Each bucket is [left edge, right edge, count].
            out["histograms"][tag] = [
                {"step": p.step, "buckets": p.numpy.tolist()} for p in points
            ]

    for run, tags in provider.read_blob_sequences(
        ctx, experiment_id=experiment, plugin_name="images", downsample=EVERYTHING
    ).items():
        for tag, points in tags.items():
            entries = []
            for p in points:
                # The images plugin's blob sequence: width, height, then images.
                blobs = [provider.read_blob(ctx, blob_key=b.blob_key) for b in p.values]
                entries.append(
                    {
                        "step": p.step,
                        "width": int(blobs[0]),
                        "height": int(blobs[1]),
                        "png_hex": blobs[2].hex(),
                    }
                )
            out["images"][tag] = entries

    for run, tags in provider.read_tensors(
        ctx, experiment_id=experiment, plugin_name="text", downsample=EVERYTHING
    ).items():
        for tag, points in tags.items():
            out["text"][tag] = [
                [p.step, p.numpy.item().decode("utf-8")] for p in points
            ]
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tb-read.py LOG_DIR")
    log_dir = sys.argv[1]
    json.dump(
        {"accumulator": read_accumulator(log_dir), "provider": read_provider(log_dir)},
        sys.stdout,
    )


if __name__ == "__main__":
    main()
