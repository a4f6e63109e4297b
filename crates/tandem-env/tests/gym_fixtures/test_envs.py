"""Small gymnasium environments that the gymnasium bridge tests (tests/gym_bridge.rs)
register by importing this module (`imports: ["tests.gym_fixtures.test_envs"]`)."""

import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Counter(gym.Env):
    """Observation [t, seed-derived value]; ends after `length` steps. Optional faults:
    raise at step `raise_at` (only in the environment first reset with `raise_seed`, when
    given), sleep `sleep` seconds in every step, print on every step, a NaN as the second
    observation entry at step `nan_obs_at`, a reward of `bad_reward` at step `bad_reward_at`."""

    def __init__(
        self, length=5, raise_at=-1, raise_seed=-1, sleep=0.0, chatty=False, obs_space=None, act_space=None,
        nan_obs_at=-1, bad_reward_at=-1, bad_reward=float("nan"),
    ):
        self.nan_obs_at, self.bad_reward_at, self.bad_reward = nan_obs_at, bad_reward_at, bad_reward
        self.observation_space = obs_space or spaces.Box(-1e9, 1e9, (2,), np.float64)
        self.action_space = act_space or spaces.Discrete(3)
        self.length, self.raise_at, self.sleep, self.chatty = length, raise_at, sleep, chatty
        self.raise_seed, self.first_seed = raise_seed, None
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.first_seed is None:
            self.first_seed = seed
        self.t = 0
        self.base = float(self.np_random.integers(0, 1000))
        return self._obs(), {}

    def _obs(self):
        return np.array([self.t, self.base], dtype=np.float64)

    def step(self, action):
        if self.chatty:
            print("a user print that must not reach the protocol")
        if self.sleep:
            time.sleep(self.sleep)
        self.t += 1
        if self.t == self.raise_at and self.raise_seed in (-1, self.first_seed):
            raise ValueError("boom from the user's step")
        obs = self._obs()
        if self.t == self.nan_obs_at:
            obs[1] = np.nan
        reward = self.bad_reward if self.t == self.bad_reward_at else float(action)
        return obs, reward, self.t >= self.length, False, {}


class Image(gym.Env):
    """An RGB uint8 frame 12x10x3 whose pixels encode the step count."""

    observation_space = spaces.Box(0, 255, (12, 10, 3), np.uint8)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        frame = np.arange(12 * 10 * 3, dtype=np.int64).reshape(12, 10, 3)
        return ((frame + 7 * self.t) % 256).astype(np.uint8)

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, self.t >= 4, False, {}


class Drawn(gym.Env):
    """A seeded random walk [t, x] that draws itself: a 4x6 RGB frame whose pixel
    (h, w, c) is (h*18 + w*3 + c + 10*t) % 256, blue at (0, 0) the walk's x in tenths.
    Ends after 6 steps. `fault` makes render() misbehave: "raise", "none" (returns None)
    or "gray" (a 2-D array)."""

    metadata = {"render_modes": ["rgb_array"]}
    observation_space = spaces.Box(-1e9, 1e9, (2,), np.float64)
    action_space = spaces.Discrete(2)

    def __init__(self, render_mode=None, fault=""):
        self.render_mode, self.fault = render_mode, fault

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.x = float(self.np_random.normal())
        return self._obs(), {}

    def _obs(self):
        return np.array([self.t, self.x], dtype=np.float64)

    def step(self, action):
        self.t += 1
        self.x += action - 0.5 + 0.1 * float(self.np_random.normal())
        return self._obs(), float(self.np_random.random()), self.t >= 6, False, {}

    def render(self):
        if self.fault == "raise":
            raise RuntimeError("no picture today")
        if self.fault == "none" or self.render_mode != "rgb_array":
            return None
        if self.fault == "gray":
            return np.zeros((4, 6), dtype=np.uint8)
        frame = np.arange(4 * 6 * 3, dtype=np.int64).reshape(4, 6, 3)
        frame = ((frame + 10 * self.t) % 256).astype(np.uint8)
        frame[0, 0, 2] = int(round(self.x * 10)) % 256
        return frame


class Spawner(Counter):
    """A Counter that starts a long `sleep` of its own when made and writes its pid to
    `pid_file`: a process the environment owns, which must not outlive the run."""

    def __init__(self, pid_file, **kwargs):
        super().__init__(**kwargs)
        import subprocess

        self.sleeper = subprocess.Popen(["sleep", "600"])
        with open(pid_file, "a") as f:
            f.write(f"{self.sleeper.pid}\n")


class Structured(gym.Env):
    """A Dict observation of every space kind tandem encodes, its values a function of the
    step t: flags MultiBinary [t % 2, 1], grid MultiDiscrete [t % 2, t % 3], pair Tuple
    (t % 2, [0.5]), pos Discrete(5, start=1) 1 + t % 5, vel Box [t / 10, -t / 10]. Ends after
    `length` steps; `bad_pos_at` returns pos 9 (outside its space) at that step, `no_grid_at`
    an observation without its `grid` entry."""

    observation_space = spaces.Dict(
        {
            "vel": spaces.Box(-10, 10, (2,), np.float64),
            "pos": spaces.Discrete(5, start=1),
            "pair": spaces.Tuple((spaces.Discrete(2), spaces.Box(0, 1, (1,), np.float32))),
            "grid": spaces.MultiDiscrete([2, 3]),
            "flags": spaces.MultiBinary(2),
        }
    )
    action_space = spaces.Discrete(2)

    def __init__(self, length=7, bad_pos_at=-1, no_grid_at=-1):
        self.length, self.bad_pos_at, self.no_grid_at = length, bad_pos_at, no_grid_at

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        t = self.t
        obs = {
            "vel": np.array([t / 10, -t / 10]),
            "pos": 9 if t == self.bad_pos_at else 1 + t % 5,
            "pair": (t % 2, np.array([0.5], dtype=np.float32)),
            "grid": np.array([t % 2, t % 3]),
            "flags": np.array([t % 2, 1], dtype=np.int8),
        }
        if t == self.no_grid_at:
            del obs["grid"]
        return obs

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, self.t >= self.length, False, {}


class PictureBeside(gym.Env):
    """A Dict of a 4x5x3 uint8 frame between two vector entries in key order: a Discrete(3)
    `a` holding t % 3, the frame, whose pixel (h, w, c) is (t + 40 h + 7 w + 100 c) % 256, and
    a Box `z` [t, -1]. With `second`, a 2x2 uint8 `glance` image beside the frame. Ends
    after 6 steps."""

    action_space = spaces.Discrete(2)

    def __init__(self, second=False):
        entries = {
            "a": spaces.Discrete(3),
            "frame": spaces.Box(0, 255, (4, 5, 3), np.uint8),
            "z": spaces.Box(-10, 10, (2,), np.float32),
        }
        if second:
            entries["glance"] = spaces.Box(0, 255, (2, 2), np.uint8)
        self.observation_space = spaces.Dict(entries)
        self.second = second

    def _obs(self):
        t = self.t
        h, w, c = np.meshgrid(np.arange(4), np.arange(5), np.arange(3), indexing="ij")
        obs = {
            "a": t % 3,
            "frame": ((t + 40 * h + 7 * w + 100 * c) % 256).astype(np.uint8),
            "z": np.array([t, -1], dtype=np.float32),
        }
        if self.second:
            obs["glance"] = np.zeros((2, 2), dtype=np.uint8)
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, self.t >= 6, False, {}


class Masked(gym.Env):
    """Discrete(4) actions, valid by turns: [1, 1, 0, 0] at even steps t, [0, 0, 1, 1] at odd
    ones, given in `info["action_mask"]` or, with `source="observation"`, as the
    `action_mask` entry of a Dict observation {"action_mask", "x": [t]}. The reward is 1 for a
    valid action, -1 for an invalid one; ends after 5 steps. `fault` breaks the mask at step 2:
    "missing", "long" (5 entries), "none-valid" (all 0), "two" (an entry of 2)."""

    action_space = spaces.Discrete(4)

    def __init__(self, source="info", fault=""):
        self.source, self.fault = source, fault
        x = spaces.Box(0, 100, (1,), np.float32)
        if source == "observation":
            self.observation_space = spaces.Dict({"action_mask": spaces.MultiBinary(4), "x": x})
        else:
            self.observation_space = x

    def _mask(self):
        mask = np.array([1, 1, 0, 0] if self.t % 2 == 0 else [0, 0, 1, 1], dtype=np.int8)
        if self.t == 2:
            mask = {
                "missing": None,
                "long": np.ones(5, dtype=np.int8),
                "none-valid": np.zeros(4, dtype=np.int8),
                "two": np.array([2, 1, 0, 0]),
            }.get(self.fault, mask)
        return mask

    def _result(self):
        x = np.array([self.t], dtype=np.float32)
        mask = self._mask()
        if self.source == "observation":
            return {"action_mask": mask, "x": x}, {}
        return x, ({} if mask is None else {"action_mask": mask})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._result()

    def step(self, action):
        valid = self._mask()[action] == 1
        self.t += 1
        obs, info = self._result()
        return obs, 1.0 if valid else -1.0, self.t >= 5, False, info


gym.register("TandemTest/Counter-v0", entry_point=Counter)
gym.register("TandemTest/Masked-v0", entry_point=Masked)
gym.register("TandemTest/BoxActions-v0", entry_point=lambda: Counter(act_space=spaces.Box(-1, 1, (2,))))
gym.register("TandemTest/Structured-v0", entry_point=Structured)
gym.register("TandemTest/PictureBeside-v0", entry_point=PictureBeside)
gym.register("TandemTest/TwoPictures-v0", entry_point=lambda: PictureBeside(second=True))
gym.register("TandemTest/TextObs-v0", entry_point=lambda: Counter(obs_space=spaces.Text(5)))
gym.register("TandemTest/Spawner-v0", entry_point=Spawner)
gym.register("TandemTest/Drawn-v0", entry_point=Drawn)
gym.register("TandemTest/Image-v0", entry_point=Image)
class Echo(gym.Env):
    """Observes the action it was last given, as floats; the reward says whether that action
    was a member of its space (right values and dtype). Ends after 3 steps."""

    def __init__(self, act_space):
        self.action_space = act_space
        self.observation_space = spaces.Box(-1e9, 1e9, (act_space.shape[0],), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(self.observation_space.shape), {}

    def step(self, action):
        self.t += 1
        member = isinstance(action, np.ndarray) and self.action_space.contains(action)
        return np.asarray(action, dtype=np.float64), float(member), self.t >= 3, False, {}


gym.register(
    "TandemTest/MultiDiscreteAct-v0",
    entry_point=lambda: Echo(spaces.MultiDiscrete([2, 3], start=[1, -1])),
)
gym.register("TandemTest/MultiBinaryAct-v0", entry_point=lambda: Echo(spaces.MultiBinary(3)))
gym.register(
    "TandemTest/GridMultiDiscreteAct-v0",
    entry_point=lambda: Counter(act_space=spaces.MultiDiscrete([[2, 3], [2, 2]])),
)


class Rendezvous(gym.Env):
    """Each step, marks its process in the folder `meet` and waits, at most `patience` seconds,
    until `parties` processes have: the reward is 1 if they met, 0 if it gave up. Workers that
    are asked to step at the same time meet; a worker asked only after another's reply
    cannot. Ends after 3 steps."""

    def __init__(self, meet="", parties=2, patience=10.0):
        self.meet, self.parties, self.patience = meet, parties, patience
        self.observation_space = spaces.Box(-1.0, 1e9, (1,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        import os

        self.t += 1
        step_dir = os.path.join(self.meet, str(self.t))
        os.makedirs(step_dir, exist_ok=True)
        open(os.path.join(step_dir, str(os.getpid())), "w").close()
        deadline = time.monotonic() + self.patience
        while len(os.listdir(step_dir)) < self.parties and time.monotonic() < deadline:
            time.sleep(0.01)
        met = len(os.listdir(step_dir)) >= self.parties
        return np.array([self.t], np.float32), float(met), self.t >= 3, False, {}


gym.register("TandemTest/Rendezvous-v0", entry_point=Rendezvous)


class Scored(gym.Env):
    """Episodes of 1, 2, 3, 1, 2, 3, ... steps, counted by each environment itself from the
    place its seed gives (seed % 3 episodes on), so environments differ. Every
    step's info holds `steps` (the step count t) and `phase` (that seed % 3), and the last one
    also `is_success`, a numpy bool true when the episode's length is odd; the reset's info
    holds none of them. `fault`:
    "text" makes info["steps"] a string at step 2, "nan" a float32 NaN at step 2, "unfinished"
    leaves `is_success` out of the last step's info."""

    observation_space = spaces.Box(-1e9, 1e9, (2,), np.float64)
    action_space = spaces.Discrete(2)

    def __init__(self, fault=""):
        self.fault, self.episodes, self.phase = fault, 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.episodes = self.phase = seed % 3
        self.t, self.length = 0, 1 + self.episodes % 3
        self.episodes += 1
        return self._obs(), {}

    def _obs(self):
        return np.array([self.t, self.length], dtype=np.float64)

    def step(self, action):
        self.t += 1
        info = {"steps": self.t, "phase": self.phase}
        if self.t == 2 and self.fault == "text":
            info["steps"] = "two"
        if self.t == 2 and self.fault == "nan":
            info["steps"] = np.float32("nan")
        done = self.t >= self.length
        if done and self.fault != "unfinished":
            info["is_success"] = np.bool_(self.length % 2 == 1)
        return self._obs(), 1.0, done, False, info


gym.register("TandemTest/Scored-v0", entry_point=Scored)
