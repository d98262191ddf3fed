"""``gpuplan validate``: predict published measurements and report the error by metric and grade."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuplan.core.errors import UserInputError
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.interfaces.cli import validate_views, views
from gpuplan.interfaces.cli.app import CatalogOpt, FormatOpt, app, catalog_from, fmt, guarded
from gpuplan.usecases.validation.breakdown import grouped
from gpuplan.usecases.validation.report import GroupStats


@app.command()
@guarded
def validate(
    cases: Annotated[Path, typer.Argument(help="a validation CSV (inference, inference_memory, ...)")],
    grades: Annotated[str, typer.Option(help="quality grades to include")] = "A,B",
    fit_out: Annotated[
        Path | None, typer.Option(help="refit the calibration on these rows, write YAML here")
    ] = None,
    cross_validate: Annotated[
        str | None, typer.Option(help="held-out error: refit without each 'gpu' or 'model' in turn")
    ] = None,
    intervals: Annotated[
        bool, typer.Option("--intervals", help="give each row the error model's interval and report coverage")
    ] = False,
    interval: Annotated[
        float | None, typer.Option(help="interval level, 0.5..0.99 (default 0.8; implies --intervals)")
    ] = None,
    by: Annotated[
        str | None,
        typer.Option(help="also group the error by framework, class (dense/moe), method, gpu, model"),
    ] = None,
    catalog: CatalogOpt = None,
    format: FormatOpt = "table",
) -> None:
    """Predict published measurements and report the error by metric and quality grade."""
    # these load the simulator and scipy: only here
    from gpuplan.usecases.calibration.crossval import cross_validate_file
    from gpuplan.usecases.calibration.published_serving import refit_file
    from gpuplan.usecases.validation import service as validation
    from gpuplan.usecases.validation.breakdown import parse_by
    from gpuplan.usecases.validation.intervals import DEFAULT_INTERVAL

    keys = parse_by(by) if by is not None else ()
    chosen = [g.strip().upper() for g in grades.split(",") if g.strip()]
    cat = catalog_from(catalog)
    cal = default_calibration()
    level = interval if interval is not None else DEFAULT_INTERVAL if intervals else None
    if cross_validate is not None:
        if level is not None:
            raise UserInputError(
                "--intervals does not combine with --cross-validate",
                hint="the error model's held-out coverage is in docs/validate.md (Intervals)",
            )
        held_out = grouped(cases, cross_validate_file(cases, cat, grades=chosen, by=cross_validate), keys)
        views.cross_validation(held_out, fmt(format))
        _breakdown_table(held_out.breakdown, fmt(format), "Held-out error by " + ", ".join(keys))
        return
    if fit_out is not None:
        cal = refit_file(cases, cat, grades=chosen, out=fit_out)
    report = grouped(cases, validation.validate(cases, cat, cal, grades=chosen, interval=level), keys)
    views.validation(report, fmt(format))
    _breakdown_table(report.breakdown, fmt(format), "By " + ", ".join(keys))


def _breakdown_table(groups: list[GroupStats], f: str, title: str) -> None:
    if f != "json":
        validate_views.breakdown(groups, title=title)
