"""``gpuplan calibrate`` on synthetic results generated from known factors: the fit recovers them
within 5 %, and the calibration lowers the error on a held-back half."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.core.calibration.serving import Calibration
from gpuplan.data.bundled_calibration import default_calibration, default_training_calibration
from gpuplan.usecases.calibration.measured import fit_profile
from gpuplan.usecases.calibration.measured_predict import predict_row
from gpuplan.usecases.calibration.measured_rows import ResultRow
from gpuplan.usecases.calibration.profile import load_calibration, load_training_calibration, write_profile
from gpuplan.usecases.calibration.report import mape

CATALOG = load_catalog()
BASE = default_calibration()
TRAINING = default_training_calibration()
TRUE = {
    "compute": 0.66,
    "bandwidth": 0.86,
    "lp_scale": 0.7,
    "vllm_eff": 0.7,
    "vllm_step_s": 0.004,
    "mfu": 0.42,
}


def _truth() -> Calibration:
    return BASE.model_copy(
        update={
            "compute_efficiency": BASE.compute_efficiency | {"hopper": TRUE["compute"]},
            "bandwidth_efficiency": BASE.bandwidth_efficiency | {"hopper": TRUE["bandwidth"]},
            "low_precision_compute_scale": TRUE["lp_scale"],
            "engine_efficiency": BASE.engine_efficiency | {"vllm": TRUE["vllm_eff"]},
            "step_overhead_s": BASE.step_overhead_s | {"vllm": TRUE["vllm_step_s"]},
        }
    )


def _serve_rows() -> list[ResultRow]:
    rows = []
    for conc in (1, 4, 16, 64):
        for inp, out in ((128, 128), (1024, 256), (2048, 64)):
            for metric in ("ttft_ms_mean", "tpot_ms_mean", "output_tokens_per_s"):
                rows.append(
                    ResultRow(
                        id=f"s{conc}-{inp}-{metric}",
                        kind="serve",
                        gpu="H100-SXM",
                        metric=metric,
                        value=1.0,
                        fields={
                            "model": "meta-llama/Meta-Llama-3-8B",
                            "framework": "vllm",
                            "tp": "1",
                            "num_gpus": "1",
                            "weight_dtype": "bf16",
                            "scenario": "concurrency",
                            "concurrency": str(conc),
                            "input_len": str(inp),
                            "output_len": str(out),
                        },
                    )
                )
    return rows


def _micro_rows() -> list[ResultRow]:
    rows = [
        ResultRow(id=f"g{i}", kind="gemm", gpu=gpu, metric="tflops", value=1.0, fields={"dtype": dtype})
        for i, (gpu, dtype) in enumerate(
            [
                ("H100-SXM", "bf16"),
                ("H200-SXM", "bf16"),
                ("H100-SXM", "fp16"),
                ("H100-SXM", "fp8"),
                ("H200-SXM", "fp8"),
                ("H100-SXM", "fp32"),
            ]
        )
    ]
    rows += [
        ResultRow(id=f"b{g}", kind="bandwidth", gpu=g, metric="gb_per_s", value=1.0, fields={})
        for g in ("H100-SXM", "H200-SXM")
    ]
    rows += [
        ResultRow(
            id=f"t{b}",
            kind="train",
            gpu="H100-SXM",
            metric="tflops",
            value=1.0,
            fields={
                "dtype": "bf16",
                "batch_size": str(b),
                "seq_len": "2048",
                "model": "meta-llama/Llama-3.2-1B",
                "method": "full",
            },
        )
        for b in (1, 2, 4)
    ]
    return rows


def synthetic(seed: int = 7, noise: float = 0.02) -> list[ResultRow]:
    """Measured = prediction under the true factors × uniform noise of ±``noise``."""
    rng = random.Random(seed)
    truth, training = (
        _truth(),
        TRAINING.model_copy(update={"mfu": TRAINING.mfu | {"hopper:bf16": TRUE["mfu"]}}),
    )
    out = []
    for row in _micro_rows() + _serve_rows():
        value = predict_row(row, CATALOG, truth, training)
        if row.kind == "gemm" and row.fields["dtype"] == "fp32":
            value = 40.0  # informs no factor; must be ignored
        assert value is not None, row.id
        out.append(row.model_copy(update={"value": value * rng.uniform(1 - noise, 1 + noise)}))
    return out


def test_fit_recovers_known_factors_within_5_percent() -> None:
    cal, mfu, fitted = fit_profile(synthetic(), CATALOG, BASE, data="synthetic", command="test")
    got = {
        "compute": cal.compute("hopper"),
        "bandwidth": cal.bandwidth("hopper"),
        "lp_scale": cal.low_precision_compute_scale,
        "vllm_eff": cal.engine("vllm"),
        "vllm_step_s": cal.overhead("vllm"),
        "mfu": mfu["hopper:bf16"],
    }
    for name, want in TRUE.items():
        assert got[name] == pytest.approx(want, rel=0.05), name
    assert ("engine_efficiency", "vllm") in fitted and ("compute_efficiency", "hopper") in fitted
    assert cal.provenance.rows == len(synthetic()) and "serve: 36" in cal.provenance.data


def test_calibration_lowers_error_on_held_back_half() -> None:
    rows = synthetic(seed=11)
    rng = random.Random(3)
    rng.shuffle(rows)
    fit_half, held = rows[: len(rows) // 2], rows[len(rows) // 2 :]
    cal, mfu, _ = fit_profile(fit_half, CATALOG, BASE, data="half", command="test")
    training = TRAINING.model_copy(update={"mfu": TRAINING.mfu | mfu})
    before, after = mape(held, CATALOG, BASE, TRAINING), mape(held, CATALOG, cal, training)
    assert after < before / 2, (before, after)
    assert after < 0.05


def test_profile_round_trip(tmp_path: Path) -> None:
    cal, mfu, _ = fit_profile(synthetic(), CATALOG, BASE, data="synthetic", command="test")
    path = tmp_path / "profile.yaml"
    write_profile(path, cal, mfu)
    assert load_calibration(path) == cal
    assert load_training_calibration(path).mfu_for("hopper", "bf16") == pytest.approx(mfu["hopper:bf16"])


def test_a_power_capped_board_is_not_charged_its_cap_twice() -> None:
    # 500 TFLOP/s measured on an H100-PCIe already carries the 350 W cap: the fitted efficiency must give
    # the step model back 500 TFLOP/s (trtllm, engine factor 1), as it does on an uncapped H100-SXM.
    from gpuplan.adapters.models.registry import get_model
    from gpuplan.core.perf.layout import Layout
    from gpuplan.core.perf.roofline import StepModel

    catalog = load_catalog()
    for gpu_id in ("H100-SXM", "H100-PCIe"):
        rows = [
            ResultRow(id="g", kind="gemm", gpu=gpu_id, metric="tflops", value=500.0, fields={"dtype": "bf16"})
        ]
        cal, _, _ = fit_profile(rows, catalog, default_calibration(), data="test", command="test")
        gpu = catalog.get_gpu(gpu_id)
        step = StepModel.build(get_model("meta-llama/Llama-3.1-8B"), gpu, Layout(engine="trtllm"), cal)
        assert step.attn_flops_per_s / 1e12 == pytest.approx(500.0, rel=1e-9), gpu_id
        assert predict_row(rows[0], catalog, cal, default_training_calibration()) == pytest.approx(
            500.0, rel=1e-9
        )
