"""Writes classic-control parity traces from gymnasium (Acrobot-v1, MountainCar-v0,
MountainCarContinuous-v0, Pendulum-v1 and CartPole-v1, made with `gymnasium.make`, so
with their registered time limits).

tandem's `cartpole` keeps its own seeding (its start states come from another
generator), so its trace checks the dynamics: every reset is recorded as the float64
state gymnasium drew, which the test puts the cart into.

Each trace is a list of episodes. An episode starts with `reset(seed=s)` or
`reset(seed=None)` (which continues the generator) and runs a policy until the
episode terminates or is truncated, or, for episodes marked as cut short, until a
fixed step count, when the next reset interrupts it. The Rust test
`crates/tandem-env/tests/classic_parity.rs` replays the same resets and actions
through tandem-env's games and must reproduce every observation bit, reward and flag.

File format (gzip-compressed, little-endian):
  header: b"TCTRACE1", game-name length u8, game name (tandem's name, ASCII),
          observation length u8, record count u32
  record: kind u8 (0 reset with a seed, 1 reset without, 2 step, 3 start at a
          state), then
          for a seeded reset: seed u64;
          for a start at a state: the state, float64 values (CartPole's four);
          for a step: action f32 (the index for discrete games), reward f32 (the
          float64 reward rounded to float32), terminated u8, truncated u8 (as
          gymnasium's TimeLimit reports them);
          then the observation, float32 values.

Run through scripts/parity/classic_venv.sh, which makes the venv.
"""

import gzip
import struct
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

BIG_SEED = 2**63 + 123_456_789  # two 32-bit words of entropy in SeedSequence


def acrobot_pump(obs, rng):
    """Torque in the direction the second link turns (pumps energy, reaches the goal),
    with a random action now and then."""
    if rng.random() < 0.1:
        return int(rng.integers(3))
    return 2 if obs[5] > 0 else 0


def car_pump(obs, rng):
    """Push the way the car moves: rocks it up to the flag."""
    return 2 if obs[1] >= 0 else 0


def car_continuous_pump(obs, rng):
    """Force with the velocity, now and then beyond the bounds (clipped) or small."""
    magnitude = [0.6, 1.0, 1.7][int(rng.integers(3))]
    return np.float32(magnitude if obs[1] >= 0 else -magnitude)


def pendulum_swing(obs, rng):
    """Torque with the angular speed (swings up), with noise, beyond the bounds at times."""
    return np.float32(np.clip(1.5 * np.sign(obs[2]) + rng.normal(0, 1), -3, 3))


def cartpole_balance(obs, rng):
    """Push the way the pole leans (balances long enough to reach the time limit), with
    a random push now and then."""
    if rng.random() < 0.05:
        return int(rng.integers(2))
    return 1 if obs[2] + 0.5 * obs[3] > 0 else 0


def random_discrete(n):
    return lambda obs, rng: int(rng.integers(n))


def random_box(bound):
    return lambda obs, rng: np.float32(rng.uniform(-bound, bound))


def resets_only(count):
    """Episodes of no step: many reset observations (Acrobot's first observation
    takes numpy's float32 cosine and sine, whose last bits need many samples)."""
    return [(None, None, 0)] * count


# (gymnasium id, tandem name, file stem, discrete, episodes); an episode is
# (seed or None, policy, step cap or None).
GAMES = [
    ("Acrobot-v1", "acrobot", "classic_acrobot", True, [
        (0, random_discrete(3), None),
        (None, acrobot_pump, None),
        (None, acrobot_pump, None),
        (BIG_SEED, random_discrete(3), 40),
        (7, acrobot_pump, None),
        (None, random_discrete(3), None),
        (None, acrobot_pump, None),
        (123, acrobot_pump, None),
        *resets_only(800),
    ]),
    ("MountainCar-v0", "mountain-car", "classic_mountain_car", True, [
        (0, random_discrete(3), None),
        (None, car_pump, None),
        (None, random_discrete(3), None),
        (BIG_SEED, car_pump, None),
        (None, car_pump, 30),
        (5, random_discrete(3), None),
        (None, car_pump, None),
        (None, car_pump, None),
        (99, car_pump, None),
        (None, random_discrete(3), None),
        *resets_only(100),
    ]),
    ("MountainCarContinuous-v0", "mountain-car-continuous", "classic_mountain_car_continuous", False, [
        (0, random_box(2.0), None),
        (None, car_continuous_pump, None),
        (None, car_continuous_pump, None),
        (BIG_SEED, car_continuous_pump, None),
        (3, random_box(1.0), 60),
        (None, car_continuous_pump, None),
        (None, car_continuous_pump, None),
        (11, car_continuous_pump, None),
        *resets_only(100),
    ]),
    ("Pendulum-v1", "pendulum", "classic_pendulum", False, [
        (0, random_box(3.0), None),
        (None, pendulum_swing, None),
        (None, random_box(2.0), None),
        (BIG_SEED, pendulum_swing, None),
        (None, pendulum_swing, 50),
        (4, random_box(3.0), None),
        (None, pendulum_swing, None),
        (None, pendulum_swing, None),
        (2024, pendulum_swing, None),
        (None, random_box(1.0), None),
        *resets_only(100),
    ]),
    # Last, so the policy draws of the games above stay as they were.
    ("CartPole-v1", "cartpole", "classic_cartpole", True, [
        (0, random_discrete(2), None),
        (None, random_discrete(2), None),
        (BIG_SEED, random_discrete(2), None),
        (None, cartpole_balance, None),
        (9, cartpole_balance, 120),
        (None, cartpole_balance, None),
        (None, random_discrete(2), None),
        *resets_only(50),
    ]),
]


def record_game(gym_id, discrete, episodes, policy_rng, state_resets):
    env = gym.make(gym_id)
    out = bytearray()
    count = 0
    ends = {"terminated": 0, "truncated": 0, "cut": 0, "reset only": 0}
    for seed, policy, cap in episodes:
        obs, _ = env.reset(seed=seed)
        if state_resets:
            out += struct.pack("<B", 3) + np.asarray(env.unwrapped.state, dtype="<f8").tobytes()
        elif seed is None:
            out += struct.pack("<B", 1)
        else:
            out += struct.pack("<BQ", 0, seed)
        out += np.asarray(obs, dtype="<f4").tobytes()
        count += 1
        if cap == 0:
            ends["reset only"] += 1
        steps = 0
        while cap != 0:
            action = policy(obs, policy_rng)
            gym_action = action if discrete else np.array([action], dtype=np.float32)
            obs, reward, terminated, truncated, _ = env.step(gym_action)
            out += struct.pack("<BffBB", 2, float(action), float(np.float32(reward)),
                               terminated, truncated)
            out += np.asarray(obs, dtype="<f4").tobytes()
            count += 1
            steps += 1
            if terminated or truncated:
                ends["terminated" if terminated else "truncated"] += 1
                break
            if cap is not None and steps == cap:
                ends["cut"] += 1
                break
    obs_len = env.observation_space.shape[0]
    return out, count, obs_len, ends


def write_uniform_draws(path):
    """gymnasium's `np_random` draws as bit patterns: per seed, five `random()` doubles
    and then five `uniform(-0.6, -0.4)` values (MountainCar's reset range)."""
    lines = ["# seed, then 5 random() and 5 uniform(-0.6, -0.4) as float64 bits"]
    for seed in [0, 1, 42, 2**32 - 1, 2**32, BIG_SEED, 2**64 - 1]:
        rng, _ = gym.utils.seeding.np_random(seed)
        draws = [rng.random() for _ in range(5)] + [rng.uniform(-0.6, -0.4) for _ in range(5)]
        bits = [struct.unpack("<Q", struct.pack("<d", d))[0] for d in draws]
        lines.append(" ".join(str(v) for v in [seed, *bits]))
    path.write_text("\n".join(lines) + "\n")
    print(f"{path.name}: {len(lines) - 1} seeds")


def main():
    out_dir = Path(sys.argv[1])
    write_uniform_draws(out_dir / "classic_numpy_uniform.txt")
    policy_rng = np.random.default_rng(20_26)
    for gym_id, name, stem, discrete, episodes in GAMES:
        body, count, obs_len, ends = record_game(
            gym_id, discrete, episodes, policy_rng, state_resets=name == "cartpole")
        header = b"TCTRACE1" + struct.pack("<B", len(name)) + name.encode()
        header += struct.pack("<BI", obs_len, count)
        path = out_dir / f"{stem}.bin.gz"
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(header + bytes(body))
        print(f"{path.name}: {count} records, episodes ending {ends}")


if __name__ == "__main__":
    main()
