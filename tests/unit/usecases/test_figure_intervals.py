"""``predict`` and ``fit`` with intervals (issue 17, item 2): each figure's ends are the prediction times
the band of the error-model group it names, read at the workload's regime."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.scenario_files.deployment import ScenarioFile
from gpuplan.core.calibration.uncertainty import Uncertainty, band
from gpuplan.data.error_model import default_error_model
from gpuplan.usecases import fit as fit_usecase
from gpuplan.usecases.predict import predict_from_scenario

SURE = Uncertainty(model=default_error_model())


def _scenario(workload: dict[str, object]) -> ScenarioFile:
    return ScenarioFile.model_validate(
        {
            "model": "meta-llama/Llama-3.1-8B",
            "hardware": {"gpu": "H100-SXM", "count": 1},
            "workload": {"input_tokens": 512, "output_tokens": 128, **workload},
        }
    )


def test_predict_intervals_are_the_named_groups_bands() -> None:
    result = predict_from_scenario(
        _scenario({"scenario": "rate", "rate_rps": 2}), default_catalog(), uncertainty=SURE
    )
    b = result.interval
    assert b is not None and b.level == 0.8
    assert set(b.sources) == {"ttft_s", "tpot_s", "output_tokens_per_s"}
    group = b.sources["tpot_s"].group
    assert group.startswith("tpot/light load/gpu calibrated")  # 2 req/s is a light load for one H100
    ends = band(model=SURE.model, path=tuple(group.split("/")), level=0.8)
    assert ends is not None
    assert b.low["tpot_s"] == pytest.approx(result.prediction.tpot_s * ends[0])
    assert b.high["tpot_s"] == pytest.approx(result.prediction.tpot_s * ends[1])


def test_predict_offline_reads_the_saturated_groups() -> None:
    result = predict_from_scenario(_scenario({"scenario": "offline"}), default_catalog(), uncertainty=SURE)
    assert result.interval is not None
    assert result.interval.sources["output_tokens_per_s"].group.startswith(
        "throughput/saturated/gpu calibrated"
    )


def test_predict_without_an_error_model_has_no_interval() -> None:
    assert predict_from_scenario(_scenario({"scenario": "offline"}), default_catalog()).interval is None


def test_fit_memory_intervals_read_the_inference_memory_groups() -> None:
    result = fit_usecase.fit(
        "meta-llama/Llama-3.1-8B", "H100-SXM", default_catalog(), count=1, tp=None, pp=1, weight_dtype="bf16",
        kv_dtype=None, engine="vllm", context_tokens=4096, utilization=None, uncertainty=SURE,
    )  # fmt: skip
    b = result.interval
    assert b is not None
    weights = b.sources["weights_bytes"]
    assert weights.group == "inference memory/other/no fitted factors/engine known/weights_gib_per_gpu"
    assert weights.rows == SURE.model.groups[weights.group].n
    low, high = b.low["weights_bytes"], b.high["weights_bytes"]
    assert low is not None and high is not None
    assert low < result.memory.weights_bytes < high
    assert all(
        v is None or v <= result.memory.usable_bytes for k, v in b.high.items() if k.endswith("_bytes")
    )  # no part of a GPU's memory is bounded above its usable memory
