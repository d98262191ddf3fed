"""Scenario files for ``gpuplan simulate``: the deployment sections of ``scenario_files.deployment`` plus a
simulated workload, the engine knobs, an SLO and whether to search the capacity.

Parsing is pure (text in, validated object out); errors name the origin and the YAML line or the
field path, as ``gpuplan.adapters.scenario_files.deployment.parse_scenario`` does.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidatorFunctionWrapHandler, field_validator

from gpuplan.adapters.scenario_files.deployment import DeploymentDocument, parse_yaml_document
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sim.workload import WorkloadSpec
from gpuplan.core.sla import P99_LIMITS, Sla, refuse_unchecked


class SimWorkload(WorkloadSpec):
    """The workload; ``trace`` names a CSV/JSONL file (relative to the scenario) of arrival_s,
    input_tokens, output_tokens; ``lengths_from_trace`` resamples its lengths under another arrival kind."""

    trace: str | None = None
    trace_format: Literal["csv", "jsonl"] | None = None
    lengths_from_trace: bool = False


class SimulateScenario(DeploymentDocument):
    """The whole ``simulate`` document."""

    workload: SimWorkload
    simulation: SimConfig = SimConfig()
    slo: Sla = Sla()
    capacity_search: bool = Field(default=False, description="also bisect the highest rate meeting the SLO")

    @field_validator("slo", mode="wrap")
    @classmethod
    def _limits_the_simulator_checks(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Sla:
        """The means (``ttft_ms``, ``tpot_ms``) are refused as unknown keys (the simulator checks
        P99s), before any value is read."""
        return refuse_unchecked(value, handler, P99_LIMITS)


def parse_simulate_scenario(text: str, *, origin: str) -> SimulateScenario:
    """Validate simulate-scenario YAML; FileFormatError names ``origin`` and the line or field."""
    return parse_yaml_document(
        text, SimulateScenario, origin=origin, keys="model, hardware, workload, ...", doc="docs/simulator.md"
    )
