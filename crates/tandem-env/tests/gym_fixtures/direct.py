"""Drives gymnasium directly, as the gymnasium bridge promises to: the first reset of
environment i is reset(seed=seeds[i]) (and action_space.seed), later resets unseeded,
an episode end resets at once. Writes what tandem's VecEnv would show, for
tests/gym_bridge.rs to compare byte for byte.

Usage: direct.py CONFIG_JSON ACTIONS_FILE OUTPUT_FILE
Output: the first observations (n x len f32), then per step: observations, final
observations (zero where the episode did not end), rewards (f32), terminated, truncated (u8).
"""

import json
import sys

import gymnasium as gym
import numpy as np

config = json.loads(sys.argv[1])
seeds, steps = config["seeds"], config["steps"]
n = len(seeds)
envs = [gym.make(config["id"]) for _ in seeds]
discrete = isinstance(envs[0].action_space, gym.spaces.Discrete)
dim = 1 if discrete else int(np.prod(envs[0].action_space.shape))
actions = np.fromfile(sys.argv[2], dtype=np.int64 if discrete else np.float32).reshape(steps, n, dim)
obs_len = int(np.prod(envs[0].observation_space.shape))
obs = np.zeros((n, obs_len), np.float32)
with open(sys.argv[3], "wb") as out:
    for i, (env, seed) in enumerate(zip(envs, seeds)):
        obs[i] = np.asarray(env.reset(seed=seed)[0]).reshape(-1)
        env.action_space.seed(seed)
    out.write(obs.tobytes())
    for t in range(steps):
        final = np.zeros_like(obs)
        rewards = np.zeros(n, np.float32)
        flags = np.zeros((2, n), np.uint8)
        for i, env in enumerate(envs):
            if discrete:
                action = int(actions[t, i, 0])
            else:
                action = actions[t, i].reshape(env.action_space.shape).astype(env.action_space.dtype)
            o, r, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                final[i] = np.asarray(o).reshape(-1)
                o, _ = env.reset()
            obs[i] = np.asarray(o).reshape(-1)
            rewards[i] = r
            flags[:, i] = (terminated, truncated)
        out.write(obs.tobytes() + final.tobytes() + rewards.tobytes() + flags.tobytes())
