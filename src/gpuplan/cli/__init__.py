"""The ``gpuplan`` command line (see ``app.py`` for the error contract and ``commands.py``)."""

from __future__ import annotations

from gpuplan.cli import cmd_bench as _cmd_bench  # noqa: F401  (each module registers its commands)
from gpuplan.cli import cmd_bench_gpu as _cmd_bench_gpu  # noqa: F401
from gpuplan.cli import cmd_deploy as _cmd_deploy  # noqa: F401
from gpuplan.cli import cmd_simulate as _cmd_simulate  # noqa: F401
from gpuplan.cli import cmd_train as _cmd_train  # noqa: F401
from gpuplan.cli import cmd_web as _cmd_web  # noqa: F401
from gpuplan.cli import commands as _commands  # noqa: F401
from gpuplan.cli.app import app


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
