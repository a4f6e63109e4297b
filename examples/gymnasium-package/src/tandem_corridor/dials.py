"""A combination lock of `dials` dials, each showing one of `sides` symbols: the agent sees the
target combination and the dials' current one (a Dict of two MultiDiscrete entries) and turns
every dial at once, each down, not at all or up (MultiDiscrete actions, one choice of three
per dial; turning wraps around). Matching the target pays 1 and ends the episode; every step
costs 0.05; an episode is cut after 20 steps.

Every dial is at most sides // 2 turns from its target, so with the default 4 sides a policy
that turns each dial the short way opens the lock in at most two steps and scores at least
0.9. A policy that turns the dials at random opens it in a quarter of its episodes and
scores about -0.6 on average (2,000 seeded episodes).

With `jam` above 0, each dial is jammed at each step with that probability: a jammed dial
must be left alone, and turning it breaks the lock (-1, the episode ends). Which dials are
jammed is not in the observation: `info["action_mask"]` says which actions are valid (per
dial: down, leave, up), as gymnasium's own Taxi does.
"""

import gymnasium as gym
import numpy as np


class Dials(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, dials=3, sides=4, jam=0.0):
        if dials < 1 or sides < 2:
            raise ValueError(f"a lock needs at least 1 dial of 2 sides, got dials={dials}, sides={sides}")
        if not 0.0 <= jam < 1.0:
            raise ValueError(f"jam is a probability below 1, got {jam}")
        self.dials, self.sides, self.jam = int(dials), int(sides), float(jam)
        combination = gym.spaces.MultiDiscrete([self.sides] * self.dials)
        self.observation_space = gym.spaces.Dict({"target": combination, "shown": combination})
        self.action_space = gym.spaces.MultiDiscrete([3] * self.dials)

    def _observation(self):
        return {"target": self.target.copy(), "shown": self.shown.copy()}

    def _info(self):
        # No draw without jams, so that the lock's episodes are the same as before jams existed.
        self.jammed = self.np_random.random(self.dials) < self.jam if self.jam > 0 else np.zeros(self.dials, bool)
        mask = np.ones((self.dials, 3), dtype=np.int8)
        mask[self.jammed, 0] = 0
        mask[self.jammed, 2] = 0
        return {"action_mask": mask.reshape(-1)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.target = self.np_random.integers(0, self.sides, self.dials)
        self.shown = self.np_random.integers(0, self.sides, self.dials)
        while np.array_equal(self.shown, self.target):
            self.shown = self.np_random.integers(0, self.sides, self.dials)
        return self._observation(), self._info()

    def step(self, action):
        turns = np.asarray(action, dtype=np.int64) - 1
        if np.any(turns[self.jammed] != 0):
            return self._observation(), -1.0, True, False, {"action_mask": np.ones(3 * self.dials, dtype=np.int8)}
        self.shown = (self.shown + turns) % self.sides
        opened = bool(np.array_equal(self.shown, self.target))
        reward = (1.0 if opened else 0.0) - 0.05
        return self._observation(), reward, opened, False, self._info()
