"""Measured results as uniform rows, from the results store or a CSV.

A row: ``kind`` (gemm, bandwidth, allreduce, train, serve), catalog ``gpu``, ``metric``, ``value``
and its conditions in ``fields`` (the validation CSV's column names: dtype, model, framework,
num_gpus, tp, weight_dtype, scenario, input_len, output_len, concurrency, request_rate …; a bench train
run adds ``checkpointing`` ("full" when it ran with gradient checkpointing) and the ``lora_rank`` of LoRA).
A serving run records the server's deployment in ``conditions.deployment`` (``bench serve --gpu --engine
--tp``, the engine otherwise read from the server); ``gpuplan calibrate --gpu --engine --tp`` fill in
what a run did not record.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from gpuplan.adapters.scenario_files.deployment import describe_validation_error
from gpuplan.adapters.store.database import RunInfo, Store
from gpuplan.adapters.store.measurements import run_measurements
from gpuplan.core.errors import FileFormatError
from gpuplan.core.frozen import FrozenModel

Kind = Literal["gemm", "bandwidth", "allreduce", "train", "serve"]
FIELDS = (
    "dtype",
    "model",
    "framework",
    "num_gpus",
    "tp",
    "weight_dtype",
    "scenario",
    "input_len",
    "output_len",
    "concurrency",
    "request_rate",
    "batch_size",
    "seq_len",
    "method",
    "ranks",
    "checkpointing",
    "lora_rank",
    "source",
)
COLUMNS = ("id", "kind", "gpu", "metric", "value", *FIELDS)
SERVE_METRICS = {"concurrency": ("ttft_ms", "tpot_ms", "output_tokens_per_s"), "rate": ("ttft_ms", "tpot_ms")}


class ResultRow(FrozenModel):
    id: str
    kind: Kind
    gpu: str
    metric: str
    value: float = Field(gt=0, allow_inf_nan=False, description="a measurement: finite and > 0")
    fields: dict[str, str]


def _row(id_: str, kind: str, gpu: str, metric: str, value: float, **fields: Any) -> ResultRow:
    clean = {k: str(v) for k, v in fields.items() if v is not None and v != ""}
    return ResultRow.model_validate(
        {"id": id_, "kind": kind, "gpu": gpu, "metric": metric, "value": value, "fields": clean}
    )


def _gpu_rows(run: RunInfo, items: list[dict[str, Any]]) -> Iterator[ResultRow]:
    gpu = str(run.conditions.get("gpu"))
    for i, m in enumerate(x for x in items if x.get("status") == "ok" and x.get("value")):
        rid, src = f"{run.run_id[:8]}-{i}", run.run_id
        if m["kind"] == "gemm":
            yield _row(rid, "gemm", gpu, "tflops", m["value"], dtype=m.get("dtype"), source=src)
        elif m["name"] == "d2d":
            yield _row(rid, "bandwidth", gpu, "gb_per_s", m["value"], source=src)
        elif m["kind"] == "allreduce" and m.get("params", {}).get("backend") == "nccl":
            yield _row(rid, "allreduce", gpu, "gb_per_s", m["value"], ranks=m["params"]["ranks"], source=src)


def _train_rows(run: RunInfo, items: list[dict[str, Any]]) -> Iterator[ResultRow]:
    gpu = str(run.conditions.get("gpu"))
    for m in items:
        if m.get("status") == "ok" and m.get("achieved_tflops"):
            yield _row(
                f"{run.run_id[:8]}-{m['name']}",
                "train",
                gpu,
                "tflops",
                m["achieved_tflops"],
                dtype=m.get("dtype"),
                model=run.config.get("model"),
                batch_size=m.get("batch_size"),
                seq_len=m.get("seq_len"),
                method=m.get("method"),
                checkpointing="full" if run.config.get("gradient_checkpointing") else None,
                lora_rank=run.config.get("lora_rank") if m.get("method") == "lora" else None,
                source=run.run_id,
            )


def _deployment(run: RunInfo, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The flags' defaults, then what the run recorded (a recorded None never hides a flag)."""
    recorded = (run.conditions.get("deployment") or {}) | (run.config.get("deployment") or {})
    return dict(defaults) | {k: v for k, v in recorded.items() if v is not None}


def serve_skip_reason(run: RunInfo, defaults: Mapping[str, Any]) -> str | None:
    """Why a serve run gives no row, in a few words, or None when it gives rows."""
    cfg, summary = run.config, run.summary or {}
    if not _deployment(run, defaults).get("gpu"):
        return "no GPU recorded (bench serve --gpu) or given (calibrate --gpu)"
    if not (cfg.get("concurrency") or cfg.get("rate_rps")):
        return "neither a rate nor a concurrency run (a trace or --request-rate inf is not fitted)"
    if not summary.get("requests_completed"):
        return f"no completed requests (status {run.status})"
    return None


def _serve_rows(run: RunInfo, defaults: Mapping[str, Any]) -> Iterator[ResultRow]:
    dep = _deployment(run, defaults)
    summary, cfg = run.summary or {}, run.config
    mode = "concurrency" if cfg.get("concurrency") else "rate"
    if serve_skip_reason(run, defaults) is not None:
        return
    fields = {
        "model": dep.get("model") or cfg.get("model"),
        "framework": dep.get("engine"),
        "tp": dep.get("tp"),
        "num_gpus": dep.get("num_gpus") or dep.get("tp"),
        "weight_dtype": dep.get("weight_dtype"),
        "input_len": cfg.get("input_tokens"),
        "output_len": cfg.get("output_tokens"),
        "scenario": mode,
        "concurrency": cfg.get("concurrency"),
        "request_rate": cfg.get("rate_rps"),
        "source": run.run_id,
    }
    for metric in SERVE_METRICS[mode]:
        stat = summary.get(metric)
        value = stat.get("mean") if isinstance(stat, dict) else stat
        name = metric if metric == "output_tokens_per_s" else f"{metric}_mean"
        if value:
            yield _row(f"{run.run_id[:8]}-{name}", "serve", dep["gpu"], name, float(value), **fields)


def rows_from_store(
    url: str | None, *, run_ids: tuple[str, ...] = (), deployment: Mapping[str, Any] | None = None
) -> tuple[list[ResultRow], list[str]]:
    """Rows of every completed run (or of ``run_ids``); also the runs left out and why."""
    store = Store(url)
    runs = [store.run(r) for r in run_ids] if run_ids else store.runs()
    rows: list[ResultRow] = []
    notes: list[str] = []
    for run in runs:
        if run.kind in ("bench-gpu", "bench-train") and not run.conditions.get("gpu"):
            notes.append(
                f"{run.run_id[:12]} ({run.kind}): device {run.conditions.get('device_name')!r} "
                "is not a catalog GPU"
            )
            continue
        if run.kind == "bench-gpu":
            rows += _gpu_rows(run, run_measurements(store, run.run_id))
        elif run.kind == "bench-train":
            rows += _train_rows(run, run_measurements(store, run.run_id))
        elif run.kind == "serve":
            found = list(_serve_rows(run, deployment or {}))
            rows += found
            if not found:
                why = serve_skip_reason(run, deployment or {}) or "no positive latency or throughput"
                notes.append(f"{run.run_id[:12]} (serve): {why}")
    return rows, notes


def rows_from_csv(path: Path) -> list[ResultRow]:
    """Rows of a results CSV (columns: ``kind, gpu, metric, value`` and any of the condition columns)."""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = {"kind", "gpu", "metric", "value"} - set(reader.fieldnames or [])
            if missing:
                raise FileFormatError(
                    f"{path}: header lacks {', '.join(sorted(missing))}",
                    hint="see docs/bench.md (gpuplan calibrate) for the columns",
                )
            rows = []
            for line, raw in enumerate(reader, start=2):
                try:
                    rows.append(_csv_row(raw, line))
                except ValidationError as exc:
                    raise FileFormatError(f"{path} line {line}: {describe_validation_error(exc)}") from None
                except ValueError as exc:
                    raise FileFormatError(f"{path} line {line}: {str(exc).splitlines()[0]}") from None
            return rows
    except OSError as exc:
        raise FileFormatError(f"cannot read {path}: {exc.strerror}", hint="check the path") from None


def _csv_row(raw: dict[str, str | None], line: int) -> ResultRow:
    fields = {k: (v or "").strip() for k, v in raw.items() if k in FIELDS and v}
    return _row(
        raw.get("id") or f"line{line}",
        (raw.get("kind") or "").strip(),
        (raw.get("gpu") or "").strip(),
        (raw.get("metric") or "").strip(),
        float(raw.get("value") or "nan"),
        **fields,
    )


def rows_to_csv(rows: list[ResultRow]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow(
            {"id": r.id, "kind": r.kind, "gpu": r.gpu, "metric": r.metric, "value": r.value} | r.fields
        )
    return out.getvalue()
