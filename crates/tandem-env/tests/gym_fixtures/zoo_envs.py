"""A small PettingZoo Parallel environment that the pettingzoo bridge tests
(tests/pettingzoo_bridge.rs) build through `module "tests.gym_fixtures.zoo_envs"`.

Agents `scout_0` and `scout_1` observe 2 floats, `guard` 4; all act with Discrete(3). With
`masked`, every agent observes 4 floats in a Dict beside its `action_mask` (the scouts'
[0, 1, 1], the guard's [1, 1, 0]). Observation at step t: scouts
[t, seed], guard [t, seed, 10 + t, action taken]; each agent's reward is its action.
The game ends (truncated) after `length` steps (`DEFAULT_LENGTH`, 4, unless given); with `leave_at`, `guard` terminates alone at
that step while the scouts play on (with `leave_by` "truncation", it is truncated instead).
Like PettingZoo's own environments, a step refuses an action for an agent not in the game.

`escape` is a tiny game to learn, for the learner's test of agents that leave early: agents
`runner_0`, `runner_1` and `runner_2` observe Box(2) [t / 10, 1.0] at step t and act with
Discrete(2). Action 1 leaves the game at once (terminated): with reward +1 through the door,
which is open from step `DOOR` (4) on, and -1 against it before; action 0 stays, with reward 0.
The game ends after 10 steps (terminating those still in it, with reward 0) or when every
runner has left. A
uniformly random policy leaves before the door opens 7 times in 8 and scores about -0.75 a
runner; one that waits for the door scores 1.0."""

import numpy as np
from gymnasium import spaces

# Steps of a game when `length` is not given (zoo_short.py changes it).
DEFAULT_LENGTH = 4


class Zoo:
    metadata = {"name": "zoo_v0"}

    def __init__(self, length=None, leave_at=-1, leave_by="termination", masked=False):
        length = DEFAULT_LENGTH if length is None else length
        self.length, self.leave_at, self.masked = length, leave_at, masked
        self.leave_by = leave_by
        self.possible_agents = ["scout_0", "scout_1", "guard"]
        self.agents = []
        self.t, self.seed, self.last = 0, -1, {}
        box = lambda n: spaces.Box(-1e9, 1e9, (n,), np.float32)
        self._obs = {"scout_0": box(2), "scout_1": box(2), "guard": box(4)}
        if masked:
            self._obs = {a: spaces.Dict({"action_mask": spaces.MultiBinary(3), "obs": box(4)}) for a in self.possible_agents}

    def observation_space(self, agent):
        return self._obs[agent]

    def action_space(self, agent):
        return spaces.Discrete(3)

    def observe(self):
        out = {}
        for a in self.agents:
            v = [self.t, self.seed] if a != "guard" and not self.masked else [self.t, self.seed, 10 + self.t, self.last.get(a, -1)]
            v = np.asarray(v, dtype=np.float32)
            mask = np.array([1, 1, 0] if a == "guard" else [0, 1, 1], dtype=np.int8)
            out[a] = {"action_mask": mask, "obs": v} if self.masked else v
        return out

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t, self.last = 0, {}
        if seed is not None:
            self.seed = seed % 1000
        return self.observe(), {a: {} for a in self.agents}

    def step(self, actions):
        strangers = sorted(set(actions) - set(self.agents))
        if strangers:
            raise ValueError(f"actions given for {strangers}, which are not in the game (agents: {self.agents})")
        self.t += 1
        self.last = dict(actions)
        rewards = {a: float(actions[a]) for a in self.agents}
        leaves = {a: a == "guard" and self.t == self.leave_at for a in self.agents}
        by_truncation = self.leave_by == "truncation"
        trunc = {a: self.t >= self.length or (by_truncation and leaves[a]) for a in self.agents}
        term = {a: leaves[a] and not by_truncation for a in self.agents}
        obs = self.observe()
        if self.t >= self.length:
            self.agents = []
        elif self.t == self.leave_at:
            self.agents = [a for a in self.agents if a != "guard"]
        return obs, rewards, term, trunc, {a: {} for a in obs}

    def close(self):
        pass


def parallel_env(**kwargs):
    return Zoo(**kwargs)


class Escape:
    """The `escape` game of the module's documentation."""

    metadata = {"name": "escape_v0"}
    LENGTH = 10
    DOOR = 4

    def __init__(self):
        self.possible_agents = [f"runner_{k}" for k in range(3)]
        self.agents, self.t = [], 0

    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (2,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def observe(self):
        return {a: np.array([self.t / self.LENGTH, 1.0], dtype=np.float32) for a in self.agents}

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return self.observe(), {a: {} for a in self.agents}

    def step(self, actions):
        strangers = sorted(set(actions) - set(self.agents))
        if strangers:
            raise ValueError(f"actions given for {strangers}, which are not in the game (agents: {self.agents})")
        self.t += 1
        leave = {a: int(actions[a]) == 1 for a in self.agents}
        through = 1.0 if self.t >= self.DOOR else -1.0
        rewards = {a: through if leave[a] else 0.0 for a in self.agents}
        # The game's end is part of it (the door closes for good): a terminal state, not a time
        # limit to bootstrap across.
        term = {a: leave[a] or self.t >= self.LENGTH for a in self.agents}
        trunc = {a: False for a in self.agents}
        obs, infos = self.observe(), {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rewards, term, trunc, infos

    def close(self):
        pass


def escape(**kwargs):
    return Escape(**kwargs)


def long_game(**kwargs):
    return Zoo(**dict(kwargs, length=7))


def mixed_actions(**kwargs):
    env = Zoo(**kwargs)
    env.action_space = lambda agent: spaces.Discrete(2 if agent == "guard" else 3)
    return env


class Shifting(Zoo):
    """Loses `scout_1` from possible_agents at its second reset."""

    resets = 0

    def reset(self, seed=None, options=None):
        self.resets += 1
        if self.resets == 2:
            self.possible_agents = ["scout_0", "guard"]
        return super().reset(seed=seed, options=options)


def shifting(**kwargs):
    return Shifting(**kwargs)


class Sloppy(Zoo):
    """Breaks the Parallel API at step 2: with `fault` "unflagged", `guard` leaves `agents`
    without a flag set; with "no_reward", it stays in the game and gets no reward."""

    def __init__(self, fault, **kwargs):
        super().__init__(**kwargs)
        self.fault = fault

    def step(self, actions):
        obs, rewards, term, trunc, infos = super().step(actions)
        if self.t == 2 and self.fault == "unflagged":
            self.agents = [a for a in self.agents if a != "guard"]
        if self.t == 2 and self.fault == "no_reward":
            del rewards["guard"]
        return obs, rewards, term, trunc, infos


def sloppy(**kwargs):
    return Sloppy(**kwargs)


def two_scouts(**kwargs):
    env = Zoo(**kwargs)
    env.possible_agents = ["scout_0", "scout_1"]
    return env


def turns(**kwargs):
    """The same game as an AEC environment (PettingZoo's own conversion): its agents take
    turns, each move stored until every agent has moved, when the game steps."""
    from pettingzoo.utils.conversions import parallel_to_aec

    return parallel_to_aec(Zoo(**kwargs))
