"""The results store on a real PostgreSQL, when ``GPUPLAN_TEST_POSTGRES_URL`` names one.

Set it to an empty database the test may write into, e.g.
``GPUPLAN_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/gpuplan_test`` (with the ``postgres``
extra installed: ``pip install -e '.[postgres]'``). Without it, the server tests are SKIPPED with a
reason that says so; the URL check below needs no server. Each test uses run ids of its own, so the
database may be reused.
"""

from __future__ import annotations

import os
import sys
import threading
import uuid

import pytest

from gpuplan.adapters.store.database import RecordWriter, Store
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.errors import UserInputError

POSTGRES_URL = os.environ.get("GPUPLAN_TEST_POSTGRES_URL", "")
needs_server = pytest.mark.skipif(
    not POSTGRES_URL,
    reason="GPUPLAN_TEST_POSTGRES_URL is not set: the PostgreSQL store was NOT tested "
    "(set it to postgresql://user@host:port/empty_db; see this file's docstring)",
)


def _rec(i: int) -> RequestRecord:
    return RequestRecord(
        index=i,
        scheduled_s=0.1 * i,
        sent_s=0.1 * i,
        done_s=0.1 * i + 0.2,
        status=200,
        ttft_ms=50.0 + i,
        e2e_ms=200.0,
        itl_ms=(10.0, 11.0),
        output_tokens=3,
    )


def test_a_plain_postgresql_url_uses_psycopg_3() -> None:
    """SQLAlchemy >= 2.1 maps ``postgresql://`` to psycopg 3 (its default PostgreSQL driver since 2.1,
    https://docs.sqlalchemy.org/en/21/changelog/migration_21.html); 2.0 picked psycopg2. No connection
    is made."""
    pytest.importorskip("psycopg", reason="psycopg (gpuplan[postgres]) is not installed")
    from sqlalchemy import create_engine

    assert create_engine("postgresql://user@127.0.0.1/db").dialect.driver == "psycopg"


def test_without_psycopg_a_postgresql_store_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg -> ImportError
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    with pytest.raises(UserInputError) as info:
        Store("postgresql://user@127.0.0.1:1/db")
    assert info.value.hint == "pip install 'gpuplan[postgres]'"


@needs_server
def test_runs_and_records_round_trip_on_postgresql() -> None:
    store = Store(POSTGRES_URL)
    assert store.engine.dialect.name == "postgresql"
    run_id = uuid.uuid4().hex[:16]
    store.create_run(
        run_id, "serve", {"model": "m", "url": "http://u:sk-secret@h:8000/v1"}, {"host": "h"}, "0.1.0"
    )
    writer = RecordWriter(store, run_id)
    for i in range(200):
        writer.put(_rec(i))
    writer.close()
    records = store.records(run_id)
    assert [r.index for r in records] == list(range(200))
    assert records[7].ttft_ms == 57.0 and records[7].itl_ms == (10.0, 11.0)
    store.finish_run(run_id, "completed", {"requests_completed": 200})
    info = store.run(run_id)
    assert (info.status, info.requests, info.summary) == ("completed", 200, {"requests_completed": 200})
    assert info.config["url"] == "http://u:***@h:8000/v1"  # masked before it reached the server


@needs_server
def test_concurrent_writers_on_postgresql_lose_nothing() -> None:
    store = Store(POSTGRES_URL)
    run_ids = [uuid.uuid4().hex[:16] for _ in range(4)]

    def write(run_id: str) -> None:
        store.create_run(run_id, "serve", {}, {}, "0")
        writer = RecordWriter(store, run_id)
        for i in range(300):
            writer.put(_rec(i))
        writer.close()

    threads = [threading.Thread(target=write, args=(run_id,)) for run_id in run_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [len(store.records(run_id)) for run_id in run_ids] == [300] * 4
    assert {r.run_id for r in store.runs()} >= set(run_ids)
