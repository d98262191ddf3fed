"""Find a model's config and build it with random weights (transformers ``from_config``; no download).

Lookup of ``--model``: a config bundled for the benchmark (``data/<id>.json``, e.g. ``tiny-llama``),
then a model gpuplan bundles (``gpuplan models``; aliases too), then a path to a ``config.json``.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import torch

from gpuplan.adapters.models.registry import aliases
from gpuplan.core import jsontext
from gpuplan.core.errors import UserInputError
from gpuplan.data import bundled

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _bundled_bench(model_id: str) -> dict[str, Any] | None:
    path = bundled("bench", f"{model_id}.json")
    return dict(jsontext.loads(path.read_text(encoding="utf-8"))) if path.is_file() else None


def _bundled_gpuplan(model_id: str) -> dict[str, Any] | None:
    configs = bundled("models", "configs")
    index = {
        row["hf_id"].lower(): row["file"]
        for row in csv.DictReader(io.StringIO(configs.joinpath("INDEX.csv").read_text(encoding="utf-8")))
    }
    name = {k.lower(): v for k, v in aliases().items()}.get(model_id.lower(), model_id).lower()
    if name not in index:
        return None
    return dict(json.loads(configs.joinpath(index[name]).read_text(encoding="utf-8")))


def resolve_config(model_id: str) -> dict[str, Any]:
    """The HF config mapping of ``model_id``; UserInputError when none is found."""
    found = _bundled_bench(model_id) or _bundled_gpuplan(model_id)
    if found is not None:
        return found
    path = Path(model_id)
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        return dict(jsontext.loads(path.read_text(encoding="utf-8")))
    raise UserInputError(
        f"no config for model {model_id!r}",
        hint="a bundled id (gpuplan models), tiny-llama, or a path to config.json",
    )


def build_model(config: dict[str, Any], dtype: str, device: torch.device) -> torch.nn.Module:
    """A causal LM of that architecture with random weights, on ``device`` in ``dtype``."""
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype", "dtype", "auto_map")}
    model_type = raw.pop("model_type", None)
    if not model_type:
        raise UserInputError("the model's config has no model_type")
    try:
        cfg = AutoConfig.for_model(model_type, **raw)
    except (ValueError, KeyError) as exc:
        raise UserInputError(f"transformers cannot build model_type {model_type!r}: {exc}") from None
    cfg._attn_implementation = "sdpa"
    previous = torch.get_default_dtype()
    torch.set_default_dtype(DTYPES[dtype])
    try:
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(cfg)  # type: ignore[no-untyped-call]
    finally:
        torch.set_default_dtype(previous)
    return model.to(device=device, dtype=DTYPES[dtype])  # type: ignore[no-any-return]
