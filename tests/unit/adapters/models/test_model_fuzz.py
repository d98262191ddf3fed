"""Fuzz parse_hf_config with damaged real configs: the only failure allowed is FileFormatError,
and whatever parses must go through the arithmetic without raising."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from models_testdata import all_raw_configs

from gpuplan.adapters.models.hf_config import SUPPORTED_MODEL_TYPES, parse_hf_config
from gpuplan.core.errors import FileFormatError
from gpuplan.core.model.arith import kv_elements_for_sequence, param_counts, prefill_flops
from gpuplan.core.model.spec import ModelSpec

CONFIGS = all_raw_configs()
NESTED = ("text_config", "attn_config")
REPLACEMENTS: dict[str, Any] = {
    "string": "42",
    "null": None,
    "negative": -7,
    "zero": 0,
    "float": 2.5,
    "integral_float": 64.0,
    "bool": True,
    "list": [1, "a"],
    "dict": {"x": 1},
    "huge": 10**13,
    "large": 10**6,
    "nan": float("nan"),
}
OPS = ("delete", "halve", "double", *REPLACEMENTS)


def _mutate(target: dict[str, Any], key: str, op: str) -> None:
    value = target.get(key)
    if op == "delete":
        target.pop(key, None)
    elif op in ("halve", "double"):
        if isinstance(value, int | float) and not isinstance(value, bool):
            target[key] = value // 2 if op == "halve" else value * 2
    else:
        target[key] = REPLACEMENTS[op]


@st.composite
def damaged_configs(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    hf_id = draw(st.sampled_from(sorted(CONFIGS)))
    config = copy.deepcopy(CONFIGS[hf_id])
    for _ in range(draw(st.integers(1, 4))):
        nested = [k for k in NESTED if isinstance(config.get(k), dict)]
        target = config[draw(st.sampled_from(nested))] if bool(nested) and draw(st.booleans()) else config
        if not target:
            break
        _mutate(target, draw(st.sampled_from(sorted(target))), draw(st.sampled_from(OPS)))
    return hf_id, config


def _exercise(spec: ModelSpec) -> None:
    counts = param_counts(spec)
    assert counts.total >= counts.active >= 0
    assert kv_elements_for_sequence(spec, tokens=4096) >= 0
    assert prefill_flops(spec, prompt_tokens=64, cached_tokens=8) >= 0


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_configs())
def test_damaged_configs_raise_only_file_format_errors(case: tuple[str, dict[str, Any]]) -> None:
    hf_id, config = case
    try:
        spec = parse_hf_config(config, model_id=hf_id)
    except FileFormatError as exc:
        assert hf_id in str(exc)
        return
    _exercise(spec)


KEYS = sorted({k for c in CONFIGS.values() for k in c} - {"model_type"})
VALUES = st.one_of(
    st.none(), st.integers(-3, 10**5), st.text(max_size=5), st.booleans(), st.floats(allow_nan=True)
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SUPPORTED_MODEL_TYPES), st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=25))
def test_random_dicts_raise_only_file_format_errors(model_type: str, config: dict[str, Any]) -> None:
    config["model_type"] = model_type
    try:
        spec = parse_hf_config(config, model_id="fuzz/model")
    except FileFormatError:
        return
    _exercise(spec)
