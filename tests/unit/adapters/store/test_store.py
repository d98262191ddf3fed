"""The results store: runs, request rows written by the background writer, export."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from gpuplan.adapters.store.database import RecordWriter, Store, default_store_url
from gpuplan.adapters.store.export import to_csv, to_json
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.errors import UserInputError


def _rec(i: int) -> RequestRecord:
    return RequestRecord(
        index=i,
        scheduled_s=0.1 * i,
        sent_s=0.1 * i,
        done_s=0.1 * i + 0.2,
        status=200,
        ttft_ms=50.0,
        e2e_ms=200.0,
        itl_ms=(10.0, 11.0),
        output_tokens=3,
    )


def test_default_url_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUPLAN_STORE", str(tmp_path / "x.sqlite"))
    assert default_store_url() == f"sqlite:///{tmp_path / 'x.sqlite'}"
    monkeypatch.setenv("GPUPLAN_STORE", "postgresql://u@h/db")
    assert default_store_url() == "postgresql://u@h/db"


def test_writer_stores_every_record_and_runs_round_trip(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'r.sqlite'}")
    store.create_run("abc123", "serve", {"model": "m"}, {"host": "h"}, "0.1.0")
    writer = RecordWriter(store, "abc123")
    for i in range(50):
        writer.put(_rec(i))
    writer.close()
    assert [r.index for r in store.records("abc123")] == list(range(50))
    store.finish_run("abc123", "completed", {"requests_completed": 50})
    info = store.run("abc")
    assert (info.status, info.requests, info.summary) == ("completed", 50, {"requests_completed": 50})
    with pytest.raises(UserInputError, match="no run"):
        store.run("zzz")


def test_export_csv_and_json(tmp_path: Path) -> None:
    records = [_rec(0), _rec(1)]
    rows = list(csv.DictReader(io.StringIO(to_csv(records))))
    assert rows[1]["index"] == "1" and rows[0]["itl_ms"] == "10.0000;11.0000"
    assert json.loads(to_json(records))[0]["itl_ms"] == [10.0, 11.0]


def test_bad_url_is_a_user_error() -> None:
    with pytest.raises(UserInputError, match="database URL"):
        Store("nosuchdb://x")


def _beat(store: Store, run_id: str, **row: object) -> None:
    from sqlalchemy import update

    from gpuplan.adapters.store.database import heartbeats

    with store.engine.begin() as conn:
        conn.execute(update(heartbeats).where(heartbeats.c.run_id == run_id).values(**row))


def test_a_run_whose_writer_is_gone_reads_back_interrupted(tmp_path: Path) -> None:
    """Liveness from the writer's heartbeat: fresh and this pid alive -> running; the pid gone (kill -9)
    or the beat older than STALE_S (another host) -> interrupted; a run that never beat keeps its status."""
    import subprocess
    import sys
    import time

    from gpuplan.adapters.store.database import STALE_S

    store = Store(f"sqlite:///{tmp_path / 'r.sqlite'}")
    for run_id in ("a", "b", "c", "d"):
        store.create_run(run_id, "serve", {}, {}, "0")
    for run_id in ("a", "b", "c"):
        RecordWriter(store, run_id).close()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    _beat(store, "b", pid=int(gone.stdout))  # a pid that has exited (and was reaped)
    _beat(store, "c", host="elsewhere", beat_unix_s=time.time() - STALE_S - 1)
    runs = {r.run_id: r for r in store.runs()}
    assert (runs["a"].status, runs["a"].live) == ("running", True)
    assert (runs["b"].status, runs["b"].live) == ("interrupted", False)
    assert (runs["c"].status, runs["c"].live) == ("interrupted", False)
    assert (runs["d"].status, runs["d"].live) == ("running", False)
    _beat(store, "c", beat_unix_s=time.time())  # another host, fresh: trusted
    assert store.run("c").live
    store.finish_run("a", "completed", {})
    assert (store.run("a").status, store.run("a").live) == ("completed", False)
