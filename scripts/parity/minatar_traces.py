"""Writes MinAtar Breakout parity traces from the `minatar` PyPI package.

Each trace plays one seeded game stream for a fixed number of steps with a fixed
policy, resetting whenever a game ends, and records every reset and step. The Rust
test `crates/tandem-env/tests/minatar_parity.rs` replays the same seeds and actions
and must reproduce every observation, reward and terminal flag.

File format (gzip-compressed, little-endian):
  header: b"TMTRACE2", channels u8, seed_kind u8 (0: RandomState(seed),
          1: RandomState([lo, hi])), seed u64, sticky_action_prob f64, record count u32
  record: kind u8 (0 reset, 1 step), action u8, reward i8, terminal u8,
          ceil(100 * channels / 8) bytes: the 10x10xC boolean state (minatar's
          height-width-channel order) bit-packed with numpy.packbits, XORed with the
          previous record's packed state (so that unchanged cells compress away).

Run through scripts/parity/minatar_venv.sh, which makes the venv.
"""

import copy
import gzip
import struct
import sys
from pathlib import Path

import numpy as np
from minatar import Environment

STICKY = 0.1


def ball_tracking_action(env, rng):
    """Moves the paddle to where the ball will next come down to the paddle row (full-set
    actions 1 = left, 3 = right, 0 = stay), found by playing a copy of the game forward;
    with a small chance of a random action so that rarer situations occur too. Games
    last long enough to clear and restore the bricks."""
    if rng.rand() < 0.01:
        return int(rng.randint(6))
    game = env.env
    sim = copy.deepcopy(game)
    target = sim.ball_x
    for _ in range(40):
        if sim.ball_y == 8 and sim.ball_dir in (2, 3):
            target = sim.ball_x
            break
        sim.act(0)
        if sim.terminal:
            break
    if target < game.pos:
        return 1
    if target > game.pos:
        return 3
    return 0


def asterix_dodging_action(env, rng):
    """Asterix: step out of the row of an enemy that is about to reach the player and
    otherwise head for the row of the nearest treasure (full-set actions 0 stay, 1 left,
    2 up, 3 right, 4 down), with a small chance of a random action."""
    if rng.rand() < 0.05:
        return int(rng.randint(6))
    game = env.env
    px, py = game.player_x, game.player_y
    danger_rows = set()
    for e in game.entities:
        if e is not None and not e[3]:
            ex, ey, right = e[0], e[1], e[2]
            if abs(ex - px) <= 2 and ((right and ex <= px) or (not right and ex >= px)):
                danger_rows.add(ey)
    if py in danger_rows:
        if py > 1 and py - 1 not in danger_rows:
            return 2
        if py < 8 and py + 1 not in danger_rows:
            return 4
        return 1 if px > 4 else 3
    golds = [e for e in game.entities if e is not None and e[3]]
    if golds:
        target = min(golds, key=lambda e: abs(e[1] - py) + abs(e[0] - px))
        if target[1] < py and py - 1 not in danger_rows:
            return 2
        if target[1] > py and py + 1 not in danger_rows:
            return 4
        return 1 if target[0] < px else 3 if target[0] > px else 0
    return 0


def freeway_crossing_action(env, rng):
    """Freeway: go up unless the car in the next lane up is about to pass column 4
    (full-set actions 0 stay, 2 up, 4 down), with a small chance of a random action."""
    if rng.rand() < 0.05:
        return int(rng.randint(6))
    game = env.env
    target_row = game.pos - 1
    for car in game.cars:
        if car[1] == target_row and abs(car[0] - 4) <= 1:
            return 0
    return 2


def invaders_shooting_action(env, rng):
    """Space Invaders: fire when under an alien, else move towards the nearest alien
    column, skipping any action after which (playing a copy of the game forward with
    no-ops) the cannon dies within a few steps (full-set actions 0 stay, 1 left,
    3 right, 5 fire); with a small chance of a random action. Long enough to clear
    waves, so the difficulty ramp is covered."""
    if rng.rand() < 0.03:
        return int(rng.randint(6))
    game = env.env
    pos = game.pos
    columns = [x for x in range(10) if game.alien_map[:, x].any()]
    preferred = []
    if columns:
        target = min(columns, key=lambda x: (abs(x - pos), x))
        preferred.append(5 if target == pos else 1 if target < pos else 3)
    preferred += [5, 0, 1, 3]

    def survives(action):
        sim = copy.deepcopy(game)
        sim.act(action)
        for _ in range(3):
            if sim.terminal:
                return False
            sim.act(0)
        return not sim.terminal

    for action in preferred:
        if survives(action):
            return action
    return preferred[0]


def seaquest_diving_action(env, rng):
    """Seaquest: surface when low on oxygen or full of divers, dive from the surface,
    shoot enemies in the sub's row, otherwise head for the row of the nearest diver or
    enemy; any action after which (playing a copy of the game forward with no-ops) the
    sub dies within a few steps is skipped (full-set actions 0 stay, 1 left, 2 up,
    3 right, 4 down, 5 fire). A small chance of a random action."""
    if rng.rand() < 0.03:
        return int(rng.randint(6))
    game = env.env
    x, y = game.sub_x, game.sub_y
    enemies = game.e_fish + game.e_subs
    if y > 0 and (game.oxygen < 40 or game.diver_count >= 6):
        plan = 2
    elif y == 0 and (game.diver_count <= 0 or game.oxygen >= 190):
        plan = 4
    else:
        in_row = [e for e in enemies if e[1] == y]
        if in_row:
            target = min(in_row, key=lambda e: abs(e[0] - x))
            facing_it = (target[0] >= x) == game.sub_or
            plan = 5 if facing_it else (3 if target[0] >= x else 1)
        else:
            things = game.divers + enemies
            if things:
                target = min(things, key=lambda e: abs(e[1] - y) + abs(e[0] - x))
                plan = 4 if target[1] > y else 2 if target[1] < y else (3 if target[0] > x else 1)
            else:
                plan = 0

    def survives(action):
        sim = copy.deepcopy(game)
        sim.act(action)
        for _ in range(3):
            if sim.terminal:
                return False
            sim.act(0)
        return not sim.terminal

    for action in [plan, 5, 4, 2, 1, 3, 0]:
        if survives(action):
            return action
    return plan


def write_trace(path, seed, seed_kind, steps, policy, policy_seed, game="breakout"):
    env = Environment(game, sticky_action_prob=STICKY)
    if seed_kind == 0:
        env.seed(seed)
    else:
        # minatar seeds numpy directly; a 64-bit seed goes in as two 32-bit words.
        env.seed(np.array([seed & 0xFFFFFFFF, seed >> 32], dtype=np.uint32))
    policy_rng = np.random.RandomState(policy_seed)
    records = []
    channels = env.state_shape()[2]
    packed_len = (100 * channels + 7) // 8
    previous = np.zeros(packed_len, dtype=np.uint8)

    def record(kind, action, reward, terminal):
        nonlocal previous
        packed = np.packbits(env.state().astype(np.uint8).reshape(-1))
        assert packed.size == packed_len
        records.append(struct.pack("<BBbB", kind, action, reward, terminal) + (packed ^ previous).tobytes())
        previous = packed

    env.reset()
    record(0, 0, 0, 0)
    games = 1
    score = best = 0
    for _ in range(steps):
        if policy == "random":
            action = int(policy_rng.randint(6))
        elif policy == "diving":
            action = seaquest_diving_action(env, policy_rng)
        elif policy == "shooting":
            action = invaders_shooting_action(env, policy_rng)
        elif policy == "crossing":
            action = freeway_crossing_action(env, policy_rng)
        elif policy == "dodging":
            action = asterix_dodging_action(env, policy_rng)
        else:
            action = ball_tracking_action(env, policy_rng)
        reward, terminal = env.act(action)
        assert reward == int(reward) and 0 <= reward <= 127, reward
        record(1, action, int(reward), int(terminal))
        score += reward
        best = max(best, score)
        if terminal:
            env.reset()
            record(0, 0, 0, 0)
            games += 1
            score = 0
    header = b"TMTRACE2" + struct.pack("<BBQdI", channels, seed_kind, seed, STICKY, len(records))
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as f:
        f.write(header + b"".join(records))
    print(f"{path.name}: {steps} steps, {games} games, best score {best}, {path.stat().st_size} bytes")


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    write_trace(out / "minatar_breakout_random_seed0.bin.gz", 0, 0, 30_000, "random", 1)
    write_trace(out / "minatar_breakout_random_seed64bit.bin.gz", (1 << 40) + 12345, 1, 30_000, "random", 2)
    write_trace(out / "minatar_breakout_tracking_seed42.bin.gz", 42, 0, 40_000, "tracking", 3)
    write_trace(out / "minatar_breakout_tracking_seed3141592653.bin.gz", 3141592653, 0, 30_000, "tracking", 4)
    write_trace(out / "minatar_asterix_random_seed7.bin.gz", 7, 0, 50_000, "random", 5, "asterix")
    write_trace(out / "minatar_asterix_dodging_seed64bit.bin.gz", (1 << 33) + 99, 1, 60_000, "dodging", 6, "asterix")
    write_trace(out / "minatar_freeway_random_seed11.bin.gz", 11, 0, 30_000, "random", 7, "freeway")
    write_trace(out / "minatar_freeway_crossing_seed64bit.bin.gz", (1 << 50) + 3, 1, 30_000, "crossing", 8, "freeway")
    write_trace(out / "minatar_space_invaders_random_seed5.bin.gz", 5, 0, 30_000, "random", 9, "space_invaders")
    write_trace(
        out / "minatar_space_invaders_shooting_seed64bit.bin.gz", (1 << 45) + 17, 1, 40_000, "shooting", 10, "space_invaders"
    )
    write_trace(out / "minatar_seaquest_random_seed13.bin.gz", 13, 0, 30_000, "random", 11, "seaquest")
    write_trace(out / "minatar_seaquest_diving_seed64bit.bin.gz", (1 << 40) + 5, 1, 40_000, "diving", 12, "seaquest")


if __name__ == "__main__":
    main()
