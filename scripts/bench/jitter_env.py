"""A gymnasium CartPole-v1 whose steps now and then take longer, as a simulator's do when it
hits a costly contact, a level generator or a remote call: with probability `slow_p` a step
sleeps `slow_ms` milliseconds (sleeping, not computing, so the benchmark measures how the
sampler waits, not how the cores are shared). scripts/bench/ready_order.sh imports it through
the gymnasium bridge (`import "scripts.bench.jitter_env"`, from the repository's root)."""

import time

import gymnasium as gym
import numpy as np


class Jitter(gym.Wrapper):
    def __init__(self, env, slow_p, slow_ms):
        super().__init__(env)
        self.slow_p = float(slow_p)
        self.slow_s = float(slow_ms) / 1000.0
        self.draws = np.random.default_rng()

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.draws = np.random.default_rng(seed + 7919)
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        if self.draws.random() < self.slow_p:
            time.sleep(self.slow_s)
        return self.env.step(action)


def make(slow_p=0.05, slow_ms=20.0):
    return Jitter(gym.make("CartPole-v1"), slow_p, slow_ms)


gym.register("TandemBench/JitteryCartPole-v0", entry_point=make)
