"""web commands."""

from __future__ import annotations

from gpuplan.cli.app import app

__all__ = ["app"]
