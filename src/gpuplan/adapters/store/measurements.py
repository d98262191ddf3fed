"""Rows of micro-benchmark and training-step runs (``bench gpu``, ``bench train``) in the results store.

One row per measurement, committed as soon as it is measured (these are seconds apart, so no writer
thread is needed). The table sits beside ``runs`` and ``requests`` in the same database; it is
created on first use, so older stores gain it without a migration.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sqlalchemy import Column, Float, Integer, String, Table, Text, insert

from gpuplan import __version__
from gpuplan.adapters.store.database import Store, metadata
from gpuplan.core.errors import BenchmarkError

Measured = TypeVar("Measured")

measurements = Table(
    "measurements",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False, index=True),
    Column("kind", String(32), nullable=False),
    Column("name", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("value", Float),
    Column("unit", String(16)),
    Column("data", Text, nullable=False),
)


def ensure_table(store: Store) -> None:
    """Create the table in an existing store when it lacks it."""
    measurements.create(store.engine, checkfirst=True)


def add_measurement(store: Store, run_id: str, row: dict[str, Any]) -> None:
    """Commit one measurement (``kind``, ``name``, ``status``, ``value``, ``unit`` + anything else)."""
    values = {
        "run_id": run_id,
        "kind": row["kind"],
        "name": row["name"],
        "status": row["status"],
        "value": row.get("value"),
        "unit": row.get("unit"),
        "data": json.dumps(row, default=str),
    }
    with store.engine.begin() as conn:
        conn.execute(insert(measurements).values(**values))


def run_measurements(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Every measurement of a run, in the order it was taken (full rows, as written)."""
    ensure_table(store)
    return [json.loads(data) for data in store.run_data(measurements, run_id)]


def open_measurement_run(
    store_url: str | None,
    kind: str,
    config: dict[str, Any],
    conditions: dict[str, Any],
    announce: Callable[[str, str], None] | None = None,
) -> tuple[Store, str]:
    """Open the store (gaining the table if it lacks it) and create a running run; ``announce`` gets
    (run id, store URL) once it exists. Returns the store and the new run's id."""
    store = Store(store_url)
    ensure_table(store)
    run_id = uuid.uuid4().hex
    store.create_run(run_id, kind, config, conditions, __version__)
    if announce is not None:
        announce(run_id, store.display_url)
    return store, run_id


def store_each(
    store: Store,
    run_id: str,
    measured: Iterable[Measured],
    row: Callable[[Measured], dict[str, Any]],
    on_result: Callable[[Measured], None] | None,
    *,
    interrupted_message: str,
) -> list[Measured]:
    """Take each measurement from ``measured`` (a lazy iterable: measuring happens here) and commit its
    ``row`` at once. Ctrl-C marks the run ``interrupted`` and raises BenchmarkError(``interrupted_message``);
    what was committed stays."""
    results: list[Measured] = []
    try:
        for result in measured:
            add_measurement(store, run_id, row(result))
            results.append(result)
            if on_result is not None:
                on_result(result)
    except KeyboardInterrupt:
        store.set_status(run_id, "interrupted")
        raise BenchmarkError(interrupted_message) from None
    return results
