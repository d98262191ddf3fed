"""Request rows of a run as CSV or JSON (flat columns; ITLs joined by ``;`` in CSV)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from gpuplan.adapters.store.records import RequestRecord

COLUMNS = [*list(RequestRecord.model_fields), "send_lag_ms"]


def rows(records: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json") | {"send_lag_ms": r.send_lag_ms} for r in records]


def to_csv(records: Sequence[RequestRecord]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows(records):
        row["itl_ms"] = ";".join(f"{x:.4f}" for x in row["itl_ms"])
        writer.writerow(row)
    return out.getvalue()


def to_json(records: Sequence[RequestRecord]) -> str:
    return json.dumps(rows(records), indent=1) + "\n"
