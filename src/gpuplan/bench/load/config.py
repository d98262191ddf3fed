"""What one serving load test does: target, load profile, workload, SLO (frozen, validated)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Arrival = Literal["poisson", "constant", "gamma"]
Api = Literal["completions", "chat"]


class LoadConfig(BaseModel):
    """One run of ``gpuplan bench serve``: either an open-loop ``rate_rps`` or a closed-loop ``concurrency``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(description="server base, http://host:port")
    model: str
    api: Api = "completions"
    rate_rps: float | None = Field(default=None, gt=0)
    concurrency: int | None = Field(default=None, ge=1)
    arrival: Arrival = "poisson"
    burstiness: float = Field(default=1.0, gt=0, description="gamma shape k; 1 is Poisson, < 1 burstier")
    duration_s: float = Field(gt=0, le=86_400)
    warmup_s: float = Field(default=0.0, ge=0)
    input_tokens: int = Field(ge=1, le=1_000_000)
    output_tokens: int = Field(ge=1, le=1_000_000)
    seed: int = 0
    request_timeout_s: float = Field(default=60.0, gt=0)
    slo_ttft_ms: float | None = Field(default=None, gt=0)
    slo_tpot_ms: float | None = Field(default=None, gt=0)
    max_requests: int = Field(default=10_000_000, ge=1, description="hard bound on requests sent")

    @model_validator(mode="after")
    def _one_load_profile(self) -> LoadConfig:
        if (self.rate_rps is None) == (self.concurrency is None):
            raise ValueError("give exactly one of --rate or --concurrency")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"--url {self.url!r} must start with http:// or https://")
        return self

    @property
    def open_loop(self) -> bool:
        return self.rate_rps is not None

    @property
    def endpoint(self) -> str:
        path = "/v1/completions" if self.api == "completions" else "/v1/chat/completions"
        return self.url.rstrip("/") + path
