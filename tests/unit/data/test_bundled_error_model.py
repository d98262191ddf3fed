"""The bundled error model loads without ../shared and is the file the builder writes."""

from __future__ import annotations

import pytest

from gpuplan.core.calibration.error_model import Residual, held_out_coverage, interval
from gpuplan.data import read_bundled_text
from gpuplan.data.error_model import ERROR_MODEL_FILE, default_error_model, error_model_data
from gpuplan.usecases.calibration.error_model_build import HOW, dump

FAMILIES = {"throughput", "ttft", "tpot", "itl", "inference memory", "training speed", "training memory"}


def test_bundled_file_loads_and_names_how_it_was_built() -> None:
    data = error_model_data()
    assert set(data.provenance.inputs) == set(HOW)
    assert "error_model_build" in data.provenance.command
    for name, recorded in data.provenance.inputs.items():
        assert recorded.residuals == sum(r.source == name for r in data.residuals) > 0
        assert recorded.residuals <= recorded.rows
        assert len(recorded.sha256) == 64


def test_every_metric_family_has_a_group() -> None:
    model = default_error_model()
    assert set(model.groups) >= FAMILIES
    for family in FAMILIES:
        assert model.groups[family].n >= 5


def test_bundled_text_is_exactly_what_the_builder_writes() -> None:
    assert dump(error_model_data()) == read_bundled_text(*ERROR_MODEL_FILE)


def test_intervals_of_every_family_contain_most_of_their_own_rows() -> None:
    data = error_model_data()
    model = default_error_model()
    for family in FAMILIES:
        rows = [r for r in data.residuals if r.path[0] == family]
        inside = 0
        for r in rows:
            ends = interval(model=model, path=r.path, predicted=1.0, level=0.99)
            assert ends is not None
            inside += ends[0] <= 2.718281828459045**r.log_ratio <= ends[1]
        # in-sample 99 % intervals (each group shrunk towards its parent) hold at least 90 % of the rows
        assert inside >= 0.9 * len(rows), family


CALIBRATED = (
    # (family, source file or None for all) whose held-out coverage meets issue 17's target at 50 and
    # 80 %; training memory does not (docs/validate.md, Intervals)
    ("inference memory", None),
    ("throughput", "inference.csv"),
    ("training speed", None),
)
TARGET = {0.5: (0.43, 0.57), 0.8: (0.75, 0.85)}
"""Issue 17: the share of held-out measured values inside the 50 % and 80 % intervals."""


def _by_document(residuals: tuple[Residual, ...]) -> list[Residual]:
    """The residuals with their source document in place of the GPU: held out by document."""
    return [r.model_copy(update={"gpu": r.setup.split(" ", 1)[1]}) for r in residuals]


@pytest.mark.parametrize("held_out_by", ["gpu", "document"])
def test_held_out_coverage_meets_the_target(held_out_by: str) -> None:
    # A regression pin of the bundled model: each GPU's (or document's) rows scored against the error
    # model rebuilt without them (docs/validate.md). By document, no document's bias stays in the model
    # that scores its own rows.
    data = error_model_data()
    residuals = list(data.residuals) if held_out_by == "gpu" else _by_document(data.residuals)
    levels = TARGET if held_out_by == "gpu" else {0.8: TARGET[0.8]}  # by document, 50 %: 44-57.1 %
    for family, source in CALIBRATED:
        for level, (low, high) in levels.items():
            got = held_out_coverage(
                residuals=residuals, level=level, k=data.shrinkage_k, family=family, source=source
            )
            assert got.coverage is not None and low <= got.coverage <= high, (family, source, level, got)
