"""Request and response bodies of the web API that the CLI has no model for.

Requests reuse the CLI's models: a recommend or predict body is a scenario document
(:class:`ScenarioFile`, as in a scenario YAML) with an optional pasted ``config_json``; a fit body
has the fields of ``gpuplan fit``'s flags. Responses are the CLI's ``--format json`` models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gpuplan.adapters.scenario_files.deployment import ScenarioFile
from gpuplan.core.calibration.error_model import MAX_LEVEL, MIN_LEVEL
from gpuplan.core.calibration.uncertainty import Bounds
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.recommend.request import Recommendation
from gpuplan.core.sim.capacity import CapacityResult
from gpuplan.core.sim.metrics import SimSummary
from gpuplan.interfaces.plots.serving import CostAxis, LatencyAxis, PlanLatency
from gpuplan.usecases.recommend import ScalingPoint
from gpuplan.usecases.train import TrainMemoryBar, TrainPlanResult

CONFIG_JSON_DESCRIPTION = (
    "a Hugging Face config.json pasted as an object; when given it defines the model and "
    "`model` only names it"
)


class WebScenario(ScenarioFile):
    """A scenario document (docs/scenarios.md) as JSON, optionally with the model's config.json."""

    config_json: dict[str, Any] | None = Field(default=None, description=CONFIG_JSON_DESCRIPTION)
    confidence: float | None = Field(
        default=None,
        ge=MIN_LEVEL,
        le=MAX_LEVEL,
        description="recommend: size every plan at this quantile of the error model, as `recommend "
        "--confidence` (0.5-0.99); null: the point estimate",
    )


class FitRequest(FrozenModel):
    """The flags of ``gpuplan fit``."""

    model: str = Field(description="bundled model id or alias (see /api/models)")
    gpu: str = Field(description="GPU id (see /api/gpus)")
    count: int = Field(default=1, description="GPUs in the replica")
    tp: int | None = Field(default=None, description="tensor parallel (default: count / pp)")
    pp: int = 1
    dtype: str = Field(default="bf16", description="weight dtype")
    kv_dtype: str | None = Field(default=None, description="KV-cache dtype (default: follows weights)")
    engine: str = "vllm"
    context: int | None = Field(default=None, description="tokens per request (max_model_len)")
    utilization: float | None = Field(default=None, description="gpu_memory_utilization")
    config_json: dict[str, Any] | None = Field(default=None, description=CONFIG_JSON_DESCRIPTION)


class TrainPlanBody(FrozenModel):
    """The flags of ``gpuplan train-plan``; turned into the CLI's TrainPlanRequest the way the CLI does.

    Values are checked there (not here), so a bad value gets the CLI's own message; only a boolean in a
    number field is refused here (``gpuplan.core.frozen``).
    """

    model: str = Field(description="bundled model id or alias (see /api/models)")
    seq_len: int = Field(description="tokens per sequence")
    method: str = Field(default="full", description="full | lora | qlora | pretrain")
    tokens: float | None = Field(default=None, allow_inf_nan=False, description="tokens to train on")
    epochs: float | None = Field(
        default=None, allow_inf_nan=False, description="epochs over `samples` sequences (instead of tokens)"
    )
    samples: int | None = Field(default=None, description="sequences in the dataset")
    global_batch: int = Field(default=256, description="sequences per optimizer step")
    dtype: str = Field(default="bf16", description="bf16 | fp8 | fp4")
    gpus: list[str] | None = Field(default=None, description="GPU ids (default: all)")
    max_gpus: int = Field(default=64, description="largest GPU count to try (web limit 256)")
    deadline_hours: float | None = Field(default=None, allow_inf_nan=False, description="wall-time limit")
    objective: str = Field(default="time", description="time | cost")
    provider: str | None = Field(
        default=None, description="price every GPU from this provider's quotes only (train-plan's --provider)"
    )
    price_basis: str | None = Field(
        default=None,
        description="market-median (default), hyperscaler, specialist or marketplace (train-plan's --price-basis)",
    )


class SearchBound(FrozenModel):
    """The limits the web API puts on one recommend search (also in the X-Gpuplan-Search-Bound header)."""

    max_gpus_requested: int
    max_gpus_searched: int = Field(description="min(requested, max_gpus_limit)")
    max_gpus_limit: int
    time_limit_s: float
    clamped: bool


class ApiError(FrozenModel):
    """Every 4xx/5xx body: the CLI's one-line message, and the input it is about when known."""

    error: str = Field(description="the message the CLI prints after 'error: '")
    field: str | None = Field(
        default=None, description="dotted path of the input at fault (workload.input_tokens), or the id kind"
    )
    exit_code: int | None = Field(default=None, description="the CLI's exit code for the same input")


class RecommendPlots(FrozenModel):
    """What the page shows: the recommendation, the bound the search ran under, and the figures."""

    recommendation: Recommendation
    search: SearchBound
    scaling: list[ScalingPoint]
    cost_axis: CostAxis
    latency_axis: LatencyAxis
    latency_statistic: Literal["mean", "p99"] = Field(
        description="what the table's latency columns and the chart's latency axis both show: the statistic "
        "the plans were sized on"
    )
    latency_field: PlanLatency = Field(description="the plan field on the chart's latency axis")
    figures: dict[str, dict[str, Any]] = Field(description="plotly figure JSON: pareto, memory, throughput")


class TrainPlots(FrozenModel):
    """The page's training view: the train-plan answer, the search bound, memory by part, the figures."""

    result: TrainPlanResult
    search: SearchBound
    memory: list[TrainMemoryBar] = Field(description="memory by part of one GPU of the top plans")
    figures: dict[str, dict[str, Any]] = Field(description="plotly figure JSON: pareto, memory")


class SimulateResponse(FrozenModel):
    """``gpuplan simulate --format json``: the summary, and the capacity when the scenario asked for it."""

    summary: SimSummary
    capacity: CapacityResult | None
    interval: Bounds | None = None
