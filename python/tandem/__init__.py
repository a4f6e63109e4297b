"""tandem from Python: a thin layer over the `tandem` binary, so a notebook or a search (Optuna,
say) trains and reads runs exactly as the command line does, with nothing of tandem rebuilt here.

    import tandem
    run = tandem.train("experiments/cartpole.kdl", seed=3, algorithm__lr=1e-3)
    run.final_score, run.scalars             # summary.json; scalars.jsonl as a DataFrame
    policy = tandem.load(run.dir)            # the newest checkpoint's policy
    action, _ = policy.predict(obs)          # tandem's greedy action
    tandem.validate("my.kdl").diagnostics    # what `tandem validate` says, as dicts

The binary is `$TANDEM_BIN`, else `tandem` on the PATH. Settings given as keywords are
`--set`s: `__` separates a path's sections and `_` stands for `-` (`train__total_steps=10_000`
is `--set train.total-steps=10000`); `overrides={"algorithm.lr": 3e-4}` takes paths as written.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["TandemError", "Run", "Policy", "Validation", "train", "load", "validate"]


class TandemError(RuntimeError):
    """The binary failed: its exit status (2: a mistake in what was asked, 1: a failure while
    running, 130 and 75: interrupted) and what it printed."""

    def __init__(self, command, status, output):
        self.status, self.output = status, output
        last = output.strip().splitlines()[-8:]
        super().__init__(f"`{' '.join(command)}` exited with {status}:\n" + "\n".join(last))


def binary():
    """The `tandem` executable this package drives."""
    found = os.environ.get("TANDEM_BIN") or shutil.which("tandem")
    if not found:
        raise TandemError(["tandem"], 127, "no tandem binary: set TANDEM_BIN to its path, or put `tandem` on the PATH (cargo install --path . in tandem's repository)")
    return found


def _call(*args, check=True):
    command = [binary(), *map(str, args)]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and done.returncode != 0:
        raise TandemError(command, done.returncode, done.stdout)
    return done


def _kdl(value):
    """A Python value as `--set` writes it: KDL's own value syntax."""
    if value is None:
        return "#null"
    if isinstance(value, bool):
        return "#true" if value else "#false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return " ".join(_kdl(v) for v in value)
    return json.dumps(str(value))


def _sets(overrides, settings):
    pairs = dict(overrides or {})
    for name, value in settings.items():
        pairs[".".join(part.replace("_", "-") for part in name.split("__"))] = value
    args = []
    for path, value in pairs.items():
        args += ["--set", f"{path}={_kdl(value)}"]
    return args


def _config_file(config, folder):
    """A path to `config`: as given when it names a file; else KDL text (or a dict, as JSON)
    written into `folder`, where its includes are then looked up."""
    if isinstance(config, dict):
        path = Path(folder) / "experiment.json"
        path.write_text(json.dumps(config))
        return path
    if isinstance(config, Path) or ("{" not in config and "\n" not in config):
        return Path(config)
    path = Path(folder) / "experiment.kdl"
    path.write_text(config)
    return path


class Run:
    """A run directory: what `tandem train` wrote there."""

    def __init__(self, run_dir):
        self.dir = Path(run_dir)

    def __repr__(self):
        return f"Run({str(self.dir)!r})"

    @property
    def summary(self):
        """summary.json: the final score, steps, episodes, wall time, config hash."""
        return json.loads((self.dir / "summary.json").read_text())

    @property
    def final_score(self):
        return self.summary["final_score"]

    @property
    def config(self):
        """The resolved config the run trained, as KDL text (resolved.kdl)."""
        return (self.dir / "resolved.kdl").read_text()

    @property
    def scalars(self):
        """Every logged scalar (scalars.jsonl), one row a step: a pandas DataFrame indexed by
        step where pandas is installed, else a list of dicts."""
        rows = [json.loads(line) for line in (self.dir / "scalars.jsonl").read_text().splitlines() if line]
        try:
            import pandas
        except ImportError:
            return rows
        return pandas.DataFrame(rows).groupby("step").first()

    def policy(self, checkpoint=None, policy=None):
        return load(self.dir, checkpoint=checkpoint, policy=policy)


def train(config, *, run_dir=None, overrides=None, **settings):
    """Trains `config` (a file's path, KDL text, or a dict of the JSON form) with the given
    settings as `--set`s, and returns the run. `run_dir` defaults to tandem's own choice under
    `log.dir`. Raises TandemError when the binary fails."""
    with tempfile.TemporaryDirectory(prefix="tandem-") as folder:
        args = ["train", _config_file(config, folder), *_sets(overrides, settings)]
        if run_dir is not None:
            args += ["--run-dir", run_dir]
        done = _call(*args)
    said = [line for line in done.stdout.splitlines() if line.startswith("run directory: ")]
    if run_dir is None and not said:
        raise TandemError(args, 0, "tandem train did not say its run directory:\n" + done.stdout)
    return Run(run_dir if run_dir is not None else said[-1][len("run directory: "):])


class Validation:
    """What `tandem validate --format json` says of one file: `valid`, and `diagnostics`, each
    a dict with its `message`, `code`, `severity`, `line`, `column`, `label` and `help`."""

    def __init__(self, report):
        self.valid = report["valid"]
        self.diagnostics = report["diagnostics"]
        self.hash = report.get("hash")
        self.steps = report.get("steps")

    def __repr__(self):
        return f"Validation(valid={self.valid}, {len(self.diagnostics)} diagnostic(s))"


def validate(config, *, overrides=None, deep=False, **settings):
    """Checks `config` (as `train` takes it) with the settings, as `tandem validate` does."""
    with tempfile.TemporaryDirectory(prefix="tandem-") as folder:
        args = ["validate", "--format", "json", _config_file(config, folder), *_sets(overrides, settings)]
        if deep:
            args.append("--deep")
        done = _call(*args, check=False)
    if done.returncode not in (0, 1):
        raise TandemError(args, done.returncode, done.stdout)
    return Validation(json.loads(done.stdout)["files"][0])


class Policy:
    """A checkpoint's policy as `tandem export` writes it, acting as `tandem play --greedy`
    does: run by torch (the TorchScript module, `.pt`) or by onnxruntime (the ONNX graph,
    `.onnx`). `obs_shape`, one observation's shape, tells one observation from a batch."""

    def __init__(self, path, obs_shape=None):
        self.path = Path(path)
        if self.path.suffix == ".onnx":
            import onnxruntime

            self._session = onnxruntime.InferenceSession(str(self.path), providers=["CPUExecutionProvider"])
            inputs = self._session.get_inputs()
            self.recurrent = len(inputs) == 2
            self.obs_shape = list(inputs[0].shape[1:])
        else:
            import torch

            self._module = torch.jit.load(str(self.path))
            self.recurrent = hasattr(self._module, "initial_state")
            self.obs_shape = None if obs_shape is None else list(obs_shape)
            self._state_width = None

    def predict(self, obs, state=None, episode_start=None, deterministic=True):
        """tandem's action for `obs` (one observation, or a batch `[B, ...]`) and, for a
        recurrent policy, the state after it: `(action, state)` (state `None` otherwise), as
        Stable-Baselines3's `predict` returns. A recurrent policy starts from zeros where
        `state` is `None` or `episode_start` is true. Only greedy actions: the export holds the
        policy's deterministic action."""
        import numpy as np

        if not deterministic:
            raise ValueError("tandem's exported policies act greedily (as `tandem play --greedy`): pass deterministic=True")
        obs = np.asarray(obs, dtype=np.float32)
        single = self.obs_shape is not None and list(obs.shape) == self.obs_shape
        batch = obs[None] if single else obs
        if self.recurrent:
            state = self._start(batch, state, episode_start)
        action, state = self._run(batch, state)
        return (action[0] if single else action), state

    def _start(self, batch, state, episode_start):
        import numpy as np

        width = self._width(batch)
        zeros = np.zeros((len(batch), width), dtype=np.float32)
        if state is None:
            return zeros
        state = np.asarray(state, dtype=np.float32).reshape(len(batch), width)
        if episode_start is not None:
            starts = np.asarray(episode_start, dtype=bool).reshape(-1, 1)
            state = np.where(starts, zeros, state)
        return state

    def _width(self, batch):
        """A recurrent state's width: the graph's declared input, or what the module's
        `initial_state` gives, asked once."""
        if hasattr(self, "_session"):
            return self._session.get_inputs()[1].shape[1]
        if self._state_width is None:
            import torch

            self._state_width = self._module.initial_state(torch.from_numpy(batch[:1])).shape[1]
        return self._state_width

    def _run(self, batch, state):
        if hasattr(self, "_session"):
            feed = {"obs": batch, **({"state": state} if self.recurrent else {})}
            names = [o.name for o in self._session.get_outputs()]
            out = dict(zip(names, self._session.run(None, feed)))
            return out["action"], out.get("next_state")
        import torch

        with torch.no_grad():
            inputs = [torch.from_numpy(batch)]
            if self.recurrent:
                inputs.append(torch.from_numpy(state))
            action = self._module(*inputs).numpy()
            next_state = self._module.next_state(*inputs).numpy() if self.recurrent else None
        return action, next_state


def load(run_dir, checkpoint=None, policy=None, obs_shape=None):
    """The policy of `run_dir`'s newest checkpoint (or `checkpoint`: an update number or
    "best"; `policy`: one of a run of several), exported as TorchScript into a temporary file
    and run by torch. A path to an exported `.pt` (with `obs_shape`) or `.onnx` file is loaded
    as it is."""
    path = Path(run_dir)
    if path.is_file() and path.suffix in (".pt", ".onnx") and "checkpoints" not in path.parts:
        return Policy(path, obs_shape)
    exported = Path(tempfile.mkdtemp(prefix="tandem-policy-")) / "policy.pt"
    args = ["export", path, "-o", exported]
    if checkpoint is not None:
        args += ["--checkpoint", checkpoint]
    if policy is not None:
        args += ["--policy", policy]
    said = _call(*args).stdout
    # The export names the observations it takes: "obs [batch, 4]".
    shape = re.search(r"obs \[batch((?:, \d+)*)\]", said)
    if shape is None:
        raise TandemError(args, 0, "tandem export did not say its observation shape:\n" + said)
    return Policy(exported, [int(d) for d in shape.group(1).split(", ")[1:]])
