"""Plays gymnasium's CartPole-v1 with a policy exported by `tandem export` (docs/export.md).

    tandem train experiments/cartpole.kdl --run-dir runs/cartpole
    tandem export runs/cartpole -o cartpole.pt
    python examples/export/cartpole.py cartpole.pt

Needs torch (the version tandem's libtorch is, or newer) and gymnasium; tandem is not needed.
"""

import sys

import gymnasium as gym
import torch

policy = torch.jit.load(sys.argv[1] if len(sys.argv) > 1 else "cartpole.pt")
env = gym.make("CartPole-v1")
returns = []
for episode in range(5):
    obs, _ = env.reset(seed=episode)
    done, total = False, 0.0
    while not done:
        # A batch of one observation in, one action out; the module casts to float32 itself.
        with torch.no_grad():
            action = policy(torch.as_tensor(obs).unsqueeze(0))
        obs, reward, terminated, truncated, _ = env.step(int(action[0]))
        total += float(reward)
        done = terminated or truncated
    returns.append(total)
    print(f"episode {episode + 1}: return {total:.0f}")
print(f"mean return over {len(returns)} episodes: {sum(returns) / len(returns):.1f}")
