"""Sizes in a config.json are bounded by physics where they are read: an absurd value is one
FileFormatError naming the key and the bound, raised before any work scales with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from models_testdata import all_raw_configs, raw_config

from gpuplan.adapters.models.hf_config import parse_hf_config
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.errors import FileFormatError
from gpuplan.core.model import spec as bounds

LLAMA = "meta-llama/Llama-3.1-8B"
MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"


def _with(hf_id: str, **changes: Any) -> dict[str, Any]:
    return raw_config(hf_id) | changes


@pytest.mark.parametrize(
    ("hf_id", "key", "value", "bound"),
    [
        (LLAMA, "num_attention_heads", 2**40 - 1, bounds.MAX_ATTENTION_HEADS),
        (LLAMA, "num_attention_heads", 10**8, bounds.MAX_ATTENTION_HEADS),
        (LLAMA, "num_key_value_heads", 8192, bounds.MAX_ATTENTION_HEADS),
        (LLAMA, "head_dim", 10**6, bounds.MAX_HEAD_DIM),
        (LLAMA, "hidden_size", 2**30, bounds.MAX_HIDDEN_SIZE),
        (LLAMA, "num_hidden_layers", 10**6, bounds.MAX_LAYERS),
        (LLAMA, "vocab_size", 10**9, bounds.MAX_VOCAB_SIZE),
        (LLAMA, "max_position_embeddings", 2**31, bounds.MAX_POSITIONS),
        (MIXTRAL, "num_local_experts", 10**6, bounds.MAX_EXPERTS),
        (MIXTRAL, "num_experts_per_tok", 10**4, bounds.MAX_TOP_K),
        (DEEPSEEK, "n_routed_experts", 10**6, bounds.MAX_EXPERTS),
    ],
)
def test_a_size_past_its_physical_bound_names_the_key(hf_id: str, key: str, value: int, bound: int) -> None:
    with pytest.raises(FileFormatError) as err:
        parse_hf_config(_with(hf_id, **{key: value}), model_id="x")
    assert err.value.message == f"config.json for x: {key!r} is {value} (expected an int <= {bound})"


@pytest.mark.parametrize(
    ("hf_id", "key", "value", "field"),
    [
        (LLAMA, "intermediate_size", 10**7, "intermediate_size"),
        (MIXTRAL, "intermediate_size", 10**7, "expert_intermediate_size"),
    ],
)
def test_a_derived_size_past_its_bound_names_the_field(hf_id: str, key: str, value: int, field: str) -> None:
    with pytest.raises(FileFormatError, match=f"'{field}'.*less than or equal to 1048576"):
        parse_hf_config(_with(hf_id, **{key: value}), model_id="x")


MARGIN = 8
"""Each bound is at least this many times the largest bundled value (the bounds' docstrings)."""


def test_every_bundled_size_is_far_inside_its_bound() -> None:
    specs = [parse_hf_config(config, model_id=hf_id) for hf_id, config in all_raw_configs().items()]
    sizes = {
        "MAX_ATTENTION_HEADS": [s.num_attention_heads or 1 for s in specs],
        "MAX_HEAD_DIM": [s.head_dim or 1 for s in specs],
        "MAX_HIDDEN_SIZE": [s.hidden_size for s in specs],
        "MAX_LAYERS": [s.num_layers for s in specs],
        "MAX_INTERMEDIATE_SIZE": [s.intermediate_size for s in specs],
        "MAX_VOCAB_SIZE": [s.vocab_size for s in specs],
        "MAX_POSITIONS": [s.max_position_embeddings or 1 for s in specs],
        "MAX_EXPERTS": [s.moe.num_experts for s in specs if s.moe],
        "MAX_TOP_K": [s.moe.top_k for s in specs if s.moe],
    }
    too_close = {name: max(v) for name, v in sizes.items() if max(v) * MARGIN > getattr(bounds, name)}
    assert too_close == {}


def test_an_integer_over_python_s_digit_limit_names_the_key(tmp_path: Path) -> None:
    text = json.dumps(raw_config(LLAMA)).replace('"hidden_size": 4096', '"hidden_size": ' + "9" * 5000)
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FileFormatError, match="'hidden_size' is Infinity"):
        get_model(str(path))
