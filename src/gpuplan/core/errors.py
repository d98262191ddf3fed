"""The one exception tree of gpuplan.

Every error a user can cause or meet derives from :class:`GpuplanError`; the CLI and the web app
render it as one line (no traceback) and map the branch to an exit code / HTTP status::

    GpuplanError                      base; never raised directly
    ├── UserInputError                exit 1   the user's flags, scenario file or config are wrong
    │   ├── UnknownNameError          an unknown GPU / model / dtype id, with "did you mean" choices
    │   └── FileFormatError           a malformed YAML / JSON / CSV file, naming the file and line or field
    ├── DataError                     exit 3   bundled or user catalog data is inconsistent
    ├── InfeasibleError               exit 2   the request is valid but nothing fits or meets the SLA;
    │                                          carries the nearest misses
    └── BenchmarkError                exit 4   a measurement could not be taken (unreachable endpoint, OOM)

Each message says what was wrong, the nearest valid choices, and what to run next.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import TypeVar

from pydantic import BaseModel, ValidationError

_ModelT = TypeVar("_ModelT", bound=BaseModel)

__all__ = [
    "BenchmarkError",
    "DataError",
    "FileFormatError",
    "GpuplanError",
    "InfeasibleError",
    "UnknownNameError",
    "UserInputError",
    "closest",
    "first_problem",
    "validate_data",
]


class GpuplanError(Exception):
    """Base of all gpuplan errors; ``exit_code`` is what the CLI exits with."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """The message and the hint on one line, as the CLI prints it."""
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UserInputError(GpuplanError):
    """The user's input (flags, scenario, config.json, CSV) is wrong; the message names the field."""

    exit_code = 1


class UnknownNameError(UserInputError):
    """An id that is not in the catalog / model registry; suggests the closest valid ids."""

    def __init__(self, kind: str, name: str, choices: Iterable[str], *, hint: str | None = None) -> None:
        self.kind = kind
        self.name = name
        self.suggestions = closest(name, choices)
        message = f"unknown {kind} {name!r}"
        if self.suggestions:
            message += f"; did you mean {', '.join(self.suggestions)}?"
        super().__init__(message, hint=hint)


class FileFormatError(UserInputError):
    """A file that cannot be read as what it should be; names the file and the place in it."""


class DataError(GpuplanError):
    """Catalog, price, model or calibration data that fails validation."""

    exit_code = 3


class InfeasibleError(GpuplanError):
    """A valid request with no answer: nothing fits or meets the SLA. ``nearest`` lists the best misses."""

    exit_code = 2

    def __init__(self, message: str, *, nearest: Sequence[str] = (), hint: str | None = None) -> None:
        self.nearest = list(nearest)
        if self.nearest:
            message += "; nearest misses: " + "; ".join(self.nearest[:3])
        super().__init__(message, hint=hint)


class BenchmarkError(GpuplanError):
    """A benchmark could not run or complete (endpoint unreachable, device missing)."""

    exit_code = 4


def closest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` valid ids closest to ``name`` (case-insensitive), for "did you mean" messages."""
    pool = list(choices)
    lowered = {c.lower(): c for c in pool}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    contains = [c for c in pool if name.lower() in c.lower() and c.lower() not in hits]
    return [lowered[h] for h in hits] + contains[: max(0, n - len(hits))]


def first_problem(exc: ValidationError) -> tuple[str, str]:
    """(dotted field path, message) of a pydantic error's first problem, for one-line errors."""
    first = exc.errors()[0]
    return ".".join(str(p) for p in first["loc"]), first["msg"]


def validate_data(model: type[_ModelT], data: object, *, origin: str) -> _ModelT:
    """``data`` validated as ``model``; a DataError naming ``origin`` and the first bad field otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where, msg = first_problem(exc)
        raise DataError(f"{origin}: {where}: {msg}") from None
