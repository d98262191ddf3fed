"""What one serving load test does: target, load profile, workload, goodput limits (frozen, validated)."""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticKnownError

from gpuplan.core.frozen import FrozenModel
from gpuplan.core.sla import MAX_TPOT_MS, MAX_TTFT_MS, Sla

MAX_RATE_RPS = 100_000.0
"""Sanity cap on the offered rate: one client process holds about 1,000 req/s on 2 cores
(docs/bench.md); a larger number is a typo, and would build a schedule of billions of requests."""
MAX_CONCURRENCY = 100_000
"""Sanity cap on closed-loop clients (each is a coroutine and a connection)."""
Arrival = Literal["poisson", "constant", "gamma"]
Api = Literal["completions", "chat"]
STORED_RUN = "stored_run"
"""Validation context key of a config read back from the store (:meth:`LoadConfig.from_stored`)."""
GOODPUT_CAPS_MS = {"slo_ttft_ms": MAX_TTFT_MS, "slo_tpot_ms": MAX_TPOT_MS}
"""The goodput limits' caps: the ``Sla`` caps of the TTFT and TPOT limits they become."""


class LoadConfig(FrozenModel):
    """One run of ``gpuplan bench serve``: an open-loop ``rate_rps``, a closed-loop ``concurrency`` or a
    ``trace_path`` replayed open loop (the simulator's trace format: arrival_s, input_tokens, output_tokens)."""

    url: str = Field(description="server base, http://host:port")
    model: str
    api: Api = "completions"
    rate_rps: float | None = Field(default=None, gt=0, le=MAX_RATE_RPS, allow_inf_nan=False)
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)
    arrival: Arrival = "poisson"
    burstiness: float = Field(default=1.0, gt=0, description="gamma shape k; 1 is Poisson, < 1 burstier")
    duration_s: float = Field(gt=0, le=86_400, allow_inf_nan=False)
    warmup_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    input_tokens: int = Field(ge=1, le=1_000_000)
    output_tokens: int = Field(ge=1, le=1_000_000)
    seed: int = 0
    request_timeout_s: float = Field(default=60.0, gt=0)
    slo_ttft_ms: float | None = Field(
        default=None, gt=0, description="goodput: TTFT from the scheduled send within this"
    )
    slo_tpot_ms: float | None = Field(default=None, gt=0, description="goodput: TPOT within this")
    max_requests: int = Field(default=10_000_000, ge=1, description="hard bound on requests sent")
    trace_path: str | None = Field(default=None, description="CSV/JSONL trace replayed open loop")
    prompts_path: str | None = Field(default=None, description="JSONL prompts, used in turn")
    workers: int = Field(default=1, ge=1, le=64, description="client processes sharing the schedule")
    metrics_url: str | None = Field(default=None, description="Prometheus /metrics scraped before and after")

    @classmethod
    def from_stored(cls, data: Any) -> LoadConfig:
        """A stored run's config, read back as it was stored: every rule but the goodput limits' caps
        applies (a run stored before the caps may hold a larger limit, and must still resume)."""
        return cls.model_validate(data, context={STORED_RUN: True})

    @field_validator("slo_ttft_ms", "slo_tpot_ms")
    @classmethod
    def _within_cap(cls, limit_ms: float | None, info: ValidationInfo) -> float | None:
        """The ``Sla`` caps, in pydantic's own words, for every config but a stored one."""
        cap_ms = GOODPUT_CAPS_MS[str(info.field_name)]
        if limit_ms is not None and limit_ms > cap_ms and not (info.context or {}).get(STORED_RUN):
            raise PydanticKnownError("less_than_equal", {"le": cap_ms})
        return limit_ms

    @model_validator(mode="after")
    def _one_load_profile(self) -> LoadConfig:
        profiles = (self.rate_rps, self.concurrency, self.trace_path)
        if sum(p is not None for p in profiles) != 1:
            raise ValueError("give exactly one of --rate, --concurrency or --trace")
        for flag, url in (("--url", self.url), ("--metrics-url", self.metrics_url)):
            if url is None:
                continue
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{flag} {url!r} must start with http:// or https://")
            try:
                httpx.URL(url)
            except httpx.InvalidURL as exc:
                raise ValueError(f"{flag} {url!r} is not a valid URL ({exc})") from None
        return self

    @property
    def goodput_sla(self) -> Sla:
        """``--slo-ttft-ms``/``--slo-tpot-ms`` as an SLA: per-request limits, so its P99 limits (a
        request counts towards goodput when its own TTFT and TPOT are within them, as in ``simulate``'s
        goodput, docs/metrics.md). The run config keeps the flat fields: they are the stored and
        ``bench serve --format json`` shape. As recorded (:meth:`Sla.as_recorded`): a stored run
        keeps the limits it began with."""
        return Sla.as_recorded(ttft_p99_ms=self.slo_ttft_ms, tpot_p99_ms=self.slo_tpot_ms)

    @property
    def open_loop(self) -> bool:
        return self.concurrency is None

    @property
    def mode(self) -> str:
        return (
            "trace" if self.trace_path is not None else "rate" if self.rate_rps is not None else "concurrency"
        )

    @property
    def path(self) -> str:
        """The request path, under the URL's own path prefix if it has one."""
        return urlsplit(self.url).path.rstrip("/") + (
            "/v1/completions" if self.api == "completions" else "/v1/chat/completions"
        )

    @property
    def endpoint(self) -> str:
        return self.url.rstrip("/") + self.path.removeprefix(urlsplit(self.url).path.rstrip("/"))
