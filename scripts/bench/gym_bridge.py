"""The Python side of scripts/bench/gym_bridge.sh: env steps per second of gymnasium's
AsyncVectorEnv(shared_memory=True), Stable-Baselines3's SubprocVecEnv, and a bare
in-process env.step loop, with uniformly random actions drawn before timing.

Usage: gym_bridge.py MODE ID ENVS STEPS   (MODE: async, sb3 or bare; one process per env
for async and sb3; bare steps ENVS environments in this process, one after the other)
Prints one JSON line.
"""

import json
import sys
import time

import gymnasium as gym
import numpy as np


def random_actions(space, steps, n):
    rng = np.random.default_rng(1)
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(0, space.n, size=(steps, n))
    return rng.uniform(space.low, space.high, size=(steps, n) + space.shape).astype(space.dtype)


def timed(step, actions, warmup):
    for t in range(warmup):
        step(actions[t])
    started = time.perf_counter()
    for t in range(len(actions)):
        step(actions[t])
    return time.perf_counter() - started


def main():
    mode, env_id, n, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    warmup = min(steps, 200)
    if mode == "async":
        envs = gym.vector.AsyncVectorEnv([lambda: gym.make(env_id)] * n, shared_memory=True)
        envs.reset(seed=0)
        actions = random_actions(envs.single_action_space, steps, n)
        seconds = timed(envs.step, actions, warmup)
        envs.close()
    elif mode == "sb3":
        from stable_baselines3.common.vec_env import SubprocVecEnv

        envs = SubprocVecEnv([lambda: gym.make(env_id)] * n)
        envs.seed(0)
        envs.reset()
        actions = random_actions(envs.action_space, steps, n)
        seconds = timed(envs.step, actions, warmup)
        envs.close()
    elif mode == "bare":
        envs = [gym.make(env_id) for _ in range(n)]
        for i, env in enumerate(envs):
            env.reset(seed=i)
        actions = random_actions(envs[0].action_space, steps, n)
        discrete = isinstance(envs[0].action_space, gym.spaces.Discrete)

        def step(batch):
            for env, a in zip(envs, batch):
                _, _, terminated, truncated, _ = env.step(int(a) if discrete else a)
                if terminated or truncated:
                    env.reset()

        seconds = timed(step, actions, warmup)
    else:
        sys.exit(f"unknown mode {mode!r} (async, sb3 or bare)")
    print(json.dumps({"mode": mode, "id": env_id, "envs": n, "processes": n if mode != "bare" else 1,
                      "steps_per_s": round(steps * n / seconds, 1)}))


if __name__ == "__main__":
    main()
