"""Prints TFRecord framings made by TensorBoard's own RecordWriter, as hex.

The unit tests of crates/tandem-summary/src/record.rs compare tandem's framing
against these bytes. Run with the venv made by scripts/tb-read-setup.sh:

    .deps/venv-tb/bin/python scripts/tb-read-golden.py
"""

import io

from tensorboard.summary.writer.record_writer import RecordWriter

for payload in (b"", b"hello", b"brain.Event:2"):
    sink = io.BytesIO()
    RecordWriter(sink).write(payload)
    print(repr(payload), sink.getvalue().hex())
