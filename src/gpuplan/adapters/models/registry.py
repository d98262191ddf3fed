"""Find a model by name: bundled HF ids (and a few aliases), a ``config.json`` path, or the HF Hub.

Resolution order in :func:`get_model`:

1. a bundled id from ``gpuplan/data/models/configs/INDEX.csv`` (case-insensitive), or an alias from
   ``gpuplan/data/models/aliases.csv`` (chat/instruct variants and renamed repos with the same network);
2. a path to a ``config.json``, or to a directory holding one;
3. with ``huggingface_hub`` installed (extra ``gpuplan[hf]``): the local HF cache, then the Hub
   (:mod:`gpuplan.adapters.models.hub`: one existence request without retries, then
   ``hf_hub_download(repo_id, "config.json")``). Any failure there is an UnknownNameError whose hint
   says why (Hub unreachable, no such repository, offline mode, download refused).

Bundled specs are parsed lazily and cached; importing this module does no I/O.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from gpuplan.adapters.models import hub
from gpuplan.adapters.models.hf_config import parse_hf_config
from gpuplan.core import jsontext
from gpuplan.core.errors import FileFormatError, UnknownNameError, UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.model import arith
from gpuplan.core.model.spec import ModelSpec
from gpuplan.data import read_bundled_text

HUB_HINT = "pass a path to config.json, or pip install 'gpuplan[hf]' and check the id"
HUB_INSTALLED_HINT = (
    "pass a path to config.json, or check the id on huggingface.co (a gated model needs `hf auth login`)"
)
LLMFOUNDRY_SUFFIX = "-llmfoundry"
"""llm-foundry benchmark models: their learned position table is as long as the run's seq_len."""
_BF16_BYTES = 2
_REPO_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


class ModelSummary(FrozenModel):
    """One row of ``gpuplan models``."""

    id: str
    model_type: str
    attention: str
    params_b: float
    active_params_b: float
    kv_bytes_per_token_bf16: int


def _data_text(*parts: str) -> str:
    return read_bundled_text("models", *parts)


@lru_cache(maxsize=1)
def _index() -> dict[str, tuple[str, str]]:
    """lower-cased hf_id → (hf_id, file name)."""
    rows = csv.DictReader(io.StringIO(_data_text("configs", "INDEX.csv")))
    return {row["hf_id"].lower(): (row["hf_id"], row["file"]) for row in rows}


@lru_cache(maxsize=1)
def _aliases() -> dict[str, str]:
    """lower-cased alias → bundled hf_id."""
    rows = csv.DictReader(io.StringIO(_data_text("aliases.csv")))
    return {row["alias"].lower(): row["hf_id"] for row in rows}


def bundled_ids() -> list[str]:
    """Every bundled model id, sorted case-insensitively."""
    return sorted((hf_id for hf_id, _ in _index().values()), key=str.lower)


def aliases() -> dict[str, str]:
    """Alias → bundled id, e.g. ``meta-llama/Llama-2-70b-chat-hf`` → ``meta-llama/Llama-2-70b-hf``."""
    rows = csv.DictReader(io.StringIO(_data_text("aliases.csv")))
    return {row["alias"]: row["hf_id"] for row in rows}


@cache
def _bundled(hf_id: str) -> ModelSpec:
    _, file_name = _index()[hf_id.lower()]
    return parse_hf_config(json.loads(_data_text("configs", file_name)), model_id=hf_id)


def _read_json(path: Path, model_id: str) -> Mapping[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"{path}: cannot read config.json ({exc})") from None
    try:
        data = jsontext.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise FileFormatError(f"{path}: not valid JSON ({where}: {exc.msg})") from None
    if not isinstance(data, Mapping):
        raise FileFormatError(f"config.json for {model_id}: expected a JSON object at the top level")
    return data


def _local_config(name: str) -> Path | None:
    """The config.json a name points to, None when the name is not a local path."""
    try:
        path = Path(name).expanduser()
        is_dir, is_file = path.is_dir(), path.is_file()
    except (OSError, RuntimeError, ValueError):
        return None
    if is_dir:
        candidate = path / "config.json"
        if not candidate.is_file():
            raise UserInputError(f"directory {name} has no config.json", hint="pass the path to config.json")
        return candidate
    if is_file:
        return path
    if name.endswith(".json") or name.startswith(("/", "./", "../", "~")):
        raise UserInputError(f"no such file: {name}", hint="check the path to config.json")
    return None


def _hub_config(repo_id: str) -> Mapping[str, Any] | None:
    """config.json of ``repo_id`` from the local HF cache or the Hub (:mod:`.hub`); None when
    ``repo_id`` is no repo id or huggingface_hub is not installed; :class:`~.hub.HubMiss` (its
    message the hint) when the Hub has none."""
    if not _REPO_ID.match(repo_id):
        return None
    path = hub.config_path(repo_id)
    return None if path is None else _read_json(path, repo_id)


def get_model(name_or_path: str) -> ModelSpec:
    """The :class:`ModelSpec` for a bundled id / alias, a config.json path, or a Hub repo id.

    Raises UnknownNameError (with did-you-mean over the bundled ids and aliases) when nothing
    matches, FileFormatError when the config found is malformed.
    """
    name = name_or_path.strip()
    key = name.lower()
    key = _aliases().get(key, name).lower()
    key = _bundled_by_stem(key) or key
    if key in _index():
        return _bundled(_index()[key][0])
    local = _local_config(name) if name else None
    if local is not None:
        return parse_hf_config(_read_json(local, name), model_id=name)
    try:
        config = _hub_config(name) if name else None
    except hub.HubMiss as miss:
        raise UnknownNameError("model", name, [*bundled_ids(), *aliases()], hint=str(miss)) from None
    if config is not None:
        return parse_hf_config(config, model_id=name)
    raise UnknownNameError("model", name, [*bundled_ids(), *aliases()], hint=hub_hint())


def _bundled_by_stem(key: str) -> str | None:
    """The bundled id whose name after the organisation is ``key`` (``llama-3.1-8b`` ->
    ``meta-llama/llama-3.1-8b``), when exactly one is; None otherwise or when ``key`` names an organisation."""
    if "/" in key:
        return None
    owners = [hf_id for hf_id in _index() if hf_id.rsplit("/", 1)[-1] == key]
    return owners[0] if len(owners) == 1 else None


def hub_hint() -> str:
    """What to do about an unknown model: install the Hub extra, or, with it installed, check the id."""
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        return HUB_HINT
    return HUB_INSTALLED_HINT


def with_position_table(spec: ModelSpec, rows: int) -> ModelSpec:
    """``spec`` with a learned position table of ``rows`` rows (and that many max positions).

    ``params_reported`` is dropped when the table changes size, since it was published for the
    original table.
    """
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise UserInputError(f"position table rows must be a positive int, got {rows!r}")
    if rows == spec.learned_position_embeddings:
        return spec
    return spec.model_copy(
        update={"learned_position_embeddings": rows, "max_position_embeddings": rows, "params_reported": None}
    )


def model_for_seq_len(spec: ModelSpec, seq_len: int) -> ModelSpec:
    """The model as run at ``seq_len``: llm-foundry benchmark MPTs (``mosaicml/*-llmfoundry``)
    size their learned position table to the run's ``max_seq_len`` (mpt-1b: 1.316B at 2048,
    1.446B at 65536); every other model is returned unchanged."""
    if spec.id.lower().endswith(LLMFOUNDRY_SUFFIX) and spec.learned_position_embeddings > 0:
        return with_position_table(spec, seq_len)
    return spec


def list_models() -> list[ModelSummary]:
    """A summary of every bundled model, sorted by id."""
    out = []
    for hf_id in bundled_ids():
        spec = _bundled(hf_id)
        counts = arith.param_counts(spec)
        out.append(
            ModelSummary(
                id=spec.id,
                model_type=spec.model_type,
                attention=spec.attention,
                params_b=counts.total / 1e9,
                active_params_b=counts.active / 1e9,
                kv_bytes_per_token_bf16=arith.kv_elements_per_token(spec) * _BF16_BYTES,
            )
        )
    return out
