"""``bench serve`` against a mock that behaves like ``vllm serve --api-key K --served-model-name M``: the key,
headers and extra body reach it, a wrong key or model fails before any load, failure storms are damped
(backoff, Retry-After) and stopped (--max-errors), and vLLM's workload knobs run (issue 23)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpuplan.adapters.store.database import Store

SRC = str(Path(__file__).resolve().parents[2] / "src")
Invoke = Callable[..., Any]
"""The ``invoke`` fixture of conftest.py: ``gpuplan ARGS`` in-process, its ``Run``."""

KEY = "sk-mock-Key-7431"
MODEL = "org/served-model"


@contextmanager
def _mock(*flags: str) -> Iterator[str]:
    """A mock server with these flags, in its own process, for the ``with`` block."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"} | {"PYTHONPATH": SRC}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuplan",
            "mock-server",
            "--port",
            "0",
            "--ttft-ms",
            "5",
            "--itl-ms",
            "1",
            *flags,
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        assert "listening on" in line, line
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture()
def mock() -> Iterator[str]:
    """A mock like ``vllm serve --api-key KEY --served-model-name MODEL``."""
    with _mock("--api-key", KEY, "--served-model-name", MODEL) as url:
        yield url


@pytest.fixture(autouse=True)
def _no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _stats(url: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(url + "/mock/stats", headers={"Authorization": f"Bearer {KEY}"}).json()
    return data


def _serve(invoke: Invoke, url: str, db: Path, *flags: str) -> Any:
    return invoke(
        "bench", "serve", "--url", url, "--input-tokens", "8", "--output-tokens", "4",
        "--store", f"sqlite:///{db}", "--format", "json", "--no-progress", *flags,
    )  # fmt: skip


def test_the_mock_answers_like_vllm(mock: str) -> None:
    assert httpx.get(mock + "/v1/models").status_code == 401
    assert httpx.get(mock + "/v1/models").json() == {"error": "Unauthorized"}
    listed = httpx.get(mock + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert [m["id"] for m in listed["data"]] == [MODEL]
    assert httpx.get(mock + "/health").status_code == 200  # vLLM guards /v1/* only
    wrong = httpx.post(
        mock + "/v1/completions",
        json={"model": "x", "prompt": "hi"},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert wrong.status_code == 404 and wrong.json()["message"] == "The model `x` does not exist."
    assert KEY not in httpx.get(mock + "/mock/stats").text  # its config is shown without the key


@pytest.mark.parametrize("given", ["flag", "env", "header"])
def test_a_key_protected_endpoint_succeeds_and_the_key_is_never_shown_or_stored(
    given: str, mock: str, tmp_path: Path, invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    access = {
        "flag": ["--api-key", KEY],
        "env": [],
        "header": ["--header", f"Authorization: Bearer {KEY}"],
    }[given]
    if given == "env":
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
    db = tmp_path / "r.sqlite"
    run = _serve(invoke, mock, db, "--model", MODEL, "--concurrency", "2", "--duration", "0.5", *access)
    assert run.exit_code == 0, run.output
    summary = json.loads(run.stdout)
    assert summary["requests_completed"] >= 2 and summary["errors"] == {}
    assert KEY not in run.output
    [info] = Store(f"sqlite:///{db}").runs()
    assert info.config["api_key"] is None and info.conditions["api_key_given"] is (given != "header")
    if given == "header":
        assert info.config["headers"] == {"Authorization": "***"}
    for path in tmp_path.iterdir():
        assert KEY.encode() not in path.read_bytes(), path


def test_a_missing_or_wrong_key_fails_before_any_load_naming_api_key(
    mock: str, tmp_path: Path, invoke: Invoke
) -> None:
    for access in ([], ["--api-key", "sk-wrong-one"]):
        run = _serve(
            invoke, mock, tmp_path / "r.sqlite", "--model", MODEL, "--rate", "50", "--duration", "1", *access
        )
        assert run.exit_code == 1, run.output
        line = run.error_line()
        assert "HTTP 401" in line and "--api-key" in line and "sk-wrong-one" not in run.output
        assert ("missing" if not access else "wrong") in line
    assert _stats(mock)["requests"] == 0
    assert not (tmp_path / "r.sqlite").exists() or Store(f"sqlite:///{tmp_path / 'r.sqlite'}").runs() == []


def test_a_wrong_model_fails_before_load_naming_model_and_the_served_ones(
    mock: str, tmp_path: Path, invoke: Invoke
) -> None:
    run = _serve(
        invoke, mock, tmp_path / "r.sqlite", "--model", "served-model", "--api-key", KEY, "--rate", "100",
        "--duration", "2",
    )  # fmt: skip
    assert run.exit_code == 1, run.output
    line = run.error_line()
    assert "--model 'served-model' is not served" in line and f"it lists: {MODEL}" in line
    assert "does not exist" in line  # the server's own words
    assert _stats(mock)["requests"] == 0  # the probe was refused; not one request of load was sent


def test_an_erroring_server_stops_at_max_errors_and_keeps_what_was_measured(
    tmp_path: Path, invoke: Invoke
) -> None:
    db = tmp_path / "r.sqlite"
    with _mock("--error-500-rate", "1") as url:
        run = _serve(
            invoke, url, db, "--model", "mock", "--rate", "200", "--duration", "5", "--max-errors", "10"
        )
        sent = _stats(url)["requests"]
    assert run.exit_code == 4, run.output
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("error: stopped at --max-errors 10:") and "http_500" in last, last
    [info] = Store(f"sqlite:///{db}").runs()
    records = Store(f"sqlite:///{db}").records(info.run_id)
    assert info.status == "stopped" and info.summary is not None
    assert 10 <= len(records) == info.summary["requests_sent"] < 1000  # stopped well before its 1,000
    assert sent == len(records)  # every request sent is stored (the model is listed: no probe)


def test_a_closed_loop_backs_off_instead_of_storming(tmp_path: Path, invoke: Invoke) -> None:
    with _mock("--error-500-rate", "1") as url:
        run = _serve(
            invoke, url, tmp_path / "r.sqlite", "--model", "mock", "--concurrency", "1", "--duration", "1"
        )
        sent = _stats(url)["requests"]
    assert run.exit_code == 4  # every request failed
    # Backoff 50, 100, 200, 400 ms: at most 5 requests in 1 s (before: ~1,000 per second per client).
    assert 2 <= sent <= 6


def test_retry_after_is_honoured_in_both_loops(tmp_path: Path, invoke: Invoke) -> None:
    db = tmp_path / "r.sqlite"
    with _mock("--error-429-rate", "1", "--retry-after-s", "1") as url:
        closed = _serve(invoke, url, db, "--model", "mock", "--concurrency", "1", "--duration", "2.5")
        sent = _stats(url)["requests"]
        opened = _serve(
            invoke, url, db, "--model", "m", "--rate", "20", "--duration", "1.5", "--arrival", "constant"
        )
    assert closed.exit_code == 4 and opened.exit_code == 4
    assert 2 <= sent <= 3  # one request per Retry-After second
    run = next(r for r in Store(f"sqlite:///{db}").runs() if r.config["rate_rps"] == 20.0)
    records = sorted(Store(f"sqlite:///{db}").records(run.run_id), key=lambda r: r.sent_s)
    assert len(records) == 30  # the schedule is kept: every request goes, late
    answered = min(r.done_s for r in records)  # the first 429 and its Retry-After: 1
    held = [r.sent_s for r in records if answered + 0.05 < r.sent_s < answered + 0.9]
    assert held == [], held  # nothing sent while the Retry-After second ran
    assert max(r.sent_s for r in records) >= answered + 0.95


def test_header_and_extra_body_reach_the_server(tmp_path: Path, invoke: Invoke) -> None:
    with _mock() as url:
        run = _serve(
            invoke, url, tmp_path / "r.sqlite", "--model", "m", "--concurrency", "1", "--num-prompts", "3",
            "--extra-body", '{"max_tokens": 2}', "--temperature", "0.5", "--no-ignore-eos",
        )  # fmt: skip
    assert run.exit_code == 0, run.output
    summary = json.loads(run.stdout)
    assert summary["requests_completed"] == 3 and summary["output_tokens_mean"] == 2  # max_tokens overridden


def test_the_done_when_command_of_issue_23(tmp_path: Path, invoke: Invoke) -> None:
    db = tmp_path / "r.sqlite"
    with _mock("--max-concurrency", "1000") as url:
        run = _serve(
            invoke, url, db, "--model", "mock", "--num-prompts", "200", "--request-rate", "inf",
            "--max-concurrency", "16", "--dataset-name", "random", "--random-range-ratio", "0.5",
            "--random-input-len", "32", "--random-output-len", "8",
        )  # fmt: skip
        stats = _stats(url)
    assert run.exit_code == 0, run.output
    summary = json.loads(run.stdout)
    assert summary["mode"] == "burst" and summary["requests_completed"] == 200 and summary["errors"] == {}
    assert stats["requests"] == 200 and 8 <= stats["max_active"] <= 16  # never more than 16 in flight
    [info] = Store(f"sqlite:///{db}").runs()
    records = Store(f"sqlite:///{db}").records(info.run_id)
    inputs = {r.input_tokens for r in records}
    outputs = {r.output_tokens for r in records}
    assert min(inputs) >= 16 and max(inputs) <= 48 and len(inputs) > 10  # 32 · (1 ± 0.5), spread
    assert outputs <= set(range(4, 13)) and len(outputs) > 3
    assert all(r.scheduled_s == 0.0 for r in records)  # all due at once: the cap is the only gate


def turn(who: str, text: str) -> dict[str, str]:
    """One ShareGPT turn."""
    return {"from": who, "value": text}


def test_a_sharegpt_dataset_runs_with_its_real_lengths(tmp_path: Path, invoke: Invoke) -> None:
    data = [
        {"conversations": [turn("human", "what is two plus two"), turn("gpt", "four " * 6)]},
        {"conversations": [turn("human", "hello"), turn("gpt", "hi there friend")]},
    ]
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with _mock() as url:
        run = _serve(
            invoke, url, tmp_path / "r.sqlite", "--model", "m", "--rate", "50", "--num-prompts", "4",
            "--dataset-name", "sharegpt", "--dataset-path", str(path),
        )  # fmt: skip
    assert run.exit_code == 0, run.output
    summary = json.loads(run.stdout)
    assert summary["requests_completed"] == 4 and summary["output_tokens_mean"] == (6 + 3) / 2
    assert summary["input_tokens_mean"] == (5 + 1) / 2  # the mock's usage: words of each prompt


def test_resuming_a_keyed_run_needs_the_key_and_the_secret_header_again(
    mock: str, tmp_path: Path, invoke: Invoke
) -> None:
    db = tmp_path / "r.sqlite"
    first = _serve(
        invoke, mock, db, "--model", MODEL, "--concurrency", "1", "--num-prompts", "3", "--api-key", KEY,
        "--header", "X-Api-Token: tok-1",
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    [info] = Store(f"sqlite:///{db}").runs()
    bare = invoke("bench", "serve", "--resume", info.run_id, "--store", f"sqlite:///{db}", "--api-key", KEY)
    assert bare.exit_code == 1 and "--header 'X-Api-Token: VALUE'" in bare.error_line()
    keyless = invoke(
        "bench",
        "serve",
        "--resume",
        info.run_id,
        "--store",
        f"sqlite:///{db}",
        "--header",
        "X-Api-Token: tok-1",
    )
    assert (
        keyless.exit_code == 1 and "HTTP 401" in keyless.error_line()
    )  # the key is not stored: give it again
    again = invoke(
        "bench", "serve", "--resume", info.run_id, "--store", f"sqlite:///{db}", "--format", "json",
        "--api-key", KEY, "--header", "X-Api-Token: tok-1",
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["requests_completed"] == 3  # nothing left to send; all three kept
    assert _stats(mock)["requests"] == 3
