"""Rows of micro-benchmark and training-step runs (``bench gpu``, ``bench train``) in the results store.

One row per measurement, committed as soon as it is measured (these are seconds apart, so no writer
thread is needed). The table sits beside ``runs`` and ``requests`` in the same database; it is
created on first use, so older stores gain it without a migration.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Column, Float, Integer, String, Table, Text, insert, select

from gpuplan.adapters.store.database import Store, metadata

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
    with store.engine.connect() as conn:
        rows = (
            conn.execute(
                select(measurements.c.data).where(measurements.c.run_id == run_id).order_by(measurements.c.id)
            )
            .scalars()
            .all()
        )
    return [json.loads(data) for data in rows]
