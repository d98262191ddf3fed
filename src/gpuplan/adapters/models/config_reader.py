"""Typed, validating access to a raw HF ``config.json`` dict.

Every getter either returns a value of the promised type or raises
:class:`~gpuplan.core.errors.FileFormatError` naming the key and the model id, e.g.
``config.json for X: missing 'hidden_size' (expected a positive int)``. Parsers never index the
raw mapping themselves, so no ``KeyError``/``TypeError`` can escape them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from gpuplan.core.errors import FileFormatError

_MISSING: Any = object()
MAX_INT = 2**40
"""Ceiling on any size in a config (about 10¹²): larger values are corrupt, and keeping sizes
below it keeps every product of two sizes exactly representable as a float."""


class ConfigReader:
    """A view on one (possibly nested) config mapping; ``path`` prefixes key names in errors."""

    def __init__(self, config: Mapping[str, Any], *, model_id: str, path: str = "") -> None:
        self.raw = config
        self.model_id = model_id
        self.path = path

    # -- errors ---------------------------------------------------------------------------------
    def key_name(self, key: str) -> str:
        """``key`` quoted, with the path of the nested object it sits in (``'text_config.hidden_size'``)."""
        return repr(f"{self.path}{key}")

    def error(self, key: str, problem: str) -> FileFormatError:
        """A FileFormatError for ``key`` with the model id in front."""
        return FileFormatError(f"config.json for {self.model_id}: {self.key_name(key)} {problem}")

    def missing(self, key: str, expected: str) -> FileFormatError:
        """The error for a required key that is absent or null."""
        return FileFormatError(
            f"config.json for {self.model_id}: missing {self.key_name(key)} (expected {expected})"
        )

    def _bad(self, key: str, value: Any, expected: str) -> FileFormatError:
        shown = json.dumps(value, default=repr)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return self.error(key, f"is {shown} (expected {expected})")

    def has(self, key: str) -> bool:
        """Whether ``key`` is present and not null."""
        return self.raw.get(key) is not None

    def get_raw(self, key: str) -> Any:
        """The raw value (may be anything, including None)."""
        return self.raw.get(key)

    # -- scalars --------------------------------------------------------------------------------
    def integer(self, key: str, default: Any = _MISSING, *, minimum: int = 1, maximum: int = MAX_INT) -> int:
        """An int in ``[minimum, maximum]``; an integral float (``4096.0``) is accepted, bools and
        strings are not."""
        value = self.raw.get(key)
        if value is None:
            if default is _MISSING:
                raise self.missing(key, f"an int >= {minimum}")
            return int(default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._bad(key, value, f"an int >= {minimum}")
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            raise self._bad(key, value, f"an int >= {minimum}")
        if value < minimum:
            raise self._bad(key, value, f"an int >= {minimum}")
        if value > maximum:
            raise self._bad(key, value, f"an int <= {maximum}")
        return int(value)

    def opt_int(self, key: str, *, minimum: int = 1, maximum: int = MAX_INT) -> int | None:
        """An int in ``[minimum, maximum]``, or None when the key is missing or null."""
        return self.integer(key, minimum=minimum, maximum=maximum) if self.has(key) else None

    def first_int(
        self, keys: Sequence[str], default: Any = _MISSING, *, minimum: int = 1, maximum: int = MAX_INT
    ) -> int:
        """The first present key of ``keys`` (HF families spell the same thing differently)."""
        for key in keys:
            if self.has(key):
                return self.integer(key, minimum=minimum, maximum=maximum)
        if default is _MISSING:
            names = " or ".join(self.key_name(k) for k in keys)
            raise FileFormatError(
                f"config.json for {self.model_id}: missing {names} (expected an int >= {minimum})"
            )
        return int(default)

    def number(self, key: str, default: Any = _MISSING) -> float:
        """A finite positive number."""
        value = self.raw.get(key)
        if value is None:
            if default is _MISSING:
                raise self.missing(key, "a positive number")
            return float(default)
        numeric = isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < MAX_INT
        if not numeric or not math.isfinite(value) or value <= 0:
            raise self._bad(key, value, "a positive number")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        """A JSON boolean (0/1 ints are accepted, as some old configs write them)."""
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise self._bad(key, value, "true or false")

    def text(self, key: str, default: str | None = None) -> str | None:
        """A string, or ``default`` when missing/null."""
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self._bad(key, value, "a string")
        return value

    # -- containers -----------------------------------------------------------------------------
    def str_list(self, key: str) -> tuple[str, ...] | None:
        """A list of strings, or None when missing/null."""
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise self._bad(key, value, "a list of strings")
        return tuple(value)

    def int_list(self, key: str, *, minimum: int = 0) -> tuple[int, ...] | None:
        """A list of ints ``>= minimum``, or None when missing/null."""
        value = self.raw.get(key)
        if value is None:
            return None
        ok = isinstance(value, list | tuple) and all(
            isinstance(v, int) and not isinstance(v, bool) and minimum <= v <= MAX_INT for v in value
        )
        if not ok:
            raise self._bad(key, value, f"a list of ints >= {minimum}")
        return tuple(value)

    def sub(self, key: str, *, required: bool = False) -> ConfigReader:
        """A reader on a nested mapping (``text_config``, ``attn_config``); empty when missing."""
        value = self.raw.get(key)
        if value is None:
            if required:
                raise self.missing(key, "an object")
            value = {}
        if not isinstance(value, Mapping):
            raise self._bad(key, value, "an object")
        return ConfigReader(value, model_id=self.model_id, path=f"{self.path}{key}.")
