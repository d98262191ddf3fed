"""What one serving load test does: target, load profile, workload, goodput limits (frozen, validated)."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

import httpx
from pydantic import Field, model_validator

from gpuplan.core.frozen import FrozenModel
from gpuplan.core.sla import MAX_TPOT_MS, MAX_TTFT_MS, Sla

MAX_RATE_RPS = 100_000.0
"""Sanity cap on the offered rate: one client process holds about 1,000 req/s on 2 cores
(docs/bench.md); a larger number is a typo, and would build a schedule of billions of requests."""
MAX_CONCURRENCY = 100_000
"""Sanity cap on closed-loop clients (each is a coroutine and a connection)."""
Arrival = Literal["poisson", "constant", "gamma"]
Api = Literal["completions", "chat"]


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
        default=None, gt=0, le=MAX_TTFT_MS, description="goodput: TTFT from the scheduled send within this"
    )
    slo_tpot_ms: float | None = Field(
        default=None, gt=0, le=MAX_TPOT_MS, description="goodput: TPOT within this"
    )
    max_requests: int = Field(default=10_000_000, ge=1, description="hard bound on requests sent")
    trace_path: str | None = Field(default=None, description="CSV/JSONL trace replayed open loop")
    prompts_path: str | None = Field(default=None, description="JSONL prompts, used in turn")
    workers: int = Field(default=1, ge=1, le=64, description="client processes sharing the schedule")
    metrics_url: str | None = Field(default=None, description="Prometheus /metrics scraped before and after")

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
        ``bench serve --format json`` shape."""
        return Sla(ttft_p99_ms=self.slo_ttft_ms, tpot_p99_ms=self.slo_tpot_ms)

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
