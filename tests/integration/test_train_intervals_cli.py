"""``train-plan`` intervals (issue 17): each plan's step time and tokens/s carry the interval of the error
model's training-speed group, at the GPU's evidence level (an MFU factor of its family fitted or not)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gpuplan.core.calibration.error_model import group_path
from gpuplan.core.calibration.uncertainty import band
from gpuplan.data.error_model import default_error_model

Invoke = Callable[..., Any]

REQUEST = (
    "train-plan", "--model", "Qwen/Qwen3-0.6B", "--seq-len", "2048", "--tokens", "1e9", "--global-batch", "16",
    "--gpus", "H200-SXM,MI300X", "--max-gpus", "1",
)  # fmt: skip
FIGURES = ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu")


def _plans(invoke: Invoke, *args: str) -> dict[str, dict[str, Any]]:
    run = invoke(*REQUEST, *args, "--format", "json")
    assert run.exit_code == 0, run.stderr
    return {p["gpu"]: p for p in json.loads(run.stdout)["plans"]}


def test_step_time_and_tokens_per_s_carry_the_training_speed_interval(invoke: Invoke) -> None:
    plans = _plans(invoke)
    model = default_error_model()
    for gpu, evidence in (("H200-SXM", True), ("MI300X", False)):  # hopper has a bundled MFU, cdna3 none
        b, step = plans[gpu]["interval"], plans[gpu]["step"]
        assert b["level"] == 0.8 and set(b["sources"]) == set(FIGURES)
        for name in FIGURES:
            path = group_path(
                family="training speed", regime="other", gpu_fitted=evidence, engine_known=True, metric=name
            )
            lo, hi = band(model=model, path=path, level=0.8) or (0.0, 0.0)
            assert abs(b["low"][name] / (step[name] * lo) - 1) < 1e-9
            assert abs(b["high"][name] / (step[name] * hi) - 1) < 1e-9
            assert b["sources"][name]["group"].startswith(
                "training speed/other/" + ("gpu calibrated" if evidence else "gpu priors only")
            )


def test_interval_level_and_table(invoke: Invoke) -> None:
    narrow, wide = (
        _plans(invoke, "--interval", "0.5")["H200-SXM"],
        _plans(invoke, "--interval", "0.95")["H200-SXM"],
    )
    ratio = {k: p["interval"]["high"]["step_time_s"] / p["interval"]["low"]["step_time_s"] for k, p in
             (("narrow", narrow), ("wide", wide))}  # fmt: skip
    assert ratio["wide"] > ratio["narrow"] > 1
    table = invoke(*REQUEST)
    assert table.exit_code == 0 and "Intervals" in table.stdout and "training speed/other/" in table.stdout
    bad = invoke(*REQUEST, "--interval", "0.3")
    assert bad.exit_code == 1 and bad.error_line().startswith("error: --interval 0.3 is outside")
