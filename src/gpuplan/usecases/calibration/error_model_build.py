"""Build the error model (``data/calibration/error_model.json``) from held-out residuals. Run::

    PYTHONPATH=src python -m gpuplan.usecases.calibration.error_model_build ../shared/validation \\
        --out src/gpuplan/data/calibration/error_model.json

Every residual is log(measured / predicted) for a development row (grades A,B) predicted without
having seen its GPU:

* ``inference.csv`` and ``serving_sweeps.csv``: ``gpuplan validate --cross-validate gpu`` (the serving
  factors, and for sweeps the release-line factors, refitted without the row's GPU);
* ``training.csv``: the training factors refitted without the row's GPU (``cross_validate_training``);
* ``inference_memory.csv`` and ``memory.csv``: the memory model has no factors fitted on
  measurements, so ``gpuplan validate`` with the bundled factors is already out of sample.

The row's GPU family counts as calibrated when its fold still holds ``MIN_ROWS_PER_FACTOR`` fitting
rows of that family (the rule by which the fit fits a family's factors). Rows of GPUs whose fold
would leave fewer than ``MIN_TRAINING_ROWS`` rows to fit on are not held out and give no residual.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Callable, Collection, Sequence
from datetime import date
from pathlib import Path

from gpuplan.adapters.catalog.loader import Catalog, default_catalog
from gpuplan.core.calibration.error_model import (
    SHRINKAGE_K,
    Coverage,
    ErrorModelData,
    ErrorModelInput,
    ErrorModelProvenance,
    Residual,
    coverage,
    held_out_coverage,
)
from gpuplan.core.calibration.solver import MIN_ROWS_PER_FACTOR
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.data.error_model import parse_error_model_data
from gpuplan.usecases.calibration.crossval import cross_validate_file
from gpuplan.usecases.calibration.crossval_training import cross_validate_training
from gpuplan.usecases.calibration.published_serving import fit_rows
from gpuplan.usecases.validation import validate_file
from gpuplan.usecases.validation.cases import Case, read_cases
from gpuplan.usecases.validation.intervals import gpu_family, row_path
from gpuplan.usecases.validation.predict import RowResult
from gpuplan.usecases.validation.predict_training import THROUGHPUT_METRICS

GRADES = ("A", "B")
COMMAND = (
    "PYTHONPATH=src python -m gpuplan.usecases.calibration.error_model_build ../shared/validation "
    "--out src/gpuplan/data/calibration/error_model.json"
)
ABOUT = (
    "Held-out residuals log(measured/predicted) of the development rows, grouped by path "
    "(metric family / regime / GPU evidence / engine / metric); quantiles per group are computed on "
    "load, each measurement setup (GPU and source document) weighing one unit, each group shrunk to "
    "its parent with weight n/(n+k), n its setups. See gpuplan/core/calibration/error_model.py."
)
SERVING_FILES = ("inference.csv", "serving_sweeps.csv")
TRAINING_FILE = "training.csv"
MEMORY_FILES = ("inference_memory.csv", "memory.csv")
ROUND_DIGITS = 6
"""Digits a stored log ratio keeps (1e-6 in log space is a 0.0001 % error)."""
FamilyFitted = Callable[[Case], bool]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _chosen(path: Path) -> list[Case]:
    return [c for c in read_cases(path)[1] if c.quality in GRADES]


def residuals_of(
    source: str,
    cases: Sequence[Case],
    results: Sequence[RowResult],
    *,
    fitted: Callable[[Case], bool | None],
) -> list[Residual]:
    """A residual per predicted row with a positive measured value and an error-model group."""
    by_id = {c.id: c for c in cases}
    out: list[Residual] = []
    for r in results:
        case = by_id.get(r.id)
        if case is None or r.predicted is None or r.predicted <= 0 or r.measured <= 0:
            continue
        path = row_path(case, r, gpu_fitted=fitted(case))
        if path is None:
            continue
        ratio = round(math.log(r.measured / r.predicted), ROUND_DIGITS)
        setup = f"{r.gpu} {case.get('source_url')}"
        out.append(Residual(source=source, id=r.id, gpu=r.gpu, setup=setup, path=path, log_ratio=ratio))
    return out


def family_fitted_in_fold(fit_on: Sequence[Case], catalog: Catalog) -> FamilyFitted:
    """Whether a held-out row's GPU family keeps ``MIN_ROWS_PER_FACTOR`` fitting rows without its GPU."""
    families = {id(c): gpu_family(c, catalog) for c in fit_on}

    def fitted(case: Case) -> bool:
        family = gpu_family(case, catalog)
        left = sum(1 for c in fit_on if families[id(c)] == family and c.get("gpu") != case.get("gpu"))
        return family is not None and left >= MIN_ROWS_PER_FACTOR

    return fitted


def serving_residuals(folder: Path, catalog: Catalog) -> tuple[list[Residual], dict[str, int]]:
    """Leave-one-GPU-out residuals of the inference rows and the load sweeps."""
    fitted = family_fitted_in_fold(fit_rows(_chosen(folder / "inference.csv")), catalog)
    out: list[Residual] = []
    counts: dict[str, int] = {}
    for name in SERVING_FILES:
        path = folder / name
        cv = cross_validate_file(path, catalog, grades=GRADES, by="gpu")
        cases = _chosen(path)
        counts[name] = len(cases)
        out += residuals_of(name, cases, cv.rows, fitted=fitted)
    return out, counts


def training_residuals(
    folder: Path, catalog: Catalog, *, gpus: Collection[str] | None = None
) -> tuple[list[Residual], int]:
    """Leave-one-GPU-out residuals of the training rows (of ``gpus``, default all)."""
    cases = _chosen(folder / TRAINING_FILE)
    fitted = family_fitted_in_fold([c for c in cases if c.metric in THROUGHPUT_METRICS], catalog)
    rows = cross_validate_training(cases, catalog, groups=gpus)
    return residuals_of(TRAINING_FILE, cases, rows, fitted=fitted), len(cases)


def memory_residuals(folder: Path, catalog: Catalog, name: str) -> tuple[list[Residual], int]:
    """Residuals of a memory file with the bundled factors (no memory factor is fitted)."""
    path = folder / name
    report = validate_file(path, catalog=catalog, cal=default_calibration(), grades=GRADES)
    cases = _chosen(path)
    return residuals_of(name, cases, report.rows, fitted=lambda _: None), len(cases)


HOW = {
    "inference.csv": "validate --cross-validate gpu",
    "serving_sweeps.csv": "validate --cross-validate gpu (inference and release-line factors refitted)",
    "training.csv": "training factors refitted without the row's GPU",
    "inference_memory.csv": "validate (no fitted memory factors)",
    "memory.csv": "validate (no fitted memory factors)",
}


def build(folder: Path, *, catalog: Catalog, command: str = COMMAND) -> ErrorModelData:
    """Every residual of the five development files, with the files' digests and row counts."""
    residuals, rows = serving_residuals(folder, catalog)
    train, rows[TRAINING_FILE] = training_residuals(folder, catalog)
    residuals += train
    for name in MEMORY_FILES:
        mem, rows[name] = memory_residuals(folder, catalog, name)
        residuals += mem
    inputs = {
        name: ErrorModelInput(
            sha256=sha256(folder / name),
            rows=rows[name],
            residuals=sum(r.source == name for r in residuals),
            how=HOW[name],
        )
        for name in (*SERVING_FILES, TRAINING_FILE, *MEMORY_FILES)
    }
    provenance = ErrorModelProvenance(
        command=command, built_on=date.today().isoformat(), grades=GRADES, inputs=inputs
    )
    return ErrorModelData(
        about=ABOUT, provenance=provenance, shrinkage_k=SHRINKAGE_K, residuals=tuple(residuals)
    )


def dump(data: ErrorModelData) -> str:
    """The file's text: one residual a line, so a rebuild's diff reads row by row."""
    head = data.model_dump(mode="json", exclude={"residuals"})
    lines = [json.dumps(r.model_dump(mode="json"), separators=(",", ":")) for r in data.residuals]
    body = json.dumps(head, indent=1)[:-2]
    return body + ',\n "residuals": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"


COVERAGE_LEVELS = (0.5, 0.8)


CoverageRow = tuple[str, Coverage, Coverage, Coverage]


def coverage_table(data: ErrorModelData) -> list[CoverageRow]:
    """Per metric family (and per source file of a family with several): the 50 % and 80 % coverage
    with the error model rebuilt without the row's GPU, and the 80 % coverage in-sample (the model
    built from every residual, these included)."""
    everything = data.model()
    rows: list[CoverageRow] = []
    for family in sorted({r.path[0] for r in data.residuals}):
        sources = sorted({r.source for r in data.residuals if r.path[0] == family})
        for source in [None, *sources] if len(sources) > 1 else [None]:
            c50, c80 = (
                held_out_coverage(
                    residuals=data.residuals, level=level, k=data.shrinkage_k, family=family, source=source
                )
                for level in COVERAGE_LEVELS
            )
            own = [r for r in data.residuals if r.path[0] == family and source in (None, r.source)]
            label = family if source is None else f"{family}: {source}"
            rows.append((label, c50, c80, coverage(model=everything, residuals=own, level=0.8)))
    return rows


def coverage_markdown(data: ErrorModelData) -> str:
    """The coverage table as Markdown (docs/validate.md, Intervals)."""
    lines = [
        "| metric family | rows | GPUs | 50 % coverage | 50 % median width | 80 % coverage "
        "| 80 % median width | 80 % in-sample |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, c50, c80, own in coverage_table(data):
        family, _, source = label.partition(": ")
        gpus = len({r.gpu for r in data.residuals if r.path[0] == family and source in ("", r.source)})
        lines.append(
            f"| {label} | {own.n} | {gpus} | {_pct(c50.coverage)} | {_pct(c50.median_width)} "
            f"| {_pct(c80.coverage)} | {_pct(c80.median_width)} | {_pct(own.coverage)} |"
        )
    return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f} %"


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="error_model_build", description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="the validation folder (../shared/validation)")
    parser.add_argument("--out", type=Path, required=True, help="where to write error_model.json")
    parser.add_argument(
        "--coverage-only",
        action="store_true",
        help="read --out and print its held-out coverage; build nothing",
    )
    args = parser.parse_args(argv)
    if args.coverage_only:
        data = parse_error_model_data(args.out.read_text(encoding="utf-8"), origin=str(args.out))
    else:
        data = build(args.folder, catalog=default_catalog())
        args.out.write_text(dump(data), encoding="utf-8")
        sys.stderr.write(f"wrote {len(data.residuals)} residuals to {args.out}\n")
    sys.stdout.write(coverage_markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
