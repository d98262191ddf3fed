"""The ``workload:`` section of a predict/recommend scenario is a ``gpuplan.core.workload.Workload`` as
written: any loads (each command reads the one it needs), with the user-input caps and their messages."""

from __future__ import annotations

import pytest
import yaml

from gpuplan.adapters.scenario_files.deployment import parse_scenario
from gpuplan.core.errors import FileFormatError
from gpuplan.core.workload import Workload

DOC = "model: m\nworkload: %s\n"


@pytest.mark.parametrize(
    "section",
    [
        "{input_tokens: 10, output_tokens: 5}",  # fit reads no load
        "{input_tokens: 10, output_tokens: 5, rate_rps: 5}",  # recommend's open loop; predict's kind stays
        "{scenario: rate, input_tokens: 10, output_tokens: 5}",  # predict refuses it later, naming rate_rps
        "{scenario: offline, input_tokens: 10, output_tokens: 5, concurrency: 4, batch_size: 2}",
    ],
)
def test_any_loads_are_accepted_as_written(section: str) -> None:
    workload = parse_scenario(DOC % section, origin="a").workload
    written = yaml.safe_load(section)
    assert isinstance(workload, Workload) and workload.model_dump(exclude_defaults=True) == written


@pytest.mark.parametrize(
    ("section", "line"),
    [
        (
            "{input_tokens: 0, output_tokens: 5}",
            "a: workload.input_tokens: Input should be greater than or equal to 1",
        ),
        (
            "{input_tokens: 10, output_tokens: 5, rate_rps: 2000000}",
            "a: workload.rate_rps: Input should be less than or equal to 1000000",
        ),
        (
            "{input_tokens: 10, output_tokens: 5, concurrency: 2.5}",
            "a: workload.concurrency: Input should be a valid integer, got a number with a fractional part",
        ),
        (
            "{input_tokens: 10, output_tokens: 5, batch_size: 0}",
            "a: workload.batch_size: Input should be greater than or equal to 1",
        ),
        ("{input_tokens: 10, output_tokens: 5, sed: 1}", "a: workload.sed: Extra inputs are not permitted"),
        ("[1]", "a: workload: Input should be a valid dictionary or instance of Workload"),
    ],
)
def test_bad_sections_name_the_field_and_the_rule(section: str, line: str) -> None:
    with pytest.raises(FileFormatError) as info:
        parse_scenario(DOC % section, origin="a")
    assert info.value.one_line().startswith(line + " ("), info.value.one_line()
