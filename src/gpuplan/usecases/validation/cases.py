"""Read the validation CSVs (any of the four schemas, detected by header) into typed rows.

One row is one published number with its conditions; see ``shared/validation/README.md``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from gpuplan.core.errors import FileFormatError
from gpuplan.core.frozen import FrozenModel

Schema = Literal["inference", "inference_memory", "training", "memory"]

_SIGNATURES: dict[Schema, frozenset[str]] = {
    "inference": frozenset({"scenario", "input_len", "output_len", "concurrency", "metric", "value"}),
    "inference_memory": frozenset({"framework_version", "gpu_memory_utilization", "max_model_len", "metric"}),
    "training": frozenset({"global_batch_size", "micro_batch_size", "method", "metric", "value"}),
    "memory": frozenset({"optimizer", "zero_stage", "gradient_checkpointing", "metric", "value"}),
}
_REQUIRED = frozenset({"id", "model", "gpu", "metric", "value", "quality"})


class Skip(Exception):
    """A row the model cannot predict, with the reason shown to the user."""


class Case(FrozenModel):
    """One validation row: its raw fields plus the parsed value."""

    schema_name: Schema
    id: str
    metric: str
    value: float
    quality: str
    fields: dict[str, str]

    def get(self, key: str) -> str:
        """The raw field, stripped ('' when absent or blank)."""
        return (self.fields.get(key) or "").strip()

    def int_field(self, key: str) -> int | None:
        """A whole number >= 0 ('' → None); Skip naming the column otherwise (the row, not the run)."""
        value = self.float_field(key)
        if value is None:
            return None
        if value < 0 or value != int(value):
            raise Skip(f"{key} {self.get(key)!r} is not a whole number >= 0")
        return int(value)

    def float_field(self, key: str) -> float | None:
        """A finite number ('' → None); Skip naming the column otherwise."""
        raw = self.get(key)
        if not raw:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise Skip(f"{key} {raw!r} is not a number") from None
        if not math.isfinite(value):
            raise Skip(f"{key} {raw!r} is not a finite number")
        return value

    def note(self, key: str) -> str | None:
        """A ``key=value`` item of the ``notes`` column, if present."""
        for item in self.get("notes").split(" | "):
            head, sep, tail = item.strip().partition("=")
            if sep and head.strip() == key:
                return tail.strip().split(" ")[0].rstrip(";,")
        return None


def detect_schema(header: list[str], *, path: str) -> Schema:
    """Which validation schema a header belongs to; FileFormatError names what is missing."""
    columns = set(header)
    missing = _REQUIRED - columns
    if missing:
        raise FileFormatError(
            f"{path}: header lacks {', '.join(sorted(missing))}",
            hint="expected a gpuplan validation CSV (inference, inference_memory, training, memory)",
        )
    for schema in ("inference_memory", "inference", "training", "memory"):
        if _SIGNATURES[schema] <= columns:
            return schema
    raise FileFormatError(
        f"{path}: header matches no validation schema",
        hint="see shared/validation/README.md for the four schemas",
    )


def read_cases(path: Path) -> tuple[Schema, list[Case]]:
    """Parse a validation CSV; FileFormatError names the file and line of a bad row."""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            schema = detect_schema(list(reader.fieldnames or []), path=str(path))
            return schema, [_case(schema, row, path, reader.line_num) for row in reader]
    except OSError as exc:
        raise FileFormatError(f"cannot read {path}: {exc.strerror}", hint="check the path") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise FileFormatError(f"{path}: not a readable CSV ({exc})") from None


def _case(schema: Schema, row: Mapping[str, str | None], path: Path, line: int) -> Case:
    raw = {k: (v or "") for k, v in row.items() if k is not None}
    try:
        value = float(raw.get("value", ""))
    except ValueError:
        raise FileFormatError(f"{path} line {line}: value {raw.get('value')!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise FileFormatError(
            f"{path} line {line}: value {raw.get('value')!r} must be a finite measurement >= 0",
            hint="fix or remove the row",
        )
    return Case(
        schema_name=schema,
        id=raw.get("id", f"line{line}"),
        metric=raw.get("metric", ""),
        value=value,
        quality=raw.get("quality", "").strip().upper(),
        fields=raw,
    )
