"""Issue 17 item 5, "what would shrink it": a plan on a GPU without measurements names the benchmark that
narrows its intervals most, and running that loop (bench-like rows → ``calibrate`` → ``recommend
--calibration``) does narrow the plan's interval to the calibrated group's width."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.core.calibration.error_model import group_path
from gpuplan.core.calibration.narrowing import band_width
from gpuplan.data.bundled_calibration import default_calibration, default_training_calibration
from gpuplan.data.error_model import default_error_model
from gpuplan.usecases.calibration.measured_predict import predict_row
from gpuplan.usecases.calibration.measured_rows import ResultRow, rows_to_csv

Invoke = Callable[..., Any]

GPU = "L40S"
"""An Ada board: the bundled calibration has no ``ada`` factors, so its plans read priors-only groups."""
REQUEST = (
    "recommend", "--model", "meta-llama/Llama-3.1-8B", "--input-tokens", "1024", "--output-tokens", "256",
    "--rate", "1", "--ttft-ms", "1000", "--tpot-ms", "50", "--layouts", "aggregated",
)  # fmt: skip
SLOWER_THAN_PREDICTED = 0.9
"""The synthetic board runs at 90 % of the bundled prediction: any measurement moves the family from priors
to calibrated; the figure only has to differ from the prior so that the fit has something to do."""


def _plans(invoke: Invoke, *args: str) -> list[dict[str, Any]]:
    run = invoke(*REQUEST, *args, "--format", "json")
    assert run.exit_code == 0, run.stderr
    return list(json.loads(run.stdout)["plans"])


def _width(plan: dict[str, Any], name: str) -> float:
    return float(plan["high"][name] / plan["low"][name] - 1.0)


def test_a_plan_on_a_gpu_without_measurements_names_its_benchmark(invoke: Invoke) -> None:
    plans = _plans(invoke, "--gpus", f"{GPU},H100-SXM")
    ada = next(p for p in plans if p["gpu"] == GPU)
    hopper = next(p for p in plans if p["gpu"] == "H100-SXM")
    assert not ada["calibrated"] and hopper["calibrated"] and hopper["narrow_with"] is None
    n = ada["narrow_with"]
    assert n["gpu"] == GPU and "gpuplan bench serve" in n["command"]
    assert f"calibrate --from-store --gpu {GPU} --engine vllm --tp {ada['tp']}" in n["command"]
    assert n["width_after"] < n["width_now"]
    # the width now is the plan's own interval of that figure (a mean figure: value times the band)
    assert abs(_width(ada, n["metric"]) / n["width_now"] - 1.0) < 1e-9
    assert ada["interval"]["sources"][n["metric"]]["group"] == n["group_now"]
    # and the width after is the band of the same figure's calibrated group, from the error model
    regime = n["group_after"].split("/")[1]
    family, metric = {"ttft_ms": ("ttft", "ttft_ms_mean"), "tpot_ms": ("tpot", "tpot_ms_mean")}[n["metric"]]
    path = group_path(family=family, regime=regime, gpu_fitted=True, engine_known=True, metric=metric)
    assert band_width(model=default_error_model(), path=path, level=0.8) == n["width_after"]
    text = invoke(*REQUEST, "--gpus", f"{GPU},H100-SXM")
    assert "What would shrink it" in text.stdout and f"benchmark {GPU} with" in text.stdout


def _bench_rows(plan: dict[str, Any]) -> list[ResultRow]:
    """``bench serve``-like rows of the plan's layout on ``GPU``: the three metrics a run reports, at a
    few loads and lengths, measured at ``SLOWER_THAN_PREDICTED`` of the bundled prediction."""
    catalog, cal, training = load_catalog(), default_calibration(), default_training_calibration()
    rows = []
    for conc in (1, 4, 16, 64):
        for inp, out in ((128, 128), (1024, 256), (2048, 64)):
            for metric in ("ttft_ms_mean", "tpot_ms_mean", "output_tokens_per_s"):
                fields = {
                    "model": "meta-llama/Llama-3.1-8B", "framework": "vllm", "tp": str(plan["tp"]),
                    "num_gpus": str(plan["tp"]), "weight_dtype": "bf16", "scenario": "concurrency",
                    "concurrency": str(conc), "input_len": str(inp), "output_len": str(out),
                }  # fmt: skip
                row = ResultRow(id=f"s{conc}-{inp}-{metric}", kind="serve", gpu=GPU, metric=metric,
                                value=1.0, fields=fields)  # fmt: skip
                predicted = predict_row(row, catalog, cal, training)
                assert predicted is not None
                rate = metric == "output_tokens_per_s"  # a rate is 0.9x the prediction, a time 1/0.9x
                measured = predicted * SLOWER_THAN_PREDICTED if rate else predicted / SLOWER_THAN_PREDICTED
                rows.append(row.model_copy(update={"value": measured}))
    return rows


def test_calibrating_on_own_results_narrows_the_interval(invoke: Invoke, tmp_path: Path) -> None:
    before = next(p for p in _plans(invoke, "--gpus", GPU) if p["gpu"] == GPU)
    n = before["narrow_with"]
    results, profile = tmp_path / "results.csv", tmp_path / "profile.yaml"
    results.write_text(rows_to_csv(_bench_rows(before)), encoding="utf-8")
    fitted = invoke("calibrate", str(results), "-o", str(profile))
    assert fitted.exit_code == 0, fitted.stderr
    after = next(p for p in _plans(invoke, "--gpus", GPU, "--calibration", str(profile)) if p["gpu"] == GPU)
    assert after["calibrated"] and after["narrow_with"] is None
    assert after["interval"]["sources"][n["metric"]]["group"] == n["group_after"]
    assert abs(_width(after, n["metric"]) / n["width_after"] - 1.0) < 1e-9
    assert _width(after, n["metric"]) < _width(before, n["metric"])
