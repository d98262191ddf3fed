"""The load tester against the mock server on loopback: measured back, rate held, faults, kill + resume.

Timing tolerances come from the issue; the machine may be loaded (CI, 2 cores shared by client and
mock), so each timing assertion gets one retry (``_twice``). Poisson is run at 200 req/s for 30 s, as
the issue asks; the count is fixed by the schedule, so the check is on the client keeping up, not on
sampling noise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import BenchSummary
from gpuplan.adapters.store.database import Store
from gpuplan.usecases.bench_serve import serve

SRC = str(Path(__file__).resolve().parents[2] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC}
TTFT_TOL_MS = 2.0
"""The issue's tolerance; measured here ≈ 50.5-50.7 ms P50 against the mock's 50 ms."""


def _start_mock(*flags: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuplan", "mock-server", "--port", "0", *flags],
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "listening on" in line, line
    return proc, line.split()[-1]


@pytest.fixture(scope="module")
def mock() -> Iterator[str]:
    proc, url = _start_mock("--ttft-ms", "50", "--itl-ms", "10")
    yield url
    proc.terminate()
    proc.wait(10)


def _run(url: str, tmp_path: Path, **kw: object) -> BenchSummary:
    base: dict[str, object] = {
        "url": url,
        "model": "mock",
        "duration_s": 3.0,
        "input_tokens": 32,
        "output_tokens": 32,
        "request_timeout_s": 10.0,
    }
    return serve(LoadConfig.model_validate(base | kw), f"sqlite:///{tmp_path / 'r.sqlite'}")


def _twice(check: Callable[[], None]) -> None:
    """Timing checks retry once: a single stall of a shared CI machine should not fail the suite."""
    try:
        check()
    except AssertionError:
        check()


def test_measures_back_what_the_mock_was_set_to(mock: str, tmp_path: Path) -> None:
    def check() -> None:
        s = _run(mock, tmp_path, rate_rps=20.0, arrival="constant", warmup_s=0.5)
        assert s.requests_completed == 60 and not s.errors
        assert s.ttft_ms.p50 is not None and abs(s.ttft_ms.p50 - 50.0) <= TTFT_TOL_MS, s.ttft_ms
        assert s.itl_ms.mean is not None and abs(s.itl_ms.mean - 10.0) <= 0.5, s.itl_ms
        assert s.output_tokens_mean == 32

    _twice(check)


def test_chat_api_and_closed_loop(mock: str, tmp_path: Path) -> None:
    s = _run(mock, tmp_path, api="chat", concurrency=4, duration_s=1.0, output_tokens=8)
    assert s.requests_completed >= 4 and not s.errors
    assert s.mode == "concurrency"


def test_poisson_200_rps_holds_the_count(mock: str, tmp_path: Path) -> None:
    def check() -> None:
        s = _run(mock, tmp_path, rate_rps=200.0, duration_s=30.0, output_tokens=8, input_tokens=16)
        assert abs(s.requests_completed - 6000) <= 120, s.requests_completed
        assert abs(s.achieved_rate_rps - 200.0) <= 4.0, s.achieved_rate_rps

    _twice(check)


def test_faults_are_recorded_with_their_kind(tmp_path: Path) -> None:
    proc, url = _start_mock(
        "--ttft-ms",
        "20",
        "--itl-ms",
        "2",
        "--error-500-rate",
        "0.1",
        "--error-429-rate",
        "0.1",
        "--drop-rate",
        "0.1",
        "--malformed-rate",
        "0.1",
        "--slow-rate",
        "0.1",
        "--slow-first-byte-ms",
        "5000",
        "--seed",
        "7",
    )
    try:
        s = _run(url, tmp_path, rate_rps=50.0, duration_s=2.0, output_tokens=8, request_timeout_s=1.0)
    finally:
        proc.terminate()
        proc.wait(10)
    assert s.requests_sent == 100 == s.requests_completed + s.requests_failed
    assert {"http_500", "http_429", "dropped", "malformed_sse", "timeout"} <= set(s.errors), s.errors
    assert sum(s.errors.values()) == s.requests_failed
    assert 30 <= s.requests_failed <= 70


def test_unreachable_url_is_one_line_exit_4(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuplan",
            "bench",
            "serve",
            "--url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--rate",
            "1",
            "--duration",
            "1",
            "--store",
            f"sqlite:///{tmp_path / 'r.sqlite'}",
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=30,
    )
    assert out.returncode == 4
    assert next(ln for ln in out.stderr.splitlines() if ln.strip()).startswith("error: cannot reach")


def test_sigkill_loses_no_completed_request_and_resume_completes(mock: str, tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'kill.sqlite'}"
    cmd = [
        sys.executable,
        "-m",
        "gpuplan",
        "bench",
        "serve",
        "--url",
        mock,
        "--model",
        "m",
        "--rate",
        "40",
        "--arrival",
        "constant",
        "--duration",
        "5",
        "--input-tokens",
        "16",
        "--output-tokens",
        "8",
        "--store",
        store_url,
        "--format",
        "json",
    ]
    before = httpx.get(mock + "/mock/stats").json()["completed"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    deadline = time.monotonic() + 30.0  # a loaded machine may take seconds just to start the client
    while time.monotonic() < deadline and httpx.get(mock + "/mock/stats").json()["completed"] - before < 40:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    served = httpx.get(mock + "/mock/stats").json()["completed"] - before
    store = Store(store_url)
    [run] = store.runs()
    stored = store.records(run.run_id)
    # Lost at most what completed in the writer's last 20 ms flush window plus one in delivery (40 req/s).
    assert served > 20 and len(stored) >= served - 3, (served, len(stored))
    assert (run.status, run.live) == ("interrupted", False)  # its process is gone: not live
    s = serve(None, store_url, resume=run.run_id[:8])
    rows = store.records(run.run_id)
    assert sorted(r.index for r in rows) == list(range(200))
    assert s.requests_completed == 200 and s.run_id == run.run_id
    assert store.run(run.run_id).status == "completed"


def test_a_run_stored_with_goodput_limits_above_the_caps_still_resumes(mock: str, tmp_path: Path) -> None:
    """A run stored before the Sla caps (--slo-ttft-ms 5000000) resumes with the limits it began with."""
    store_url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    load: dict[str, object] = {"url": mock, "model": "m", "rate_rps": 20.0, "arrival": "constant"}
    load |= {"duration_s": 1.0, "input_tokens": 16, "output_tokens": 4, "request_timeout_s": 10.0}
    stored = LoadConfig.model_validate(load).model_dump(mode="json")
    stored |= {"slo_ttft_ms": 5_000_000.0, "slo_tpot_ms": 700_000.0}  # above MAX_TTFT_MS, MAX_TPOT_MS
    store = Store(store_url)
    store.create_run("0ld" * 8, "serve", stored, {}, "0.0")
    store.set_status("0ld" * 8, "interrupted")
    s = serve(None, store_url, resume="0ld")
    assert s.requests_completed == 20 and s.goodput_rps == s.achieved_rate_rps
    assert store.run("0ld").config == stored and store.run("0ld").status == "completed"


def test_sharded_workers_hold_the_schedule_and_store_every_record(mock: str, tmp_path: Path) -> None:
    s = _run(
        mock,
        tmp_path,
        rate_rps=50.0,
        arrival="constant",
        duration_s=1.0,
        output_tokens=4,
        input_tokens=8,
        workers=2,
    )
    assert s.requests_completed == 50 and not s.errors
    assert abs(s.achieved_rate_rps - 50.0) <= 1.0
    assert s.client.cpu_ms_per_request is not None and s.client.cpu_ms_per_request > 0
    assert sorted(r.index for r in Store(f"sqlite:///{tmp_path / 'r.sqlite'}").records(s.run_id)) == list(
        range(50)
    )


def test_trace_replay_with_prompt_file_and_metrics_scrape(mock: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "arrival_s,input_tokens,output_tokens\n"
        + "".join(f"{i * 0.05},{8 + i},{2 + i % 3}\n" for i in range(10)),
        encoding="utf-8",
    )
    s = _run(mock, tmp_path, trace_path=str(trace), duration_s=0.6, metrics_url=mock + "/metrics")
    assert s.mode == "trace" and s.requests_completed == 10 and not s.errors
    assert s.output_tokens_mean == pytest.approx(sum(2 + i % 3 for i in range(10)) / 10)
    assert s.input_tokens_mean == pytest.approx(sum(8 + i for i in range(10)) / 10)
    assert s.server_metrics is not None
    delta = s.server_metrics["delta"]
    assert delta['vllm:request_success_total{finished_reason="length",model_name="mock"}'] >= 10
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "one two three", "max_tokens": 2}\n', encoding="utf-8")
    s2 = _run(mock, tmp_path, api="chat", rate_rps=20.0, duration_s=0.5, prompts_path=str(prompts))
    assert s2.requests_completed == 10 and s2.input_tokens_mean == 3 and s2.output_tokens_mean == 2
