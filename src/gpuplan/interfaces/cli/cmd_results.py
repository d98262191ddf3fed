"""``gpuplan results list|show|export|compare``: the runs in the results store (docs/bench.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuplan.core.errors import UserInputError
from gpuplan.interfaces.cli import render
from gpuplan.interfaces.cli.app import FormatOpt, fmt, guarded
from gpuplan.interfaces.cli.cmd_bench import StoreOpt, results_app, summary_table

RunIdArg = Annotated[str, typer.Argument(help="run id or a unique prefix")]


@results_app.command("list")
@guarded
def results_list(
    store: StoreOpt = None,
    format: FormatOpt = "table",
) -> None:
    """Stored runs, oldest first."""
    from gpuplan.adapters.store.database import Store

    runs = Store(store).runs()
    if fmt(format) == "json":
        render.emit_json([r.model_dump(mode="json") for r in runs])
        return
    rows = [
        [
            r.run_id[:12],
            r.kind,
            r.status,
            r.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            r.requests,
            r.config.get("model"),
            _load_label(r.config),
            (r.summary or {}).get("achieved_rate"),  # the stored JSON key of achieved_rate_rps
        ]
        for r in runs
    ]
    render.table("runs", ["id", "kind", "status", "created", "requests", "model", "load", "achieved"], rows)


def _load_label(config: dict[str, Any]) -> object:
    if config.get("rate_rps"):
        return config["rate_rps"]
    return f"c={config['concurrency']}" if config.get("concurrency") else "trace"


@results_app.command("show")
@guarded
def results_show(
    run_id: RunIdArg,
    store: StoreOpt = None,
    format: FormatOpt = "table",
) -> None:
    """One run: config, conditions and summary."""
    from gpuplan.adapters.store.database import Store

    info = Store(store).run(run_id)
    if fmt(format) == "json" or info.summary is None:
        render.emit_json(info)
        return
    summary_table(info.summary)


@results_app.command("export")
@guarded
def results_export(
    run_id: RunIdArg,
    store: StoreOpt = None,
    format: Annotated[str, typer.Option("--format", "-f", help="csv or json")] = "csv",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="file (default stdout)")] = None,
) -> None:
    """Every request row of a run, as CSV or JSON."""
    from gpuplan.adapters.store.database import Store
    from gpuplan.adapters.store.export import to_csv, to_json

    if format not in ("csv", "json"):
        raise UserInputError(f"--format {format!r} is not one of csv, json")
    db = Store(store)
    records = db.records(db.run(run_id).run_id)
    text = to_csv(records) if format == "csv" else to_json(records)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")


@results_app.command("compare")
@guarded
def results_compare(
    run_a: Annotated[str, typer.Argument(help="run id or a unique prefix (A)")],
    run_b: Annotated[str, typer.Argument(help="run id or a unique prefix (B)")],
    store: StoreOpt = None,
    format: FormatOpt = "table",
) -> None:
    """Two runs side by side: key metrics, B − A in %, and the settings that differ."""
    from gpuplan.adapters.store.compare import compare
    from gpuplan.adapters.store.database import Store

    db = Store(store)
    result = compare(db.run(run_a), db.run(run_b))
    if fmt(format) == "json":
        render.emit_json(result)
        return
    render.table(
        f"A {result['a'][:12]} vs B {result['b'][:12]}",
        ["metric", "A", "B", "B - A", "change %"],
        [[m["metric"], m["a"], m["b"], m["delta"], m["delta_pct"]] for m in result["metrics"]],
    )
    if result["config_diff"]:
        render.lines(
            [f"{k}: {a} -> {b}" for k, (a, b) in result["config_diff"].items()], title="settings that differ"
        )
