"""YAML integers past Python's 4,300-digit conversion limit read as infinity, not a ValueError;
every other scalar reads as PyYAML's SafeLoader reads it."""

from __future__ import annotations

import math

import yaml

from gpuplan.adapters.yamltext import safe_load, safe_load_all

ORDINARY = "a: 12\nb: -3\nc: 0x10\nd: 1.5\ne: .inf\nf: yes\ng: text\nh: [1, 2]\n"


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
