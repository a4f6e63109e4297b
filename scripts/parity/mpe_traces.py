"""Writes the MPE parity traces from the `mpe2` 1.1.1 PyPI package (PettingZoo's Parallel API).

Each trace holds episodes of one configuration of simple_spread or simple_tag: the seed of the
episode's reset (or null where the reset continues the generator), the first observations, and
every step's actions, rewards, termination and truncation flags and observations of every agent.
The Rust test `crates/tandem-env/tests/mpe_parity.rs` resets the native games with the same
seeds, plays the same actions and must reproduce every observation (float32) and reward
(float64) exactly.

The actions are not uniform noise only: agents also head for each other (collisions, the
contact force), predators chase prey and prey runs past the edge (the boundary penalty, capped
at 10), so every branch of the physics and the rewards is met.

File format: gzip-compressed JSON, one object per configuration file:
  {"game", "args", "agents": [names], "episodes": [{"seed", "obs": [[agent obs]],
   "steps": [{"actions", "rewards", "terminated", "truncated", "obs"}]}]}
Numbers are written with Python's shortest round-trip repr, so every float32 and float64 value
reads back exactly.

Run through scripts/parity/mpe_venv.sh, which makes the venv.
"""

import gzip
import json
import sys
from pathlib import Path

import numpy as np
from mpe2 import simple_spread_v3, simple_tag_v3

CONFIGS = [
    ("mpe_simple_spread", "simple_spread", simple_spread_v3, {}),
    (
        "mpe_simple_spread_n4_continuous",
        "simple_spread",
        simple_spread_v3,
        {"N": 4, "local_ratio": 0.2, "max_cycles": 30, "continuous_actions": True},
    ),
    ("mpe_simple_tag", "simple_tag", simple_tag_v3, {}),
    (
        "mpe_simple_tag_2v2_continuous",
        "simple_tag",
        simple_tag_v3,
        {"num_good": 2, "num_adversaries": 2, "num_obstacles": 1, "continuous_actions": True},
    ),
]
EPISODES = 16


def toward(delta):
    """The discrete MPE move (1 -x, 2 +x, 3 -y, 4 +y) along the larger component of delta."""
    if abs(delta[0]) >= abs(delta[1]):
        return 2 if delta[0] > 0 else 1
    return 4 if delta[1] > 0 else 3


def as_continuous(move, rng):
    """A Box(0, 1, 5) action that pushes in the direction of a discrete move, with noise."""
    action = rng.uniform(0.0, 0.3, 5).astype(np.float32)
    if move:
        action[move] = np.float32(rng.uniform(0.6, 1.0))
    return action


def target_of(world, agent, game, rng, mode):
    """Where an agent heads in this episode's mode: None for a random move."""
    if mode == "random":
        return None
    others = [a for a in world.agents if a is not agent]
    if game == "simple_tag":
        if agent.adversary:
            prey = [a for a in world.agents if not a.adversary]
            return min(prey, key=lambda p: np.sum((p.state.p_pos - agent.state.p_pos) ** 2)).state.p_pos
        if mode == "edge":
            return np.array([6.0, 0.3])
    nearest = min(others, key=lambda o: np.sum((o.state.p_pos - agent.state.p_pos) ** 2))
    return nearest.state.p_pos


def actions_for(env, game, continuous, rng, mode):
    world = env.unwrapped.world
    actions = {}
    for agent in world.agents:
        target = target_of(world, agent, game, rng, mode)
        # Prey running for the edge never dawdles: the penalty's cap (10) needs |x| > 2.15.
        dawdles = rng.random() < 0.2 and not (mode == "edge" and game == "simple_tag")
        if target is None or dawdles:
            move = int(rng.integers(5))
        else:
            move = toward(target - agent.state.p_pos)
        actions[agent.name] = as_continuous(move, rng) if continuous else move
    return actions


def floats(values):
    return [float(v) for v in values]


def action_value(action):
    return floats(action) if isinstance(action, np.ndarray) else int(action)


def trace(game, module, args):
    env = module.parallel_env(**args)
    continuous = bool(args.get("continuous_actions", False))
    rng = np.random.default_rng(20261207)
    modes = ["random", "chase", "edge"]
    episodes = []
    for e in range(EPISODES):
        seed = None if e % 4 == 3 else 100 + e
        obs, _ = env.reset(seed=seed)
        agents = list(env.agents)
        episode = {"seed": seed, "obs": [floats(obs[a]) for a in agents], "steps": []}
        mode = modes[e % len(modes)]
        while env.agents:
            actions = actions_for(env, game, continuous, rng, mode)
            obs, rewards, terminations, truncations, _ = env.step(actions)
            episode["steps"].append(
                {
                    "actions": [action_value(actions[a]) for a in agents],
                    "rewards": [float(rewards[a]) for a in agents],
                    "terminated": [bool(terminations[a]) for a in agents],
                    "truncated": [bool(truncations[a]) for a in agents],
                    "obs": [floats(obs[a]) for a in agents],
                }
            )
        episodes.append(episode)
    return {"game": game, "args": args, "agents": agents, "episodes": episodes}


def main(out_dir):
    for stem, game, module, args in CONFIGS:
        path = Path(out_dir) / f"{stem}.json.gz"
        text = json.dumps(trace(game, module, args), separators=(",", ":"))
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(text.encode())
        print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1])
