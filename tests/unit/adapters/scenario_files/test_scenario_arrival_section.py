"""The ``arrival:`` section and the reading of older simulate documents (``adapters/scenario_files/arrival.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan.adapters.scenario_files.arrival import (
    SLO_RENAMED,
    TRAFFIC_MOVED,
    legacy_notes,
    upgrade_document,
)
from gpuplan.adapters.scenario_files.deployment import ALL_LIMITS, parse_scenario
from gpuplan.adapters.scenario_files.simulate import parse_simulate_scenario
from gpuplan.core.errors import FileFormatError

OLD: dict[str, Any] = {
    "model": "m",
    "workload": {
        "arrival": {"kind": "closed_loop", "concurrency": 8, "ramp_up_s": 2},
        "input_tokens": {"kind": "uniform", "low": 100, "high": 301},
        "output_tokens": 50,
        "num_requests": 99,
        "seed": 4,
    },
    "slo": {"ttft_p99_ms": 10},
}


def test_an_older_document_is_read_in_todays_shape() -> None:
    new = upgrade_document(OLD)
    # the load moves to the core workload, the lengths it reads are the distributions' rounded means
    assert new["workload"] == {
        "scenario": "concurrency",
        "concurrency": 8,
        "input_tokens": 200,
        "output_tokens": 50,
    }
    assert new["arrival"] == {
        "kind": "closed_loop",
        "ramp_up_s": 2,
        "input_tokens": OLD["workload"]["input_tokens"],
        "num_requests": 99,
        "seed": 4,
    }
    assert new["sla"] == {"ttft_p99_ms": 10} and "slo" not in new
    assert legacy_notes(OLD) == [SLO_RENAMED, TRAFFIC_MOVED] and legacy_notes(new) == []
    assert upgrade_document(new) == new  # idempotent: a web body is validated once more


def test_a_trace_document_has_no_workload_for_predict() -> None:
    old = {"model": "m", "workload": {"arrival": {"kind": "trace"}, "trace": "t.csv"}}
    assert upgrade_document(old) == {"model": "m", "arrival": {"kind": "trace", "trace": "t.csv"}}
    assert (
        parse_simulate_scenario(
            "model: m\nworkload: {arrival: {kind: trace}, trace: t.csv}\n", origin="s"
        ).workload
        is None
    )
    with pytest.raises(FileFormatError, match="s: workload: Field required"):
        parse_simulate_scenario("model: m\narrival: {kind: poisson}\n", origin="s")


def test_predict_reads_every_limit_recommend_refuses_what_it_does_not_check() -> None:
    text = "model: m\nworkload: {input_tokens: 10, output_tokens: 5, rate_rps: 1}\nsla: {e2e_p99_ms: 9000}\n"
    assert parse_scenario(text, origin="a", sla_limits=ALL_LIMITS).sla.e2e_p99_ms == 9000
    with pytest.raises(FileFormatError, match=r"a: sla\.e2e_p99_ms: Extra inputs are not permitted"):
        parse_scenario(text, origin="a")


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("{kind: poisson, ramp_up_s: 3}", "ramp_up_s applies to closed_loop arrivals only"),
        ("{kind: trace, rate_rps: 3}", "rate_rps does not apply to trace arrivals"),
        ("{kind: gamma, concurrency: 3}", "concurrency applies to closed_loop arrivals only"),
        ("{num_requests: 0}", "arrival.num_requests: Input should be greater than or equal to 1"),
        (
            "{output_tokens: {kind: uniform, low: 9}}",
            "arrival.output_tokens: a uniform length needs high",
        ),
    ],
)
def test_bad_arrival_sections_name_the_field(section: str, message: str) -> None:
    text = f"model: m\nworkload: {{input_tokens: 10, output_tokens: 5, rate_rps: 1}}\narrival: {section}\n"
    with pytest.raises(FileFormatError) as caught:
        parse_simulate_scenario(text, origin="s")
    assert message in caught.value.one_line(), caught.value.one_line()
