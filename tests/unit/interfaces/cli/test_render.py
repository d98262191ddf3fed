"""The CLI's cell helpers: a figure with its interval, and an error-model group's size."""

from __future__ import annotations

from gpuplan.core.calibration.uncertainty import IntervalSource
from gpuplan.interfaces.cli.render import group_read, ranged


def test_group_read_names_rows_gpus_and_setups() -> None:
    read = IntervalSource(group="ttft/light load", rows=12, gpus=2, setups=3)
    assert group_read(read) == "ttft/light load (12 rows, 2 GPU(s), 3 setup(s))"
    # answers written before setups were recorded print without them
    old = read.model_copy(update={"setups": None})
    assert group_read(old) == "ttft/light load (12 rows, 2 GPU(s))"


def test_ranged_prints_open_ends_and_bare_points() -> None:
    assert ranged(2560.0, 1400.0, 2400.0) == "2,560 (1.4k-2.4k)"
    assert ranged(10.0, None, None).endswith("(--open)")
    assert ranged(5.0, 5.0, 5.0) == "5.00"  # no spread: the figure alone
    assert ranged(None, 1.0, 2.0) == "-"
