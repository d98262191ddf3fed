"""Latency limits (an SLA), the one vocabulary of every path that checks latency against a limit.

TTFT, TPOT and E2E are defined in docs/metrics.md (TPOT excludes the first token). An ``Sla`` holds
limits on their steady-state **means** (``ttft_ms``, ``tpot_ms``: what ``predict`` and the analytic
``recommend`` compute) and on their **P99s** (``ttft_p99_ms``, ``tpot_p99_ms``, ``e2e_p99_ms``: what
the serving simulator measures, docs/metrics.md "Percentiles"). Goodput (docs/metrics.md "Goodput")
counts a request when its own latencies are within the P99 limits, the per-request test behind them.

Each path checks the limits it can compute: ``recommend`` the means and the TTFT/TPOT P99s, ``simulate``
and its capacity search the P99s, a fleet's classes the means, the load tester's goodput the TTFT/TPOT
P99s per request. A document section refuses a limit its path does not check before it reads any
value, at the limit's own path and in the words of an unknown key (:func:`refuse_unchecked`).

The caps (``MAX_*_MS``) bound every limit a user writes; a limit read back from a stored run keeps the
value it was stored with (:meth:`Sla.as_recorded`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic import Field, ValidationError, ValidatorFunctionWrapHandler
from pydantic_core import InitErrorDetails, PydanticCustomError

from gpuplan.core.frozen import FiniteModel

MAX_TTFT_MS = 3_600_000
"""Sanity cap on a TTFT limit (one hour, the bound ``recommend`` always had): a larger one is a typo."""
MAX_TPOT_MS = 600_000
"""Sanity cap on a TPOT limit (ten minutes per token, the bound ``recommend`` always had)."""
MAX_E2E_MS = 86_400_000
"""Sanity cap on an end-to-end limit: one day (24 h in ms), the longest load test ``bench serve
--duration`` accepts (86,400 s). It leaves room for a TTFT at its cap (1 h) and a long answer after
it; a larger limit is a typo, as a larger TTFT or TPOT limit is."""
MEAN_LIMITS = ("ttft_ms", "tpot_ms")
P99_LIMITS = ("ttft_p99_ms", "tpot_p99_ms", "e2e_p99_ms")
EXTRA_INPUT = "Extra inputs are not permitted"
"""Pydantic's words for an unknown key (``extra_forbidden``): a limit a path does not check reads as one."""


class Sla(FiniteModel):
    """Latency limits in ms, each optional (``None`` = not constrained), finite, > 0 and within its cap.

    Means: ``ttft_ms``, ``tpot_ms``; P99s: ``ttft_p99_ms``, ``tpot_p99_ms``, ``e2e_p99_ms``
    (definitions: docs/metrics.md)."""

    ttft_ms: float | None = Field(default=None, gt=0, le=MAX_TTFT_MS, description="limit on mean TTFT (ms)")
    tpot_ms: float | None = Field(default=None, gt=0, le=MAX_TPOT_MS, description="limit on mean TPOT (ms)")
    ttft_p99_ms: float | None = Field(
        default=None, gt=0, le=MAX_TTFT_MS, description="limit on P99 TTFT (ms)"
    )
    tpot_p99_ms: float | None = Field(
        default=None, gt=0, le=MAX_TPOT_MS, description="limit on P99 TPOT (ms)"
    )
    e2e_p99_ms: float | None = Field(
        default=None, gt=0, le=MAX_E2E_MS, description="limit on P99 end-to-end latency (ms)"
    )

    @property
    def given(self) -> tuple[str, ...]:
        """The names of the limits set, in field order."""
        return tuple(name for name in (*MEAN_LIMITS, *P99_LIMITS) if getattr(self, name) is not None)

    @property
    def has_means(self) -> bool:
        """Whether a limit on a mean (``ttft_ms``, ``tpot_ms``) is set."""
        return self.ttft_ms is not None or self.tpot_ms is not None

    @property
    def has_percentiles(self) -> bool:
        """Whether a P99 limit is set (these need the serving simulator)."""
        return self.ttft_p99_ms is not None or self.tpot_p99_ms is not None or self.e2e_p99_ms is not None

    @property
    def empty(self) -> bool:
        """No limit at all."""
        return not self.given

    @classmethod
    def as_recorded(cls, **limits: float | None) -> Sla:
        """Limits read back from a stored record, with the values it was stored with: every rule but the
        caps applies. A run stored before the caps existed may hold a larger limit, and must resume
        judging its requests as it began (a capped copy would move its goodput)."""
        capped = {name: None if v is None else min(v, _CAPS_MS[name]) for name, v in limits.items()}
        return cls.model_validate(capped).model_copy(update=limits)


_CAPS_MS = {
    "ttft_ms": MAX_TTFT_MS,
    "tpot_ms": MAX_TPOT_MS,
    "ttft_p99_ms": MAX_TTFT_MS,
    "tpot_p99_ms": MAX_TPOT_MS,
    "e2e_p99_ms": MAX_E2E_MS,
}
"""Each limit's cap (the ``le`` bounds of the fields above), by name: also the names a section may refuse."""


def refuse_unchecked(value: Any, handler: ValidatorFunctionWrapHandler, checked: Collection[str]) -> Sla:
    """The body of a section's wrap validator: the section as an ``Sla`` when every limit it sets is
    among ``checked`` (the limits its path checks). Otherwise each other limit is refused as an
    unknown key is, at its own path ("sla.e2e_p99_ms: Extra inputs are not permitted"), before its
    value is read, and together with the errors of the other keys: a limit the path does not check
    must not pass silently, and its value is not the problem."""
    if isinstance(value, Sla):
        refused = {name: getattr(value, name) for name in value.given if name not in checked}
        rest: Any = value.model_copy(update=dict.fromkeys(refused))
    elif isinstance(value, dict):
        refused = {k: v for k, v in value.items() if k in _CAPS_MS and k not in checked}
        rest = {k: v for k, v in value.items() if k not in refused}
    else:
        return handler(value)  # type: ignore[no-any-return]
    if not refused:
        return handler(value)  # type: ignore[no-any-return]
    try:
        handler(rest)
        errors: list[Any] = []
    except ValidationError as exc:
        errors = exc.errors()
    errors += [
        {"type": "extra_forbidden", "loc": (k,), "msg": EXTRA_INPUT, "input": v} for k, v in refused.items()
    ]
    raise ValidationError.from_exception_data(Sla.__name__, [_as_detail(e) for e in _in_order(errors, value)])


def _in_order(errors: list[Any], value: Any) -> list[Any]:
    """As a strict section reports them: the fields' errors first, then the unknown keys as written."""
    keys = list(value) if isinstance(value, dict) else list(_CAPS_MS)
    unknown = [e for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
    rest = [e for e in errors if e not in unknown]
    return rest + sorted(unknown, key=lambda e: keys.index(e["loc"][0]) if e["loc"][0] in keys else len(keys))


def _as_detail(error: Any) -> InitErrorDetails:
    """One reported error, re-raised as it was worded (its type kept, its message as written)."""
    return InitErrorDetails(
        type=PydanticCustomError(error["type"], error["msg"]), loc=tuple(error["loc"]), input=error["input"]
    )
