"""YAML text to Python values, safely, with every integer in range of Python's int-string conversion.

PyYAML's SafeLoader turns an integer of more than 4,300 digits into a ``ValueError`` from ``int()``
(Python's conversion limit), which escapes as a traceback. :class:`BoundedLoader` reads such an
integer as an infinite float instead, as ``.inf`` reads (see ``gpuplan.core.jsontext``): every
bounded field then refuses it with its own message naming the field.

YAML 1.1 number forms that YAML 1.2 and JSON read otherwise, or not at all (``010`` is octal 8,
``0x10``, ``0b10``, ``1_000``, sexagesimal ``1:30`` is 90), are refused with the line and the plain
decimal they stand for: a count of ``010`` silently planned as 8 GPUs is the wrong answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import yaml

INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"
_YAML11_ONLY = re.compile(
    r"^[-+]?(0[0-7]+|0[xX][0-9a-fA-F_]+|0[bB][01_]+|[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?|.*_.*)$"
)
"""Integer and float spellings that only YAML 1.1 reads as numbers (octal, hex, binary, ``_``, base 60)."""


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose integers over Python's conversion limit read as ±infinity."""


def _refuse_yaml11_form(loader: BoundedLoader, node: yaml.ScalarNode, value: float) -> None:
    text = str(loader.construct_scalar(node)).strip()
    if text.lstrip("+-").isdigit() and int(text, 10) == value:
        return  # 00, 07: leading zeros that read the same in YAML 1.1 and as decimals
    if _YAML11_ONLY.match(text):
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"{text!r} is a YAML 1.1 number form (read as {value:g}); "
            "write it as a plain decimal (or quote it if it is text)",
            node.start_mark,
        )


def _construct_float(loader: BoundedLoader, node: yaml.ScalarNode) -> float:
    value: float = loader.construct_yaml_float(node)
    _refuse_yaml11_form(loader, node, value)
    return value


def _construct_int(loader: BoundedLoader, node: yaml.ScalarNode) -> int | float:
    try:
        value: int = loader.construct_yaml_int(node)
        _refuse_yaml11_form(loader, node, value)
    except ValueError:  # the resolver matched the int pattern: only the digit limit fails int()
        text = str(loader.construct_scalar(node)).strip()
        return -math.inf if text.startswith("-") else math.inf
    return value


BoundedLoader.add_constructor(INT_TAG, _construct_int)
BoundedLoader.add_constructor(FLOAT_TAG, _construct_float)


def safe_load(text: str) -> Any:
    """:func:`yaml.safe_load` with :class:`BoundedLoader`."""
    return yaml.load(text, Loader=BoundedLoader)  # a SafeLoader subclass


def safe_load_all(text: str) -> Iterator[Any]:
    """:func:`yaml.safe_load_all` with :class:`BoundedLoader`."""
    return yaml.load_all(text, Loader=BoundedLoader)  # a SafeLoader subclass
