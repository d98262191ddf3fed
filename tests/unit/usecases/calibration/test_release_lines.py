"""Which sweep rows fit a release line, and where its fit starts."""

from __future__ import annotations

from gpuplan.usecases.calibration.release_lines import fit_starts, line_rows
from gpuplan.usecases.validation.cases import Case

_NOTES = "framework_reported=vLLM 0.14.1 | client: vllm bench serve --num-prompts 300"


def _level(rate: str, metric: str, *, notes: str = _NOTES, folder: str = "run") -> Case:
    fields = {
        "source_url": f"https://example.org/{folder}/rate-{rate}.json",  # one file per load level
        "framework": "vllm",
        "model": "meta-llama/Llama-3.1-8B",
        "gpu": "H100-SXM",
        "num_gpus": "1",
        "tp": "1",
        "scenario": "rate",
        "request_rate": rate,
        "notes": notes,
    }
    return Case(
        schema_name="inference", id=f"N{rate}{metric}", metric=metric, value=50.0, quality="C", fields=fields
    )


def test_the_levels_of_one_sweep_fit_its_line_whatever_file_each_came_from() -> None:
    rows = [_level(r, m) for r in ("0.5", "1", "2") for m in ("ttft_ms_p50", "tpot_ms_p50", "itl_ms_p99")]
    fitted = line_rows(rows)
    assert list(fitted) == ["vllm-v1"]
    assert sorted(c.id for c in fitted["vllm-v1"]) == sorted(c.id for c in rows if c.metric != "itl_ms_p99")


def test_a_level_past_saturation_does_not_fit_the_line() -> None:
    past = _level(
        "16", "ttft_ms_p50", notes=_NOTES + " | offered 16 req/s exceeds the achieved 6.3: above saturation"
    )
    assert [c.id for c in line_rows([_level("1", "ttft_ms_p50"), past])["vllm-v1"]] == ["N1ttft_ms_p50"]


def test_the_fit_starts_once_on_the_gpu_and_once_off_it() -> None:
    rows = [_level("1", "ttft_ms_p50"), _level("1", "tpot_ms_p50")]
    on_gpu, off_gpu = fit_starts(
        ("mla_moe_efficiency", "mla_moe_layer_step_s", "mla_moe_first_token_host_s"), rows
    )
    assert on_gpu[0] < off_gpu[0] == 1.0  # slow math on the GPU, or the engine's own math
    assert off_gpu[2] == 0.025  # half the lightest median TTFT (50 ms) on the host
