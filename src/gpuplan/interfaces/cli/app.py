"""The typer app and the error guard shared by every command: parse → one validated request → one core call → render.

Exit codes: 0 ok, 1 user input error, 2 infeasible (nothing fits / meets the SLA), 3 data error,
4 benchmark error. Errors print one line on stderr, never a traceback.
"""

from __future__ import annotations

import functools
import inspect
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer
from pydantic import ValidationError

from gpuplan.adapters.catalog.loader import Catalog, load_catalog
from gpuplan.adapters.scenario_files.deployment import describe_validation_error
from gpuplan.core.calibration.error_model import MAX_LEVEL, MIN_LEVEL
from gpuplan.core.calibration.uncertainty import Uncertainty
from gpuplan.core.errors import GpuplanError, UserInputError
from gpuplan.data.error_model import default_error_model
from gpuplan.interfaces.cli.render import error

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Which GPU, how many, at what cost, for this model and workload - and how sure are we.",
)

Format = Literal["table", "json"]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table or json")]
CalibrationOpt = Annotated[
    Path | None, typer.Option("--calibration", help="calibration profile YAML (from gpuplan calibrate -o)")
]
CatalogOpt = Annotated[list[Path] | None, typer.Option("--catalog", help="extra catalog YAML (GPUs, prices)")]
ProviderOpt = Annotated[
    str | None, typer.Option("--provider", help="price every GPU from this provider's quotes only (e.g. AWS)")
]
PriceBasisOpt = Annotated[
    str | None,
    typer.Option(
        "--price-basis",
        help="market-median (default: fixed providers, named in the output), hyperscaler, specialist or marketplace",
    ),
]
IntervalOpt = Annotated[
    float, typer.Option("--interval", help="level of the intervals shown next to each figure, 0.5..0.99")
]
ConfidenceOpt = Annotated[
    float | None,
    typer.Option(
        "--confidence",
        help="size each plan so its SLA and load hold at this quantile of the error model, 0.5..0.99 "
        "[default: the point estimate]",
    ),
]

F = TypeVar("F", bound=Callable[..., Any])


def guarded(fn: F) -> F:
    """Turn gpuplan errors into one stderr line and the branch's exit code. A field error on a value
    the command took from a flag of the same name (``seq_len`` from ``--seq-len``) names the flag."""
    flags = {name: f"--{name.replace('_', '-')}" for name in inspect.signature(fn).parameters}

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except GpuplanError as exc:
            error(exc.one_line())
            raise typer.Exit(exc.exit_code) from None
        except ValidationError as exc:
            error(describe_validation_error(exc, names=flags))
            raise typer.Exit(UserInputError.exit_code) from None
        except OSError as exc:  # a path that is a directory, a missing folder, a port in use, a bad host
            error(_os_error_line(exc))
            raise typer.Exit(UserInputError.exit_code) from None
        except RecursionError:
            error("an input document is nested too deeply (thousands of levels); fix the file")
            raise typer.Exit(UserInputError.exit_code) from None
        except OverflowError as exc:
            error(f"a number is out of range ({exc}); use finite values")
            raise typer.Exit(UserInputError.exit_code) from None

    return wrapper  # type: ignore[return-value]


def refuse_flags(why: tuple[str, str], **flags: object) -> None:
    """Flags given (not None) that this request would ignore are an error, never silently dropped;
    ``why`` is (what follows "would be ignored", the hint)."""
    given = [f"--{name.replace('_', '-')}" for name, value in flags.items() if value is not None]
    if given:
        reason, hint = why
        raise UserInputError(f"{', '.join(given)} would be ignored{reason}", hint=hint)


def _os_error_line(exc: OSError) -> str:
    """``cannot use PATH: reason`` for file errors, the socket's own reason for network ones."""
    reason = exc.strerror or str(exc)
    if exc.filename is not None:
        return f"cannot use {exc.filename}: {reason} (check the path: an existing folder, a file name)"
    return f"{reason} (check --host / --port / --url, or the file paths given)"


def check_listen_address(host: str, port: int) -> None:
    """UserInputError naming --host or --port when a server could not listen there (checked by binding
    once and letting go, before the server starts and fails inside its own event loop)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise UserInputError(
            f"--host {host!r} does not resolve ({exc})", hint="e.g. --host 127.0.0.1"
        ) from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers themselves do
        try:
            probe.bind(address)
        except OSError as exc:
            raise UserInputError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc})",
                hint="choose another --port (0 picks a free one where supported) or --host",
            ) from None


def fmt(value: str) -> Format:
    if value not in ("table", "json"):
        raise UserInputError(f"--format {value!r} is not one of table, json")
    return value  # type: ignore[return-value]


def uncertainty_from(level: float, confidence: float | None = None) -> Uncertainty:
    """The bundled error model at the ``--interval`` level (and ``--confidence``), loaded once by the command."""
    check_level(level, "--interval")
    if confidence is not None:
        check_level(confidence, "--confidence")
    return Uncertainty(model=default_error_model(), level=level, confidence=confidence)


def check_level(value: float, flag: str) -> None:
    """UserInputError naming ``flag`` unless ``value`` is a level the error model covers."""
    if not MIN_LEVEL <= value <= MAX_LEVEL:
        raise UserInputError(
            f"{flag} {value:g} is outside {MIN_LEVEL:g}..{MAX_LEVEL:g}", hint=f"e.g. {flag} 0.8 (80 %)"
        )


def catalog_from(files: list[Path] | None) -> Catalog:
    return load_catalog(extra_files=tuple(files or ()))
