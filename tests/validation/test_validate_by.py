"""``gpuplan validate memory.csv --by framework,class,method``: each group's rows counted from the file
itself, its MAPE the mean of those rows' APEs, and the table printed under its title."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner
from validation_data import SHARED, report

from gpuplan.interfaces.cli.app import app

pytestmark = pytest.mark.validation
runner = CliRunner()


def test_groups_count_the_files_rows_and_average_their_errors() -> None:
    path = SHARED / "memory.csv"
    if not path.is_file():
        pytest.skip(f"validation data not found at {path}")
    result = runner.invoke(app, ["validate", str(path), "--by", "framework,method", "--format", "json"])
    assert result.exit_code == 0, result.output
    groups = json.loads(result.stdout)["breakdown"]
    apes = {
        r.id: r.ape for r in report("memory.csv").rows if r.ape is not None and r.metric == "peak_gib_per_gpu"
    }
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["id"] in apes]
    for group in (g for g in groups if g["metric"] == "peak_gib_per_gpu"):
        members = [r["id"] for r in rows if (r["framework"], r["method"]) == tuple(group["key"].values())]
        assert group["stats"]["n"] == len(members) > 0
        assert group["stats"]["mape"] == pytest.approx(np.mean([apes[i] for i in members]))
    assert sum(g["stats"]["n"] for g in groups if g["metric"] == "peak_gib_per_gpu") == len(apes)


def test_the_table_prints_the_groups_under_their_keys() -> None:
    path = SHARED / "memory.csv"
    if not path.is_file():
        pytest.skip(f"validation data not found at {path}")
    out = runner.invoke(app, ["validate", str(path), "--by", "framework,class,method"]).output
    assert "By framework, class, method" in out and "torchtitan" in out and "dense" in out
    bad = runner.invoke(app, ["validate", str(path), "--by", "vendor"])
    assert bad.exit_code == 1 and "--by 'vendor'" in bad.output and "Traceback" not in bad.output
