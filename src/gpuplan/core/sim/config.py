"""Knobs of the simulated serving engine, as frozen models (its latency limits: ``gpuplan.core.sla``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuplan.core.frozen import FiniteModel

DEFAULT_MAX_EVENTS = 5_000_000
"""Hard cap on simulated events (arrivals + engine steps + KV hand-offs): about a minute of CPU on a
2-core machine at the measured ~150 k events/s (benchmarks/bench_simulator.py), less with few,
large batches; raise ``max_events`` for longer runs."""
DEFAULT_MAX_SIM_TIME_S = 7 * 24 * 3600.0
"""Hard cap on simulated time (one week): any workload still running by then is overloaded."""


class Disaggregation(FiniteModel):
    """Separate prefill and decode pools (DistServe, Zhong et al. 2024; Mooncake; DeepSeek-V3 serving).

    The prefill pool computes prompts and the first token, then ships the KV to a decode replica over
    ``kv_transfer_bytes_per_s`` (default: the GPU's scale-out/PCIe link from the catalog)."""

    prefill_replicas: int = Field(ge=1, le=10_000)
    decode_replicas: int = Field(ge=1, le=10_000)
    kv_transfer_bytes_per_s: float | None = Field(default=None, gt=0)


class SimConfig(FiniteModel):
    """Scheduler settings; ``None`` means the engine default (``ENGINE_PROFILES``, ``core/perf/engine_profiles.py``)."""

    max_num_seqs: int | None = Field(default=None, ge=1, le=1_000_000)
    max_batched_tokens: int | None = Field(default=None, ge=1, le=10_000_000)
    block_size_tokens: int | None = Field(default=None, ge=1, le=4096)
    chunked_prefill: bool | None = Field(
        default=None,
        description="None: the engine's own (chunked, but whole prompts for vLLM V0 on MLA models)",
    )
    prefix_cache_hit_rate: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="share of prompt tokens found cached; at least 1 token is computed",
    )
    preemption: Literal["recompute", "swap"] = "recompute"
    kv_reservation: Literal["full", "current"] | None = Field(
        default=None, description="'full' reserves prompt + whole answer at admission (no preemption)"
    )
    router: Literal["round_robin", "least_loaded"] = "least_loaded"
    disaggregation: Disaggregation | None = None
    warmup_fraction: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="share of the first-arriving requests left out of the metrics",
    )
    max_events: int = Field(default=DEFAULT_MAX_EVENTS, ge=1)
    max_sim_time_s: float = Field(default=DEFAULT_MAX_SIM_TIME_S, gt=0)
    record_timeline: bool = True
