"""Fit the factors of engine release lines (``core/perf/engine_releases.py``) on load sweeps.

Each line is fitted on the light-load points of its own sweeps only (the two lowest loads of each
sweep, where queueing is small and a step's cost shows through): median TTFT sets how fast the line
prefills, median TPOT how long its decode steps take. The rest of every sweep (near the knee and past
it) is left to judge the fit. Which factors a line gets follows from the rows it has:

* a line with MLA+MoE rows (DeepSeek-V3 on early-2025 engines): ``mla_moe_efficiency`` and
  ``mla_moe_layer_step_s``;
* a line with other models' rows (vLLM V1 on Llama): ``efficiency``.

Least squares on log(predicted / measured), the serving simulator predicting each row as its run
was made (``usecases/validation/predict_sweep.py``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.serving import Calibration, ReleaseFactors
from gpuplan.core.calibration.solver import solve_bounded
from gpuplan.core.perf.engine_releases import is_mla_moe, release_line
from gpuplan.usecases.validation.cases import Case
from gpuplan.usecases.validation.layouts import row_engine, row_engine_version
from gpuplan.usecases.validation.predict import predict_case
from gpuplan.usecases.validation.predict_sweep import finite_prompts

FIT_METRICS = ("ttft_ms_p50", "tpot_ms_p50")
RELEASE_LINE_GRADES = ("A", "B", "C")
"""Sweep rows the lines are fitted on: every grade (the DeepSeek sweeps are B and C)."""
LIGHT_LEVELS = 2
"""Load levels of each sweep that the fit reads (its lightest)."""
_BOUNDS = {"efficiency": (0.3, 1.5), "mla_moe_efficiency": (0.02, 1.5), "mla_moe_layer_step_s": (0.0, 0.005)}
"""Physical ranges: efficiencies up to ``MAX_FACTOR`` of their engine's (down to 2 % of the math rate
for MLA/MoE); host time per layer per step from 0 (CUDA graphs) to 5 ms (a slow eager Python step)."""
_START = {"efficiency": 1.0, "mla_moe_efficiency": 0.3, "mla_moe_layer_step_s": 1e-4}
"""Starting points: the engine's own rate; a third of the math rate; 0.1 ms per layer (~10 eager
kernel launches of ~10 µs)."""


def light_rows(cases: Sequence[Case]) -> dict[str, list[Case]]:
    """The fit rows of each release line: TTFT/TPOT medians at each sweep's lightest loads."""
    sweeps: dict[tuple[object, ...], list[Case]] = defaultdict(list)
    for case in cases:
        stated = row_engine_version(case) is not None  # an unstated version runs at the engine's factors
        if stated and finite_prompts(case) is not None and case.metric in FIT_METRICS:
            sweeps[_sweep_key(case)].append(case)
    by_line: dict[str, list[Case]] = defaultdict(list)
    for rows in sweeps.values():
        loads = sorted({_load(c) for c in rows})[:LIGHT_LEVELS]
        line = release_line(row_engine(rows[0]), row_engine_version(rows[0]))
        if line is not None:
            by_line[line.name].extend(c for c in rows if _load(c) in loads)
    return dict(by_line)


def fit_release_lines(cases: Sequence[Case], catalog: Catalog, cal: Calibration) -> dict[str, ReleaseFactors]:
    """Factors of every release line that has sweep rows, each fitted on its own light-load rows."""
    return {name: _fit_line(name, rows, catalog, cal) for name, rows in sorted(light_rows(cases).items())}


def _fit_line(name: str, rows: list[Case], catalog: Catalog, cal: Calibration) -> ReleaseFactors:
    fields = _fields(rows)
    lower, upper = zip(*(_BOUNDS[f] for f in fields), strict=True)

    def residuals(x: np.ndarray) -> np.ndarray:
        trial = _with(cal, name, dict(zip(fields, x, strict=True)), "")
        predicted = [predict_case(c, catalog, trial).predicted for c in rows]
        return np.array(
            [np.log(max(p or 1e-9, 1e-9) / c.value) for p, c in zip(predicted, rows, strict=True)]
        )

    x0 = [_START[f] for f in fields]
    solution, rms = solve_bounded(residuals, x0, lower, upper)
    note = f"{len(rows)} light-load rows ({', '.join(FIT_METRICS)}) of serving_sweeps.csv; log residual rms {rms:.3f}"
    return _with(cal, name, dict(zip(fields, solution, strict=True)), note).release(name)


def _fields(rows: list[Case]) -> tuple[str, ...]:
    if any(is_mla_moe(get_model(c.get("model"))) for c in rows):
        return ("mla_moe_efficiency", "mla_moe_layer_step_s")
    return ("efficiency",)


def _with(cal: Calibration, line: str, values: dict[str, float], note: str) -> Calibration:
    factors = ReleaseFactors(**{k: float(v) for k, v in values.items()}, fitted_on=note)
    return cal.model_copy(update={"release_lines": {**cal.release_lines, line: factors}})


def _load(case: Case) -> float:
    return case.float_field("concurrency") or case.float_field("request_rate") or 0.0


def _sweep_key(case: Case) -> tuple[object, ...]:
    skip = (
        "id",
        "raw_id",
        "metric",
        "value",
        "concurrency",
        "request_rate",
        "notes",
        "input_len",
        "output_len",
    )
    fields = sorted((k, v) for k, v in case.fields.items() if k not in skip)
    return (*fields, finite_prompts(case), row_engine_version(case))
