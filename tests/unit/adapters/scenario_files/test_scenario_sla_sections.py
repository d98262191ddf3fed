"""The ``sla:`` section of a scenario is a ``gpuplan.core.sla.Sla``; recommend refuses the limits it
does not check as unknown keys, at their own path, whatever their value (the words the strict sections
had); simulate checks all of them, and reads the older simulate name ``slo:`` as ``sla:``."""

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


def test_simulate_sla_takes_every_limit_and_reads_slo_as_sla() -> None:
    # simulate checks means and P99s of the simulated requests, so its sla takes all five limits
    limits = "{ttft_ms: 500, tpot_ms: 40, ttft_p99_ms: 1000, tpot_p99_ms: 60, e2e_p99_ms: 9000}"
    new = parse_simulate_scenario(SIMULATE.replace("slo:", "sla:") % limits, origin="s")
    old = parse_simulate_scenario(SIMULATE % limits, origin="s")  # the older name of the section
    assert (
        new.sla == old.sla == Sla(ttft_ms=500, tpot_ms=40, ttft_p99_ms=1000, tpot_p99_ms=60, e2e_p99_ms=9000)
    )


def test_sla_and_slo_together_is_one_line_naming_both() -> None:
    with pytest.raises(FileFormatError) as caught:
        parse_simulate_scenario(SIMULATE % "{ttft_p99_ms: 1}" + "sla: {ttft_p99_ms: 2}\n", origin="s")
    line = caught.value.one_line()
    assert line.startswith("s: sla and slo are both given") and "\n" not in line, line


@pytest.mark.parametrize(
    ("section", "line"),
    [
        ("{ttft_ms: -5}", "s: sla.ttft_ms: Input should be greater than 0 ("),
        (
            "{ttft_ms: 1, foo: 2, ttft_p99_ms: true}",
            "s: sla.ttft_p99_ms: expected a number, got a boolean (true/false); "
            "sla.foo: Extra inputs are not permitted (",
        ),
        ("{e2e_p99_ms: 86400001}", "s: sla.e2e_p99_ms: Input should be less than or equal to 86400000 ("),
    ],
)
def test_simulate_sla_refusals_name_the_field(section: str, line: str) -> None:
    with pytest.raises(FileFormatError) as caught:
        parse_simulate_scenario(SIMULATE % section, origin="s")
    assert caught.value.one_line().startswith(line), caught.value.one_line()
