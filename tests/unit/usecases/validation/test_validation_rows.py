"""Validation rows the simulator predicts: closed-loop concurrency rows, and MLPerf dataset lengths."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from validation_row_factory import llama8b_row

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases.validation.cases import Case
from gpuplan.usecases.validation.datasets import DatasetLengths, dataset_of, row_lengths
from gpuplan.usecases.validation.predict import predict_case


def _case(metric: str, concurrency: int | None, **extra: str) -> Case:
    """A Llama-3.1-8B row on one H100; ``concurrency`` None leaves the field blank (offline, server)."""
    return llama8b_row(metric, concurrency="" if concurrency is None else str(concurrency), **extra)


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
    case = _case(
        "output_tokens_per_s", concurrency=1, input_len="", output_len="265", notes="benchmark=llama2-70b"
    )
    assert row_lengths(case) == (222, 294)
    plain = _case("output_tokens_per_s", concurrency=1)
    assert row_lengths(plain) == (512, 128)


def test_llmperf_inter_token_latency_is_e2e_over_tokens() -> None:
    # llmperf divides the sum of all chunk gaps, the first one (TTFT) included, by the output tokens.
    note = "source metric itl_ms_mean (inter-token latency) mapped to tpot | llmperf over HTTP"
    llmperf = _case("tpot_ms_mean", concurrency=8, notes=note)
    itl = predict_case(llmperf, default_catalog(), default_calibration()).predicted
    e2e = predict_case(
        _case("e2e_ms_mean", concurrency=8), default_catalog(), default_calibration()
    ).predicted
    tpot = predict_case(
        _case("tpot_ms_mean", concurrency=8), default_catalog(), default_calibration()
    ).predicted
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


def _mlperf(scenario: str, metric: str, **extra: str) -> Case:
    """A v4.0-style MLPerf llama2-70b row: 8x H100-SXM as 4x TP2, fp8, lengths from the dataset table."""
    mlperf = {
        "framework": "trtllm",
        "model": "meta-llama/Llama-2-70b-hf",
        "num_gpus": "8",
        "tp": "2",
        "weight_dtype": "fp8",
        "input_len": "",
        "output_len": "265",
        "scenario": scenario,
        "notes": "constraint: ttft_p99_ms<=2000; tpot_p99_ms<=200 | benchmark=llama2-70b",
    }
    return _case(metric, None, **{**mlperf, **extra})


def test_dataset_lengths_resample_the_mlperf_distribution() -> None:
    # 100 bin-centre percentiles of the 24,576 prompts (mean 222.33) and of GPT-4's reference answers
    # (mean 218.89), the answers scaled to what Llama-2-70B-chat generates (294.45) and capped at 1,024.
    table = dataset_of(_mlperf("offline", "output_tokens_per_s"))
    assert table is not None and table.verified
    dists = table.distributions()
    assert dists is not None
    prompts, answers = dists
    assert prompts.kind == answers.kind == "empirical"
    assert prompts.mean_tokens == pytest.approx(222.33, rel=0.01)
    assert answers.mean_tokens == pytest.approx(294.45, rel=0.01)
    assert max(answers.values or ()) <= 1024 and min(prompts.values or ()) >= 48  # dataset min prompt


def test_a_dataset_without_percentiles_runs_fixed_means() -> None:
    gptj = _mlperf("offline", "output_tokens_per_s", notes="benchmark=gptj")
    table = dataset_of(gptj)
    assert table is not None and table.distributions() is None
    assert row_lengths(gptj) == (800, 128)
    assert dataset_of(_case("output_tokens_per_s", concurrency=1)) is None


def test_mlperf_offline_row_is_simulated_on_its_mixed_lengths() -> None:
    # A batch of mixed answers holds KV for the long ones and refills unevenly: the simulated saturation
    # on the dataset's lengths sits below the analytic model at the mean lengths, which the fit keeps.
    row = _mlperf("offline", "output_tokens_per_s")
    simulated, analytic = _both(row)
    assert 0.75 * analytic < simulated < analytic


def _entry(**extra: object) -> dict[str, object]:
    return {
        "benchmark": "b",
        "dataset": "d",
        "input_tokens_mean": 100,
        "output_tokens_mean": 200,
        "verified": True,
        "source": "https://example.org",
        **extra,
    }


def test_dataset_table_entries_are_checked() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        DatasetLengths.model_validate(
            _entry(input_tokens_percentiles=[0, 5], reference_output_tokens_percentiles=[1, 2])
        )
    with pytest.raises(ValidationError, match="give both input_tokens_percentiles and reference"):
        DatasetLengths.model_validate(_entry(input_tokens_percentiles=[1, 5]))
    # Without a cap the reference shape is scaled to the generated mean exactly: (10, 30) -> (100, 300).
    entry = DatasetLengths.model_validate(
        _entry(input_tokens_percentiles=[50, 150], reference_output_tokens_percentiles=[10, 30])
    )
    dists = entry.distributions()
    assert dists is not None and dists[1].values == (100, 300) and dists[1].mean_tokens == 200
