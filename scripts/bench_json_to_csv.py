#!/usr/bin/env python3
"""Turn saved ``gpuplan bench gpu|train --format json`` outputs into a RESULTS.csv for ``gpuplan calibrate``.

``gpuplan calibrate --from-store`` reads measurements from a results store; a JSON summary saved from
the device machine (``benchmarks/results/*.json``) has the same measurement rows but no store. This
script builds the rows with the very functions the store path uses (``gpuplan.usecases.calibration.measured_rows``:
``bench-gpu`` → gemm/bandwidth/allreduce rows, ``bench-train`` → train rows; skipped and OOM
measurements are left out, as there) and writes them with ``rows_to_csv``, so
``gpuplan calibrate RESULTS.csv`` fits what ``--from-store`` would have fitted.

The JSON files do not record the driver or the date: pass them with ``--conditions``. Each row's
``source`` column then reads ``FILE run RUNID8 (DEVICE; CONDITIONS)``.

    PYTHONPATH=src python3 scripts/bench_json_to_csv.py \\
        benchmarks/results/h200_bench_gpu.json benchmarks/results/h200_bench_train_qwen3-0.6b.json \\
        --conditions "driver 580.159.04, torch 2.11.0+cu130, measured 2026-11-29" \\
        -o docs/playbooks/inputs/h200-results.csv [--check]

``--check`` writes nothing and exits 1 when the CSV differs from what the JSON files give.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuplan.adapters.store.database import RunInfo
from gpuplan.usecases.calibration.measured_rows import ResultRow, _gpu_rows, _train_rows, rows_to_csv

ROOT = Path(__file__).resolve().parent.parent


def rows_of(path: Path, conditions: str) -> list[ResultRow]:
    """The calibrate rows of one saved ``bench gpu`` or ``bench train`` JSON summary."""
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if not doc.get("gpu"):
        raise SystemExit(f"{path}: device {doc.get('device_name')!r} is not a catalog GPU (no 'gpu' key)")
    train = "model" in doc
    run = RunInfo(
        run_id=doc["run_id"],
        kind="bench-train" if train else "bench-gpu",
        status="finished",
        created_at=datetime.fromtimestamp(0, UTC),
        finished_at=None,
        tool_version="",
        config={"model": doc.get("model")},
        conditions={"gpu": doc["gpu"]},
        summary=None,
    )
    rows = list((_train_rows if train else _gpu_rows)(run, doc["results"]))
    try:
        shown = path.resolve().relative_to(ROOT)
    except ValueError:
        shown = path
    extra = "; ".join(x for x in (doc.get("device_name"), conditions) if x)
    source = f"{shown} run {doc['run_id'][:8]}" + (f" ({extra})" if extra else "")
    return [r.model_copy(update={"fields": r.fields | {"source": source}}) for r in rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+", type=Path, help="bench gpu / bench train --format json outputs")
    ap.add_argument("--conditions", default="", help="what the JSON lacks (driver, software, date)")
    ap.add_argument("-o", "--output", type=Path, help="CSV to write (default: stdout)")
    ap.add_argument("--check", action="store_true", help="compare with --output instead of writing it")
    a = ap.parse_args(argv)
    text = rows_to_csv([r for p in a.json for r in rows_of(p, a.conditions)])
    if a.check:
        if a.output is None or not a.output.exists() or a.output.read_text(encoding="utf-8") != text:
            print(f"{a.output}: differs from what {', '.join(map(str, a.json))} give", file=sys.stderr)
            return 1
        return 0
    if a.output is None:
        sys.stdout.write(text)
    else:
        a.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
