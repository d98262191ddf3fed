"""YAML integers past Python's 4,300-digit conversion limit read as infinity, not a ValueError;
YAML 1.1-only number forms are refused; every other scalar reads as PyYAML's SafeLoader reads it."""

from __future__ import annotations

import math
import re

import pytest
import yaml

from gpuplan.adapters.yamltext import safe_load, safe_load_all

ORDINARY = "a: 12\nb: -3\nc: 0o10\nd: 1.5\ne: .inf\nf: yes\ng: text\nh: [1, 2]\n"


def test_ordinary_documents_read_as_safe_load_reads_them() -> None:
    assert safe_load(ORDINARY) == yaml.safe_load(ORDINARY)
    assert list(safe_load_all("a: 1\n---\nb: 2\n")) == [{"a": 1}, {"b": 2}]


def test_integers_over_the_digit_limit_are_infinite_with_their_sign() -> None:
    over = "7" * 5000
    assert safe_load(f"count: {over}\nlow: -{over}\nplus: +{over}\n") == {
        "count": math.inf,
        "low": -math.inf,
        "plus": math.inf,
    }


@pytest.mark.parametrize(
    ("text", "read_as"),
    [("010", "8"), ("0x10", "16"), ("0b10", "2"), ("1_000", "1000"), ("1:30", "90"), ("1_000.5", "1000.5")],
)
def test_yaml11_only_number_forms_are_refused_with_their_line(text: str, read_as: str) -> None:
    """Issue 22: ``count: 010`` planned 8 GPUs silently (YAML 1.1 octal); these forms now fail, saying
    what YAML 1.1 would have read, on the line they are on."""
    with pytest.raises(
        yaml.YAMLError, match=rf"'{re.escape(text)}' is a YAML 1\.1 number form \(read as {read_as}\)"
    ) as info:
        safe_load(f"model: m\ncount: {text}\n")
    assert "line 2" in str(info.value)


@pytest.mark.parametrize(
    ("text", "value"), [("10", 10), ("0", 0), ("-3", -3), ("1.5", 1.5), ("2.5e-3", 0.0025)]
)
def test_plain_decimals_still_read(text: str, value: float) -> None:
    assert safe_load(f"n: {text}") == {"n": value}
