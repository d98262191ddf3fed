"""JSON integers past Python's 4,300-digit conversion limit read as infinity, not a ValueError."""

from __future__ import annotations

import math

from gpuplan.core.jsontext import MAX_INT_DIGITS, bounded_int, loads


def test_integers_up_to_the_limit_are_exact() -> None:
    at_limit = "9" * MAX_INT_DIGITS
    assert loads(f'{{"a": {at_limit}, "b": -12, "c": 1.5}}') == {"a": int(at_limit), "b": -12, "c": 1.5}


def test_longer_integers_are_infinite_with_their_sign() -> None:
    over = "9" * (MAX_INT_DIGITS + 1)
    assert loads(f"[{over}, -{over}]") == [math.inf, -math.inf]
    assert bounded_int("-" + "1" * MAX_INT_DIGITS) == -int("1" * MAX_INT_DIGITS)
