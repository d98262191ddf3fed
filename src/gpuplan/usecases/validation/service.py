"""Validation use cases for the CLI and the web app: validate a CSV, refit the calibration, and the
held-out (cross-validation) error. Separate from ``gpuplan.usecases.service`` so that commands which do not
validate never load the simulator and scipy that validation needs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import FileFormatError, UserInputError
from gpuplan.data.calibration import prior_calibration
from gpuplan.usecases.calibration.published import fit_calibration
from gpuplan.usecases.validation import validate_file
from gpuplan.usecases.validation.cases import read_cases
from gpuplan.usecases.validation.crossval import CrossValidation, GroupBy
from gpuplan.usecases.validation.crossval import cross_validate as run_cross_validation
from gpuplan.usecases.validation.report import ValidationReport


def validate(path: Path, catalog: Catalog, cal: Calibration, *, grades: Sequence[str]) -> ValidationReport:
    """``gpuplan validate``; UserInputError when no row carries one of ``grades``."""
    _, cases = read_cases(path)
    present = sorted({c.quality for c in cases})
    if cases and not set(grades) & set(present):
        asked = ",".join(grades) or "(none)"
        raise UserInputError(
            f"--grades {asked}: no row of {path.name} has these quality grades",
            hint=f"the file has grades {', '.join(present)}",
        )
    return validate_file(path, catalog=catalog, cal=cal, grades=grades)


def refit(
    path: Path, catalog: Catalog, prior: Calibration, *, grades: Sequence[str], out: Path
) -> Calibration:
    """Fit the calibration factors on a CSV's rows and write them (YAML) to ``out``."""
    _, cases = read_cases(path)
    chosen = [c for c in cases if c.quality in set(grades)]
    cal, _ = fit_calibration(
        chosen,
        catalog,
        prior_calibration(),
        data=f"{path.name} grades {','.join(grades)}",
        command=f"gpuplan validate {path.name} --grades {','.join(grades)} --fit-out {out.name}",
    )
    try:
        out.write_text(yaml.safe_dump(cal.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
    except OSError as exc:
        raise FileFormatError(f"cannot write {out}: {exc.strerror}") from None
    return cal


def cross_validate(path: Path, catalog: Catalog, *, grades: Sequence[str], by: str) -> CrossValidation:
    """Leave-one-GPU (or model) -out error of the inference calibration on a validation CSV."""
    groupings: dict[str, GroupBy] = {"gpu": "gpu", "model": "model"}
    if by not in groupings:
        raise UserInputError(f"--cross-validate {by!r} is not one of gpu, model")
    schema, cases = read_cases(path)
    if schema != "inference":
        raise UserInputError(f"--cross-validate needs inference.csv rows; {path} holds {schema} rows")
    chosen = [c for c in cases if c.quality in set(grades)]
    return run_cross_validation(chosen, catalog, prior_calibration(), by=groupings[by])
