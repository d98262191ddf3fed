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
import re
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

_ModelT = TypeVar("_ModelT", bound=BaseModel)

__all__ = [
    "DEFAULT_SUGGESTIONS",
    "FAMILY_SUGGESTIONS",
    "BenchmarkError",
    "DataError",
    "FileFormatError",
    "GpuplanError",
    "InfeasibleError",
    "UnknownNameError",
    "UserInputError",
    "check_whole_number",
    "closest",
    "family_of",
    "first_problem",
    "lookup_key",
    "shown_int",
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

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its state, not by calling ``__init__`` again (whose arguments differ per
        branch), so an error crosses a process boundary whole (the web's isolated requests)."""
        return (_restored, (type(self), self.args, dict(self.__dict__)))


def _restored(cls: type[GpuplanError], args: tuple[Any, ...], state: dict[str, Any]) -> GpuplanError:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


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


DEFAULT_SUGGESTIONS = 3
"""Ids a "did you mean" lists when ``name`` begins no family."""
FAMILY_SUGGESTIONS = 6
"""Most ids of one family a "did you mean" lists (``A100`` has four catalog variants, ``H100`` four)."""


def lookup_key(name: str) -> str:
    """Case-insensitive, with spaces, ``_`` and ``-`` as one separator, because users and benchmark
    logs spell ``H100 SXM`` / ``h100_sxm`` / ``H100-SXM`` (the catalog's lookup key too)."""
    return re.sub(r"[\s_\-]+", "-", name.strip().lower()).strip("-")


def family_of(name: str, choices: Iterable[str]) -> list[str]:
    """The ids that ``name`` begins (``A100`` -> ``A100-40GB-SXM``, …; ``qwen2.5-7b`` ->
    ``Qwen/Qwen2.5-7B-Instruct``, the part after the organisation counts too), in ``choices`` order."""
    key = lookup_key(name)
    if not key:
        return []
    return [c for c in choices if any(lookup_key(k).startswith(key) for k in (c, c.rsplit("/", 1)[-1]))]


def closest(name: str, choices: Iterable[str], n: int | None = None) -> list[str]:
    """Valid ids closest to ``name`` for "did you mean" messages: its family first (``family_of``),
    then by spelling (case-insensitive); ``n`` of them, by default 3 or the whole family up to
    ``FAMILY_SUGGESTIONS``, whichever is more."""
    pool = list(choices)
    family = family_of(name, pool)[:FAMILY_SUGGESTIONS]
    limit = n if n is not None else max(DEFAULT_SUGGESTIONS, len(family))
    lowered = {c.lower(): c for c in pool}
    near = difflib.get_close_matches(name.lower(), list(lowered), n=max(limit, 1), cutoff=0.5)
    contains = [c for c in pool if name.lower() in c.lower()]
    ranked = dict.fromkeys([*family, *(lowered[h] for h in near), *contains])
    return list(ranked)[:limit]


_SHOWN_DIGITS = 15
"""An int with more digits than this is shown by its size in messages (the line stays one line, and
``str`` of an int over 4,300 digits raises)."""
_LOG10_2 = 0.30103
"""log10(2): the decimal digits per bit of an int."""


def shown_int(value: int) -> str:
    """``value`` as a message shows it: in full up to :data:`_SHOWN_DIGITS` digits, else its size
    (``about 10^400``) without converting it to a string."""
    if abs(value) < 10**_SHOWN_DIGITS:
        return str(value)
    return f"about {'-' if value < 0 else ''}10^{int(abs(value).bit_length() * _LOG10_2)}"


def check_whole_number(name: str, value: int | None, *, maximum: int, minimum: int = 1) -> None:
    """UserInputError naming ``name`` when ``value`` (None: not given) is outside [minimum, maximum]."""
    if value is None or minimum <= value <= maximum:
        return
    if value < minimum:
        raise UserInputError(
            f"{name} must be a whole number >= {minimum}, got {shown_int(value)}", hint=f"e.g. {name} 1"
        )
    raise UserInputError(f"{name} must be a whole number <= {maximum:,}, got {shown_int(value)}")


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
