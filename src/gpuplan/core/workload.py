"""What a deployment is asked to do (a :class:`Workload`), the one vocabulary of ``predict``, the
target of ``recommend`` and of a fleet's classes, and the ``workload:`` section of a scenario document.

A workload is a scenario kind, each request's prompt and answer lengths, and the load the kind reads
(``perf/scenarios.py`` and ``perf/closed_loop.py`` price each kind):

* ``concurrency``: a closed loop of ``concurrency`` requests in flight;
* ``rate``: open-loop arrivals at ``rate_rps`` requests/s;
* ``static_batch``: ``batch_size`` identical requests prefilled and decoded together;
* ``single`` (one request at a time) and ``offline`` (every request available at once): no load.

A workload built in code gives exactly the load field its kind reads. A workload **as written** in a
scenario document (:meth:`Workload.as_written`) need not: one document serves ``predict`` (which reads
its kind's load, one request per replica when it is left out), ``recommend`` (which reads ``rate_rps``
or ``concurrency`` whatever the kind, :meth:`Workload.serving_target`) and ``fit`` (neither). What a
user writes meets tighter rules than what code builds: a prompt of at least one token (the
validation data's decode-speed rows have none), whole numbers of requests in flight or in a batch
(code splits them over replicas) and at most :data:`MAX_WRITTEN_RATE_RPS` requests/s.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticKnownError

from gpuplan.core.frozen import FiniteModel

ScenarioKind = Literal["offline", "concurrency", "single", "static_batch", "rate"]
LOAD_FIELDS = ("concurrency", "batch_size", "rate_rps")
LOAD_OF_KIND: dict[str, str | None] = {
    "concurrency": "concurrency",
    "rate": "rate_rps",
    "static_batch": "batch_size",
    "single": None,
    "offline": None,
}
"""The one load field each kind reads (None: the kind reads no load)."""
SERVING_KINDS = ("rate", "concurrency")
"""The kinds of a serving target (``recommend``, fleet classes): open loop or closed loop."""
ONE_SERVING_LOAD = "give exactly one of rate_rps (requests/s) or concurrency (requests in flight)"
"""The rule of a serving target's load, worded as ``recommend`` has always worded it."""

MAX_TOKENS = 10_000_000
"""Sanity cap on a prompt or an answer (the bound every workload type always had): longer is a typo."""
MAX_REQUESTS = 10_000_000
"""Sanity cap on requests in flight or in a static batch (the bound every workload type always had)."""
MAX_RATE_RPS = 10_000_000
"""Cap on an arrival rate built in code (per-replica probe loads of recommend's search)."""
MAX_WRITTEN_RATE_RPS = 1_000_000
"""Cap on an arrival rate a user writes (the bound scenario files and recommend's target always had)."""
MIN_WRITTEN_INPUT_TOKENS = 1
"""A prompt a user writes has a token; 0 (decode only) is for code, e.g. decode-speed validation rows."""
_AS_WRITTEN = "workload as written"
"""The validation-context key of :meth:`Workload.as_written`."""
_WHOLE_NUMBER = TypeAdapter(int)


def _written(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get(_AS_WRITTEN))


class Workload(FiniteModel):
    """The scenario kind, each request's lengths, and the load (module docstring)."""

    scenario: ScenarioKind = "concurrency"
    input_tokens: int = Field(
        le=MAX_TOKENS, description="prompt tokens per request: >= 0 (0: decode only), >= 1 as written"
    )
    output_tokens: int = Field(ge=1, le=MAX_TOKENS)
    concurrency: float | None = Field(default=None, ge=1, le=MAX_REQUESTS, description="requests in flight")
    batch_size: float | None = Field(default=None, ge=1, le=MAX_REQUESTS, description="static batch size")
    rate_rps: float | None = Field(
        default=None,
        gt=0,
        description=f"open-loop arrival rate: <= {MAX_RATE_RPS:,}, <= {MAX_WRITTEN_RATE_RPS:,} as written",
    )
    prefix_cache_hit_rate: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="share of each prompt found in the prefix cache: only the rest is computed, attending "
        "over the whole prompt; KV is still counted for the whole prompt (perf/prefix_cache.py)",
    )

    @classmethod
    def as_written(cls, data: Any) -> Workload:
        """A scenario document's ``workload:`` mapping: the kind's load may be left out and loads the
        kind does not read may be given; the sanity caps of user input apply (module docstring)."""
        return cls.model_validate(data, context={_AS_WRITTEN: True})

    @field_validator("input_tokens")
    @classmethod
    def _prompt_floor(cls, tokens: int, info: ValidationInfo) -> int:
        floor = MIN_WRITTEN_INPUT_TOKENS if _written(info) else 0
        if tokens < floor:
            raise PydanticKnownError("greater_than_equal", {"ge": floor})
        return tokens

    @field_validator("concurrency", "batch_size", mode="before")
    @classmethod
    def _whole_as_written(cls, count: Any, info: ValidationInfo) -> Any:
        """Requests a user writes are whole (code splits them over replicas into fractions)."""
        if not _written(info) or count is None or isinstance(count, bool):
            return count  # a boolean is refused by FrozenModel's own check
        return _WHOLE_NUMBER.validate_python(count)

    @field_validator("rate_rps")
    @classmethod
    def _rate_cap(cls, rate_rps: float | None, info: ValidationInfo) -> float | None:
        cap = MAX_WRITTEN_RATE_RPS if _written(info) else MAX_RATE_RPS
        if rate_rps is not None and rate_rps > cap:
            raise PydanticKnownError("less_than_equal", {"le": cap})
        return rate_rps

    @model_validator(mode="wrap")
    @classmethod
    def _load_of_kind(cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo) -> Self:
        """Exactly the kind's load, unless as written; a Workload given where one is expected (a field of
        another model) was checked when it was built, as written or not."""
        if isinstance(data, cls):
            return data
        workload = handler(data)
        problem = None if _written(info) else workload.load_problem()
        if problem is not None:
            raise ValueError(problem)
        return workload

    @property
    def load_field(self) -> str | None:
        """The load field this kind reads (None for ``single`` and ``offline``)."""
        return LOAD_OF_KIND[self.scenario]

    def load_problem(self) -> str | None:
        """Why the loads given are not exactly the one this kind reads; None when they are (a workload
        built in code always is; one as written need not be)."""
        given = tuple(name for name in LOAD_FIELDS if getattr(self, name) is not None)
        if given == ((self.load_field,) if self.load_field else ()):
            return None
        if self.scenario in SERVING_KINDS and len({"rate_rps", "concurrency"} & set(given)) != 1:
            return ONE_SERVING_LOAD
        return f"scenario '{self.scenario}' reads {self.load_field or 'no load'}; given: {', '.join(given) or 'none'}"

    def serving_target(self) -> Workload:
        """The target ``recommend`` sizes for this (as written) workload: its ``rate_rps`` (kind ``rate``)
        or its ``concurrency`` (kind ``concurrency``), whatever kind it names; ValidationError
        (:data:`ONE_SERVING_LOAD`) unless it gives exactly one of them."""
        return Workload(
            scenario="rate" if self.rate_rps is not None else "concurrency",
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            rate_rps=self.rate_rps,
            concurrency=self.concurrency,
            prefix_cache_hit_rate=self.prefix_cache_hit_rate,
        )
