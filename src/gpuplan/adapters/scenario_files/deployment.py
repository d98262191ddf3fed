"""Scenario files: one YAML document → one validated object (model, hardware, workload, SLA, prices).

A scenario for ``predict`` names one deployment; one for ``recommend`` names the search space
instead (``hardware.gpus`` / ``max_gpus``). Errors name the file, the line (YAML syntax) or the
field path (schema), and the rule, on one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, Field, ValidationError, ValidatorFunctionWrapHandler, field_validator

from gpuplan.adapters.scenario_files.training import TrainingScenarioFile
from gpuplan.core.cost import OwnershipAssumptions
from gpuplan.core.errors import FileFormatError
from gpuplan.core.frozen import FiniteModel
from gpuplan.core.sla import MEAN_LIMITS, Sla, refuse_unchecked
from gpuplan.core.workload import Workload

RECOMMEND_LIMITS = (*MEAN_LIMITS, "ttft_p99_ms", "tpot_p99_ms")
"""The ``sla:`` limits ``recommend`` sizes on: means analytically, P99s with the serving simulator."""


class HardwareSection(FiniteModel):
    gpu: str | None = Field(default=None, description="one GPU id for predict / fit")
    count: int = Field(default=1, ge=1, le=100_000)
    gpus: list[str] | None = Field(
        default=None, description="GPU ids the recommend search may use (all if absent)"
    )
    max_gpus: int = Field(default=64, ge=1, le=4096)


class ParallelismSection(FiniteModel):
    tp: int | None = Field(default=None, ge=1, le=1024)
    pp: int = Field(default=1, ge=1, le=1024)
    ep: int = Field(default=1, ge=1, le=1024)


class PrecisionSection(FiniteModel):
    weights: str = "bf16"
    kv_cache: str | None = None
    allowed: list[str] | None = Field(default=None, description="weight dtypes recommend may choose")


class PricesSection(FiniteModel):
    usd_per_gpu_hour: float | None = Field(default=None, gt=0)
    kind: Literal["on_demand", "spot", "reserved_1y", "reserved_3y"] = "on_demand"
    max_usd_per_hour: float | None = Field(default=None, gt=0)


class DeploymentDocument(FiniteModel):
    """The sections every serving document shares (predict/recommend and simulate scenarios)."""

    model: str
    hardware: HardwareSection = HardwareSection()
    parallelism: ParallelismSection = ParallelismSection()
    precision: PrecisionSection = PrecisionSection()
    engine: str = "vllm"
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_model_len: int | None = Field(default=None, ge=1, le=10_000_000)


class ScenarioFile(DeploymentDocument):
    """The whole scenario document."""

    workload: Workload
    sla: Sla = Sla()
    prices: PricesSection = PricesSection()
    ownership: OwnershipAssumptions = OwnershipAssumptions()
    objective: Literal["cost", "latency", "throughput"] = "cost"

    @field_validator("workload", mode="wrap")
    @classmethod
    def _as_written(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Workload:
        """The workload as written (``Workload.as_written``): one document serves predict, recommend and
        fit, each reading the loads it needs."""
        return value if isinstance(value, Workload) else Workload.as_written(value)

    @field_validator("sla", mode="wrap")
    @classmethod
    def _limits_recommend_checks(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Sla:
        """``e2e_p99_ms`` is refused as an unknown key (recommend does not check it; predict and fit
        read the means), before any value is read."""
        return refuse_unchecked(value, handler, RECOMMEND_LIMITS)


ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_yaml_document(text: str, model: type[ModelT], *, origin: str, keys: str, doc: str) -> ModelT:
    """One YAML document → one validated ``model``. FileFormatError names ``origin`` and the YAML
    line (syntax) or the field path and rule (schema), on one line; ``keys`` and ``doc`` go into the
    hints ("expected a mapping with keys {keys}", "see {doc}")."""
    try:
        data: Any = yaml.safe_load(text)
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
        return model.model_validate(data)
    except ValidationError as exc:
        raise FileFormatError(f"{origin}: {describe_validation_error(exc)}", hint=f"see {doc}") from None
    except RecursionError:
        raise FileFormatError(f"{origin}: document nested too deeply") from None


def parse_scenario(text: str, *, origin: str) -> ScenarioFile:
    """Validate scenario YAML text; FileFormatError names ``origin``, the line or the field."""
    return parse_yaml_document(
        text, ScenarioFile, origin=origin, keys="model, workload, ...", doc="docs/scenarios.md"
    )


def load_scenario(path: Path) -> ScenarioFile:
    """Read and validate a scenario file."""
    return parse_scenario(read_scenario_text(path), origin=str(path))


def describe_validation_error(exc: ValidationError, limit: int = 3) -> str:
    """Pydantic errors flattened to one line: 'field.path: rule; ...'."""
    errors = _causes(exc.errors())
    parts = []
    for err in errors[:limit]:
        loc = ".".join(_one_line(str(p)) for p in err["loc"]) or "(document)"
        parts.append(f"{loc}: {_one_line(err['msg'])}")
    more = len(errors) - limit
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


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
        data: Any = yaml.safe_load(text)
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
