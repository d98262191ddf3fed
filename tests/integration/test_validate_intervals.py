"""``gpuplan validate --intervals``: the contract of docs/json.md on the bundled test CSVs."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Invoke = Callable[..., Any]

DATA = Path(__file__).parent / "data"


def _intervals(invoke: Invoke, *args: str | Path) -> Any:
    run = invoke("validate", *args, "--intervals", "--format", "json")
    assert run.exit_code == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize("name", ["inference_small.csv", "inference_memory_small.csv", "training_small.csv"])
def test_every_predicted_row_has_an_interval_around_it(invoke: Invoke, name: str) -> None:
    data = _intervals(invoke, DATA / name)
    assert data["summary"]["interval"] == 0.8
    for row in data["rows"]:
        if row["predicted"] is None or row["metric"] == "fits":
            assert row["low"] is None and row["high"] is None
        else:
            assert 0 < row["low"] < row["high"]
    for metric, st in data["summary"]["by_metric"].items():
        bounded = [r for r in data["rows"] if r["metric"] == metric and r["low"] is not None]
        if not bounded:
            assert st["coverage"] is None and st["median_width"] is None
            continue
        inside = [r["low"] <= r["measured"] <= r["high"] for r in bounded]
        assert st["coverage"] == pytest.approx(sum(inside) / len(inside))
        widths = [r["high"] / r["low"] - 1 for r in bounded]
        assert st["median_width"] == pytest.approx(statistics.median(widths))


def test_a_wider_level_gives_wider_intervals(invoke: Invoke) -> None:
    path = DATA / "inference_small.csv"
    narrow = _intervals(invoke, path, "--interval", "0.5")
    wide = _intervals(invoke, path, "--interval", "0.95")
    assert narrow["summary"]["interval"] == 0.5 and wide["summary"]["interval"] == 0.95
    for a, b in zip(narrow["rows"], wide["rows"], strict=True):
        assert a["id"] == b["id"] and a["predicted"] == b["predicted"]
        if a["low"] is not None:
            assert b["low"] < a["low"] and b["high"] > a["high"]


def test_without_intervals_the_rows_carry_no_interval_fields(invoke: Invoke) -> None:
    run = invoke("validate", DATA / "inference_small.csv", "--format", "json")
    data = json.loads(run.stdout)
    assert "interval" not in data["summary"]
    assert all("low" not in r for r in data["rows"])


def test_table_shows_coverage(invoke: Invoke) -> None:
    run = invoke("validate", DATA / "inference_small.csv", "--intervals")
    assert run.exit_code == 0, run.stderr
    assert "80 % intervals" in run.stdout and "coverage" in run.stdout


@pytest.mark.parametrize("level", ["0.3", "1", "0.995"])
def test_a_level_outside_the_range_names_the_flag(invoke: Invoke, level: str) -> None:
    run = invoke("validate", DATA / "inference_small.csv", "--interval", level)
    assert run.exit_code != 0
    assert f"--interval {float(level):g} is outside 0.5..0.99" in run.stderr
    assert "Traceback" not in run.stderr


def test_intervals_refuse_cross_validation(invoke: Invoke) -> None:
    run = invoke("validate", DATA / "inference_small.csv", "--intervals", "--cross-validate", "gpu")
    assert run.exit_code != 0
    assert "--intervals does not combine with --cross-validate" in run.stderr
