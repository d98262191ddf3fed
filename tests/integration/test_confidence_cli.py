"""``recommend --interval`` / ``--confidence``: the JSON contract of docs/json.md, the table, bad levels."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

Invoke = Callable[..., Any]

REQUEST = (
    "recommend", "--model", "meta-llama/Llama-3.1-8B", "--input-tokens", "512", "--output-tokens", "128",
    "--rate", "40", "--tpot-ms", "40", "--gpus", "L4,H100-SXM",
)  # fmt: skip


def _json(invoke: Invoke, *args: str) -> Any:
    run = invoke(*REQUEST, *args, "--format", "json")
    assert run.exit_code == 0, run.stderr
    return json.loads(run.stdout)


def test_plans_carry_80_percent_intervals_by_default(invoke: Invoke) -> None:
    data = _json(invoke)
    assert data["confidence"] is None
    split = [p for p in data["plans"] if p["layout_kind"] == "disaggregated"]
    assert all(p["interval"] is None for p in split)  # the error model is fitted on aggregated rows
    for plan in (p for p in data["plans"] if p["layout_kind"] == "aggregated"):
        assert plan["interval"]["level"] == 0.8
        for key in ("ttft_ms", "tpot_ms"):
            assert plan["low"][key] < plan["high"][key]
            assert plan["interval"]["sources"][key]["rows"] >= 1
        # a rate target: the plan carries its offered load, throughput is that (review M4)
        throughput = plan["output_tokens_per_s"]
        assert plan["low"]["output_tokens_per_s"] == plan["high"]["output_tokens_per_s"] == throughput


def test_interval_flag_sets_the_level(invoke: Invoke) -> None:
    narrow, wide = _json(invoke, "--interval", "0.5"), _json(invoke, "--interval", "0.95")
    n, w = narrow["plans"][0], wide["plans"][0]
    assert n["interval"]["level"] == 0.5 and w["interval"]["level"] == 0.95
    assert w["high"]["tpot_ms"] / w["low"]["tpot_ms"] > n["high"]["tpot_ms"] / n["low"]["tpot_ms"]


def test_confidence_reports_both_counts(invoke: Invoke) -> None:
    data = _json(invoke, "--confidence", "0.9")
    assert data["confidence"] == 0.9
    best = data["plans"][0]
    assert best["count"] >= best["count_at_point_estimate"] >= 1
    assert data["explanation"][1].startswith(
        f"Sized at 90% confidence: {best['count_at_point_estimate']}x {best['gpu']} meet the SLA at the point "
        f"estimate; {best['count']} at 90% confidence"
    )


def test_table_shows_intervals_and_the_point_count(invoke: Invoke) -> None:
    run = invoke(*REQUEST, "--confidence", "0.9")
    assert run.exit_code == 0, run.stderr
    assert "at 90% confidence" in run.stdout and "at point" in run.stdout
    assert "Intervals" in run.stdout and "rows" in run.stdout
    row = next(line for line in run.stdout.splitlines() if line.lstrip("│ ").startswith("H100-SXM"))
    assert "(" in row and "-" in row  # a figure printed as value (low-high)


@pytest.mark.parametrize(
    ("flag", "value"), [("--confidence", "0.3"), ("--confidence", "1"), ("--interval", "0.999")]
)
def test_a_level_outside_the_error_models_range_names_the_flag(
    user_error: Callable[..., str], flag: str, value: str
) -> None:
    line = user_error(*REQUEST, flag, value)
    assert line.startswith(f"error: {flag} {float(value):g} is outside 0.5..0.99")


def test_a_training_request_refuses_confidence(user_error: Callable[..., str]) -> None:
    line = user_error(
        "recommend", "--task", "train", "--model", "meta-llama/Llama-3.1-8B", "--tokens", "1e9", "--seq-len",
        "4096", "--gpus", "H100-SXM", "--confidence", "0.9",
    )  # fmt: skip
    assert line.startswith("error: --confidence would be ignored by --task train")
