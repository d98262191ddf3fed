"""What a run records, against the mock on loopback: ``finish_reason`` per request (chat and completions),
early stops counted and warned of, the deployment behind the endpoint (flags, ``/v1/models``, ``/metrics``)
stored with the run and read by ``calibrate --from-store`` without ``--gpu``, and stores from before any of
this still read back."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import BenchSummary
from gpuplan.adapters.store.database import Store
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.interfaces.cli.app import app
from gpuplan.usecases.bench_serve import serve
from gpuplan.usecases.calibration.measured_rows import SERVE_METRICS

EOS_AFTER = 5
"""The mock's EOS point (``--eos-after-tokens``): a request without ignore_eos stops after this many."""
MAX_MODEL_LEN = 2048
"""The ``max_model_len`` the mock is told to report (not its default, so reading it back is a measurement)."""
MODEL = "meta-llama/Llama-3.1-8B"
"""A catalog model: the mock serves any name, and calibrate can predict this one."""


MOCK_FLAGS = ("--ttft-ms", "20", "--itl-ms", "5", "--served-model-name", MODEL, "--served-model-name", "mock")


@pytest.fixture(scope="module")
def mock(mock_server: Callable[..., AbstractContextManager[str]]) -> Iterator[str]:
    flags = ("--eos-after-tokens", str(EOS_AFTER), "--max-model-len", str(MAX_MODEL_LEN))
    with mock_server(*MOCK_FLAGS, *flags) as url:
        yield url


def _run(url: str, store: str, **kw: object) -> BenchSummary:
    base: dict[str, object] = {
        "url": url,
        "model": MODEL,
        "concurrency": 2,
        "num_prompts": 8,
        "duration_s": 60.0,
        "input_tokens": 16,
        "output_tokens": 12,
        "request_timeout_s": 10.0,
    }
    return serve(LoadConfig.model_validate(base | kw), store)


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_early_stops_are_recorded_counted_and_warned_of(mock: str, tmp_path: Path, api: str) -> None:
    store = f"sqlite:///{tmp_path / 'r.sqlite'}"
    s = _run(mock, store, api=api, ignore_eos=False, metrics_url=mock + "/metrics")
    records = Store(store).records(s.run_id)
    assert s.server_metrics is not None  # the server's own count of early stops agrees with the client's
    stops = s.server_metrics["delta"]['vllm:request_success_total{finished_reason="stop",model_name="mock"}']
    assert stops == 8
    assert [r.finish_reason for r in records] == ["stop"] * 8
    assert {r.output_tokens for r in records} == {EOS_AFTER}
    assert s.finish_reasons == {"stop": 8} and s.stopped_early == 8
    assert any(w.startswith("8 requests stopped before max tokens (finish_reason=stop)") for w in s.warnings)
    assert any("ignore_eos was off" in w for w in s.warnings)


def test_full_length_streams_end_with_length_and_no_warning(mock: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'r.sqlite'}"
    s = _run(mock, store, api="chat")  # ignore_eos defaults to true: the mock generates max_tokens
    assert {r.finish_reason for r in Store(store).records(s.run_id)} == {"length"}
    assert s.finish_reasons == {"length": 8} and s.stopped_early == 0
    assert not [w for w in s.warnings if "stopped before" in w]
    assert s.output_tokens_mean == 12


def test_the_deployment_is_stored_from_flags_and_the_server(mock: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'r.sqlite'}"
    s = _run(mock, store, gpu="H100-SXM", tp=1)
    conditions = Store(store).run(s.run_id).conditions
    assert conditions["server"]["model_card"] == {
        "id": MODEL,
        "owned_by": "gpuplan",
        "root": MODEL,
        "max_model_len": MAX_MODEL_LEN,
    }
    assert conditions["server"]["engine"] == "vllm"  # the mock's metric names are vLLM's
    assert conditions["server"]["engine_source"] == "/metrics (vllm: names)"
    expected = {"gpu": "H100-SXM", "engine": "vllm", "tp": 1, "num_gpus": 1, "model": MODEL}
    assert conditions["deployment"] == expected | {"max_model_len": MAX_MODEL_LEN}
    assert s.deployment == conditions["deployment"]


def test_an_engine_flag_wins_over_what_the_server_says(mock: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'r.sqlite'}"
    s = _run(mock, store, engine="sglang", engine_version="0.5.0")
    assert (s.deployment["engine"], s.deployment["engine_version"]) == ("sglang", "0.5.0")
    assert "gpu" not in s.deployment


def test_calibrate_reads_the_recorded_gpu_and_says_why_when_it_cannot(mock: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'r.sqlite'}"
    runner = CliRunner()
    with_gpu = _run(mock, store, gpu="H100-SXM")
    result = runner.invoke(app, ["calibrate", "--from-store", "--store", store, "--format", "json"])
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.stdout)
    serve_row = next(e for e in outcome["errors"] if e["kind"] == "serve")
    expected = len(SERVE_METRICS["concurrency"])  # TTFT and TPOT means, tokens/s; no --gpu given
    assert serve_row["rows"] == expected and serve_row["predicted"] == expected
    bare = tmp_path / "bare.sqlite"
    without = _run(mock, f"sqlite:///{bare}", model="mock")
    result = runner.invoke(app, ["calibrate", "--from-store", "--store", f"sqlite:///{bare}"])
    assert result.exit_code == 1 and "no usable results to calibrate on: " in result.output
    assert "no GPU recorded (bench serve --gpu) or given (calibrate --gpu)" in result.output
    given = runner.invoke(
        app, ["calibrate", "--from-store", "--store", f"sqlite:///{bare}", "--gpu", "H100-SXM"]
    )
    assert given.exit_code == 1
    assert (
        f"none of the {expected} rows can be predicted" in given.output
        and "unknown model 'mock'" in given.output
    )
    assert with_gpu.run_id != without.run_id


def test_a_store_from_before_finish_reasons_and_deployments_reads_back(tmp_path: Path) -> None:
    """Records and summaries are JSON in the store: an old row lacks the new keys and still loads."""
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    store = Store(url)
    config = {"url": "http://127.0.0.1:1", "model": "m", "rate_rps": 1.0, "duration_s": 1.0}
    config |= {"input_tokens": 1, "output_tokens": 1}
    store.create_run("old", "serve", config, {"host": "h"}, "0.0")
    old_record = {"index": 0, "scheduled_s": 0.0, "sent_s": 0.0, "done_s": 0.1, "ttft_ms": 5.0, "e2e_ms": 9.0}
    store.add("old", [RequestRecord.model_validate(old_record)])
    store.finish_run("old", "completed", json.loads(_old_summary_json()))
    assert store.records("old")[0].finish_reason is None
    summary = BenchSummary.model_validate(store.run("old").summary)
    assert (summary.finish_reasons, summary.warnings, summary.deployment) == ({}, [], {})
    shown = CliRunner().invoke(app, ["results", "show", "old", "--store", url])
    assert shown.exit_code == 0, shown.output
    assert "warning" not in shown.output and "finish_reason" not in shown.output


OLD_KEYS = [
    *("run_id", "mode", "target_rate", "concurrency", "duration_s", "requests_sent", "requests_completed"),
    *("requests_failed", "warmup_excluded", "achieved_rate", "ttft_ms", "e2e_ms", "ttft_from_schedule_ms"),
    *("e2e_from_schedule_ms", "tpot_ms", "itl_ms", "input_tokens_mean", "output_tokens_mean"),
    *("output_tokens_per_s", "goodput_rps", "errors", "client", "server_metrics"),
]
"""The summary keys of a run stored before finish reasons, warnings and deployments were kept."""


def _old_summary_json() -> str:
    empty = {"mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    client = {"send_lag_ms": empty, "sends_late_over_1ms": 0.0, "loop_lag_ms": empty}
    old: dict[str, object] = {k: empty for k in OLD_KEYS if k.endswith("_ms")} | {
        "client": client,
        "errors": {},
    }
    old |= {"run_id": "old", "mode": "rate", "target_rate": 1.0, "concurrency": None, "duration_s": 1.0}
    old |= {"requests_sent": 1, "requests_completed": 1, "requests_failed": 0, "warmup_excluded": 0}
    old |= {"achieved_rate": 1.0, "input_tokens_mean": 1.0, "output_tokens_mean": 1.0}
    old |= {"output_tokens_per_s": 1.0, "goodput_rps": None, "server_metrics": None}
    return json.dumps(old)
