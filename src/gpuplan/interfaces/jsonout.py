"""The JSON convention every front end shares (docs/json.md): JSON has no inf or nan, so any
non-finite number is written as null. One function, used by the CLI's ``--format json`` and the web
API, so the two always print the same document."""

from __future__ import annotations

import math
from typing import Any


def finite(data: Any) -> Any:
    """``data`` with every non-finite float, at any depth of dicts, lists and tuples, replaced by None."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [finite(v) for v in data]
    return data
