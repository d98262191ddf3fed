"""Which load regime a validation row was measured in, so that errors are reported where they apply.

* ``single``: one request at a time (``single``, batch or concurrency 1);
* ``saturated``: all requests at once (``offline``, ``static_batch``);
* ``constrained rate``: the highest rate meeting a P99 constraint (``server`` throughput rows);
* ``light load`` / ``near the knee``: below saturation, by the predicted utilisation of the row's run
  (served requests/s over the replica's saturation rate at the row's lengths): below
  ``KNEE_UTILISATION`` is light, above it the queue starts to matter;
* ``past saturation``: the source's notes say the point is at or above saturation (its judgement,
  not the model's), or a predicted utilisation of 1 or more.
"""

from __future__ import annotations

from typing import Literal

from gpuplan.usecases.validation.cases import Case

Regime = Literal[
    "single", "saturated", "constrained rate", "light load", "near the knee", "past saturation", "other"
]
REGIMES: tuple[Regime, ...] = (
    "single",
    "light load",
    "near the knee",
    "past saturation",
    "constrained rate",
    "saturated",
    "other",
)
KNEE_UTILISATION = 0.5
"""Utilisation above which queueing delay becomes a visible share of latency (an M/M/1 queue waits
ρ/(1−ρ) service times: one service time at ρ = 0.5)."""
PAST_SATURATION = 1.0


def past_saturation_noted(case: Case) -> bool:
    """The source's notes mark the point as at or above saturation."""
    notes = case.get("notes").lower()
    return "above saturation" in notes or "at saturation" in notes


def scenario_regime(case: Case) -> Regime | None:
    """The regime a row's scenario fixes by itself (None: it depends on the predicted utilisation)."""
    scenario = case.get("scenario")
    if past_saturation_noted(case):
        return "past saturation"
    if scenario == "single" or case.float_field("concurrency") == 1 or case.float_field("batch_size") == 1:
        return "single"
    if scenario in ("offline", "static_batch"):
        return "saturated"
    if scenario == "server" and not case.get("request_rate"):
        return "constrained rate"
    return None


def load_regime(utilisation: float) -> Regime:
    """Light, near the knee or past saturation by the served share of the saturation rate."""
    if utilisation >= PAST_SATURATION:
        return "past saturation"
    return "near the knee" if utilisation >= KNEE_UTILISATION else "light load"
