"""``gpuplan results list|show|export|compare|report``: the runs in the results store (docs/bench.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpuplan.core.errors import UserInputError
from gpuplan.interfaces.cli import render
from gpuplan.interfaces.cli.app import CalibrationOpt, CatalogOpt, FormatOpt, catalog_from, fmt, guarded
from gpuplan.interfaces.cli.cmd_bench import StoreOpt, results_app, run_tags, summary_table

if TYPE_CHECKING:
    from gpuplan.usecases.results_report.model import Report

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
            run_tags(r.config),
        ]
        for r in runs
    ]
    headers = ["id", "kind", "status", "created", "requests", "model", "load", "achieved", "label, metadata"]
    render.table("runs", headers, rows)


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
    if tags := run_tags(info.config):
        render.console.print(f"label, metadata: {tags}", highlight=False)
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


REPORT_FORMATS = ("html", "md", "csv")


@results_app.command("report")
@guarded
def results_report(
    run_ids: Annotated[list[str], typer.Argument(help="run ids or unique prefixes (gpuplan results list)")],
    format: Annotated[str, typer.Option("--format", "-f", help="html, md or csv")] = "html",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="file (default stdout)")] = None,
    png: Annotated[
        bool, typer.Option("--png", help="md: also write the charts as PNG beside -o FILE.md")
    ] = False,
    gpu: Annotated[str | None, typer.Option(help="the server's GPU (for the predicted curve)")] = None,
    model: Annotated[str | None, typer.Option(help="the served model's Hugging Face id")] = None,
    tp: Annotated[int | None, typer.Option(help="the server's tensor-parallel degree")] = None,
    engine: Annotated[str | None, typer.Option(help="the server's engine (vllm, sglang, trtllm …)")] = None,
    weight_dtype: Annotated[str | None, typer.Option(help="the served weights' dtype (bf16, fp8 …)")] = None,
    calibration: CalibrationOpt = None,
    catalog: CatalogOpt = None,
    store: StoreOpt = None,
) -> None:
    """Compare bench serve runs: latency and throughput vs load, CDFs, tables, and the predicted curve
    of the same deployment (gpuplan simulate) over the measured one."""
    from gpuplan.usecases.calibration.profile import load_calibration
    from gpuplan.usecases.results_report import build_report, deployment_flags

    shape = _report_format(format, png, output)
    if shape == "html" or png:
        from gpuplan.interfaces.plots.serving import plotly_modules

        plotly_modules()  # without plotly: the one-line error now, before the simulations
    report = build_report(
        store,
        run_ids,
        catalog_from(catalog),
        deployment=deployment_flags(gpu=gpu, model=model, tp=tp, engine=engine, weight_dtype=weight_dtype),
        cal=load_calibration(calibration) if calibration else None,
    )
    text = _report_text(report, shape, output if png else None)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
    for line in report.notes:
        render.note(line)


def _report_format(format: str, png: bool, output: Path | None) -> str:
    if format not in REPORT_FORMATS:
        raise UserInputError(f"--format {format!r} is not one of {', '.join(REPORT_FORMATS)}")
    if png and (format != "md" or output is None):
        raise UserInputError(
            "--png writes the charts beside a Markdown report", hint="use --format md -o REPORT.md --png"
        )
    return format


def _report_text(report: Report, shape: str, md_path: Path | None) -> str:
    """The document; ``md_path``: write PNG charts beside this Markdown file and link them."""
    from gpuplan.interfaces.cli import report_views

    if shape == "csv":
        return report_views.csv_report(report)
    from gpuplan.interfaces.plots import results as charts

    if shape == "md":
        found = charts.report_charts(report) if md_path is not None else []
        paths = [md_path.with_name(f"{md_path.stem}-{c.id}.png") for c in found] if md_path else []
        if found:
            charts.write_pngs(found, paths)
        images = [(c.title, p.name) for c, p in zip(found, paths, strict=True)]
        return report_views.markdown_report(report, images)
    found = charts.report_charts(report)
    divs = [(c.title, charts.chart_html(c, include_plotlyjs=i == 0)) for i, c in enumerate(found)]
    return report_views.html_report(report, divs)
