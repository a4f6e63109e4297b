"""A picture and a rule, observed together: a lamp lights one corner of a grayscale picture
(a uint8 image entry), and a rule (a Discrete entry) says whether to point at the lit corner
(rule 0) or at the corner opposite it (rule 1). A round pays 1 for the right corner, 0 for
another; an episode is `rounds` rounds (8), each with a new lamp and rule.

Neither entry alone is enough: a policy that reads only the picture points at the lit corner
and scores 4 on average, one that reads only the rule scores 2, as pointing at random does;
the best policy scores 8.
"""

import gymnasium as gym
import numpy as np

# Corners clockwise from the top left, so that the opposite of corner c is (c + 2) % 4.
CORNERS = ((0, 0), (0, 1), (1, 1), (1, 0))


class Lamps(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, size=36, rounds=8):
        if size < 2 or size % 2 or rounds < 1:
            raise ValueError(f"the picture needs an even size of at least 2 and a round at least, got size={size}, rounds={rounds}")
        self.size, self.rounds = int(size), int(rounds)
        picture = gym.spaces.Box(0, 255, (self.size, self.size, 1), dtype=np.uint8)
        self.observation_space = gym.spaces.Dict({"picture": picture, "rule": gym.spaces.Discrete(2)})
        self.action_space = gym.spaces.Discrete(4)

    def _draw(self):
        self.lit = int(self.np_random.integers(4))
        self.rule = int(self.np_random.integers(2))
        half = self.size // 2
        row, col = CORNERS[self.lit]
        picture = np.zeros((self.size, self.size, 1), dtype=np.uint8)
        picture[row * half:(row + 1) * half, col * half:(col + 1) * half] = 255
        return {"picture": picture, "rule": self.rule}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.round = 0
        return self._draw(), {}

    def step(self, action):
        right = (self.lit + 2 * self.rule) % 4
        reward = 1.0 if int(action) == right else 0.0
        self.round += 1
        return self._draw(), reward, self.round >= self.rounds, False, {}
