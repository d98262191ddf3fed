"""Engine release lines: versions map to lines, and a line's factors reach the step model."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.serving import ReleaseFactors
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.engine_releases import NEWEST, is_mla_moe, release_line, version_of
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.roofline import StepModel
from gpuplan.data.bundled_calibration import default_calibration


@pytest.mark.parametrize(
    ("raw", "version"),
    [("0.7.4.dev181+gf35f8e22", (0, 7)), ("0.14.1", (0, 14)), ("v0", (0, 0)), ("v1", (0, 8)),
     ("2023-10-06", (0, 0)), (None, NEWEST), ("nightly", NEWEST)],
)  # fmt: skip
def test_versions_parse_to_major_minor(raw: str | None, version: tuple[int, int]) -> None:
    assert version_of(raw) == version


def test_each_version_falls_in_one_line_of_its_engine() -> None:
    line = release_line("vllm", "0.7.4")
    assert line is not None and line.name == "vllm-v0"
    newest = release_line("vllm", None)
    assert newest is not None and newest.name == "vllm-v1"
    early = release_line("sglang", "0.4.3.post2")
    assert early is not None and early.name == "sglang-0.4"
    assert release_line("llamacpp", "1.0") is None


def test_only_latent_attention_with_experts_is_mla_moe() -> None:
    assert is_mla_moe(get_model("deepseek-ai/DeepSeek-V3"))
    assert not is_mla_moe(get_model("meta-llama/Llama-3.1-8B"))


def _step(model: ModelSpec, gpu: GpuSpec, version: str | None, factors: ReleaseFactors) -> StepModel:
    cal = default_calibration().model_copy(update={"release_lines": {"vllm-v0": factors}})
    layout = Layout(tp=8, weight_dtype="fp8", engine="vllm", engine_version=version)
    return StepModel.build(model, gpu, layout, cal)


def test_a_line_slows_mla_moe_math_and_adds_host_time_per_layer() -> None:
    deepseek, h200 = get_model("deepseek-ai/DeepSeek-V3"), default_catalog().get_gpu("H200-SXM")
    base = _step(deepseek, h200, "0.7.4", ReleaseFactors())
    slow = _step(deepseek, h200, "0.7.4", ReleaseFactors(mla_moe_efficiency=0.5, mla_moe_layer_step_s=1e-4))
    assert slow.gemm_flops_per_s == pytest.approx(base.gemm_flops_per_s / 2)
    assert slow.bytes_per_s == pytest.approx(base.bytes_per_s)  # weight streaming is not the math
    assert slow.overhead_s == pytest.approx(base.overhead_s + 1e-4 * deepseek.num_layers)


def test_unstated_versions_and_other_models_keep_the_engine_factors() -> None:
    h200 = default_catalog().get_gpu("H200-SXM")
    factors = ReleaseFactors(efficiency=0.5, mla_moe_efficiency=0.5, mla_moe_layer_step_s=1e-4)
    deepseek = get_model("deepseek-ai/DeepSeek-V3")
    assert (
        _step(deepseek, h200, None, factors).gemm_flops_per_s
        == _step(deepseek, h200, None, ReleaseFactors()).gemm_flops_per_s
    )
    llama = get_model("meta-llama/Llama-3.1-70B")
    tuned = _step(llama, h200, "0.7.4", ReleaseFactors(mla_moe_efficiency=0.5, mla_moe_layer_step_s=1e-4))
    assert tuned.overhead_s == _step(llama, h200, "0.7.4", ReleaseFactors()).overhead_s
