"""Registers TandemTest/Counter-v0 again, with 2-step episodes: importing this module instead
of test_envs changes what a run of that id does, which the settings walk
(tests/settings_walk.rs) uses to show that the config's `import` runs a user's modules
before gymnasium.make."""

import gymnasium as gym

from tests.gym_fixtures.test_envs import Counter

# Replaced on purpose: without the pop gymnasium warns about the override.
gym.registry.pop("TandemTest/Counter-v0")
gym.register("TandemTest/Counter-v0", entry_point=Counter, kwargs={"length": 2})
