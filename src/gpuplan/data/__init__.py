"""Bundled data (GPU catalog files, model configs, calibration, engine and dataset tables) and its readers.

The files live beside this module; everything reads them through :func:`bundled`, so the package
works from a wheel as well as from a checkout. The readers parse with the core's validators and cache
what they read (the files never change while a process runs).
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

__all__ = ["bundled", "read_bundled_text"]


def bundled(*parts: str) -> Traversable:
    """A bundled file or folder, e.g. ``bundled("catalog", "gpus")``."""
    return resources.files(__name__).joinpath(*parts)


def read_bundled_text(*parts: str) -> str:
    """The text of one bundled file."""
    return bundled(*parts).read_text(encoding="utf-8")
