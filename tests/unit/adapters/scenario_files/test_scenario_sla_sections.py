"""The ``sla:`` section of predict/recommend scenarios and the ``slo:`` section of simulate scenarios
are both a ``gpuplan.core.sla.Sla``; each refuses the limits its path does not check as unknown keys,
at their own path, whatever their value (the words the strict sections had)."""

from __future__ import annotations

import pytest

from gpuplan.adapters.scenario_files.deployment import parse_scenario
from gpuplan.adapters.scenario_files.simulate import parse_simulate_scenario
from gpuplan.core.errors import FileFormatError
from gpuplan.core.sla import Sla

SERVING = "model: m\nworkload: {input_tokens: 10, output_tokens: 5, rate_rps: 1}\nsla: %s\n"
SIMULATE = (
    "model: m\nworkload: {arrival: {kind: poisson, rate_rps: 1}, input_tokens: {kind: fixed, value: 5},\n"
    "  output_tokens: {kind: fixed, value: 5}}\nslo: %s\n"
)


def test_scenario_sla_is_the_core_sla() -> None:
    sc = parse_scenario(
        SERVING % "{ttft_ms: 1000, tpot_ms: 50, ttft_p99_ms: 2000, tpot_p99_ms: 80}", origin="a"
    )
    assert sc.sla == Sla(ttft_ms=1000, tpot_ms=50, ttft_p99_ms=2000, tpot_p99_ms=80)
    assert parse_scenario(SERVING % "{}", origin="a").sla.empty


@pytest.mark.parametrize(
    ("section", "line"),
    [
        ("{ttft_ms: -1}", "a: sla.ttft_ms: Input should be greater than 0"),
        ("{tpot_ms: .inf}", "a: sla.tpot_ms: Input should be a finite number"),
        ("{ttft_ms: 3600001}", "a: sla.ttft_ms: Input should be less than or equal to 3600000"),
        ("{tpot_p99_ms: 600001}", "a: sla.tpot_p99_ms: Input should be less than or equal to 600000"),
        ("{ttft: 5}", "a: sla.ttft: Extra inputs are not permitted"),
        ("{e2e_p99_ms: 9000}", "a: sla.e2e_p99_ms: Extra inputs are not permitted ("),
        ('{e2e_p99_ms: "x"}', "a: sla.e2e_p99_ms: Extra inputs are not permitted ("),
        (
            "{e2e_p99_ms: -1, ttft_ms: 0}",
            "a: sla.ttft_ms: Input should be greater than 0; sla.e2e_p99_ms: Extra inputs are not permitted (",
        ),
    ],
)
def test_scenario_sla_refusals_name_the_field(section: str, line: str) -> None:
    with pytest.raises(FileFormatError) as caught:
        parse_scenario(SERVING % section, origin="a")
    assert caught.value.one_line().startswith(line), caught.value.one_line()


def test_simulate_slo_takes_p99_limits_and_refuses_means() -> None:
    sc = parse_simulate_scenario(SIMULATE % "{ttft_p99_ms: 1000, e2e_p99_ms: 9000}", origin="s")
    assert sc.slo == Sla(ttft_p99_ms=1000, e2e_p99_ms=9000)


@pytest.mark.parametrize(
    ("section", "line"),
    [
        ("{tpot_ms: 50}", "s: slo.tpot_ms: Extra inputs are not permitted ("),
        ("{ttft_ms: -5}", "s: slo.ttft_ms: Extra inputs are not permitted ("),
        (
            "{ttft_ms: 1, foo: 2, ttft_p99_ms: true}",
            "s: slo.ttft_p99_ms: expected a number, got a boolean (true/false); "
            "slo.ttft_ms: Extra inputs are not permitted; slo.foo: Extra inputs are not permitted (",
        ),
        ("{e2e_p99_ms: 86400001}", "s: slo.e2e_p99_ms: Input should be less than or equal to 86400000 ("),
    ],
)
def test_simulate_slo_refuses_means_before_their_values(section: str, line: str) -> None:
    with pytest.raises(FileFormatError) as caught:
        parse_simulate_scenario(SIMULATE % section, origin="s")
    assert caught.value.one_line().startswith(line), caught.value.one_line()
