"""The ``arrival:`` section of a serving scenario: what only ``gpuplan simulate`` reads (the arrival
process, length distributions, how many requests, the seed, a trace file), and the reading of the
older simulate documents (``slo:``, and the simulated traffic inside ``workload:``).

Every field is optional: simulate derives what is left out from the document's ``workload:``
(``usecases/simulate.py``), and ``predict`` / ``recommend`` / ``fit`` read ``workload:`` only. Parsing
is pure; the functions on raw mappings run before the document is validated.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from gpuplan.core.frozen import FiniteModel
from gpuplan.core.sim.workload import LengthDist

LEGACY_TRAFFIC_KEYS = ("arrival", "num_requests", "seed", "trace", "trace_format", "lengths_from_trace")
"""Keys of the older simulate ``workload:`` that now live in the top-level ``arrival:`` section."""
LENGTH_KEYS = ("input_tokens", "output_tokens")
SLO_RENAMED = "slo: is read as sla: (its old name in simulate documents; rename it)"
TRAFFIC_MOVED = (
    "workload.arrival, length distributions, num_requests, seed and trace are read as the top-level "
    "arrival: section (docs/simulator.md; move them there)"
)


class ArrivalSection(FiniteModel):
    """The simulator's traffic. ``kind`` (default from ``workload.scenario``: rate -> poisson,
    concurrency and single -> closed_loop, offline -> every request at t = 0); ``rate_rps`` and
    ``concurrency`` default to the workload's and, when both are given, must agree with it."""

    kind: Literal["poisson", "gamma", "closed_loop", "trace"] | None = None
    rate_rps: float | None = Field(default=None, gt=0, le=1e7)
    cv: float = Field(default=1.0, gt=0, le=100, description="gamma: coefficient of variation of the gaps")
    concurrency: int | None = Field(default=None, ge=1, le=1_000_000)
    ramp_up_s: float | None = Field(
        default=None, ge=0, le=1e7, description="closed loop: start spread (default: one request cycle)"
    )
    input_tokens: LengthDist | None = Field(default=None, description="default: fixed workload.input_tokens")
    output_tokens: LengthDist | None = Field(
        default=None, description="default: fixed workload.output_tokens"
    )
    num_requests: int | None = Field(default=None, ge=1, le=10_000_000)
    seed: int = Field(default=0, ge=0)
    trace: str | None = Field(default=None, description="CSV/JSONL of arrival_s, input_tokens, output_tokens")
    trace_format: Literal["csv", "jsonl"] | None = None
    lengths_from_trace: bool = False

    @model_validator(mode="after")
    def _kind_fits(self) -> ArrivalSection:
        if self.ramp_up_s and self.kind not in (None, "closed_loop"):
            raise ValueError(f"ramp_up_s applies to closed_loop arrivals only, not {self.kind}")
        if self.kind == "trace" and self.rate_rps is not None:
            raise ValueError("rate_rps does not apply to trace arrivals (the trace gives the times)")
        if self.kind in ("poisson", "gamma", "trace") and self.concurrency is not None:
            raise ValueError(f"concurrency applies to closed_loop arrivals only, not {self.kind}")
        return self


def upgrade_document(data: Any) -> Any:
    """A raw document in today's shape: ``slo`` becomes ``sla`` and an older simulate ``workload:``
    (arrival and distributions inside it) becomes ``arrival:`` plus a core workload whose lengths are
    the distributions' means. PydanticCustomError when the old and new names are both given."""
    if not isinstance(data, dict):
        return data
    if "slo" in data:
        if "sla" in data:
            raise PydanticCustomError(
                "sla_and_slo", "sla and slo are both given: slo is the old name of sla; keep sla only"
            )
        data = {("sla" if key == "slo" else key): value for key, value in data.items()}
    workload = data.get("workload")
    if isinstance(workload, dict) and is_legacy_workload(workload):
        if "arrival" in data:
            raise PydanticCustomError(
                "arrival_twice",
                "workload.arrival and arrival are both given: the simulator's traffic lives in arrival; "
                "keep workload to scenario, lengths and load",
            )
        data = {**data, **_split_legacy(workload)}
        if data["workload"] is None:
            del data["workload"]
    return fill_lengths(data)


def is_legacy_workload(workload: dict[Any, Any]) -> bool:
    """Whether a ``workload:`` mapping is an older simulate one (traffic keys or distributions)."""
    return any(key in workload for key in LEGACY_TRAFFIC_KEYS) or any(
        isinstance(workload.get(key), dict) for key in LENGTH_KEYS
    )


def _split_legacy(workload: dict[Any, Any]) -> dict[str, Any]:
    """An older simulate workload as (``workload``: the core one, or None for a trace; ``arrival``)."""
    process = workload.get("arrival")
    arrival: dict[Any, Any] = dict(process) if isinstance(process, dict) else {}
    if process is not None and not isinstance(process, dict):
        arrival["kind"] = process  # refused by the section's own check, at arrival.kind
    arrival.update({k: v for k, v in workload.items() if k in LEGACY_TRAFFIC_KEYS and k != "arrival"})
    lengths = {k: workload[k] for k in LENGTH_KEYS if k in workload}
    arrival.update({k: v for k, v in lengths.items() if isinstance(v, dict)})
    core = {k: v for k, v in workload.items() if k not in LEGACY_TRAFFIC_KEYS and k not in LENGTH_KEYS}
    core.update({k: v for k, v in lengths.items() if not isinstance(v, dict)})
    kind = arrival.setdefault("kind", "poisson")
    has_lengths = all(k in core or k in arrival for k in LENGTH_KEYS)
    load = {"poisson": "rate_rps", "gamma": "rate_rps", "closed_loop": "concurrency"}.get(str(kind))
    if has_lengths and load is not None and load in arrival:  # the load moves to the workload
        core.setdefault("scenario", "rate" if load == "rate_rps" else "concurrency")
        core.setdefault(load, arrival.pop(load))
    return {"workload": core if has_lengths else None, "arrival": arrival}


def fill_lengths(data: dict[Any, Any]) -> dict[Any, Any]:
    """``workload.input_tokens`` / ``output_tokens`` left out are the rounded means of the arrival
    section's distributions (what predict reads of a simulate document)."""
    workload, arrival = data.get("workload"), data.get("arrival")
    if not (isinstance(workload, dict) and isinstance(arrival, dict)):
        return data
    filled = dict(workload)
    for key in LENGTH_KEYS:
        mean = _mean_tokens(arrival.get(key))
        if key not in filled and mean is not None:
            filled[key] = max(round(mean), 1)
    return {**data, "workload": filled}


def _mean_tokens(raw: Any) -> float | None:
    """The mean of a raw length distribution, None when it is absent or invalid (its own check says why)."""
    if not isinstance(raw, dict):
        return None
    try:
        return LengthDist.model_validate(raw).mean_tokens
    except ValidationError:
        return None


def legacy_notes(data: Any) -> list[str]:
    """One deprecation note per older name a raw document uses (printed on stderr by the CLI)."""
    if not isinstance(data, dict):
        return []
    notes = [SLO_RENAMED] if "slo" in data and "sla" not in data else []
    workload = data.get("workload")
    if isinstance(workload, dict) and is_legacy_workload(workload) and "arrival" not in data:
        notes.append(TRAFFIC_MOVED)
    return notes
