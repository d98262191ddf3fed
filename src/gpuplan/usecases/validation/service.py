"""``gpuplan validate`` for the CLI and the web app: validate a CSV against a calibration. Separate from
``gpuplan.usecases.fit``/``predict``/``recommend`` so that commands which do not validate never load the simulator that
validation needs. Refitting the factors on the rows (``--fit-out``) and the held-out error
(``--cross-validate``) are calibration: ``gpuplan.usecases.calibration.published_serving`` and
``gpuplan.usecases.calibration.crossval``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.error_model import MAX_LEVEL, MIN_LEVEL
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import UserInputError
from gpuplan.data.error_model import default_error_model
from gpuplan.usecases.validation import validate_file
from gpuplan.usecases.validation.cases import read_cases
from gpuplan.usecases.validation.intervals import validate_with_intervals
from gpuplan.usecases.validation.report import ValidationReport


def validate(
    path: Path, catalog: Catalog, cal: Calibration, *, grades: Sequence[str], interval: float | None = None
) -> ValidationReport:
    """``gpuplan validate``; UserInputError when no row carries one of ``grades``. With ``interval``
    (``--intervals``, the level) each row carries the bundled error model's interval."""
    _, cases = read_cases(path)
    present = sorted({c.quality for c in cases})
    if cases and not set(grades) & set(present):
        asked = ",".join(grades) or "(none)"
        raise UserInputError(
            f"--grades {asked}: no row of {path.name} has these quality grades",
            hint=f"the file has grades {', '.join(present)}",
        )
    if interval is None:
        return validate_file(path, catalog=catalog, cal=cal, grades=grades)
    check_level(interval)
    return validate_with_intervals(
        path, catalog=catalog, cal=cal, grades=grades, model=default_error_model(), level=interval
    )


def check_level(level: float) -> None:
    """UserInputError naming ``--interval`` unless the level is one the error model covers."""
    if not MIN_LEVEL <= level <= MAX_LEVEL:
        raise UserInputError(
            f"--interval {level:g} is outside {MIN_LEVEL:g}..{MAX_LEVEL:g}",
            hint="give the interval's probability as a fraction, e.g. --interval 0.8 for 80 %",
        )
