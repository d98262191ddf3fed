"""Shared fixtures of the CLI integration tests: a CliRunner wrapper that also checks the error contract.

Contract (``gpuplan/interfaces/cli/app.py``): exit 0 ok, 1 user input error, 2 infeasible, 3 data error,
4 benchmark error; errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from gpuplan.interfaces.cli.app import app

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Run:
    """What one CLI invocation produced."""

    exit_code: int
    stdout: str
    stderr: str
    output: str
    result: Result

    def error_line(self) -> str:
        """The single non-blank stderr line (fails if there are none or several)."""
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, f"expected one error line on stderr, got {len(lines)}:\n{self.stderr}"
        return lines[0]


Invoke = Callable[..., Run]


@pytest.fixture()
def invoke(monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """Run ``gpuplan ARGS`` in-process; assert that no Python exception escaped (a crash).

    Tables render 200 columns wide so that ids are not folded over lines.
    """
    from gpuplan.interfaces.cli import render

    monkeypatch.setattr(render.console, "width", 200)
    runner = CliRunner()

    def _run(*args: str | Path) -> Run:
        result = runner.invoke(app, [str(a) for a in args], catch_exceptions=True)
        exc = result.exception
        if exc is not None and not isinstance(exc, SystemExit):
            raise AssertionError(
                f"gpuplan {' '.join(map(str, args))} crashed with {type(exc).__name__}: {exc}"
            ) from exc
        for stream in (result.stdout, result.stderr):
            assert "Traceback" not in stream, stream
        return Run(result.exit_code, result.stdout, result.stderr, result.output, result)

    return _run


@pytest.fixture()
def user_error(invoke: Invoke) -> Callable[..., str]:
    """Run a command that must fail as a user error; return its one stderr line."""

    def _check(*args: str | Path, code: int = 1) -> str:
        run = invoke(*args)
        assert run.exit_code == code, (
            f"exit {run.exit_code}, stderr: {run.stderr!r} stdout: {run.stdout[-500:]!r}"
        )
        line = run.error_line()
        assert line.startswith("error:"), line
        return line

    return _check


SRC = str(Path(__file__).resolve().parents[2] / "src")


@contextmanager
def running_mock(*flags: str) -> Iterator[str]:
    """A ``gpuplan mock-server`` with ``flags`` in its own process on a free 127.0.0.1 port: its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuplan", "mock-server", "--port", "0", *flags],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": SRC},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on" in line, line
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(10)


MockServer = Callable[..., AbstractContextManager[str]]


@pytest.fixture(scope="session")
def mock_server() -> MockServer:
    """:func:`running_mock`, for a test that starts a mock with flags of its own."""
    return running_mock


@pytest.fixture
def mock_url() -> Iterator[str]:
    """A mock OpenAI server (TTFT 5 ms, ITL 1 ms) in its own process on 127.0.0.1 for the test's duration."""
    with running_mock("--ttft-ms", "5", "--itl-ms", "1") as url:
        yield url
