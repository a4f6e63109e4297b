"""`tandem export --format onnx`'s Python half (src/export/onnx.rs runs it with the `--python` the
user names): reads the TorchScript module tandem traced and checked, writes it as one ONNX
graph, and holds that graph, run by onnxruntime, to the module on random inputs before the
file is called done.

The graph: inputs `obs` (float32 `[B, ...]`) and, for a recurrent policy, `state` (`[B,
width]`); outputs `action` (the module's `forward`), then each of the module's other methods
by its name (`logits`; `mean` and `log_std`; `q_values`; `value`), then a recurrent policy's
`next_state`: a scripted wrapper whose `forward` calls each method, exported by torch's legacy
TorchScript-based exporter (its only one that takes a TorchScript module).

Argument: one JSON object: {"torchscript", "onnx", "obs_shape", "state_width" (null without),
"methods" (the module's methods besides forward, initial_state and next_state), "opset"}.
Exit status 3 with a line on stderr when a package is missing; 1 when the check fails."""

import importlib.util
import json
import os
import sys
import tempfile
import warnings


def needs(what):
    print(
        f"the ONNX export needs {what} in the Python it runs ({sys.executable}): "
        "pip install 'torch>=2.13' onnx onnxruntime, or name another with --python",
        file=sys.stderr,
    )
    sys.exit(3)


try:
    import torch
except ImportError:
    needs("torch")
try:
    import onnx
except ImportError:
    needs("onnx")
try:
    import onnxruntime
except ImportError:
    needs("onnxruntime")

spec = json.loads(sys.argv[1])
module = torch.jit.load(spec["torchscript"])
methods = spec["methods"]
recurrent = spec["state_width"] is not None


def graph(module):
    """Every method of the module as one scripted forward of several outputs (the exporter
    takes a script module's forward; a traced wrapper cannot call into a loaded one)."""
    args = "obs, state" if recurrent else "obs"
    calls = [f"self.module({args})"] + [f"self.module.{m}({args})" for m in methods]
    if recurrent:
        calls.append(f"self.module.next_state({args})")
    annotations = ", ".join(f"{a}: torch.Tensor" for a in args.split(", "))
    source = (
        "class Graph(torch.nn.Module):\n"
        "    def __init__(self, module):\n"
        "        super().__init__()\n"
        "        self.module = module\n"
        f"    def forward(self, {annotations}):\n"
        f"        return ({', '.join(calls)},)\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        # torch.jit.script reads a class's source from its file.
        f.write("import torch\n" + source)
    spec_ = importlib.util.spec_from_file_location("tandem_onnx_graph", f.name)
    loaded = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(loaded)
    try:
        return torch.jit.script(loaded.Graph(module))
    finally:
        os.unlink(f.name)


def example(batch, seed):
    generator = torch.Generator().manual_seed(seed)
    obs = torch.randn([batch] + spec["obs_shape"], generator=generator) * 2.0
    if not recurrent:
        return (obs,)
    return (obs, torch.randn([batch, spec["state_width"]], generator=generator) * 0.5)


inputs = ["obs"] + (["state"] if recurrent else [])
outputs = ["action"] + methods + (["next_state"] if recurrent else [])
with warnings.catch_warnings():
    # The legacy exporter says it is legacy, and that a ScriptMethod has no signature.
    warnings.simplefilter("ignore")
    scripted = graph(module)
    torch.onnx.export(
        scripted,
        example(2, 0),
        spec["onnx"],
        dynamo=False,
        input_names=inputs,
        output_names=outputs,
        dynamic_axes={name: {0: "batch"} for name in inputs + outputs},
        opset_version=spec["opset"],
    )
# An output whose rank the exporter lost (a recurrent policy's value) is given its shape, the
# batch first, as the module's output has it: ONNX requires a shape on every graph output.
model = onnx.load(spec["onnx"])
with torch.no_grad():
    shapes = [list(t.shape) for t in scripted(*example(2, 0))]
for output, shape in zip(model.graph.output, shapes):
    declared = output.type.tensor_type
    if not declared.HasField("shape"):
        for i, size in enumerate(shape):
            dim = declared.shape.dim.add()
            if i == 0:
                dim.dim_param = "batch"
            else:
                dim.dim_value = size
onnx.checker.check_model(model)
onnx.save(model, spec["onnx"])

# The graph, run by onnxruntime on inputs it was not traced on, against the module.
session = onnxruntime.InferenceSession(spec["onnx"], providers=["CPUExecutionProvider"])
given = example(7, 1)
got = session.run(outputs, {n: t.numpy() for n, t in zip(inputs, given)})
with torch.no_grad():
    want = scripted(*given)
for name, g, w in zip(outputs, got, want):
    w = w.numpy()
    if g.shape != w.shape or g.dtype != w.dtype:
        print(f"ONNX output {name} is {g.dtype} {list(g.shape)}, the module's {w.dtype} {list(w.shape)}", file=sys.stderr)
        sys.exit(1)
    exact = w.dtype.kind in "iub"
    worst = float(abs(g.astype("float64") - w.astype("float64")).max()) if g.size else 0.0
    if (exact and worst != 0.0) or worst > 1e-4 * (1.0 + float(abs(w).max())):
        print(f"ONNX output {name} differs from the module's by up to {worst}", file=sys.stderr)
        sys.exit(1)
print(json.dumps({"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__, "outputs": outputs}))
