"""What ``gpuplan results report`` shows: runs, their curves by load, the predicted points (data only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplan.adapters.store.database import RunInfo

LATENCIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
"""The latencies plotted against load (the stored summary's keys)."""
CDF_POINTS = 400
"""Quantiles kept per run for its CDF: a 100,000-request run would otherwise put every request in the page."""


@dataclass(frozen=True)
class Deployment:
    """The server's hardware and model as the simulator reads them."""

    gpu: str
    model: str
    tp: int = 1
    engine: str = "vllm"
    weight_dtype: str = "bf16"

    @property
    def label(self) -> str:
        return f"{self.model} on {self.tp}x {self.gpu} ({self.engine}, {self.weight_dtype})"


@dataclass(frozen=True)
class Predicted:
    """The simulated deployment at one load: ``latency_ms[metric][stat]``, throughput."""

    load: float
    latency_ms: dict[str, dict[str, float | None]]
    output_tokens_per_s: float
    requests_per_s: float


@dataclass(frozen=True)
class RunView:
    """One stored run as the report shows it: its load, its CDF quantiles, its deployment if known
    and the prediction at its own load."""

    run: RunInfo
    mode: str
    load: float | None
    ttft_cdf_ms: tuple[float, ...]
    tpot_cdf_ms: tuple[float, ...]
    deployment: Deployment | None
    curve: str
    predicted: Predicted | None = None

    @property
    def summary(self) -> dict[str, Any]:
        return self.run.summary or {}

    def measured(self, key: str, stat: str | None = None) -> float | None:
        """A value of the stored summary (``ttft_ms``/``p99``, ``output_tokens_per_s``)."""
        value = self.summary.get(key)
        if stat is not None:
            value = value.get(stat) if isinstance(value, dict) else None
        return float(value) if isinstance(value, int | float) else None


@dataclass(frozen=True)
class Curve:
    """Runs that differ only in load, and the deployment's predicted curve over their loads."""

    label: str
    mode: str
    runs: tuple[RunView, ...]
    deployment: Deployment | None
    predicted: tuple[Predicted, ...] = ()


@dataclass(frozen=True)
class Report:
    """Everything the report shows; ``notes``: what is missing and how to add it."""

    runs: tuple[RunView, ...]
    curves: tuple[Curve, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def modes(self) -> tuple[str, ...]:
        """The load axes present (``rate``, ``concurrency``), in that order."""
        return tuple(m for m in ("rate", "concurrency") if any(c.mode == m for c in self.curves))
