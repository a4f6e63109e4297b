"""A corridor of `length` cells: the agent starts at a random cell in the left half and is
paid 1 for reaching the right end, less 0.01 for every step it takes.

Observations are the one-hot position; actions are 0 (left) and 1 (right). The best return
is about 1 - 0.01 * (steps to the end), so a policy that always goes right scores above 0.9
for the default length of 8.
"""

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, length=8):
        if length < 2:
            raise ValueError(f"a corridor needs at least 2 cells, got length={length}")
        self.length = int(length)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.length,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.position = 0

    def _observation(self):
        one_hot = np.zeros(self.length, dtype=np.float32)
        one_hot[self.position] = 1.0
        return one_hot

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = int(self.np_random.integers(0, self.length // 2))
        return self._observation(), {}

    def step(self, action):
        move = 1 if int(action) == 1 else -1
        self.position = min(max(self.position + move, 0), self.length - 1)
        reached = self.position == self.length - 1
        reward = 1.0 if reached else -0.01
        return self._observation(), reward, reached, False, {}
