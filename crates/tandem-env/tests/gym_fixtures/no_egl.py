"""Imported by a gymnasium bridge test (tests/gym_bridge.rs) to stand for a machine without
EGL: importing mujoco's EGL backend fails the way it does when libEGL is not installed."""

import importlib.abc
import sys


class NoEgl(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "mujoco.egl" or name.startswith("mujoco.egl."):
            raise ImportError("libEGL.so.1: cannot open shared object file: No such file or directory")
        return None


sys.meta_path.insert(0, NoEgl())
