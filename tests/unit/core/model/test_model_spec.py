"""ModelSpec's sizes are bounded by physics (``spec.MAX_*``), whoever builds one."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gpuplan.adapters.models.registry import get_model
from gpuplan.core.model import spec as bounds
from gpuplan.core.model.spec import ModelSpec, MoeSpec


def _fields(**changes: Any) -> dict[str, Any]:
    return get_model("meta-llama/Llama-3.1-8B").model_dump() | changes


@pytest.mark.parametrize(
    ("field", "bound"),
    [
        ("num_attention_heads", bounds.MAX_ATTENTION_HEADS),
        ("num_kv_heads", bounds.MAX_ATTENTION_HEADS),
        ("head_dim", bounds.MAX_HEAD_DIM),
        ("hidden_size", bounds.MAX_HIDDEN_SIZE),
        ("num_layers", bounds.MAX_LAYERS),
        ("intermediate_size", bounds.MAX_INTERMEDIATE_SIZE),
        ("vocab_size", bounds.MAX_VOCAB_SIZE),
        ("max_position_embeddings", bounds.MAX_POSITIONS),
    ],
)
def test_a_size_one_past_its_bound_is_refused_at_its_field(field: str, bound: int) -> None:
    ModelSpec.model_validate(_fields(**{field: bound}))
    with pytest.raises(ValidationError) as err:
        ModelSpec.model_validate(_fields(**{field: bound + 1}))
    assert [e["loc"] for e in err.value.errors()] == [(field,)]


def test_experts_and_top_k_are_bounded() -> None:
    moe = {"expert_intermediate_size": 1024, "num_moe_layers": 4}
    MoeSpec(num_experts=bounds.MAX_EXPERTS, top_k=bounds.MAX_TOP_K, **moe)
    with pytest.raises(ValidationError) as err:
        MoeSpec(num_experts=bounds.MAX_EXPERTS + 1, top_k=bounds.MAX_TOP_K + 1, **moe)
    assert [e["loc"] for e in err.value.errors()] == [("num_experts",), ("top_k",)]
