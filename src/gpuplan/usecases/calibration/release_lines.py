"""Fit the factors of engine release lines (``core/perf/engine_releases.py``) on load sweeps.

Each line is fitted on the medians of its own sweeps (TTFT p50: how fast the line prefills and how
long a request spends on the host before its first token; TPOT p50: how long its decode steps take)
at every load level whose notes do not say it ran past saturation (there the latencies measure the
run's length). The tails (TTFT/TPOT/ITL P99s) and the throughput are left to judge the fit. Light
loads alone cannot tell a slow prefill on the GPU from a slow first token off it; the heavier levels
can, because a prefill on the GPU stretches the decode steps that share it (``fit_starts``). Which factors
a line gets follows from the rows it has:

* a line with MLA+MoE rows (DeepSeek-V3 on early-2025 engines): ``mla_moe_efficiency``,
  ``mla_moe_layer_step_s`` and ``mla_moe_first_token_host_s``, which apply to such models only (a line's
  other models, e.g. TensorRT-LLM 0.14 on Llama in ``inference.csv``, keep its engine's factors);
* a line with other models' rows (vLLM V1 on Llama): ``efficiency`` and ``first_token_host_s`` (the
  request's host time outside the steps: HTTP, tokenization, hand-off to the engine core).

Least squares on log(predicted / measured) with the ``soft_l1`` loss of the ``inference.csv`` fit
(``RESIDUAL_SCALE``), so that one sweep a line's factors cannot describe (vLLM 0.8.3 with pipeline
stages on two VMs over Ray, 30 % slower than the line's other sweeps) does not drag the line's other
sweeps by its square; the serving simulator predicts each row as its run was made
(``usecases/validation/predict_sweep.py``).
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
from gpuplan.usecases.calibration.serving_factors import RESIDUAL_SCALE
from gpuplan.usecases.validation.cases import Case
from gpuplan.usecases.validation.layouts import row_engine, row_engine_version
from gpuplan.usecases.validation.predict import predict_case
from gpuplan.usecases.validation.predict_sweep import finite_prompts
from gpuplan.usecases.validation.regimes import past_saturation_noted

FIT_METRICS = ("ttft_ms_p50", "tpot_ms_p50")
RELEASE_LINE_GRADES = ("A", "B", "C")
"""Sweep rows the lines are fitted on: every grade (the DeepSeek sweeps are B and C)."""

_BOUNDS = {
    "efficiency": (0.3, 1.5),
    "mla_moe_efficiency": (0.02, 1.5),
    "mla_moe_layer_step_s": (0.0, 0.005),
    "first_token_host_s": (0.0, 5.0),
    "mla_moe_first_token_host_s": (0.0, 5.0),
}
"""Physical ranges: efficiencies up to ``MAX_FACTOR`` of their engine's (down to 2 % of the math rate
for MLA/MoE); host time per layer per step from 0 (CUDA graphs) to 5 ms (a slow eager Python step);
a request's host time from 0 to 5 s (TensorRT-LLM 0.17's first tokens took 1 s at four clients
while its decode steps took 55 ms)."""
_START = {
    "efficiency": 1.0,
    "mla_moe_efficiency": 0.3,
    "mla_moe_layer_step_s": 1e-4,
    "first_token_host_s": 0.005,
    "mla_moe_first_token_host_s": 0.005,
}
"""Starting points: the engine's own rate; a third of the math rate; 0.1 ms per layer (~10 eager
kernel launches of ~10 µs); 5 ms per request (an HTTP round trip, tokenization, one IPC hop)."""


def line_rows(cases: Sequence[Case]) -> dict[str, list[Case]]:
    """The fit rows of each release line: TTFT/TPOT medians at every load level of its sweeps."""
    sweeps: dict[tuple[object, ...], list[Case]] = defaultdict(list)
    for case in cases:
        stated = row_engine_version(case) is not None  # an unstated version runs at the engine's factors
        saturated = past_saturation_noted(case)  # its latencies are the run's length, not the line's
        if stated and not saturated and finite_prompts(case) is not None and case.metric in FIT_METRICS:
            sweeps[_sweep_key(case)].append(case)
    by_line: dict[str, list[Case]] = defaultdict(list)
    for rows in sweeps.values():
        line = release_line(row_engine(rows[0]), row_engine_version(rows[0]))
        if line is not None:
            by_line[line.name].extend(rows)
    return dict(by_line)


def fit_release_lines(cases: Sequence[Case], catalog: Catalog, cal: Calibration) -> dict[str, ReleaseFactors]:
    """Factors of every release line that has sweep rows, each fitted on its own rows (``line_rows``)."""
    return {name: _fit_line(name, rows, catalog, cal) for name, rows in sorted(line_rows(cases).items())}


def _fit_line(name: str, rows: list[Case], catalog: Catalog, cal: Calibration) -> ReleaseFactors:
    fields = _fields(rows)
    lower, upper = zip(*(_BOUNDS[f] for f in fields), strict=True)

    def residuals(x: np.ndarray) -> np.ndarray:
        trial = _with(cal, name, dict(zip(fields, x, strict=True)), "")
        predicted = [predict_case(c, catalog, trial).predicted for c in rows]
        return np.array(
            [np.log(max(p or 1e-9, 1e-9) / c.value) for p, c in zip(predicted, rows, strict=True)]
        )

    fits = [
        solve_bounded(residuals, x0, lower, upper, f_scale=RESIDUAL_SCALE) for x0 in fit_starts(fields, rows)
    ]
    solution, rms, _ = min(fits, key=lambda fit: fit[2])  # the start whose fit reached the lower loss
    note = (
        f"{len(rows)} rows ({', '.join(FIT_METRICS)}, every load level) of serving_sweeps.csv; "
        f"log residual rms {rms:.3f}"
    )
    return _with(cal, name, dict(zip(fields, solution, strict=True)), note).release(name)


def fit_starts(fields: tuple[str, ...], rows: list[Case]) -> list[list[float]]:
    """Two starting points, one in each way a slow first token can arise: slow prefill math on the
    GPU with little host time (``_START``), or the engine's own math with half the line's lightest
    median TTFT spent on the host, off the decode steps' path. Light loads alone cannot tell the
    two apart; the decode steps of the heavier loads can (a prefill on the GPU stalls them)."""
    lightest_ttft_s = min((c.value for c in rows if c.metric.startswith("ttft")), default=10.0) / 1000.0
    off_gpu = {"efficiency": 1.0, "mla_moe_efficiency": 1.0}
    host = {
        **_START,
        **off_gpu,
        "first_token_host_s": lightest_ttft_s / 2,
        "mla_moe_first_token_host_s": lightest_ttft_s / 2,
    }
    return [[_START[f] for f in fields], [host[f] for f in fields]]


def _fields(rows: list[Case]) -> tuple[str, ...]:
    if any(is_mla_moe(get_model(c.get("model"))) for c in rows):
        return ("mla_moe_efficiency", "mla_moe_layer_step_s", "mla_moe_first_token_host_s")
    return ("efficiency", "first_token_host_s")


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
        "source_url",
    )
    fields = sorted((k, v) for k, v in case.fields.items() if k not in skip)
    folder = case.get("source_url").rsplit("/", 1)[0]  # a sweep may publish one file per load level
    return (*fields, folder, finite_prompts(case), row_engine_version(case))
