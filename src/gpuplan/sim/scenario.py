"""Scenario files for ``gpuplan simulate``: the deployment sections of ``gpuplan.scenario`` plus a
simulated workload, the engine knobs, an SLO and whether to search the capacity.

Parsing is pure (text in, validated object out); errors name the origin and the YAML line or the
field path, as ``gpuplan.scenario.parse_scenario`` does.
"""

from __future__ import annotations

from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuplan.errors import FileFormatError
from gpuplan.scenario import HardwareSection, ParallelismSection, PrecisionSection, describe_validation_error
from gpuplan.sim.config import SimConfig, Slo
from gpuplan.sim.workload import WorkloadSpec


class SimWorkload(WorkloadSpec):
    """The workload; ``trace`` names a CSV/JSONL file (relative to the scenario) of arrival_s,
    input_tokens, output_tokens; ``lengths_from_trace`` resamples its lengths under another arrival kind."""

    trace: str | None = None
    trace_format: Literal["csv", "jsonl"] | None = None
    lengths_from_trace: bool = False


class SimulateScenario(BaseModel):
    """The whole ``simulate`` document."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    hardware: HardwareSection = HardwareSection()
    parallelism: ParallelismSection = ParallelismSection()
    precision: PrecisionSection = PrecisionSection()
    engine: str = "vllm"
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_model_len: int | None = Field(default=None, ge=1, le=10_000_000)
    workload: SimWorkload
    simulation: SimConfig = SimConfig()
    slo: Slo = Slo()
    capacity_search: bool = Field(default=False, description="also bisect the highest rate meeting the SLO")


def parse_simulate_scenario(text: str, *, origin: str) -> SimulateScenario:
    """Validate simulate-scenario YAML; FileFormatError names ``origin`` and the line or field."""
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
            f"{origin}: expected a mapping with keys model, hardware, workload, ...; got {type(data).__name__}",
            hint="see docs/simulator.md",
        )
    try:
        return SimulateScenario.model_validate(data)
    except ValidationError as exc:
        raise FileFormatError(
            f"{origin}: {describe_validation_error(exc)}", hint="see docs/simulator.md"
        ) from None
