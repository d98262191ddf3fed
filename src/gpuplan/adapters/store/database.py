"""Runs and their request rows in one SQL database.

Default: the SQLite file named by ``GPUPLAN_STORE`` (a path or any SQLAlchemy URL) or
``~/.local/share/gpuplan/results.sqlite``; ``postgresql://…`` works too (extra ``gpuplan[postgres]``:
psycopg 3, SQLAlchemy >= 2.1). SQLite
runs in WAL mode with ``synchronous=NORMAL``: a committed row survives the process being killed.
Rows are written by :class:`RecordWriter`, a thread that commits whatever has queued up at most every
``FLUSH_S``, so SIGKILL loses at most the requests that completed within that last moment.
Schema changes: ``SCHEMA_VERSION`` is kept in ``meta``; tables are created if missing.
Liveness: the writer of a run beats (``heartbeats``: host, pid, time) every ``HEARTBEAT_S``; a
``running`` run whose beat is older than ``STALE_S``, or whose process on this host is gone (``kill -9``),
is read back as ``interrupted`` (resumable), never as live.
Secrets: the store's URL is shown only as :attr:`Store.display_url` (its password masked), and a run's
config and conditions are stored, and read back, with every URL password and API key masked
(:mod:`gpuplan.core.redact`).
"""

from __future__ import annotations

import json
import os
import queue
import socket
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError

from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.errors import BenchmarkError, UserInputError
from gpuplan.core.redact import redact, redact_json

SCHEMA_VERSION = 1
FLUSH_S = 0.02
HEARTBEAT_S = 1.0
"""How often a run's writer beats."""
STALE_S = 10.0
"""A beat older than this (ten missed beats) means the run's process is gone."""

metadata = MetaData()
runs = Table(
    "runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("status", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    Column("tool_version", String(32), nullable=False),
    Column("config", JSON, nullable=False),
    Column("conditions", JSON, nullable=False),
    Column("summary", JSON),
)
requests = Table(
    "requests",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False, index=True),
    Column("idx", Integer, nullable=False),
    Column("warmup", Boolean, nullable=False),
    Column("error", String(32)),
    Column("ttft_ms", Float),
    Column("e2e_ms", Float),
    Column("data", Text, nullable=False),
)
heartbeats = Table(
    "heartbeats",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("beat_unix_s", Float, nullable=False),
)
meta = Table("meta", metadata, Column("key", String(32), primary_key=True), Column("value", Text))


def default_store_url() -> str:
    raw = os.environ.get("GPUPLAN_STORE") or str(Path.home() / ".local/share/gpuplan/results.sqlite")
    return raw if "://" in raw else f"sqlite:///{Path(raw).expanduser()}"


class RunInfo(BaseModel):
    """One run's row: what, when, under which conditions, and its summary once finished."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    kind: str
    status: str
    created_at: datetime
    finished_at: datetime | None
    tool_version: str
    config: dict[str, Any]
    conditions: dict[str, Any]
    summary: dict[str, Any] | None
    requests: int = 0
    live: bool = False
    """A process is still writing this run (its heartbeat is fresh and, on this host, its pid alive)."""


def _pid_alive(pid: int) -> bool:
    if os.name != "posix":  # os.kill(pid, 0) would terminate the process on Windows: trust the beat
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def _live(beat: Any) -> bool:
    """Whether a ``heartbeats`` row belongs to a process still running the run."""
    if time.time() - beat.beat_unix_s > STALE_S:
        return False
    return beat.host != socket.gethostname() or _pid_alive(beat.pid)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


class Store:
    """A results database; ``url`` is any SQLAlchemy URL (default :func:`default_store_url`)."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_store_url()
        if self.url.startswith("sqlite:///"):
            Path(self.url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.engine: Engine = create_engine(self.url, future=True)
        except (ArgumentError, NoSuchModuleError, ImportError) as exc:
            driver_missing = isinstance(exc, ImportError) and self.url.startswith("postgresql")
            raise UserInputError(
                redact(f"--store {self.url!r} is not a usable database URL: {exc}"),
                hint="pip install 'gpuplan[postgres]'"
                if driver_missing
                else "sqlite:///path.sqlite or postgresql://user@host/db",
            ) from None
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        try:
            metadata.create_all(self.engine)
            with self.engine.begin() as conn:
                if conn.execute(select(meta.c.value).where(meta.c.key == "schema")).first() is None:
                    conn.execute(insert(meta).values(key="schema", value=str(SCHEMA_VERSION)))
        except DatabaseError as exc:  # OperationalError (cannot open) and "file is not a database"
            raise BenchmarkError(
                redact(f"cannot open the results store {self.url}: {' '.join(str(exc.orig).split())}"),
                hint="point --store at a gpuplan SQLite file or a new path",
            ) from None

    @property
    def display_url(self) -> str:
        """The URL as it may be printed: its password (and any API key) masked."""
        return redact(self.url)

    def create_run(
        self, run_id: str, kind: str, config: dict[str, Any], conditions: dict[str, Any], tool_version: str
    ) -> None:
        """A new ``running`` run; URL passwords and API keys in ``config``/``conditions`` are masked."""
        config, conditions = redact_json(config), redact_json(conditions)
        with self.engine.begin() as conn:
            conn.execute(
                insert(runs).values(
                    run_id=run_id,
                    kind=kind,
                    status="running",
                    created_at=datetime.now(UTC),
                    tool_version=tool_version,
                    config=config,
                    conditions=conditions,
                )
            )

    def finish_run(self, run_id: str, status: str, summary: dict[str, Any] | None) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                update(runs)
                .where(runs.c.run_id == run_id)
                .values(status=status, finished_at=datetime.now(UTC), summary=summary)
            )

    def set_status(self, run_id: str, status: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(runs).where(runs.c.run_id == run_id).values(status=status))

    def beat(self, run_id: str) -> None:
        """This process is still running ``run_id`` (see ``STALE_S``)."""
        row = {"host": socket.gethostname(), "pid": os.getpid(), "beat_unix_s": time.time()}
        with self.engine.begin() as conn:
            done = conn.execute(update(heartbeats).where(heartbeats.c.run_id == run_id).values(**row))
            if not done.rowcount:
                conn.execute(insert(heartbeats).values(run_id=run_id, **row))

    def add(self, run_id: str, records: list[RequestRecord]) -> None:
        if not records:
            return
        rows = [
            {
                "run_id": run_id,
                "idx": r.index,
                "warmup": r.warmup,
                "error": r.error,
                "ttft_ms": r.ttft_ms,
                "e2e_ms": r.e2e_ms,
                "data": r.model_dump_json(),
            }
            for r in records
        ]
        with self.engine.begin() as conn:
            conn.execute(insert(requests), rows)

    def run(self, run_id: str) -> RunInfo:
        found = [r for r in self.runs() if r.run_id == run_id or r.run_id.startswith(run_id)]
        if len(found) != 1:
            raise UserInputError(
                f"{'no' if not found else 'more than one'} run matches {run_id!r} in {self.display_url}",
                hint="see gpuplan results list",
            )
        return found[0]

    def runs(self) -> list[RunInfo]:
        with self.engine.connect() as conn:
            counts: dict[str, int] = {}
            for (rid,) in conn.execute(select(requests.c.run_id)):
                counts[rid] = counts.get(rid, 0) + 1
            rows = conn.execute(select(runs).order_by(runs.c.created_at)).mappings().all()
            beats = {b.run_id: b for b in conn.execute(select(heartbeats))}
        return [self._info(dict(row), counts.get(row["run_id"], 0), beats.get(row["run_id"])) for row in rows]

    @staticmethod
    def _info(row: dict[str, Any], count: int, beat: Any) -> RunInfo:
        """One run as read back: secrets masked (a run stored before masking too); a ``running`` run
        whose writer's heartbeat stopped is ``interrupted``."""
        live = row["status"] == "running" and beat is not None and _live(beat)
        if row["status"] == "running" and beat is not None and not live:
            row["status"] = "interrupted"
        return RunInfo(
            **row | {"config": redact_json(row["config"]), "conditions": redact_json(row["conditions"])},
            requests=count,
            live=live,
        )

    def records(self, run_id: str) -> list[RequestRecord]:
        return [RequestRecord.model_validate_json(data) for data in self.run_data(requests, run_id)]

    def run_data(self, table: Table, run_id: str) -> list[str]:
        """The ``data`` column of a run's rows in ``table`` (``requests``, ``measurements``), in the
        order they were written."""
        with self.engine.connect() as conn:
            query = select(table.c.data).where(table.c.run_id == run_id).order_by(table.c.id)
            return list(conn.execute(query).scalars().all())


class RecordWriter:
    """Writes records from a background thread, committing at most every ``flush_s``; beats the run's
    heartbeat every ``HEARTBEAT_S`` while open."""

    def __init__(self, store: Store, run_id: str, flush_s: float = FLUSH_S) -> None:
        self.store = store
        self.run_id = run_id
        self.flush_s = flush_s
        self.queue: queue.Queue[RequestRecord | None] = queue.Queue()
        self.error: Exception | None = None
        self.written = 0
        self.beat_at = time.monotonic()
        store.beat(run_id)
        self.thread = threading.Thread(target=self._loop, name="gpuplan-results-writer", daemon=True)
        self.thread.start()

    def put(self, record: RequestRecord) -> None:
        self.queue.put(record)

    def close(self) -> None:
        """Flush everything and stop; raises if a write failed."""
        self.queue.put(None)
        self.thread.join()
        if self.error is not None:
            raise BenchmarkError(redact(f"writing results to {self.store.url} failed: {self.error}"))

    def _loop(self) -> None:
        stop = False
        while not stop:
            try:
                batch = [self.queue.get(timeout=HEARTBEAT_S)]
            except queue.Empty:
                batch = []
            while True:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            stop = None in batch
            started = time.monotonic()
            try:
                self.store.add(self.run_id, [r for r in batch if r is not None])
                self.written += sum(r is not None for r in batch)
                if not stop and time.monotonic() - self.beat_at >= HEARTBEAT_S:
                    self.store.beat(self.run_id)
                    self.beat_at = time.monotonic()
            except Exception as exc:  # reported by close()
                self.error = exc
            if not stop:
                time.sleep(max(0.0, self.flush_s - (time.monotonic() - started)))


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=str)
