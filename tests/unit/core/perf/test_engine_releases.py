"""Engine release lines: versions map to lines, and a line's factors reach the step model."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.serving import ReleaseFactors
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.engine_releases import NEWEST, is_mla_moe, release_line, version_of
from gpuplan.core.perf.inference import SCENARIO_RUNS, ReplicaModel, first_token_delay_s
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.roofline import StepModel
from gpuplan.core.perf.speculative import Speculative
from gpuplan.core.workload import Workload
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


def test_async_scheduling_hides_the_step_planning_behind_the_gpu_from_vllm_0_14(
    llama8b: ModelSpec, h100: GpuSpec
) -> None:
    cal = default_calibration()
    sync = StepModel.build(llama8b, h100, Layout(engine="vllm", engine_version="0.13.0"), cal)
    ahead = StepModel.build(llama8b, h100, Layout(engine="vllm", engine_version="0.14.1"), cal)
    unstated = StepModel.build(llama8b, h100, Layout(engine="vllm"), cal)
    assert (sync.schedules_ahead, ahead.schedules_ahead, unstated.schedules_ahead) == (False, True, False)
    host_s = cal.overhead("vllm")
    # an 8B decode step of 8 sequences takes longer on the GPU than its planning on the host: hidden
    assert ahead.decode_s(batch=8, context=1000) == pytest.approx(
        sync.decode_s(batch=8, context=1000) - host_s
    )
    # a 1B model's lone decode step is shorter than its planning: the step lasts the planning
    tiny = get_model("meta-llama/Llama-3.2-1B")
    fast = StepModel.build(
        tiny, h100, Layout(engine="vllm", engine_version="0.14.1", weight_dtype="fp8"), cal
    )
    gpu_s = fast.decode_s(batch=1, context=100)
    assert gpu_s == pytest.approx(host_s)


@pytest.mark.parametrize(
    "layout",
    [
        Layout(pp=2, engine_version="0.14.1"),
        Layout(
            engine_version="0.14.1",
            speculative=Speculative(method="ngram", draft_tokens=3, acceptance_rate=0.8),
        ),
    ],
)
def test_pipeline_stages_and_ngram_speculation_keep_the_synchronous_scheduler(
    llama8b: ModelSpec, h100: GpuSpec, layout: Layout
) -> None:
    step = StepModel.build(llama8b, h100, layout, default_calibration())
    assert not step.schedules_ahead


def test_the_first_token_waits_the_host_time_and_one_planned_step(llama8b: ModelSpec, h100: GpuSpec) -> None:
    host_s = 0.008
    cal = default_calibration().model_copy(
        update={"release_lines": {"vllm-v1": ReleaseFactors(first_token_host_s=host_s)}}
    )

    def replica(version: str) -> ReplicaModel:
        layout = Layout(engine="vllm", engine_version=version)
        return ReplicaModel.build(llama8b, h100, layout, context_tokens=4096, cal=cal)

    sync, ahead = replica("0.13.0"), replica("0.14.1")
    lone = Workload(scenario="single", input_tokens=512, output_tokens=128)
    # alone, both see the host time and plan the prompt's step before it runs: the same first token
    assert ahead.run(lone)[0] == pytest.approx(sync.run(lone)[0])
    assert sync.run(lone)[0] == pytest.approx(
        SCENARIO_RUNS["single"](sync.step, sync.memory, lone)[0] + host_s
    )
    # busy (~80 requests in system), a prompt arriving mid-step waits one planned step more
    busy = Workload(scenario="rate", rate_rps=30.0, input_tokens=512, output_tokens=128)
    (ttft_sync, *_), (ttft_ahead, tpot_ahead, _, running) = sync.run(busy), ahead.run(busy)
    assert running > 10
    assert 0.5 * tpot_ahead < ttft_ahead - ttft_sync < 1.5 * tpot_ahead


def test_under_speculation_the_planned_step_is_tau_tokens_long(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # EAGLE keeps async scheduling on; its TPOT is a step over τ, and a busy engine's arrival waits a
    # whole step: τ times TPOT, not TPOT
    spec = Speculative(method="eagle", draft_tokens=3, acceptance_rate=0.8)
    step = StepModel.build(
        llama8b, h100, Layout(engine_version="0.14.1", speculative=spec), default_calibration()
    )
    assert step.schedules_ahead
    tpot_s = 0.010
    assert first_token_delay_s(step, 50.0, tpot_s) == pytest.approx(
        step.first_token_host_s + spec.tokens_per_step * tpot_s, rel=1e-9
    )
    assert spec.tokens_per_step == pytest.approx(2.952)  # (1 − 0.8⁴) / (1 − 0.8)


def test_a_step_is_tau_tokens_under_speculation_and_one_without(llama8b: ModelSpec, h100: GpuSpec) -> None:
    spec = Speculative(method="eagle", draft_tokens=3, acceptance_rate=0.8)
    plain = StepModel.build(llama8b, h100, Layout(), default_calibration())
    speculating = StepModel.build(llama8b, h100, Layout(speculative=spec), default_calibration())
    assert plain.step_of_tpot_s(0.01) == 0.01
    assert speculating.step_of_tpot_s(0.01) == pytest.approx(0.01 * 2.952)
