"""Writes the Atari parity fixtures tandem's Rust tests compare against.

Run through scripts/parity/atari_fixture.sh, which provides a venv with the
pinned ale-py, gymnasium, numpy and opencv. Outputs (small text files, one line
per emulated frame or agent step, screens as truncated sha256):

  crates/tandem-ale/tests/fixtures/breakout_raw_*.txt
      ale_py.ALEInterface driven frame by frame (seed and sticky-action
      probability set explicitly): action, reward, lives, game over, frame
      numbers and hashes of the RGB and grayscale screens.
  crates/tandem-env/tests/atari_fixtures/breakout_preprocessed_*.txt
      gymnasium ALE/Breakout-v5 (frameskip=1) + AtariPreprocessing(noop_max=30,
      frame_skip=4, screen_size=84, grayscale, terminal_on_life_loss=False) +
      FrameStackObservation(4), reset with a seed once and then continued:
      per agent step the action, reward, flags, lives and the hash of the
      4x84x84 stacked observation; per reset the number of no-ops taken.
  crates/tandem-env/tests/atari_fixtures/numpy_seeding.txt
      what gymnasium's AtariEnv derives from a reset seed: SeedSequence(seed)
      .generate_state(2) (the numpy seed and the ALE seed) and the first no-op
      counts Generator(PCG64).integers(1, 31) draws from it.
"""

import hashlib
import sys
from pathlib import Path

import ale_py
import cv2
import gymnasium as gym
import numpy as np
from ale_py import roms
from gymnasium.utils import seeding
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

REPO = Path(__file__).resolve().parents[2]
RAW_DIR = REPO / "crates/tandem-ale/tests/fixtures"
PRE_DIR = REPO / "crates/tandem-env/tests/atari_fixtures"


def short_hash(array: np.ndarray) -> str:
    """First 16 hex digits of the sha256 of the array's C-order bytes."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]


def versions() -> str:
    return (f"ale-py {ale_py.__version__}, gymnasium {gym.__version__}, "
            f"numpy {np.__version__}, opencv {cv2.__version__}")


def raw_trace(path: Path, seed: int, sticky: float, frames: int, action_seed: int) -> None:
    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    # ALE stores the seed as a C int; pass the uint32 bit pattern as int32 like gymnasium does.
    ale.setInt("random_seed", int(np.uint32(seed).astype(np.int32)))
    ale.setFloat("repeat_action_probability", sticky)
    ale.loadROM(roms.get_rom_path("breakout"))
    ale.reset_game()
    actions = ale.getMinimalActionSet()
    policy = np.random.default_rng(action_seed)
    lines = [
        f"# ALE Breakout raw frames: {versions()}",
        f"# seed={seed} repeat_action_probability={sticky} minimal action set "
        f"{[a.value for a in actions]}",
        "# reset: R <frame_number> <episode_frame_number> <lives> <rgb_hash> <gray_hash>",
        "# frame: <action_index> <reward> <lives> <game_over> <frame_number> "
        "<episode_frame_number> <rgb_hash> <gray_hash>",
        f"config {seed} {sticky}",
    ]

    def screens() -> str:
        return f"{short_hash(ale.getScreenRGB())} {short_hash(ale.getScreenGrayscale())}"

    lines.append(f"R {ale.getFrameNumber()} {ale.getEpisodeFrameNumber()} {ale.lives()} {screens()}")
    for _ in range(frames):
        index = int(policy.integers(0, len(actions)))
        reward = ale.act(actions[index])
        over = int(ale.game_over())
        lines.append(f"{index} {reward} {ale.lives()} {over} {ale.getFrameNumber()} "
                     f"{ale.getEpisodeFrameNumber()} {screens()}")
        if over:
            ale.reset_game()
            lines.append(f"R {ale.getFrameNumber()} {ale.getEpisodeFrameNumber()} {ale.lives()} {screens()}")
    path.write_text("\n".join(lines) + "\n")


def preprocessed_trace(path: Path, seed: int, steps: int, action_seed: int) -> None:
    gym.register_envs(ale_py)
    env = gym.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.25,
                   max_num_frames_per_episode=108_000)
    env = AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84,
                             terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False)
    env = FrameStackObservation(env, 4)
    policy = np.random.default_rng(action_seed)
    lines = [
        f"# ALE/Breakout-v5 frameskip=1 sticky=0.25 + AtariPreprocessing(noop_max=30, frame_skip=4, "
        f"screen_size=84, grayscale, terminal_on_life_loss=False) + FrameStackObservation(4): {versions()}",
        "# reset: R <noops> <lives> <stack_hash>   (the first reset is seeded, later ones are not)",
        "# step: <action> <reward> <terminated> <truncated> <lives> <stack_hash>",
        f"config {seed}",
    ]

    def reset(seed_or_none):
        obs, info = env.reset(seed=seed_or_none)
        assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
        # Every no-op is one emulated frame of the frameskip=1 env after ALE's reset.
        lines.append(f"R {info['episode_frame_number']} {info['lives']} {short_hash(obs)}")

    reset(seed)
    for _ in range(steps):
        action = int(policy.integers(0, 4))
        obs, reward, terminated, truncated, info = env.step(action)
        lines.append(f"{action} {reward:g} {int(terminated)} {int(truncated)} {info['lives']} {short_hash(obs)}")
        if terminated or truncated:
            reset(None)
    path.write_text("\n".join(lines) + "\n")


def numpy_seeding(path: Path) -> None:
    lines = [
        f"# gymnasium AtariEnv seeding: {versions()}",
        "# <reset seed> <numpy seed> <ALE seed as uint32> <first 12 noop counts integers(1, 31)>",
    ]
    for seed in [0, 1, 7, 42, 2024, 123456789, 2**32 - 1, 2**32 + 5, 2**63 + 11, 2**64 - 1]:
        np_seed, ale_seed = np.random.SeedSequence(seed).generate_state(n_words=2)
        generator, _ = seeding.np_random(int(np_seed))
        draws = [int(generator.integers(1, 31)) for _ in range(12)]
        lines.append(f"{seed} {int(np_seed)} {int(ale_seed)} " + " ".join(map(str, draws)))
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    RAW_DIR.mkdir(parents=True, exist_ok=True)
    PRE_DIR.mkdir(parents=True, exist_ok=True)
    raw_trace(RAW_DIR / "breakout_raw_sticky.txt", seed=123, sticky=0.25, frames=2500, action_seed=1)
    # A seed above 2^31 becomes a negative C int inside ALE, as gymnasium's do half the time.
    raw_trace(RAW_DIR / "breakout_raw_deterministic.txt", seed=3_000_000_005, sticky=0.0, frames=1500,
              action_seed=2)
    preprocessed_trace(PRE_DIR / "breakout_preprocessed_seed7.txt", seed=7, steps=1200, action_seed=3)
    preprocessed_trace(PRE_DIR / "breakout_preprocessed_seed2024.txt", seed=2024, steps=800, action_seed=4)
    numpy_seeding(PRE_DIR / "numpy_seeding.txt")
    print("atari fixtures written:", RAW_DIR, PRE_DIR)
    return 0


if __name__ == "__main__":
    sys.exit(main())
