"""gpuplan.core.workload: one Workload, exactly the load its kind reads when built in code, looser (and
with the tighter caps of user input) as written in a scenario document."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gpuplan.core.frozen import FrozenModel
from gpuplan.core.workload import (
    LOAD_OF_KIND,
    MAX_RATE_RPS,
    MAX_WRITTEN_RATE_RPS,
    ONE_SERVING_LOAD,
    Workload,
)

LENGTHS = {"input_tokens": 512, "output_tokens": 128}


def _errors(exc: pytest.ExceptionInfo[ValidationError]) -> list[tuple[tuple[Any, ...], str]]:
    return [(tuple(e["loc"]), e["msg"]) for e in exc.value.errors()]


@pytest.mark.parametrize(
    ("scenario", "load"),
    [
        ("concurrency", {"concurrency": 8}),
        ("rate", {"rate_rps": 2.5}),
        ("static_batch", {"batch_size": 4}),
        ("single", {}),
        ("offline", {}),
    ],
)
def test_each_kind_takes_exactly_its_load(scenario: str, load: dict[str, float]) -> None:
    workload = Workload.model_validate({"scenario": scenario, **LENGTHS, **load})
    assert workload.load_field == LOAD_OF_KIND[scenario] == next(iter(load), None)
    assert workload.load_problem() is None


@pytest.mark.parametrize(
    ("scenario", "load", "message"),
    [
        ("concurrency", {}, ONE_SERVING_LOAD),
        ("rate", {"rate_rps": 1, "concurrency": 2}, ONE_SERVING_LOAD),
        ("concurrency", {"rate_rps": 1}, "scenario 'concurrency' reads concurrency; given: rate_rps"),
        (
            "rate",
            {"rate_rps": 1, "batch_size": 2},
            "scenario 'rate' reads rate_rps; given: batch_size, rate_rps",
        ),
        ("static_batch", {}, "scenario 'static_batch' reads batch_size; given: none"),
        ("single", {"batch_size": 1}, "scenario 'single' reads no load; given: batch_size"),
        ("offline", {"concurrency": 4}, "scenario 'offline' reads no load; given: concurrency"),
    ],
)
def test_a_workload_built_in_code_refuses_other_loads(
    scenario: str, load: dict[str, float], message: str
) -> None:
    with pytest.raises(ValidationError) as info:
        Workload.model_validate({"scenario": scenario, **LENGTHS, **load})
    assert _errors(info) == [((), f"Value error, {message}")]
    written = Workload.as_written({"scenario": scenario, **LENGTHS, **load})  # a document may say so
    assert written.load_problem() == message


def test_code_may_build_decode_only_fractional_and_fast_workloads() -> None:
    # Decode-speed validation rows have no prompt; the search probes fractional loads per replica.
    assert Workload(scenario="single", input_tokens=0, output_tokens=256).input_tokens == 0
    assert Workload(concurrency=2.5, **LENGTHS).concurrency == 2.5
    assert Workload(scenario="rate", rate_rps=MAX_RATE_RPS, **LENGTHS).rate_rps == MAX_RATE_RPS
    with pytest.raises(ValidationError, match="less than or equal to 10000000"):
        Workload(scenario="rate", rate_rps=MAX_RATE_RPS * 1.5, **LENGTHS)
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        Workload(scenario="single", input_tokens=-1, output_tokens=1)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("input_tokens", 0, "Input should be greater than or equal to 1"),
        ("input_tokens", -5, "Input should be greater than or equal to 1"),
        ("rate_rps", MAX_WRITTEN_RATE_RPS + 1, "Input should be less than or equal to 1000000"),
        ("rate_rps", 0, "Input should be greater than 0"),
        ("concurrency", 1.5, "Input should be a valid integer, got a number with a fractional part"),
        ("batch_size", "many", "Input should be a valid integer, unable to parse string as an integer"),
        ("concurrency", True, "expected a number, got a boolean (true/false)"),
        ("rate_rps", float("inf"), "Input should be a finite number"),
    ],
)
def test_as_written_the_caps_of_user_input_apply(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        Workload.as_written({**LENGTHS, field: value})
    assert _errors(info) == [((field,), message)]


def test_as_written_the_load_may_be_partial_and_counts_stay_numbers() -> None:
    written = Workload.as_written({"scenario": "rate", **LENGTHS})
    assert written.rate_rps is None and written.load_problem() is not None
    assert Workload.as_written({**LENGTHS, "concurrency": "16"}).concurrency == 16.0


@pytest.mark.parametrize(
    ("load", "scenario"),
    [({"rate_rps": 5, "batch_size": 3}, "rate"), ({"concurrency": 64, "scenario": "offline"}, "concurrency")],
)
def test_the_serving_target_reads_rate_or_concurrency_whatever_the_kind(
    load: dict[str, Any], scenario: str
) -> None:
    target = Workload.as_written({**LENGTHS, **load}).serving_target()
    assert target.scenario == scenario and target.load_problem() is None
    assert target.batch_size is None and (target.rate_rps or target.concurrency) == load.get(
        "rate_rps", load.get("concurrency")
    )


@pytest.mark.parametrize("load", [{}, {"rate_rps": 1, "concurrency": 1}, {"batch_size": 4}])
def test_the_serving_target_needs_exactly_one_of_rate_or_concurrency(load: dict[str, float]) -> None:
    with pytest.raises(ValidationError) as info:
        Workload.as_written({**LENGTHS, **load}).serving_target()
    assert _errors(info) == [((), f"Value error, {ONE_SERVING_LOAD}")]


def test_a_workload_inside_another_model_is_not_checked_again() -> None:
    class Echo(FrozenModel):
        workload: Workload

    written = Workload.as_written({**LENGTHS, "rate_rps": 5, "batch_size": 3})
    assert Echo(workload=written).workload is written
    assert Echo(workload=written).model_dump()["workload"] == {
        "scenario": "concurrency",
        **LENGTHS,
        "concurrency": None,
        "batch_size": 3.0,
        "rate_rps": 5.0,
        "prefix_cache_hit_rate": 0.0,
    }
    with pytest.raises(ValidationError, match="scenario 'concurrency' reads concurrency"):
        Echo.model_validate({"workload": written.model_dump()})  # a mapping is a new workload built in code
