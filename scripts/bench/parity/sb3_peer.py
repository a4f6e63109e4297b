"""The Stable-Baselines3 side of a parity case (scripts/bench/parity/parity.py runs it).

Trains SB3's own algorithm class, unmodified, with its defaults except the keyword arguments
the case passes (--json, plus the fixed ones below), on `gymnasium.make(--env-id)` wrapped
in SB3's Monitor, and writes every finished episode's untransformed return (what SB3's
ep_info_buffer holds) with the global step it ended at:
  {"episodes": [[step, score], ...], "final": mean of the last 20, "final_n": ...}

Run with the SB3 venv's python (scripts/bench/sb3_venv.sh):
  sb3_peer.py --algo sac|td3|dqn|ppo --env-id ID --seed N --steps N --out FILE
              [--json '{"learning_rate": ...}'] [--import MODULE[:FUNCTION]]
--import imports MODULE before the environment is made (and calls FUNCTION from it, for a
package that registers its environments only when asked, as minatar's gym module does).
Threads: torch.set_num_threads(1) here as well as OMP_NUM_THREADS from the runner (SB3 is
driven from this file, so one thread is settable without touching SB3).
"""

import argparse
import importlib
import json
import os
import statistics

# Steps between two writes of the episodes so far (episodes.partial.json beside --out).
PARTIAL_EVERY = 50_000

# Where a case's settings cannot match tandem's exactly, both sides take the value tandem can
# express; the KDL files say why. SAC and TD3: tandem needs learning-starts >= batch size.
FIXED = {
    "sac": {"learning_starts": 256},
    "td3": {"learning_starts": 256},
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--algo", required=True, choices=["sac", "td3", "dqn", "ppo"])
    ap.add_argument("--env-id", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--json", default="{}")
    ap.add_argument("--import", dest="imports", action="append", default=[])
    args = ap.parse_args()

    import gymnasium
    import numpy as np
    import torch
    import stable_baselines3 as sb3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.monitor import Monitor

    torch.set_num_threads(1)
    for spec in args.imports:
        module, _, function = spec.partition(":")
        loaded = importlib.import_module(module)
        if function:
            getattr(loaded, function)()
    env = Monitor(gymnasium.make(args.env_id))
    kwargs = dict(FIXED.get(args.algo, {}))
    kwargs.update(json.loads(args.json))
    if args.algo == "td3" and "action_noise" not in kwargs:
        from stable_baselines3.common.noise import NormalActionNoise

        dim = env.action_space.shape[0]
        kwargs["action_noise"] = NormalActionNoise(np.zeros(dim), 0.1 * np.ones(dim))
    policy = "MlpPolicy"
    model = getattr(sb3, args.algo.upper())(policy, env, seed=args.seed, device="cpu", verbose=0,
                                            **kwargs)

    episodes = []
    partial = args.out.removesuffix(".json") + ".partial.json"

    class Collect(BaseCallback):
        # ep_info_buffer keeps only the newest 100; the whole curve is taken from the infos.
        def _on_step(self):
            for info in self.locals.get("infos", []):
                if "episode" in info:
                    episodes.append([self.num_timesteps, float(info["episode"]["r"])])
            # The episodes so far, for `run.sh --progress`: a run that a session's end stops
            # leaves how far it got.
            if self.num_timesteps % PARTIAL_EVERY == 0:
                write(partial, {"episodes": episodes})
            return True

    model.learn(total_timesteps=args.steps, callback=Collect())
    last = [s for _, s in episodes[-20:]]
    write(args.out, {"episodes": episodes, "final": statistics.fmean(last) if last else None,
                     "final_n": len(last), "diagnostics": {}})
    if os.path.exists(partial):
        os.remove(partial)


def write(path, value):
    """`value` as JSON at `path`, replaced whole (a reader never sees half a file)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(value, f)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
