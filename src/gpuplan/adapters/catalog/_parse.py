"""Reading catalog files into plain data, with errors a user can act on.

Everything here turns a parse or validation failure into ONE line that names the file, the place
(line, or GPU id and field path) and the rule that failed, because the CLI prints errors without a
traceback. Bundled files raise :class:`~gpuplan.core.errors.DataError` (our bug, exit 3); the user's own
files raise :class:`~gpuplan.core.errors.FileFormatError` (their input, exit 1). The caller picks which.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from gpuplan.adapters.yamltext import BoundedLoader
from gpuplan.core.errors import GpuplanError
from gpuplan.core.hardware import GpuSpec, PriceEntry

PRICE_COLUMNS = ("gpu", "kind", "provider", "usd", "as_of", "source_url", "region", "notes")
"""Column order of every prices.csv (bundled or user); extra or missing columns are rejected."""

_OPTIONAL = ("region", "notes")
_REQUIRED_PRICE_COLUMNS = frozenset(PRICE_COLUMNS) - set(_OPTIONAL)
_MAX_ERRORS = 3
_M = TypeVar("_M", bound=BaseModel)


class _StrictLoader(BoundedLoader):
    """SafeLoader (integers bounded, ``adapters.yamltext``) that refuses duplicate mapping keys: PyYAML
    silently keeps the last one otherwise, which hides a typo'd override (two ``memory_bytes:`` lines)
    instead of reporting it."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(text: str, origin: str, error: type[GpuplanError]) -> Any:
    """Parse YAML text; a syntax error becomes ``"<origin> line N: <problem>"`` (1-based line)."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{origin} line {mark.line + 1}" if mark is not None else origin
        problem = exc.problem or exc.context or "invalid YAML"
        raise error(f"{where}: {problem}", hint="fix the YAML syntax") from None
    except yaml.YAMLError as exc:  # pragma: no cover - non-marked errors are rare
        raise error(f"{origin}: invalid YAML ({exc})") from None


def flatten_errors(exc: ValidationError, limit: int = _MAX_ERRORS) -> str:
    """Pydantic's multi-line report as one line: ``field.path: rule (got X); ...; +N more``."""
    parts = []
    errors = exc.errors(include_url=False)
    for err in errors[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "(whole entry)"
        msg = str(err["msg"]).removeprefix("Value error, ")
        shown = err.get("input")
        quiet = err["type"] == "missing" or isinstance(shown, Mapping | list)
        got = "" if quiet else f" (got {shown!r})"
        parts.append(f"{loc}: {msg}{got}")
    if len(errors) > limit:
        parts.append(f"+{len(errors) - limit} more")
    return "; ".join(parts)


def validate_gpu(data: Any, origin: str, error: type[GpuplanError]) -> GpuSpec:
    """Validate one GPU mapping; the message names the file, the GPU id and each failing field."""
    gpu_id = data.get("id", "?") if isinstance(data, Mapping) else "?"
    if not isinstance(data, Mapping):
        raise error(f"{origin}: a GPU entry must be a mapping of fields, got {type(data).__name__}")
    return _validate(GpuSpec, data, f"{origin}: GPU {gpu_id}", error)


def validate_price(data: Any, origin: str, error: type[GpuplanError]) -> PriceEntry:
    """Validate one price mapping (a YAML entry or a CSV row)."""
    if not isinstance(data, Mapping):
        raise error(f"{origin}: a price entry must be a mapping of fields, got {type(data).__name__}")
    return _validate(PriceEntry, data, origin, error)


def _validate(model: type[_M], data: Mapping[str, Any], where: str, error: type[GpuplanError]) -> _M:
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise error(f"{where}: {flatten_errors(exc)}") from None


def read_prices_csv(text: str, origin: str, error: type[GpuplanError]) -> list[PriceEntry]:
    """Parse a prices.csv; each bad row is reported as ``"<origin> line N: field: rule"``."""
    reader = csv.DictReader(io.StringIO(text))
    header = set(reader.fieldnames or ())
    unknown = sorted(header - set(PRICE_COLUMNS))
    missing = sorted(_REQUIRED_PRICE_COLUMNS - header)
    if unknown or missing:
        detail = "; ".join(
            s
            for s in (
                f"unknown column(s) {unknown}" if unknown else "",
                f"missing column(s) {missing}" if missing else "",
            )
            if s
        )
        raise error(f"{origin} line 1: {detail} (expected {', '.join(PRICE_COLUMNS)})")
    entries = []
    for row in reader:
        if None in row:  # more cells than header columns
            raise error(f"{origin} line {reader.line_num}: more cells than the {len(header)} header columns")
        cleaned = {k: v for k, v in row.items() if v is not None and not (k in _OPTIONAL and v == "")}
        entries.append(validate_price(cleaned, f"{origin} line {reader.line_num}", error))
    return entries
