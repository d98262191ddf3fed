"""``kill -9`` of a sharded run (issue 22 item 4): the worker processes die with the parent, nothing is
sent unrecorded after it, the run reads back ``interrupted`` (not live), and ``--resume`` sends only
the indices that were never stored.

Linux only: the processes are found through ``/proc`` (the parent's children, taken while it runs).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gpuplan.adapters.store.database import Store
from gpuplan.usecases.bench_serve import serve

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

SRC = str(Path(__file__).resolve().parents[2] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC}
REQUESTS = 200
"""40 req/s for 5 s."""


def _state_and_parent(pid: int) -> tuple[str, int] | None:
    """A process's state letter and parent pid from ``/proc/PID/stat``, or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def _children(parent: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (info := _state_and_parent(int(entry.name))) and info[1] == parent:
            found.add(int(entry.name))
    return found


def _running(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (a zombie no one reaped has stopped: it is not counted)."""
    return {p for p in pids if (info := _state_and_parent(p)) is not None and info[0] != "Z"}


@pytest.fixture(scope="module")
def mock() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuplan", "mock-server", "--port", "0", "--ttft-ms", "20", "--itl-ms", "5"],
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().split()[-1]
    yield url
    proc.terminate()
    proc.wait(10)


def _completed(mock: str) -> int:
    return int(httpx.get(mock + "/mock/stats").json()["completed"])


def test_kill_9_with_workers_leaves_no_process_and_loses_no_stored_request(mock: str, tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'kill.sqlite'}"
    flags = ["--rate", "40", "--arrival", "constant", "--duration", "5", "--workers", "2"]
    flags += ["--input-tokens", "16", "--output-tokens", "8", "--store", store_url, "--format", "json"]
    cmd = [sys.executable, "-m", "gpuplan", "bench", "serve", "--url", mock, "--model", "mock", *flags]
    before = _completed(mock)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    deadline = time.monotonic() + 60.0  # a loaded machine may take seconds to start the client and workers
    while time.monotonic() < deadline and _completed(mock) - before < 40:
        time.sleep(0.2)
    children = _children(proc.pid)
    assert len(children) >= 2, children  # the two workers (and multiprocessing's resource tracker)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)

    deadline = time.monotonic() + 5.0
    while _running(children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(children), _running(children)
    served = _completed(mock) - before
    time.sleep(1.0)
    assert _completed(mock) - before == served  # nothing sends after the parent died

    store = Store(store_url)
    [run] = store.runs()
    stored = store.records(run.run_id)
    assert served > 20 and served - 3 <= len(stored) <= served, (served, len(stored))
    assert (run.status, run.live) == ("interrupted", False)

    s = serve(None, store_url, resume=run.run_id[:8])
    rows = store.records(run.run_id)
    assert sorted(r.index for r in rows) == list(range(REQUESTS))  # each index stored once
    assert s.requests_completed == REQUESTS and store.run(run.run_id).status == "completed"
    # The resume sent exactly the indices not stored: one completion at the mock each.
    assert _completed(mock) - before == served + REQUESTS - len(stored)


def test_resuming_a_run_still_live_elsewhere_is_refused(tmp_path: Path) -> None:
    """Two processes sending one run's missing indices would send each twice."""
    from gpuplan.adapters.store.database import RecordWriter
    from gpuplan.core.errors import UserInputError

    store = Store(f"sqlite:///{tmp_path / 'live.sqlite'}")
    store.create_run("abc123", "serve", {}, {}, "0")
    writer = RecordWriter(store, "abc123")  # this process beats: the run is live
    try:
        with pytest.raises(UserInputError, match="--resume abc: run abc123 is still running"):
            serve(None, store.url, resume="abc")
    finally:
        writer.close()
