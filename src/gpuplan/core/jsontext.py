"""JSON text to Python values with every integer in range of Python's int-string conversion.

Python refuses to convert an integer literal of more than ``sys.int_info.default_max_str_digits``
(4,300) digits and :func:`json.loads` lets that ``ValueError`` escape. :func:`loads` reads such a
literal as an infinite float instead, as JSON's ``1e400`` already reads: every bounded field then
refuses it with its own message naming the field (no real size has 4,300 digits).
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_INT_DIGITS = 4_300
"""CPython's default int-string conversion limit (``sys.int_info.default_max_str_digits``, 3.11+)."""


def bounded_int(literal: str) -> int | float:
    """``int(literal)``, or ±infinity for a literal of more than :data:`MAX_INT_DIGITS` digits."""
    digits = len(literal) - literal.startswith("-")
    if digits > MAX_INT_DIGITS:
        return -math.inf if literal.startswith("-") else math.inf
    return int(literal)


def loads(text: str | bytes) -> Any:
    """:func:`json.loads` with :func:`bounded_int` for integer literals."""
    return json.loads(text, parse_int=bounded_int)
