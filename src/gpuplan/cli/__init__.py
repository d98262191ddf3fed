"""The ``gpuplan`` command line (see ``app.py`` for the error contract and ``commands.py``)."""

from __future__ import annotations

from gpuplan.cli import commands as _commands  # noqa: F401  (registers the commands on ``app``)
from gpuplan.cli.app import app


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
