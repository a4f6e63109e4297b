"""Runs sample-factory 2.1.1's Atari example (`sf_examples.atari.train_atari`, its own
arguments) with ale-py's legacy ids (`BreakoutNoFrameskip-v4`, which the example makes)
registered: gymnasium 0.29 finds only ale-py's v5 ids by itself. A file, not `-c`, so the
example's worker processes import the registration too."""

import sys

import ale_py  # noqa: F401
import ale_py.registration  # noqa: F401  (registers the v0/v4 ids)
from sf_examples.atari.train_atari import main

if __name__ == "__main__":
    sys.exit(main())
