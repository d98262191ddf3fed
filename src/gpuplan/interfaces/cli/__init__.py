"""The ``gpuplan`` command line (see ``app.py`` for the error contract and ``commands.py``)."""

from __future__ import annotations

import sys

from gpuplan.core.errors import UserInputError

# Each module registers its commands on import, and the help lists them in that order: these four
# come first and in this order (mock-server before calibrate, the bench and results groups before
# k8s, bench serve before bench gpu), not alphabetically.
# isort: off
from gpuplan.interfaces.cli import cmd_mock as _cmd_mock  # noqa: F401
from gpuplan.interfaces.cli import cmd_bench as _cmd_bench  # noqa: F401
from gpuplan.interfaces.cli import cmd_bench_serve as _cmd_bench_serve  # noqa: F401
from gpuplan.interfaces.cli import cmd_bench_gpu as _cmd_bench_gpu  # noqa: F401

# isort: on
from gpuplan.interfaces.cli import cmd_deploy as _cmd_deploy  # noqa: F401
from gpuplan.interfaces.cli import cmd_results as _cmd_results  # noqa: F401
from gpuplan.interfaces.cli import cmd_simulate as _cmd_simulate  # noqa: F401
from gpuplan.interfaces.cli import cmd_tco as _cmd_tco  # noqa: F401
from gpuplan.interfaces.cli import cmd_train as _cmd_train  # noqa: F401
from gpuplan.interfaces.cli import cmd_validate as _cmd_validate  # noqa: F401
from gpuplan.interfaces.cli import cmd_web as _cmd_web  # noqa: F401
from gpuplan.interfaces.cli import commands as _commands  # noqa: F401
from gpuplan.interfaces.cli.app import app
from gpuplan.interfaces.cli.render import error


def main() -> None:
    """Console-script entry point. Usage errors (unknown flag, unparsable value, missing argument) are
    user input errors: one line and exit 1, like every other user error (click's own exit 2 would read
    as "infeasible", app.py's contract)."""
    try:
        code = app(standalone_mode=False)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # click's ClickException family, vendored by typer: recognised by shape
        message = getattr(exc, "format_message", None)
        if message is None:
            raise
        ctx = getattr(exc, "ctx", None)
        where = f" (run '{ctx.command_path} --help')" if ctx is not None else ""
        error(f"{message()}{where}")
        sys.exit(UserInputError.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["app", "main"]
