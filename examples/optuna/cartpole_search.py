"""An Optuna search over PPO's learning rate and entropy coefficient on CartPole, each trial a
tandem run (tandem's Python package, python/): 10 trials of experiments/cartpole.kdl, each
cut to --steps steps, scored by the run's final score (the mean return of its last 100
episodes). Needs `pip install optuna ./python` and the tandem binary (TANDEM_BIN or PATH).

    python examples/optuna/cartpole_search.py --trials 10 --steps 100000 --runs /tmp/search
"""

import argparse
from pathlib import Path

import optuna

import tandem

parser = argparse.ArgumentParser()
parser.add_argument("--trials", type=int, default=10)
parser.add_argument("--steps", type=int, default=100_000)
parser.add_argument("--runs", default="runs/optuna-cartpole")
parser.add_argument("--seed", type=int, default=1)
args = parser.parse_args()
experiment = Path(__file__).resolve().parents[2] / "experiments" / "cartpole.kdl"


def objective(trial):
    run = tandem.train(
        experiment,
        run_dir=Path(args.runs) / f"trial-{trial.number}",
        seed=args.seed,
        train__total_steps=args.steps,
        algorithm__lr=trial.suggest_float("lr", 1e-4, 1e-2, log=True),
        algorithm__entropy_coef=trial.suggest_float("entropy_coef", 0.0, 0.05),
    )
    return run.final_score


optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=args.seed))
study.optimize(objective, n_trials=args.trials)
for t in study.trials:
    print(f"trial {t.number}: lr {t.params['lr']:.2e}, entropy-coef {t.params['entropy_coef']:.4f}: final score {t.value:.1f}")
best = study.best_trial
print(f"best: trial {best.number}, lr {best.params['lr']:.2e}, entropy-coef {best.params['entropy_coef']:.4f}, final score {best.value:.1f}")
