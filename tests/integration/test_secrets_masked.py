"""Secrets kept secret: a password in ``--store``/``$GPUPLAN_STORE`` or ``--url`` (and an API key in a
URL's query), ``--api-key``/``$OPENAI_API_KEY`` and a secret ``--header`` value are never printed, and never
stored in a run's config or conditions."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert

from gpuplan.adapters.store.database import Store, runs
from gpuplan.interfaces.cli.cmd_bench import announce

SECRET = "s3cret-Pw"
UNREACHABLE_STORE = f"postgresql://me:{SECRET}@127.0.0.1:9/results"
Invoke = Callable[..., Any]
"""The ``invoke`` fixture of conftest.py: ``gpuplan ARGS`` in-process, its ``Run``."""


@pytest.mark.parametrize("given", ["flag", "env"])
def test_a_store_password_is_masked_in_the_error_line(
    given: str, invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without psycopg the URL is "not usable"; with it the connection is refused: one line either way.
    if given == "env":
        monkeypatch.setenv("GPUPLAN_STORE", UNREACHABLE_STORE)
        run = invoke("results", "list")
    else:
        run = invoke("results", "list", "--store", UNREACHABLE_STORE)
    assert run.exit_code in (1, 4)
    line = run.error_line()
    assert SECRET not in run.output and "me:***@127.0.0.1:9" in line, line


def test_the_run_announcement_masks_the_store_password(capsys: pytest.CaptureFixture[str]) -> None:
    announce("abc123", UNREACHABLE_STORE)
    assert capsys.readouterr().err == "run abc123 -> postgresql://me:***@127.0.0.1:9/results\n"


@pytest.mark.filterwarnings("ignore:Query string argument")  # SQLite ignores the key; SQLAlchemy says so
def test_url_credentials_and_store_keys_are_neither_printed_nor_stored(
    mock_url: str, tmp_path: Path, invoke: Invoke
) -> None:
    url = mock_url.replace("http://", f"http://bench:{SECRET}@")
    db = tmp_path / "r.sqlite"
    store_url = f"sqlite:///{db}?token={SECRET}"
    run = invoke(
        "bench", "serve", "--url", url, "--model", "m", "--concurrency", "1", "--duration", "0.3",
        "--input-tokens", "4", "--output-tokens", "4", "--store", store_url, "--format", "json",
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    assert SECRET not in run.output
    assert f"-> sqlite:///{db}?token=***" in run.stderr, run.stderr
    [info] = Store(store_url).runs()
    masked = mock_url.replace("http://", "http://bench:***@")
    assert info.config["url"] == masked and info.conditions["target"] == masked
    for path in tmp_path.iterdir():  # the database file and its WAL: not a byte of the secret
        assert SECRET.encode() not in path.read_bytes(), path
    shown = invoke("results", "show", info.run_id, "--store", f"sqlite:///{db}", "--format", "json")
    assert shown.exit_code == 0 and json.loads(shown.stdout)["config"]["url"] == masked


def test_a_run_stored_before_masking_is_shown_masked(tmp_path: Path, invoke: Invoke) -> None:
    store = Store(f"sqlite:///{tmp_path / 'old.sqlite'}")
    with store.engine.begin() as conn:  # as an older gpuplan stored it: verbatim
        conn.execute(
            insert(runs).values(
                run_id="old1", kind="serve", status="completed", created_at=datetime.now(UTC),
                tool_version="0", config={"url": f"http://u:{SECRET}@h:1"}, conditions={"target": f"http://u:{SECRET}@h:1"},
            )
        )  # fmt: skip
    shown = invoke("results", "show", "old1", "--store", store.url, "--format", "json")
    assert shown.exit_code == 0 and SECRET not in shown.output
    assert json.loads(shown.stdout)["config"]["url"] == "http://u:***@h:1"


API_KEY = "sk-live-Do-Not-Print-93"


@pytest.mark.parametrize("given", ["flag", "env"])
def test_an_api_key_and_a_secret_header_are_neither_printed_nor_stored(
    given: str, tmp_path: Path, invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = str(Path(__file__).resolve().parents[2] / "src")
    mock = subprocess.Popen(
        [sys.executable, "-m", "gpuplan", "mock-server", "--port", "0", "--api-key", API_KEY],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": src},
    )
    try:
        assert mock.stdout is not None
        url = mock.stdout.readline().split()[-1]
        key = ["--api-key", API_KEY] if given == "flag" else []
        if given == "env":
            monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        else:
            monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        db = tmp_path / "r.sqlite"
        run = invoke(
            "bench", "serve", "--url", url, "--model", "mock", "--concurrency", "1", "--duration", "0.3",
            "--input-tokens", "4", "--output-tokens", "4", "--store", f"sqlite:///{db}", "--format", "json",
            "--header", f"X-Api-Key: hdr-{API_KEY}", "--header", "X-Source: bench", *key,
        )  # fmt: skip
        refused = invoke(
            "bench", "serve", "--url", url, "--model", "mock", "--concurrency", "1", "--duration", "0.3",
            "--store", f"sqlite:///{db}", "--api-key", API_KEY[:-1],
        )  # fmt: skip
    finally:
        mock.terminate()
        mock.wait(10)
    assert run.exit_code == 0, run.output
    assert refused.exit_code == 1 and "--api-key" in refused.error_line()
    for shown in (run.output, refused.output):
        assert API_KEY not in shown and API_KEY[:-1] not in shown
    [info] = Store(f"sqlite:///{db}").runs()
    assert info.config["api_key"] is None
    assert info.config["headers"] == {"X-Api-Key": "***", "X-Source": "bench"}
    for path in tmp_path.iterdir():
        assert API_KEY[:-1].encode() not in path.read_bytes(), path
    shown_run = invoke("results", "show", info.run_id, "--store", f"sqlite:///{db}", "--format", "json")
    assert shown_run.exit_code == 0 and API_KEY[:-1] not in shown_run.output
