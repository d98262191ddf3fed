"""YAML text to Python values, safely, with every integer in range of Python's int-string conversion.

PyYAML's SafeLoader turns an integer of more than 4,300 digits into a ``ValueError`` from ``int()``
(Python's conversion limit), which escapes as a traceback. :class:`BoundedLoader` reads such an
integer as an infinite float instead, as ``.inf`` reads (see ``gpuplan.core.jsontext``): every
bounded field then refuses it with its own message naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import yaml

INT_TAG = "tag:yaml.org,2002:int"


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose integers over Python's conversion limit read as ±infinity."""


def _construct_int(loader: BoundedLoader, node: yaml.ScalarNode) -> int | float:
    try:
        value: int = loader.construct_yaml_int(node)
    except ValueError:  # the resolver matched the int pattern: only the digit limit fails int()
        text = str(loader.construct_scalar(node)).strip()
        return -math.inf if text.startswith("-") else math.inf
    return value


BoundedLoader.add_constructor(INT_TAG, _construct_int)


def safe_load(text: str) -> Any:
    """:func:`yaml.safe_load` with :class:`BoundedLoader`."""
    return yaml.load(text, Loader=BoundedLoader)  # a SafeLoader subclass


def safe_load_all(text: str) -> Iterator[Any]:
    """:func:`yaml.safe_load_all` with :class:`BoundedLoader`."""
    return yaml.load_all(text, Loader=BoundedLoader)  # a SafeLoader subclass
