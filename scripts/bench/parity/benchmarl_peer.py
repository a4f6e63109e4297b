"""The BenchMARL side of a parity case (scripts/bench/parity/parity.py runs it).

Trains BenchMARL 1.5.2's own algorithm (IPPO), unmodified, through its Python API
(benchmarl.experiment.Experiment with an ExperimentConfig, an algorithm config, a task and an
MlpConfig), with BenchMARL's defaults except the fields the case passes as JSON, and writes every
finished episode's score with the global step it ended at, as sb3_peer.py does:
  {"episodes": [[step, score], ...], "final": mean of the last 20, "final_n": ...}

- Score: an episode's per-agent return (the sum of one agent's rewards over the episode, from
  BenchMARL's RewardSum transform, `("next", group, "episode_reward")` where the episode ends),
  averaged over the group's agents: one value per finished episode of an environment.
- Steps: tandem's unit, agent steps. BenchMARL counts environment frames (one frame steps all
  of a group's agents: `batch.numel()` of a batch shaped [envs, time]), so --steps N runs
  `max_n_frames = N / agents` and an episode ending at frame f is logged at step f * agents.
- The environment: PettingZoo's simple_spread_v3 as mpe2 1.1.1 ships it (PettingZoo >= 1.25
  moved MPE out; torchrl 0.11's PettingZooEnv looks a task up in PettingZoo's table of
  environments, `pettingzoo.utils.all_modules.all_environments`, by key or by module name).
  --mpe2 TASK puts a table holding mpe2's module of that name in its place before BenchMARL
  builds the environment (PettingZoo 1.27's own table cannot be imported without its Atari
  dependencies, and holds no MPE); nothing of BenchMARL's or torchrl's code is changed.
- Evaluation, loggers, the marl-eval JSON, rendering and checkpoints are turned off: the
  episodes of training are the ones reported, as the other peers report theirs.

Run with .deps/venv-benchmarl's python (scripts/bench/parity/benchmarl_venv.sh):
  benchmarl_peer.py --algo ippo --env pettingzoo --task simple_spread --seed N --steps N --out FILE
      [--mpe2 simple_spread_v3] [--experiment JSON] [--algorithm JSON] [--task-config JSON]
      [--model JSON]
--model takes MlpConfig's fields; "activation_class" and "layer_class" name torch.nn classes.
Threads: torch.set_num_threads(1) here as well as OMP_NUM_THREADS from the runner.
"""

import argparse
import json
import os
import statistics
import time

import torch
from benchmarl.experiment.callback import Callback

# Seconds between two writes of the episodes so far (episodes.partial.json beside --out), for
# `run.sh --progress`.
PARTIAL_EVERY_SECONDS = 60


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--algo", required=True, choices=["ippo", "mappo"])
    ap.add_argument("--env", required=True, choices=["pettingzoo"])
    ap.add_argument("--task", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True, help="agent steps (tandem's unit)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--mpe2", help="mpe2's module of this name as PettingZoo's table of environments")
    ap.add_argument("--experiment", default="{}")
    ap.add_argument("--algorithm", default="{}")
    ap.add_argument("--task-config", default="{}")
    ap.add_argument("--model", default="{}")
    args = ap.parse_args()

    import importlib

    torch.set_num_threads(1)
    if args.mpe2:
        # PettingZoo 1.27's table imports its Atari games, which need multi_agent_ale_py (not
        # installed; torchrl's fallback then imports pettingzoo.mpe, which only raises "moved to
        # mpe2"). The table is given here holding mpe2's module alone.
        import sys
        import types

        import pettingzoo.utils

        table = types.ModuleType("pettingzoo.utils.all_modules")
        table.all_environments = {f"mpe/{args.mpe2}": importlib.import_module(f"mpe2.{args.mpe2}")}
        sys.modules["pettingzoo.utils.all_modules"] = table

    from benchmarl.algorithms import IppoConfig, MappoConfig
    from benchmarl.environments import PettingZooTask
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    algo_config = {"ippo": IppoConfig, "mappo": MappoConfig}[args.algo].get_from_yaml()
    for k, v in json.loads(args.algorithm).items():
        assert hasattr(algo_config, k), f"no algorithm field {k}"
        setattr(algo_config, k, v)
    task = getattr(PettingZooTask, args.task.upper()).get_from_yaml()
    for k, v in json.loads(args.task_config).items():
        assert k in task.config, f"no task field {k} (has {sorted(task.config)})"
        task.config[k] = v
    model_config = MlpConfig.get_from_yaml()
    for k, v in json.loads(args.model).items():
        if k in ("activation_class", "layer_class"):
            v = getattr(torch.nn, v)
        assert hasattr(model_config, k), f"no model field {k}"
        setattr(model_config, k, v)

    config = ExperimentConfig.get_from_yaml()
    overrides = {
        "sampling_device": "cpu", "train_device": "cpu", "buffer_device": "cpu",
        "evaluation": False, "render": False, "loggers": [], "create_json": False,
        "checkpoint_interval": 0, "checkpoint_at_end": False,
        "save_folder": os.path.dirname(os.path.abspath(args.out)),
    }
    overrides.update(json.loads(args.experiment))
    for k, v in overrides.items():
        assert hasattr(config, k), f"no experiment field {k}"
        setattr(config, k, v)

    partial = args.out.removesuffix(".json") + ".partial.json"
    collect = Collect(partial)
    agents = task.config.get("N")
    if agents is None:
        raise SystemExit("benchmarl_peer: the task config names no agent count N")
    if args.steps % agents:
        raise SystemExit(f"--steps {args.steps} is not a multiple of the {agents} agents")
    config.max_n_frames = args.steps // agents
    config.max_n_iters = None

    experiment = Experiment(task=task, algorithm_config=algo_config, model_config=model_config,
                            critic_model_config=model_config, seed=args.seed, config=config,
                            callbacks=[collect])
    experiment.run()
    episodes = collect.episodes
    last = [s for _, s in episodes[-20:]]
    write(args.out, {"episodes": episodes, "final": statistics.fmean(last) if last else None,
                     "final_n": len(last), "diagnostics": {},
                     "peer_frames": collect.frames, "agents": collect.agents})
    if os.path.exists(partial):
        os.remove(partial)


class Collect(Callback):
    """Every episode that ended in a collected batch: its agents' returns, averaged, at the
    agent step it ended (BenchMARL pickles its callbacks, so this class is at module level)."""

    def __init__(self, partial):
        super().__init__()
        self.partial = partial
        self.episodes = []
        self.frames = 0
        self.agents = None
        self.written = time.time()

    def on_batch_collected(self, batch):
        nxt = batch.get("next")
        for group in self.experiment.group_map:
            returns = nxt.get((group, "episode_reward"))  # [envs, time, agents, 1]
            if (group, "done") in nxt.keys(True):
                done = nxt.get((group, "done"))
            else:
                done = nxt.get("done").unsqueeze(-2).expand(returns.shape)
            envs, steps, agents = returns.shape[0], returns.shape[1], returns.shape[2]
            self.agents = agents
            # SerialEnv steps its environments in lockstep: the batch is [envs, time].
            ended = done.squeeze(-1).any(-1)  # [envs, time]
            for t in range(steps):
                frame = self.frames + (t + 1) * envs
                for e in range(envs):
                    if ended[e, t]:
                        self.episodes.append([frame * agents, float(returns[e, t, :, 0].mean())])
        self.frames += batch.numel()
        if time.time() - self.written >= PARTIAL_EVERY_SECONDS:
            write(self.partial, {"episodes": self.episodes})
            self.written = time.time()


def write(path, value):
    """`value` as JSON at `path`, replaced whole (a reader never sees half a file)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(value, f)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
