"""Bad input gets a clear error or an explicit infeasible result; capacity search and constraint parsing."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from gpuplan.adapters.scenario_files.simulate import parse_simulate_scenario
from gpuplan.core.errors import FileFormatError
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.sim.capacity import max_rate_under_slo, offline_requests_per_s, saturation_requests_per_s
from gpuplan.core.sim.config import SimConfig
from gpuplan.core.sim.workload import ArrivalSpec, LengthDist, WorkloadSpec, parse_trace
from gpuplan.core.sla import Sla
from gpuplan.usecases.validation.cases import Skip
from gpuplan.usecases.validation.predict_server import parse_constraint

SPEC = WorkloadSpec(
    arrival=ArrivalSpec(kind="poisson", rate_rps=1.0),
    input_tokens=LengthDist(value=512),
    output_tokens=LengthDist(value=128),
    num_requests=600,
)


@pytest.mark.parametrize("rate", [0.0, -1.0])
def test_rate_must_be_positive(rate: float) -> None:
    with pytest.raises(ValidationError, match="rate_rps"):
        ArrivalSpec(kind="poisson", rate_rps=rate)


def test_length_distributions_need_their_parameters() -> None:
    with pytest.raises(ValidationError, match="needs low, high"):
        LengthDist(kind="uniform")
    with pytest.raises(ValidationError, match="low 9 > high 3"):
        LengthDist(kind="uniform", low=9, high=3)


def test_empty_and_negative_traces_are_rejected_with_the_line() -> None:
    with pytest.raises(FileFormatError, match="no requests"):
        parse_trace("arrival_s,input_tokens,output_tokens\n", origin="t.csv", fmt="csv")
    with pytest.raises(FileFormatError, match=r"t\.csv line 3: token counts"):
        parse_trace("arrival_s,input_tokens,output_tokens\n0,10,5\n1,-4,5\n", origin="t.csv", fmt="csv")
    with pytest.raises(FileFormatError, match=r"t\.jsonl line 2: not JSON"):
        parse_trace(
            '{"arrival_s": 0, "input_tokens": 1, "output_tokens": 2}\n{oops\n', origin="t.jsonl", fmt="jsonl"
        )
    with pytest.raises(FileFormatError, match="header lacks output_tokens"):
        parse_trace("arrival_s,input_tokens\n0,1\n", origin="t.csv", fmt="csv")


def test_crlf_trace_parses_and_names_the_file_line() -> None:
    header = "arrival_s,input_tokens,output_tokens\r\n"
    trace = parse_trace(header + "0,10,5\r\n2,20,4", origin="t.csv", fmt="csv")
    assert trace.arrival_s.tolist() == [0.0, 2.0] and trace.output_tokens.tolist() == [5, 4]
    with pytest.raises(FileFormatError, match=r"t\.csv line 3: token counts"):
        parse_trace(header + "0,10,5\r\n1,-4,5\r\n", origin="t.csv", fmt="csv")


def test_trace_is_sorted_and_starts_at_zero() -> None:
    trace = parse_trace("arrival_s,input_tokens,output_tokens\n5,10,2\n3,20,4\n", origin="t", fmt="csv")
    assert trace.arrival_s.tolist() == [0.0, 2.0] and trace.input_tokens.tolist() == [20, 10]


def test_scenario_errors_name_the_field_and_line() -> None:
    with pytest.raises(FileFormatError, match=r"s.yaml: arrival.rate_rps"):
        parse_simulate_scenario(
            "model: m\nworkload: {arrival: {kind: poisson, rate_rps: 0}}\n", origin="s.yaml"
        )
    with pytest.raises(FileFormatError, match=r"s.yaml line \d+: "):
        parse_simulate_scenario("model: m\nworkload: [\n", origin="s.yaml")


def test_capacity_search_finds_a_rate_below_the_analytic_maximum(replica: ReplicaModel) -> None:
    slo = Sla(ttft_p99_ms=2000, tpot_p99_ms=100)
    spec = SPEC.model_copy(update={"num_requests": 3000})
    found = max_rate_under_slo(
        replica, spec, slo, SimConfig(record_timeline=False, warmup_fraction=0.2), steps=7
    )
    assert found.feasible and 0 < found.rate_rps <= offline_requests_per_s(replica, spec)
    assert found.summary is not None and (found.summary.tpot.p99_ms or 0) <= 100


def test_saturation_rate_is_steady_state_and_ignores_warmup(replica: ReplicaModel) -> None:
    """The engine's own maximum under a standing backlog: close to the analytic offline rate, and not
    scaled by the warm-up share (a burst's completions / wall time used to read 1 − warmup of it)."""
    analytic = offline_requests_per_s(replica, SPEC)
    rates = [
        saturation_requests_per_s(replica, SPEC, SimConfig(record_timeline=False, warmup_fraction=w))
        for w in (0.0, 0.3)
    ]
    assert rates[0] == pytest.approx(rates[1], rel=1e-9)
    assert 0.75 * analytic <= rates[0] <= 1.02 * analytic, (rates, analytic)


def test_impossible_slo_is_reported_infeasible(replica: ReplicaModel) -> None:
    found = max_rate_under_slo(replica, SPEC, Sla(ttft_p99_ms=0.001), steps=3)
    assert not found.feasible and found.reason and "rate -> 0" in found.reason and found.probes == 1


def test_constraint_notes_parse() -> None:
    slo = parse_constraint("constraint: ttft_p99_ms<=2000; tpot_p99_ms<=200 | model mapped ...")
    assert slo == Sla(ttft_p99_ms=2000, tpot_p99_ms=200)
    with pytest.raises(Skip, match="not machine-readable"):
        parse_constraint("constraint: unknown (production average) | x")


@pytest.mark.parametrize(
    ("arrival", "message"),
    [
        (
            {"kind": "closed_loop", "concurrency": 4, "rate_rps": 5.0},
            "rate_rps does not apply to closed_loop",
        ),
        (
            {"kind": "poisson", "rate_rps": 5.0, "concurrency": 4},
            "concurrency applies to closed_loop arrivals only",
        ),
        ({"kind": "trace", "rate_rps": 5.0}, "rate_rps does not apply to trace"),
    ],
)
def test_arrival_fields_of_another_kind_are_refused(arrival: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ArrivalSpec.model_validate(arrival)


def test_simulating_an_encoder_names_it(tmp_path: Path) -> None:
    from gpuplan.adapters.catalog.loader import default_catalog
    from gpuplan.core.errors import UserInputError
    from gpuplan.usecases.simulate import simulate_scenario

    text = """\
model: google-bert/bert-large-uncased
hardware: {gpu: H100-SXM, count: 1}
workload:
  arrival: {kind: poisson, rate_rps: 2}
  input_tokens: {kind: fixed, value: 128}
  output_tokens: {kind: fixed, value: 16}
  num_requests: 50
"""
    scenario = parse_simulate_scenario(text, origin="bert.yaml")
    with pytest.raises(UserInputError, match="encoder"):
        simulate_scenario(scenario, default_catalog(), base_dir=tmp_path)
