"""Measurement runs (``bench gpu``, ``bench train``): each row is committed as it is taken; Ctrl-C keeps them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuplan import __version__
from gpuplan.adapters.store.database import Store
from gpuplan.adapters.store.measurements import open_measurement_run, run_measurements, store_each
from gpuplan.core.errors import BenchmarkError


def _row(value: float) -> dict[str, Any]:
    return {
        "kind": "test",
        "name": f"m{value:g}",
        "status": "ok",
        "value": value,
        "unit": "s",
        "extra": [value],
    }


def test_each_row_is_committed_before_the_next_is_measured(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    announced: list[tuple[str, str]] = []
    store, run_id = open_measurement_run(
        url, "bench-test", {"n": 2}, {"device": "cpu"}, announce=lambda *a: announced.append(a)
    )
    assert announced == [(run_id, store.url)]
    run = Store(url).run(run_id)
    assert (run.kind, run.status, run.config, run.conditions, run.tool_version) == (
        "bench-test", "running", {"n": 2}, {"device": "cpu"}, __version__,
    )  # fmt: skip
    stored_before: list[int] = []

    def measured() -> Iterator[float]:
        for value in (1.0, 2.0):
            stored_before.append(len(run_measurements(Store(url), run_id)))
            yield value

    seen: list[float] = []
    results = store_each(store, run_id, measured(), _row, seen.append, interrupted_message="unused")
    assert results == seen == [1.0, 2.0]
    assert stored_before == [0, 1]
    assert run_measurements(Store(url), run_id) == [_row(1.0), _row(2.0)]


def test_ctrl_c_marks_the_run_interrupted_and_keeps_what_was_stored(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    store, run_id = open_measurement_run(url, "bench-test", {}, {})

    def measured() -> Iterator[float]:
        yield 1.0
        raise KeyboardInterrupt

    with pytest.raises(BenchmarkError, match="so far are stored"):
        store_each(
            store, run_id, measured(), _row, None, interrupted_message="interrupted; so far are stored"
        )
    assert Store(url).run(run_id).status == "interrupted"
    assert run_measurements(Store(url), run_id) == [_row(1.0)]
