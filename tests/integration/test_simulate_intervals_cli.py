"""``simulate`` intervals (issue 17): the summary's throughput and TTFT/TPOT P50/P99 carry the error model's
interval, and at an open-loop rate the P99s also carry the capacity interval through the queue, so their
interval widens as the load nears the replica's capacity."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuplan.core.calibration.uncertainty import band
from gpuplan.data.error_model import default_error_model

Invoke = Callable[..., Any]

SCENARIO = """model: meta-llama/Llama-3.1-8B
hardware: {{gpu: H100-SXM, count: 1}}
precision: {{weights: bf16}}
engine: vllm
workload: {{input_tokens: 512, output_tokens: 128, rate_rps: {rate}}}
arrival: {{kind: poisson, rate_rps: {rate}, num_requests: 400, seed: 0}}
"""
FIGURES = {"output_tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms"}


def _simulate(invoke: Invoke, tmp_path: Path, rate: float, *args: str) -> dict[str, Any]:
    path = tmp_path / f"rate{rate:g}.yaml"
    path.write_text(SCENARIO.format(rate=rate), encoding="utf-8")
    run = invoke("simulate", str(path), *args, "--format", "json")
    assert run.exit_code == 0, run.stderr
    return dict(json.loads(run.stdout))


def _queue_widening(out: dict[str, Any], name: str) -> float:
    """The P99's interval width (high/low) over its error-model group's band alone: the queue's share."""
    b = out["interval"]
    group = b["sources"][name]["group"].split("/")
    lo, hi = band(model=default_error_model(), path=group, level=b["level"]) or (1.0, 1.0)
    return float((b["high"][name] / b["low"][name]) / (hi / lo))


def test_summary_figures_carry_intervals(invoke: Invoke, tmp_path: Path) -> None:
    out = _simulate(invoke, tmp_path, 2)
    b = out["interval"]
    assert b["level"] == 0.8 and set(b["sources"]) == FIGURES
    summary = out["summary"]
    assert b["low"]["tpot_p50_ms"] < b["high"]["tpot_p50_ms"]
    # an open-loop run below saturation carries its offered load: the throughput has no spread
    assert (
        b["low"]["output_tokens_per_s"] == b["high"]["output_tokens_per_s"] == summary["output_tokens_per_s"]
    )
    assert all(s["group"].split("/")[1] == "light load" for s in b["sources"].values())
    wider = _simulate(invoke, tmp_path, 2, "--interval", "0.95")["interval"]
    assert (
        wider["high"]["tpot_p50_ms"] / wider["low"]["tpot_p50_ms"]
        > b["high"]["tpot_p50_ms"] / b["low"]["tpot_p50_ms"]
    )


def test_p99_interval_widens_towards_capacity(invoke: Invoke, tmp_path: Path) -> None:
    light, busier = _simulate(invoke, tmp_path, 2), _simulate(invoke, tmp_path, 20)
    for name in ("ttft_p99_ms", "tpot_p99_ms"):
        assert light["interval"]["sources"][name] == busier["interval"]["sources"][name]  # same group
        assert _queue_widening(busier, name) > _queue_widening(light, name) >= 1.0


def test_bad_interval_names_the_flag(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(rate=2), encoding="utf-8")
    run = invoke("simulate", str(path), "--interval", "1.5")
    assert run.exit_code == 1 and run.error_line().startswith("error: --interval 1.5 is outside")
