"""Rows of a stated finite benchmark run (load sweeps): simulated as the benchmark ran them."""

from __future__ import annotations

import pytest
from validation_row_factory import llama8b_row

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases.validation.cases import Case
from gpuplan.usecases.validation.datasets import run_length_shape
from gpuplan.usecases.validation.layouts import row_engine_version
from gpuplan.usecases.validation.predict import predict_case
from gpuplan.usecases.validation.predict_sweep import finite_prompts
from gpuplan.usecases.validation.regimes import load_regime, scenario_regime
from gpuplan.usecases.validation.report import summarise

_NOTES = "framework_reported=vLLM 0.14.1 (V1 engine) | client: vllm bench serve --num-prompts 40 --max-concurrency N"


def _row(metric: str, *, scenario: str = "concurrency", load: str = "1", notes: str = _NOTES) -> Case:
    closed = scenario == "concurrency"
    return llama8b_row(
        metric,
        scenario=scenario,
        concurrency=load if closed else "",
        request_rate="" if closed else load,
        notes=notes,
    )


def _predict(case: Case) -> float:
    result = predict_case(case, default_catalog(), default_calibration())
    assert result.skip_reason is None and result.predicted is not None
    return result.predicted


def test_the_run_length_and_engine_version_are_read_from_the_notes() -> None:
    assert finite_prompts(_row("ttft_ms_p50")) == 40
    assert finite_prompts(_row("ttft_ms_p50", notes="no client stated")) is None
    assert row_engine_version(_row("ttft_ms_p50")) == "0.14.1"
    dated = _row("ttft_ms_p50", notes="framework_reported=vLLM commit acbed3e (2023-10-06)")
    assert row_engine_version(dated) == "2023-10-06"
    prefixed = _row("ttft_ms_p50", notes="framework_reported=SGLang v0.4.3.post2 | x")
    assert row_engine_version(prefixed) == "0.4.3.post2"  # 'v' is not part of the version, 0.4 is
    nim = _row("ttft_ms_p50", notes="framework_reported=NVIDIA NIM (llama-3.3-70b-instruct container) 1.8.0")
    assert row_engine_version(nim) == "1.8.0"  # a model name in brackets is not the engine's version


def test_one_client_every_gap_is_one_decode_step() -> None:
    # One request at a time: no gap ever holds a prefill, so the pooled ITL, the per-request TPOT and
    # the throughput of the run (one request per E2E) all follow from the same decode step.
    itl, tpot = _predict(_row("itl_ms_p50")), _predict(_row("tpot_ms_p50"))
    assert itl == pytest.approx(tpot, rel=1e-6)
    ttft = _predict(_row("ttft_ms_p50"))
    assert _predict(_row("requests_per_s")) == pytest.approx(1000 / (ttft + 127 * tpot), rel=1e-3)


def test_a_finite_run_past_saturation_stops_with_its_prompts() -> None:
    # 40 prompts at 1,000 req/s arrive within 0.04 s: the run lasts as long as serving them takes, so
    # its throughput is the engine's (finite), never the arrival rate, and the last prompt waits for
    # the others (TTFT p99 well above p50).
    flood = "framework_reported=vLLM 0.14.1 | client: --num-prompts 40 --request-rate 1000"
    served = _predict(_row("requests_per_s", scenario="rate", load="1000", notes=flood))
    assert 0 < served < 1000
    p50 = _predict(_row("ttft_ms_p50", scenario="rate", load="1000", notes=flood))
    p99 = _predict(_row("ttft_ms_p99", scenario="rate", load="1000", notes=flood))
    assert p99 > p50


def test_regimes_come_from_the_scenario_the_notes_or_the_utilisation() -> None:
    assert scenario_regime(_row("ttft_ms_p50")) == "single"
    assert scenario_regime(_row("ttft_ms_p50", load="8")) is None
    assert (
        scenario_regime(_row("ttft_ms_p50", load="8", notes="likely at/above saturation"))
        == "past saturation"
    )
    assert [load_regime(u) for u in (0.2, 0.5, 0.99, 1.0)] == [
        "light load",
        "near the knee",
        "near the knee",
        "past saturation",
    ]


def test_the_report_splits_errors_by_regime() -> None:
    rows = [
        predict_case(_row(m, load=c), default_catalog(), default_calibration())
        for m in ("tpot_ms_p50",)
        for c in ("1", "4")
    ]
    regimes = summarise(rows).by_regime
    assert "single" in regimes and sum(s.n for by in regimes.values() for s in by.values()) == 2


def test_a_sharegpt_run_resamples_the_published_length_shape_at_its_own_means() -> None:
    row = llama8b_row("ttft_ms_p50", scenario="rate", request_rate="1", input_len="207", output_len="198",
                      notes="dataset=ShareGPT | client: vllm bench serve --num-prompts 300")  # fmt: skip
    shape = run_length_shape(row)
    assert shape is not None and shape.samples == 200
    prompts, answers = shape.scaled_to(207, 198)
    assert prompts.mean_tokens == pytest.approx(207, rel=0.01)
    assert answers.mean_tokens == pytest.approx(198, rel=0.01)
    assert max(prompts.values or ()) > 3 * 207  # the tail a fixed length leaves out
    fixed = llama8b_row("ttft_ms_p50", notes="dataset=random")
    assert run_length_shape(fixed) is None


def test_replayed_prompts_are_cached_after_the_first_level() -> None:
    replay = (
        "framework_reported=vLLM 0.14.1 | client: vllm bench serve --num-prompts 200 | --enable-prefix-caching "
        "| prefix caching on and the same 200 prompts replayed at QPS 1, 4, 16 on one server, so TTFT after "
        "the first (QPS 1) run may include prefix-cache hits"
    )
    cold = _predict(_row("ttft_ms_p50", scenario="rate", load="1", notes=replay))
    warm = _predict(_row("ttft_ms_p50", scenario="rate", load="1.01", notes=replay))
    uncached = _predict(
        _row("ttft_ms_p50", scenario="rate", load="1.01", notes=replay.replace("replayed", "sent"))
    )
    assert warm < 0.7 * cold  # 512-token prompts: 496 tokens found cached, 16 computed
    assert uncached == pytest.approx(cold, rel=0.05)
