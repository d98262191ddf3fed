"""Refit the serving factors on published validation rows (``gpuplan validate --fit-out``).

Few physical factors (``serving_factors``), fitted by the robust regularised least squares of
``gpuplan.core.calibration.solver``: the Gaussian prior in log space keeps factors that only a few
rows see near their physically motivated prior (``data/calibration/priors.yaml``); a factor fewer
than ``MIN_ROWS_PER_FACTOR`` rows exercise keeps its prior value.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.calibration.solver import Param
from gpuplan.core.errors import FileFormatError
from gpuplan.data.bundled_calibration import prior_calibration
from gpuplan.usecases.calibration.profile import fit_provenance
from gpuplan.usecases.calibration.serving_factors import fitted_params, solve
from gpuplan.usecases.validation.cases import Case, read_cases

PRIOR_SIGMA = {
    "step_overhead_s": 1.0,
    "layer_overhead_s": 1.0,
    "hop_latency_s": 1.0,
    "overlap_loss": 1.0,
    "power_limit_exponent": 1.0,
}
"""Prior width in log space: 0.25 (≈ ±28 %) for efficiencies, 1.0 (≈ ×2.7) for latencies, for the
overlap loss, whose prior (0.5: half-way between a pure roofline and no overlap) is only a guess, and
for the power-limit exponent (physically between 1/3 and 1)."""
DEFAULT_PRIOR_SIGMA = 0.25

SIMULATED_SCENARIOS = ("server", "rate")
"""Rows the serving simulator predicts (``usecases/validation/predict_server.py``). They are left out of the fit:
one of them costs a 600-second simulated run, hundreds of times per fit, and as rows the fit never
saw they test the simulator out of sample."""


def fit_rows(cases: Sequence[Case]) -> list[Case]:
    """The rows the calibration is fitted on: every row the analytic model can price. ``concurrency``
    rows stay in, priced by the analytic closed loop (``predict_case(simulate=False)``), and MLPerf
    ``offline`` rows at their dataset's mean lengths; validation reports both from the simulator
    (closed loop; saturation on the dataset's lengths, 4-6 % lower on the llama2-70b rows)."""
    return [c for c in cases if c.get("scenario") not in SIMULATED_SCENARIOS]


def fit_calibration(
    cases: Sequence[Case], catalog: Catalog, prior: Calibration, *, data: str, command: str
) -> tuple[Calibration, list[Param]]:
    """Fit the factors that enough analytic ``cases`` exercise (``fit_rows``); return the new
    calibration and what was fitted."""
    cases = fit_rows(cases)
    params = fitted_params(cases, catalog)
    sigma = np.asarray([PRIOR_SIGMA.get(p[0], DEFAULT_PRIOR_SIGMA) for p in params])
    fitted = solve(cases, catalog, prior, params, sigma)
    provenance = fit_provenance(
        method="scipy least_squares, soft_l1 on log(pred/measured)",
        data=data,
        rows=len(cases),
        command=command,
    )
    return fitted.model_copy(update={"provenance": provenance}), params


def refit_file(path: Path, catalog: Catalog, *, grades: Sequence[str], out: Path) -> Calibration:
    """Fit the serving factors on a validation CSV's rows of ``grades``, starting from (and pulled
    towards) the bundled priors, and write them (YAML) to ``out``."""
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
