"""Validation rows the simulator predicts: closed-loop concurrency rows, and MLPerf dataset lengths."""

from __future__ import annotations

import pytest

from gpuplan.catalog import default_catalog
from gpuplan.perf.calibration import default_calibration
from gpuplan.validation.cases import Case
from gpuplan.validation.datasets import row_lengths
from gpuplan.validation.predict import predict_case


def _case(metric: str, concurrency: int, **extra: str) -> Case:
    fields = {
        "framework": "vllm",
        "model": "meta-llama/Llama-3.1-8B",
        "gpu": "H100-SXM",
        "num_gpus": "1",
        "tp": "1",
        "weight_dtype": "bf16",
        "input_len": "512",
        "output_len": "128",
        "scenario": "concurrency",
        "concurrency": str(concurrency),
        "notes": "",
        **extra,
    }
    return Case(schema_name="inference", id="T1", metric=metric, value=1.0, quality="A", fields=fields)


def _both(case: Case) -> tuple[float, float]:
    """(simulated, analytic) prediction of a row."""
    simulated = predict_case(case, default_catalog(), default_calibration()).predicted
    analytic = predict_case(case, default_catalog(), default_calibration(), simulate=False).predicted
    assert simulated is not None and analytic is not None
    return simulated, analytic


@pytest.mark.parametrize("metric", ["ttft_ms_mean", "tpot_ms_mean"])
def test_one_client_reproduces_the_analytic_single_request(metric: str) -> None:
    # One request at a time: the simulator's closed loop reproduces the analytic latencies exactly.
    simulated, analytic = _both(_case(metric, concurrency=1))
    assert simulated == pytest.approx(analytic, rel=1e-6)


def test_one_client_throughput_is_output_over_e2e() -> None:
    # 128 tokens per E2E = TTFT + 127 x TPOT (the first token comes out of prefill), in both models.
    ttft_ms, _ = _both(_case("ttft_ms_mean", concurrency=1))
    tpot_ms, _ = _both(_case("tpot_ms_mean", concurrency=1))
    simulated, analytic = _both(_case("output_tokens_per_s", concurrency=1))
    assert simulated == pytest.approx(128 / ((ttft_ms + 127 * tpot_ms) / 1000), rel=1e-6)
    assert analytic == pytest.approx(simulated, rel=1e-6)


@pytest.mark.parametrize("metric", ["output_tokens_per_s", "ttft_ms_mean", "tpot_ms_mean"])
def test_many_clients_agree_with_the_analytic_steady_state(metric: str) -> None:
    # 64 clients spread over their cycle: the simulated closed loop and the analytic closed form are two
    # estimates of the same steady state (each prompt prefills beside the running decodes and slows them).
    simulated, analytic = _both(_case(metric, concurrency=64))
    assert simulated == pytest.approx(analytic, rel=0.15)


def test_mlperf_rows_take_the_benchmark_lengths_over_their_own() -> None:
    # The llama2-70b rows quote 265 output tokens (the accuracy check's floor, 0.9 x 294.45);
    # the dataset table holds the benchmark's reference mean.
    case = _case("output_tokens_per_s", concurrency=1, input_len="", output_len="265", notes="benchmark=llama2-70b")
    assert row_lengths(case) == (294, 294)
    plain = _case("output_tokens_per_s", concurrency=1)
    assert row_lengths(plain) == (512, 128)


def test_llmperf_inter_token_latency_is_e2e_over_tokens() -> None:
    # llmperf divides the sum of all chunk gaps, the first one (TTFT) included, by the output tokens.
    note = "source metric itl_ms_mean (inter-token latency) mapped to tpot | llmperf over HTTP"
    llmperf = _case("tpot_ms_mean", concurrency=8, notes=note)
    itl = predict_case(llmperf, default_catalog(), default_calibration()).predicted
    e2e = predict_case(_case("e2e_ms_mean", concurrency=8), default_catalog(), default_calibration()).predicted
    tpot = predict_case(_case("tpot_ms_mean", concurrency=8), default_catalog(), default_calibration()).predicted
    assert itl is not None and e2e is not None and tpot is not None
    assert itl == pytest.approx(e2e / 128, rel=1e-9)
    assert itl > tpot  # the TTFT spread over the tokens


def test_llmperf_inter_token_latency_is_e2e_over_tokens_in_the_fit_path_too() -> None:
    note = "source metric itl_ms_mean (inter-token latency) mapped to tpot | llmperf over HTTP"
    cat, cal = default_catalog(), default_calibration()
    itl = predict_case(_case("tpot_ms_mean", concurrency=8, notes=note), cat, cal, simulate=False).predicted
    e2e = predict_case(_case("e2e_ms_mean", concurrency=8), cat, cal, simulate=False).predicted
    assert itl is not None and e2e is not None
    assert itl == pytest.approx(e2e / 128, rel=1e-9)
    p50 = note.replace("itl_ms_mean", "itl_ms_p50")
    simulated_p50 = predict_case(_case("tpot_ms_p50", concurrency=8, notes=p50), cat, cal).predicted
    e2e_p50 = predict_case(_case("e2e_ms_p50", concurrency=8), cat, cal).predicted
    assert simulated_p50 is not None and e2e_p50 is not None
    assert simulated_p50 == pytest.approx(e2e_p50 / 128, rel=1e-9)
