"""The ``gpuplan`` command line (see ``app.py`` for the error contract and ``commands.py``)."""

from __future__ import annotations

from gpuplan.cli.commands import app


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
