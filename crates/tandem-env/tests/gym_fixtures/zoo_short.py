"""Imported by a row of tests/settings_walk.rs (`import "tests.gym_fixtures.zoo_short"`): the
fixture PettingZoo games of zoo_envs.py become 2 steps long."""

from tests.gym_fixtures import zoo_envs

zoo_envs.DEFAULT_LENGTH = 2
