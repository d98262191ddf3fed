"""``gpuplan results report RUN…``: stored ``bench serve`` runs side by side, with the predicted curve
of the same deployment from the simulator (the prove loop: measured vs predicted in one picture).

Runs that differ only in their load form one *curve*: same served model, API, lengths, target and
deployment, and the same kind of load (an open-loop rate or a closed-loop concurrency). Each curve is
plotted against its load: the achieved rate (req/s) of rate runs, the concurrency of closed loops.
Trace replays and ``--request-rate inf`` bursts have no load axis: they appear in the tables and CDFs.

The deployment behind the endpoint (GPU, model, tp, engine, weight dtype) comes from the run's
``conditions.deployment`` / ``config.deployment`` (as ``gpuplan calibrate --from-store`` reads it),
overridden by the flags given to the report; where neither names a GPU the report says so and how
to add it. The prediction simulates the deployment (``usecases/simulate.py``) at each measured load
and at loads between them, Poisson arrivals for rate runs and a closed loop for concurrency runs,
with the runs' mean measured input and output lengths (fixed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.adapters.store.database import RunInfo, Store
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.dtypes import get_dtype
from gpuplan.core.errors import UserInputError
from gpuplan.core.perf.engine_profiles import get_engine
from gpuplan.usecases.results_report.model import CDF_POINTS, Curve, Deployment, Report, RunView
from gpuplan.usecases.results_report.predict import predict_curve

__all__ = ["DEPLOYMENT_KEYS", "HOW_TO_ADD", "build_report", "deployment_flags"]

DEPLOYMENT_KEYS = ("gpu", "model", "tp", "engine", "weight_dtype")
HOW_TO_ADD = (
    "pass the deployment behind the endpoint to the report: "
    "--gpu GPU --model HF_ID [--tp N --engine vllm --weight-dtype bf16]"
)


def deployment_flags(
    *, gpu: str | None, model: str | None, tp: int | None, engine: str | None, weight_dtype: str | None
) -> dict[str, Any]:
    """The report's deployment flags as a mapping of the ones given."""
    given = {"gpu": gpu, "model": model, "tp": tp, "engine": engine, "weight_dtype": weight_dtype}
    return {k: v for k, v in given.items() if v is not None}


def _deployment(run: RunInfo, flags: Mapping[str, Any]) -> dict[str, Any]:
    recorded = dict(run.conditions.get("deployment") or {}) | dict(run.config.get("deployment") or {})
    dep = {k: v for k, v in recorded.items() if k in DEPLOYMENT_KEYS and v not in (None, "")} | dict(flags)
    if dep.get("gpu") and not dep.get("model"):
        dep["model"] = run.config.get("model")  # the served name: often the Hugging Face id (vLLM's default)
    return dep


def _mode_and_load(run: RunInfo) -> tuple[str, float | None]:
    summary, config = run.summary or {}, run.config
    mode = str(summary.get("mode") or ("concurrency" if config.get("concurrency") else "rate"))
    if mode == "rate":
        achieved = summary.get("achieved_rate")
        return mode, float(achieved) if isinstance(achieved, int | float) else None
    if mode == "concurrency":
        return mode, float(config["concurrency"])
    return mode, None


def _cdf(values: Sequence[float]) -> tuple[float, ...]:
    """Sorted values, or ``CDF_POINTS`` evenly spaced quantiles of them when there are more."""
    if len(values) <= CDF_POINTS:
        return tuple(sorted(values))
    return tuple(float(v) for v in np.quantile(np.asarray(values), np.linspace(0, 1, CDF_POINTS)))


def _run(store: Store, run_id: str, listing: str) -> RunInfo:
    """The run ``run_id`` names; a bad id: one line with the command that lists the ids."""
    try:
        return store.run(run_id)
    except UserInputError as exc:
        raise UserInputError(exc.message, hint=f"see the ids with {listing}") from None


def _load_runs(
    store: Store, run_ids: Sequence[str], listing: str = "gpuplan results list"
) -> tuple[list[RunInfo], list[str]]:
    """The distinct runs named (a bad id: one line naming ``gpuplan results list``), and notes on the
    unfinished ones left out."""
    if not run_ids:
        raise UserInputError("give one or more run ids", hint=f"see them with {listing}")
    runs: dict[str, RunInfo] = {}
    notes: list[str] = []
    for rid in run_ids:
        info = _run(store, rid, listing)
        if info.kind != "serve":
            raise UserInputError(
                f"run {rid!r} is a {info.kind} run; results report compares bench serve runs",
                hint=f"see the serve runs with {listing}",
            )
        if info.summary is None:
            notes.append(f"run {info.run_id[:12]} ({info.status}) has no summary yet and is left out")
            continue
        runs.setdefault(info.run_id, info)
    if not runs:
        raise UserInputError("none of the runs named has finished", hint=f"see {listing}")
    return list(runs.values()), notes


def _curve_label(run: RunInfo, mode: str, dep: Mapping[str, Any]) -> str:
    cfg = run.config
    where = f"{dep['gpu']} tp{dep.get('tp', 1)}" if dep.get("gpu") else "deployment not recorded"
    return f"{cfg.get('model')} {cfg.get('input_tokens')}->{cfg.get('output_tokens')} tokens, {mode}, {where}"


def _curve_key(view: RunView) -> tuple[object, ...]:
    """What the runs of one curve share: everything but the load."""
    cfg = view.run.config
    target = view.run.conditions.get("target") or cfg.get("url")
    return (
        cfg.get("model"),
        cfg.get("api"),
        target,
        cfg.get("input_tokens"),
        cfg.get("output_tokens"),
        view.mode,
    )


def _distinct(views: Sequence[RunView]) -> list[RunView]:
    """The views with labels that tell their curves apart: a label two curves share gets a number,
    the API and the target."""
    keys = [(*_curve_key(v), v.deployment) for v in views]
    by_label: dict[str, list[tuple[object, ...]]] = {}
    for view, key in zip(views, keys, strict=True):
        shared = by_label.setdefault(view.curve, [])
        if key not in shared:
            shared.append(key)
    found = []
    for view, key in zip(views, keys, strict=True):
        shared = by_label[view.curve]
        if len(shared) > 1:
            suffix = f" #{shared.index(key) + 1} ({key[1]} at {key[2]})"
            view = dataclasses.replace(view, curve=view.curve + suffix)
        found.append(view)
    return found


def _view(store: Store, run: RunInfo, dep: Mapping[str, Any], known: Deployment | None) -> RunView:
    mode, load = _mode_and_load(run)
    latest = {r.index: r for r in sorted(store.records(run.run_id), key=lambda r: r.done_s)}
    ok = [r for r in latest.values() if r.ok and not r.warmup]
    return RunView(
        run=run,
        mode=mode,
        load=load,
        ttft_cdf_ms=_cdf([r.ttft_ms for r in ok if r.ttft_ms is not None]),
        tpot_cdf_ms=_cdf([r.tpot_ms for r in ok if r.tpot_ms is not None]),
        deployment=known,
        curve=_curve_label(run, mode, dep),
    )


def _known(dep: Mapping[str, Any]) -> Deployment | None:
    if not dep.get("gpu") or not dep.get("model"):
        return None
    return Deployment(**{k: dep[k] for k in DEPLOYMENT_KEYS if k in dep})


def _group(views: Sequence[RunView]) -> list[Curve]:
    by_label: dict[str, list[RunView]] = {}
    for view in views:
        if view.load is not None:
            by_label.setdefault(view.curve, []).append(view)
    return [
        Curve(
            label, members[0].mode, tuple(sorted(members, key=lambda v: v.load or 0.0)), members[0].deployment
        )
        for label, members in by_label.items()
    ]


def _missing_notes(views: Sequence[RunView]) -> list[str]:
    notes = [
        f"run {v.run.run_id[:12]} ({v.mode}) has no load to plot against; it is in the tables and CDFs"
        for v in views
        if v.load is None
    ]
    unknown = [v.run.run_id[:12] for v in views if v.deployment is None]
    if unknown:
        notes.append(
            f"run{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} record{'' if len(unknown) > 1 else 's'} "
            f"no GPU or model of the server, so no predicted curve is drawn for them; {HOW_TO_ADD}"
        )
    return notes


def _known_model(name: str) -> str:
    get_model(name)  # an unknown id fails here, with the registry's hint
    return name


def _checked_flags(flags: dict[str, Any], catalog: Catalog) -> dict[str, Any]:
    """The deployment flags, each checked (a bad one: a one-line error naming its flag), in the names
    the simulator reads (the GPU's catalog id, the engine's and dtype's canonical names)."""
    checks: dict[str, Callable[[str], str]] = {
        "gpu": lambda name: catalog.get_gpu(name).id,
        "engine": lambda name: str(get_engine(name).name),
        "weight_dtype": lambda name: get_dtype(name).name,
        "model": _known_model,
    }
    if "tp" in flags and int(flags["tp"]) < 1:
        raise UserInputError(f"--tp must be >= 1, got {flags['tp']}", hint="e.g. --tp 1")
    checked = dict(flags)
    for key, check in checks.items():
        if key in flags:
            try:
                checked[key] = check(str(flags[key]))
            except UserInputError as exc:
                raise UserInputError(f"--{key.replace('_', '-')}: {exc.message}", hint=exc.hint) from None
    return checked


def build_report(
    store_url: str | None,
    run_ids: Sequence[str],
    catalog: Catalog,
    *,
    deployment: Mapping[str, Any] | None = None,
    cal: Calibration | None = None,
) -> Report:
    """The report of ``run_ids`` (ids or unique prefixes) in the store; ``deployment``: the flags
    (gpu, model, tp, engine, weight_dtype) that override what the runs record."""
    flags = _checked_flags(dict(deployment or {}), catalog)
    store = Store(store_url)
    listing = "gpuplan results list" + (f" --store {store.display_url}" if store_url else "")
    runs, notes = _load_runs(store, run_ids, listing)
    views = []
    for run in runs:
        dep = _deployment(run, flags)
        views.append(_view(store, run, dep, _known(dep)))
    views = _distinct(views)
    notes += _missing_notes(views)
    curves: list[Curve] = []
    for curve in _group(views):
        predicted, why = predict_curve(curve, catalog, cal)
        curves.append(predicted)
        if why:
            notes.append(why)
    with_prediction = {v.run.run_id: v for c in curves for v in c.runs}
    final = tuple(with_prediction.get(v.run.run_id, v) for v in views)
    return Report(runs=final, curves=tuple(curves), notes=tuple(notes))
