"""The mock server's settings: latency profile, admission limit and fault mix (frozen, validated)."""

from __future__ import annotations

from pydantic import Field, model_validator

from gpuplan.core.frozen import FiniteModel


class MockConfig(FiniteModel):
    """What the mock does for every request.

    Each request gets at most one fault, drawn with the given probabilities (they must sum to ≤ 1):
    an HTTP 500 or 429 answer, a connection dropped after half of the tokens, a malformed SSE event
    in the middle of the stream, or headers held back by ``slow_first_byte_ms`` (the client's timeout
    decides whether that is a slow request or a timeout).

    Like ``vllm serve``: with ``api_key`` every ``/v1/*`` path needs ``Authorization: Bearer KEY`` (else
    401 ``{"error": "Unauthorized"}``, as vLLM's ``--api-key`` middleware answers); with
    ``served_model_names`` a request for another model gets vLLM's 404 (``The model `x` does not
    exist.``) and ``/v1/models`` lists those names (without any, every name is served and ``mock`` listed).
    """

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    ttft_ms: float = Field(default=50.0, ge=0)
    itl_ms: float = Field(default=10.0, ge=0)
    max_concurrency: int = Field(default=1024, ge=1, description="streams served at once; the rest queue")
    default_output_tokens: int = Field(default=16, ge=1, description="when the request sets no max_tokens")
    error_500_rate: float = Field(default=0.0, ge=0, le=1)
    error_429_rate: float = Field(default=0.0, ge=0, le=1)
    drop_rate: float = Field(default=0.0, ge=0, le=1)
    malformed_rate: float = Field(default=0.0, ge=0, le=1)
    slow_rate: float = Field(default=0.0, ge=0, le=1)
    slow_first_byte_ms: float = Field(default=0.0, ge=0)
    seed: int = 0
    retry_after_s: int | None = Field(default=None, ge=0, description="Retry-After of the 429 faults")
    api_key: str | None = Field(
        default=None, exclude=True, repr=False, description="like vllm serve --api-key: /v1/* needs it"
    )
    max_model_len: int = Field(default=4096, ge=1, description="reported in /v1/models, as vLLM does")
    eos_after_tokens: int | None = Field(
        default=None, ge=1, description="a request without ignore_eos stops here (finish_reason stop)"
    )
    served_model_names: tuple[str, ...] = Field(
        default=(), description="like vllm serve --served-model-name: others get 404; none: any name"
    )

    @model_validator(mode="after")
    def _faults_sum_to_at_most_one(self) -> MockConfig:
        if self.fault_total() > 1.0 + 1e-9:
            raise ValueError(f"fault rates sum to {self.fault_total():.3f}; they must sum to at most 1")
        return self

    def fault_total(self) -> float:
        return (
            self.error_500_rate + self.error_429_rate + self.drop_rate + self.malformed_rate + self.slow_rate
        )

    def fault_table(self) -> tuple[tuple[str, float], ...]:
        """(fault, cumulative probability) in draw order."""
        table: list[tuple[str, float]] = []
        total = 0.0
        for name, p in (
            ("500", self.error_500_rate),
            ("429", self.error_429_rate),
            ("drop", self.drop_rate),
            ("malformed", self.malformed_rate),
            ("slow", self.slow_rate),
        ):
            if p > 0:
                total += p
                table.append((name, total))
        return tuple(table)
