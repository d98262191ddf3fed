"""``gpuplan simulate``'s reading of the one serving scenario document (``deployment.ServingDocument``):
the deployment, the core ``workload`` and ``sla``, and the simulator's ``arrival``, ``simulation`` and
``capacity_search``. Older simulate documents (``slo:``, traffic inside ``workload:``) still load.

Parsing is pure (text in, validated object out); errors name the origin and the YAML line or the
field path, as ``gpuplan.adapters.scenario_files.deployment.parse_scenario`` does.
"""

from __future__ import annotations

from gpuplan.adapters.scenario_files.deployment import ServingDocument, parse_yaml_document


class SimulateScenario(ServingDocument):
    """The document as ``simulate`` reads it: the workload may be left out when a trace gives every
    request, and ``sla`` takes every limit (simulate checks means and P99s)."""


def parse_simulate_scenario(text: str, *, origin: str) -> SimulateScenario:
    """Validate a scenario for simulate; FileFormatError names ``origin`` and the line or field."""
    return parse_yaml_document(
        text, SimulateScenario, origin=origin, keys="model, hardware, workload, ...", doc="docs/simulator.md"
    )
