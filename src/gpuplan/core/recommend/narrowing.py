"""``Plan.narrow_with``: for a plan on a GPU whose family has no measurements, the one benchmark that
would narrow its intervals most (``core/calibration/narrowing.py``).

A plan on such a GPU reads the ``gpu priors only`` groups of the error model. A ``gpuplan bench serve``
run of the plan's own layout on that GPU, fitted with ``gpuplan calibrate --from-store``, sets the
family's compute and bandwidth factors and the engine's (``usecases/calibration/measured.py``, stage
2), so the family counts as calibrated (``Calibration.is_fitted``) and the plan's figures read the
``gpu calibrated`` groups of the same regime. Of the plan's figures with a spread (a rate target's
throughput has none: the plan carries its offered load), the one whose group band shrinks most is
named. The engine is always known in a plan (it names its engine), so the evidence level is the
only part of the group a benchmark changes here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpuplan.core.calibration.narrowing import NarrowWith, narrow_with
from gpuplan.core.calibration.uncertainty import Uncertainty, load_regime
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.recommend.intervals import FIGURES, P99_FIGURES, figure_path, utilisation
from gpuplan.core.recommend.request import Plan
from gpuplan.core.workload import Workload

PROFILE_FILE = "profile.yaml"
"""The profile the suggested ``calibrate`` writes (``recommend --calibration profile.yaml`` reads it)."""
LABELS = {
    "ttft_ms": "TTFT",
    "tpot_ms": "TPOT",
    "output_tokens_per_s": "throughput",
    "ttft_p99_ms": "P99 TTFT",
    "tpot_p99_ms": "P99 TPOT",
}


CALIBRATION_RATE_SHARES = (0.25, 0.5, 1.0)
"""The sweep the suggested ``bench serve`` runs, as shares of one replica's target rate: a single rate
run gives two rows, fewer than the three the fit needs per factor (``MIN_ROWS_PER_FACTOR``); three rates
up to the target give six, and none past the load the plan was sized for."""


def serve_command(*, model_id: str, plan: Plan, target: Workload) -> str:
    """``bench serve`` up to one replica's share of the target (three rates), then the ``calibrate`` that
    fits it."""
    lay = plan.layout
    if target.rate_rps is not None:  # three runs: one run's rows are fewer than a factor's minimum
        share = target.rate_rps / lay.replicas
        load = "--rates " + ",".join(f"{share * f:.3g}" for f in CALIBRATION_RATE_SHARES)
    else:
        load = f"--concurrency {max(1, math.ceil(plan.concurrency_per_replica))}"
    bench = (
        f"gpuplan bench serve --url URL --model {model_id} {load} "
        f"--input-tokens {target.input_tokens} --output-tokens {target.output_tokens}"
    )
    fit = (
        f"gpuplan calibrate --from-store --gpu {plan.gpu} --engine {lay.engine.name} --tp {lay.tp} "
        f"--weight-dtype {lay.weight_dtype.name} -o {PROFILE_FILE}"
    )
    return f"{bench} && {fit}"


def with_narrowing(
    *, plan: Plan, replica: ReplicaModel, target: Workload, uncertainty: Uncertainty, model_id: str
) -> Plan:
    """``plan`` with ``narrow_with`` when its GPU is not calibrated and a benchmark narrows a figure."""
    if plan.calibrated or plan.interval is None or plan.low is None or plan.high is None:
        return plan
    regime = load_regime(utilisation(plan=plan, replica=replica, target=target))
    figures = {
        name: (figure_path(family, regime, False, metric), figure_path(family, regime, True, metric))
        for name, family, metric in (*FIGURES, *P99_FIGURES)
        if name in plan.interval.sources and getattr(plan.low, name) != getattr(plan.high, name)
    }
    found = narrow_with(
        model=uncertainty.model,
        level=uncertainty.level,
        gpu=plan.gpu,
        command=serve_command(model_id=model_id, plan=plan, target=target),
        figures=figures,
    )
    return plan if found is None else plan.model_copy(update={"narrow_with": found})


def narrowing_line(n: NarrowWith) -> str:
    """One line of ``recommend``'s text: the benchmark and what it would do to the interval."""
    label = LABELS.get(n.metric, n.metric)
    return (
        f"benchmark {n.gpu} with `{n.command}`, then recommend again with --calibration {PROFILE_FILE}: "
        f"its {n.level:.0%} {label} interval would narrow from {n.width_now:.2f} to "
        f"{n.width_after:.2f} wide (high/low - 1; group {n.group_now} -> {n.group_after})"
    )


def narrowing_lines(plans: Sequence[Plan]) -> list[str]:
    """One line per GPU type without measurements among ``plans`` (its best-ranked plan's benchmark)."""
    seen: set[str] = set()
    out: list[str] = []
    for p in plans:
        if p.narrow_with is not None and p.gpu not in seen:
            seen.add(p.gpu)
            out.append(narrowing_line(p.narrow_with))
    return out
