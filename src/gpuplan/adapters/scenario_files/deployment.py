"""Scenario files: one YAML document → one validated object (model, hardware, workload, SLA, prices).

A scenario for ``predict`` names one deployment; one for ``recommend`` names the search space
instead (``hardware.gpus`` / ``max_gpus``). Errors name the file, the line (YAML syntax) or the
field path (schema), and the rule, on one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from gpuplan.adapters import yamltext
from gpuplan.adapters.scenario_files.arrival import ArrivalSection, legacy_notes, upgrade_document
from gpuplan.adapters.scenario_files.training import TrainingScenarioFile
from gpuplan.core.cost import OwnershipAssumptions
from gpuplan.core.errors import FileFormatError
from gpuplan.core.frozen import FiniteModel
from gpuplan.core.hardware import MAX_GPU_COUNT, MAX_PARALLEL_DEGREE
from gpuplan.core.perf.engine_releases import check_engine_version
from gpuplan.core.perf.kv_transfer import KvTransport
from gpuplan.core.perf.speculative import MAX_DRAFT_TOKENS, SpecMethod
from gpuplan.core.recommend.request import LAYOUT_KINDS, LayoutKind
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sla import MEAN_LIMITS, P99_LIMITS, Sla, refuse_unchecked
from gpuplan.core.workload import Workload

RECOMMEND_LIMITS = (*MEAN_LIMITS, "ttft_p99_ms", "tpot_p99_ms")
"""The ``sla:`` limits ``recommend`` sizes on: means analytically, P99s with the serving simulator."""
ALL_LIMITS = (*MEAN_LIMITS, *P99_LIMITS)
"""Every limit of the core ``Sla``: what ``simulate`` checks (means and P99s of the simulated requests)
and what ``predict`` reads a simulate document with."""
SLA_LIMITS = "sla limits"
"""The validation-context key naming the ``sla:`` limits a parse accepts."""


class HardwareSection(FiniteModel):
    gpu: str | None = Field(default=None, description="one GPU id for predict / fit")
    count: int = Field(default=1, ge=1, le=MAX_GPU_COUNT)
    gpus: list[str] | None = Field(
        default=None, description="GPU ids the recommend search may use (all if absent)"
    )
    max_gpus: int = Field(default=64, ge=1, le=4096)


class ParallelismSection(FiniteModel):
    tp: int | None = Field(default=None, ge=1, le=MAX_PARALLEL_DEGREE)
    pp: int = Field(default=1, ge=1, le=MAX_PARALLEL_DEGREE)
    ep: int = Field(default=1, ge=1, le=MAX_PARALLEL_DEGREE)
    attention_dp: int = Field(
        default=1,
        ge=1,
        le=MAX_PARALLEL_DEGREE,
        description="data-parallel attention ranks sharing one expert set (MoE; SGLang --enable-dp-attention)",
    )


class PrecisionSection(FiniteModel):
    weights: str = "bf16"
    kv_cache: str | None = None
    allowed: list[str] | None = Field(default=None, description="weight dtypes recommend may choose")


class PricesSection(FiniteModel):
    usd_per_gpu_hour: float | None = Field(default=None, gt=0)
    kind: Literal["on_demand", "spot", "reserved_1y", "reserved_3y"] = "on_demand"
    max_usd_per_hour: float | None = Field(default=None, gt=0)
    provider: str | None = Field(
        default=None, description="price every GPU from this provider's quotes only (recommend's --provider)"
    )
    basis: str | None = Field(
        default=None,
        description="price basis: market-median (default), hyperscaler, specialist or marketplace "
        "(recommend's --price-basis)",
    )


class SpeculativeSection(FiniteModel):
    """Speculative decoding (``core/perf/speculative.py``): k and α default to the method's published
    figures; ``draft_model`` (an id, resolved like ``model``) only for method ``draft``."""

    method: SpecMethod
    draft_tokens: int | None = Field(default=None, ge=1, le=MAX_DRAFT_TOKENS)
    acceptance_rate: float | None = Field(default=None, gt=0, lt=1)
    draft_model: str | None = None

    @model_validator(mode="after")
    def _draft_model_iff_draft(self) -> SpeculativeSection:
        if (self.method == "draft") != (self.draft_model is not None):
            raise ValueError("draft_model is required with method 'draft' and only with it")
        return self


class DeploymentDocument(FiniteModel):
    """The sections every serving document shares (predict/recommend and simulate scenarios)."""

    model: str
    hardware: HardwareSection = HardwareSection()
    parallelism: ParallelismSection = ParallelismSection()
    precision: PrecisionSection = PrecisionSection()
    engine: str = "vllm"
    engine_version: str | None = Field(
        default=None,
        description="the engine release you run (its release line's factors and scheduling); "
        "unset: the engine's own factors (core/perf/engine_releases.py)",
    )
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_model_len: int | None = Field(default=None, ge=1, le=10_000_000)
    speculative: SpeculativeSection | None = None

    @field_validator("engine_version")
    @classmethod
    def _a_version(cls, value: str | None) -> str | None:
        try:
            return None if value is None else check_engine_version(value)
        except ValueError as exc:
            raise PydanticCustomError("engine_version", str(exc)) from None


class ServingDocument(DeploymentDocument):
    """The one serving scenario document of ``predict``, ``recommend``, ``fit`` and ``simulate``: the
    deployment, the core ``workload`` and ``sla``, and what only the simulator reads (``arrival``,
    ``simulation``, ``capacity_search``; docs/scenarios.md, docs/simulator.md). Older simulate
    documents (``slo:``, traffic inside ``workload:``) are read in today's shape
    (:func:`~gpuplan.adapters.scenario_files.arrival.upgrade_document`).

    ``workload`` may be left out only when a trace gives the simulator every request's lengths; the
    commands that need it (:class:`ScenarioFile`) require it. ``sla`` takes every limit the core
    ``Sla`` holds unless the validation context's ``SLA_LIMITS`` key (or the class's ``sla_limits``)
    names fewer: those a command does not check are refused as unknown keys."""

    sla_limits: ClassVar[tuple[str, ...]] = ALL_LIMITS
    workload: Workload | None = None
    sla: Sla = Sla()
    prices: PricesSection = PricesSection()
    ownership: OwnershipAssumptions = OwnershipAssumptions()
    objective: Literal["cost", "latency", "throughput"] = "cost"
    arrival: ArrivalSection | None = None
    simulation: SimConfig = SimConfig()
    capacity_search: bool = Field(default=False, description="simulate: bisect the highest rate meeting sla")

    @model_validator(mode="before")
    @classmethod
    def _todays_shape(cls, data: Any) -> Any:
        return upgrade_document(data)

    @field_validator("workload", mode="wrap")
    @classmethod
    def _as_written(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Workload | None:
        """The workload as written (``Workload.as_written``): one document serves predict, recommend,
        fit and simulate, each reading the loads it needs."""
        return value if value is None or isinstance(value, Workload) else Workload.as_written(value)

    @field_validator("sla", mode="wrap")
    @classmethod
    def _limits_the_command_checks(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Sla:
        """A limit the command does not check is refused as an unknown key, before any value is read."""
        limits = (info.context or {}).get(SLA_LIMITS, cls.sla_limits)
        return refuse_unchecked(value, handler, limits)

    @model_validator(mode="after")
    def _one_value_each(self) -> ServingDocument:
        """A length or load written in both ``workload`` and ``arrival`` means one value."""
        if self.workload is None:
            if self.arrival is None or not (self.arrival.kind == "trace" or self.arrival.lengths_from_trace):
                raise PydanticCustomError("missing", "workload: Field required")
            return self
        if self.arrival is not None:
            for problem in arrival_conflicts(self.workload, self.arrival):
                raise ValueError(problem)
        return self


def arrival_conflicts(workload: Workload, arrival: ArrivalSection) -> list[str]:
    """Where ``arrival`` gives a length mean or a load other than the workload's (one line each)."""
    problems = []
    for name in ("input_tokens", "output_tokens"):
        dist = getattr(arrival, name)
        if dist is not None and max(round(dist.mean_tokens), 1) != getattr(workload, name):
            problems.append(
                f"workload.{name} ({getattr(workload, name)}) is not the mean of arrival.{name} "
                f"({dist.mean_tokens:g}): leave workload.{name} out, or make them agree"
            )
    for name in ("rate_rps", "concurrency"):
        mine, theirs = getattr(arrival, name), getattr(workload, name)
        if mine is not None and theirs is not None and mine != theirs:
            problems.append(
                f"arrival.{name} ({mine:g}) differs from workload.{name} ({theirs:g}): "
                "give it once, in workload"
            )
    return problems


class LayoutsSection(FiniteModel):
    """``recommend``'s plan kinds (``layouts: {kinds: [aggregated, disaggregated], kv_transport: {kind: rdma}}``)."""

    kinds: tuple[LayoutKind, ...] = Field(default=LAYOUT_KINDS, min_length=1)
    kv_transport: KvTransport = KvTransport()
    mixed_pools: bool = Field(
        default=False, description="prefill and decode pools may use different GPU types"
    )


class ScenarioFile(ServingDocument):
    """A serving document with its workload (predict, recommend, fit); ``sla`` takes the limits
    ``recommend`` checks unless the parse names others."""

    sla_limits: ClassVar[tuple[str, ...]] = RECOMMEND_LIMITS
    workload: Workload
    layouts: LayoutsSection = LayoutsSection()


ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_yaml_document(
    text: str, model: type[ModelT], *, origin: str, keys: str, doc: str, context: dict[str, Any] | None = None
) -> ModelT:
    """One YAML document → one validated ``model``. FileFormatError names ``origin`` and the YAML
    line (syntax) or the field path and rule (schema), on one line; ``keys`` and ``doc`` go into the
    hints ("expected a mapping with keys {keys}", "see {doc}"); ``context``: pydantic's."""
    try:
        data: Any = yamltext.safe_load(text)
    except RecursionError:
        raise FileFormatError(f"{origin}: document nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise FileFormatError(f"{origin}{where}: {problem}", hint="fix the YAML syntax") from None
    if not isinstance(data, dict):
        raise FileFormatError(
            f"{origin}: expected a mapping with keys {keys}; got {type(data).__name__}", hint=f"see {doc}"
        )
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise FileFormatError(f"{origin}: {describe_validation_error(exc)}", hint=f"see {doc}") from None
    except RecursionError:
        raise FileFormatError(f"{origin}: document nested too deeply") from None


def parse_scenario(text: str, *, origin: str, sla_limits: tuple[str, ...] = RECOMMEND_LIMITS) -> ScenarioFile:
    """Validate scenario YAML text; FileFormatError names ``origin``, the line or the field.
    ``sla_limits``: the limits the command checks (others are refused); ``predict`` passes
    ``ALL_LIMITS`` so that it reads every document ``simulate`` reads."""
    return parse_yaml_document(
        text,
        ScenarioFile,
        origin=origin,
        keys="model, workload, ...",
        doc="docs/scenarios.md",
        context={SLA_LIMITS: sla_limits},
    )


def load_scenario(path: Path, *, sla_limits: tuple[str, ...] = RECOMMEND_LIMITS) -> ScenarioFile:
    """Read and validate a scenario file."""
    return parse_scenario(read_scenario_text(path), origin=str(path), sla_limits=sla_limits)


def scenario_notes(text: str) -> list[str]:
    """The deprecation notes of a scenario's older names (``slo:``, traffic inside ``workload:``)."""
    try:
        return legacy_notes(yamltext.safe_load(text))
    except (yaml.YAMLError, RecursionError):
        return []  # the real parse reports the error with its line


def describe_validation_error(
    exc: ValidationError, limit: int = 3, *, names: Mapping[str, str] | None = None
) -> str:
    """Pydantic errors flattened to one line: 'field.path: rule; ...'. ``names``: what the user typed
    for a field path (``{"workload.rate_rps": "--rate"}``), shown instead of the path (and of the
    path's items: ``hardware.gpus.0`` is ``--gpus``)."""
    errors = _causes(exc.errors())
    parts = []
    for err in errors[:limit]:
        loc = _typed_name(".".join(_one_line(str(p)) for p in err["loc"]), names or {})
        parts.append(f"{loc}: {_one_line(err['msg'])}" if loc else _one_line(err["msg"]))
    more = len(errors) - limit
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _typed_name(loc: str, names: Mapping[str, str]) -> str:
    """``loc``, or the name the user typed for it or for the field it is an item of."""
    for path, typed in names.items():
        if loc == path or loc.startswith(f"{path}."):
            return typed
    return loc


def _causes(errors: list[Any]) -> list[Any]:
    """Drop a list's "too short" error when its own items failed: it is their consequence, not news."""
    failed_items = {tuple(e["loc"][:-1]) for e in errors if len(e["loc"]) > 1}
    return [e for e in errors if not (e["type"] == "too_short" and tuple(e["loc"]) in failed_items)] or errors


def _one_line(text: str) -> str:
    """User text inside an error stays on one line: control characters are escaped."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def is_training_document(text: str) -> bool:
    """Whether scenario YAML text is a training scenario (it has a top-level ``training`` section)."""
    try:
        data: Any = yamltext.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        return False  # the real parse reports the error with its line
    return isinstance(data, dict) and "training" in data


def parse_training_scenario(text: str, *, origin: str) -> TrainingScenarioFile:
    """Validate a training scenario (model, hardware.gpu, training, layout)."""
    return parse_yaml_document(
        text,
        TrainingScenarioFile,
        origin=origin,
        keys="model, hardware, training, layout",
        doc="docs/scenarios.md",
    )


def read_scenario_text(path: Path) -> str:
    """A scenario file's text; FileFormatError naming it when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"cannot read scenario {path}: {exc}", hint="check the path") from None
