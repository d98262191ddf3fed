"""One measured request, as the load tester records it and the results store keeps it.

Times are seconds on the run's clock (0 = the schedule's origin); latencies are milliseconds.
``ttft_ms``/``e2e_ms`` are measured from the actual send, ``*_sched_ms`` from the scheduled send
(the same in closed loop), so a client that falls behind its schedule cannot pass for a fast server.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RequestRecord(BaseModel):
    """A request's schedule, timings, token counts and outcome (``error`` is None when it succeeded)."""

    model_config = ConfigDict(frozen=True)

    index: int
    scheduled_s: float
    sent_s: float
    done_s: float
    warmup: bool = False
    status: int | None = None
    error: str | None = None
    error_detail: str | None = None
    ttft_ms: float | None = None
    ttft_sched_ms: float | None = None
    e2e_ms: float | None = None
    e2e_sched_ms: float | None = None
    tpot_ms: float | None = None
    itl_ms: tuple[float, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    usage_reported: bool = False
    finish_reason: str | None = None
    """The stream's last ``finish_reason`` (``length``: stopped at ``max_tokens``; ``stop``: an EOS or stop
    string came first); None when the server sent none (or on a stored run from before it was kept)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def send_lag_ms(self) -> float:
        """How far behind its schedule the client sent this request."""
        return (self.sent_s - self.scheduled_s) * 1e3
