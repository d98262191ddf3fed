"""The JSON contracts (docs/json.md) of the main commands, against golden files.

Each case runs one command in-process and compares its ``--format json`` output with
``tests/golden/json/<name>.json``: the same keys in the same order at every level, the same strings,
booleans and nulls, and numbers equal to 1e-9 relative (so the last bit of a float may move with a
numpy release; a real prediction change may not). The goldens were written by the tree before the
re-layering (commit ea544cf) and stay valid through refactors; after an intended change of a contract
or a prediction, regenerate them with ``GPUPLAN_UPDATE_GOLDEN=1 pytest tests/integration/test_json_golden.py``
and review the diff.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Invoke = Callable[..., Any]

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "json"
INPUTS = GOLDEN / "inputs"
UPDATE_ENV = "GPUPLAN_UPDATE_GOLDEN"
REL_TOL = 1e-9
PRICE_DATE = "2026-12-03"
"""The date quotes are aged against (``GPUPLAN_PRICE_DATE``), so a quote's stale flag does not change the
goldens as the calendar moves."""

CASES: dict[str, tuple[str, ...]] = {
    "recommend-example": ("recommend", "--example"),
    "recommend-rate": (
        "recommend", "--model", "meta-llama/Llama-3.1-8B", "--input-tokens", "2048", "--output-tokens", "300",
        "--rate", "20", "--ttft-ms", "1000", "--tpot-ms", "50", "--gpus", "L4,A10G,L40S,H100-SXM",
    ),
    "recommend-rate-aws": (
        "recommend", "--model", "meta-llama/Llama-3.1-8B", "--input-tokens", "2048", "--output-tokens", "300",
        "--rate", "20", "--ttft-ms", "1000", "--tpot-ms", "50", "--gpus", "L4,A10G,L40S,H100-SXM",
        "--provider", "AWS",
    ),
    "recommend-confidence": (
        "recommend", "--model", "meta-llama/Llama-3.1-8B", "--input-tokens", "2048", "--output-tokens", "300",
        "--rate", "20", "--ttft-ms", "1000", "--tpot-ms", "50", "--gpus", "L4,A10G,L40S,H100-SXM",
        "--confidence", "0.9",
    ),
    "recommend-train": (
        "recommend", "--task", "train", "--model", "meta-llama/Llama-3.1-8B", "--tokens", "1e9",
        "--seq-len", "4096", "--gpus", "H100-SXM,A100-80GB-SXM",
    ),
    "fit": ("fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM"),
    "predict-rate": ("predict", str(INPUTS / "predict-rate.yaml")),
    "simulate-a10": ("simulate", str(INPUTS / "simulate-a10.yaml")),
    "fleet-tiers": ("fleet", str(ROOT / "docs" / "playbooks" / "inputs" / "04-fleet-tiers.yaml")),
    "train-plan-lora": (
        "train-plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--method", "lora", "--tokens", "1e8",
        "--seq-len", "2048", "--gpus", "A100-80GB-SXM,H100-SXM,L40S", "--max-gpus", "8",
    ),
    "dtypes": ("dtypes",),
}  # fmt: skip


def differences(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Where ``actual`` departs from ``expected``: key order, types, strings exactly, numbers to REL_TOL."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        if list(expected) != list(actual):
            return [f"{path}: keys {list(expected)} != {list(actual)}"]
        return [d for k in expected for d in differences(expected[k], actual[k], f"{path}.{k}")]
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: {len(expected)} items != {len(actual)}"]
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in differences(e, a, f"{path}[{i}]")
        ]
    numbers = (int, float)
    if isinstance(expected, numbers) and isinstance(actual, numbers) and not isinstance(expected, bool):
        same_kind = isinstance(expected, int) == isinstance(actual, int) and not isinstance(actual, bool)
        close = math.isclose(expected, actual, rel_tol=REL_TOL, abs_tol=0.0)
        return [] if same_kind and close else [f"{path}: {expected!r} != {actual!r}"]
    return (
        []
        if type(expected) is type(actual) and expected == actual
        else [f"{path}: {expected!r} != {actual!r}"]
    )


def test_differences_sees_order_type_and_value_changes() -> None:
    assert differences({"a": 1.0, "b": [1, "x"]}, {"a": 1.0 + 1e-12, "b": [1, "x"]}) == []
    assert differences({"a": 1, "b": 2}, {"b": 2, "a": 1}) == ["$: keys ['a', 'b'] != ['b', 'a']"]
    assert differences({"a": 1.0}, {"a": 1.001}) == ["$.a: 1.0 != 1.001"]
    assert differences({"a": 1}, {"a": 1.0}) == ["$.a: 1 != 1.0"]
    assert differences({"a": None}, {"a": 0}) == ["$.a: None != 0"]
    assert differences([True], [1]) == ["$[0]: True != 1"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_json_output_matches_golden(invoke: Invoke, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPLAN_PRICE_DATE", PRICE_DATE)
    run = invoke(*CASES[name], "--format", "json")
    assert run.exit_code == 0, run.output
    path = GOLDEN / f"{name}.json"
    if os.environ.get(UPDATE_ENV):
        path.write_text(run.stdout, encoding="utf-8")
    found = differences(json.loads(path.read_text(encoding="utf-8")), json.loads(run.stdout))
    assert not found, f"{name}: {len(found)} differences, first: {found[:5]}"
