"""``gpuplan validate training.csv --cross-validate gpu``: every fold refits the training factors
without its GPU (``usecases/calibration/crossval_training.py``) and reports that GPU's held-out error."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from validation_data import SHARED

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.interfaces.cli.app import app
from gpuplan.usecases.calibration import crossval_training
from gpuplan.usecases.calibration.crossval import cross_validate_file

pytestmark = pytest.mark.validation

HELD_OUT = "H200-SXM"
FITTED_ON = "H100-96GB-SXM"
"""Two GPUs of training.csv's A+B rows: 14 throughput rows of FITTED_ON (≥ MIN_TRAINING_FIT_ROWS) and
five rows of HELD_OUT, whose own four throughput rows are too few to fit FITTED_ON's fold on."""


def _subset(tmp_path: Path) -> Path:
    source = SHARED / "training.csv"
    if not source.is_file():
        pytest.skip(f"validation data not found at {source} (clone the repo next to shared/)")
    with source.open(newline="") as f:
        reader = csv.DictReader(f)
        fields = list(reader.fieldnames or [])
        rows = [r for r in reader if r["gpu"] in {HELD_OUT, FITTED_ON} and r["quality"] in {"A", "B"}]
    out = tmp_path / "training.csv"
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return out


def test_each_fold_fits_without_its_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[set[str]] = []
    real = getattr(crossval_training, "fit_training_calibration")  # noqa: B009 (not re-exported)

    def spy(rows: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append({r.get("gpu") for r in rows})
        return real(rows, *args, **kwargs)

    monkeypatch.setattr(crossval_training, "fit_training_calibration", spy)
    cv = cross_validate_file(_subset(tmp_path), default_catalog(), grades=("A", "B"), by="gpu")
    assert [(f.group, f.rows) for f in cv.folds] == [(HELD_OUT, 5)]  # FITTED_ON's fold: too few rows
    assert seen == [{FITTED_ON}]
    assert {r.gpu for r in cv.rows} == {HELD_OUT}
    for r in cv.rows:
        assert r.predicted is not None and r.ape == pytest.approx(abs(r.predicted / r.measured - 1))


def test_memory_rows_are_refused_in_one_line(tmp_path: Path) -> None:
    memory = SHARED / "memory.csv"
    if not memory.is_file():
        pytest.skip(f"validation data not found at {memory}")
    result = CliRunner().invoke(app, ["validate", str(memory), "--cross-validate", "gpu"])
    assert result.exit_code != 0
    first = result.output.strip().splitlines()[0]
    assert "--cross-validate needs inference or training rows" in first and "Traceback" not in result.output


def test_held_out_rows_group_by_framework(tmp_path: Path) -> None:
    subset = _subset(tmp_path)
    result = CliRunner().invoke(
        app, ["validate", str(subset), "--cross-validate", "gpu", "--by", "framework", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    held = [r for r in data["rows"] if r["ape"] is not None]
    with subset.open(newline="") as f:
        framework = {r["id"]: r["framework"] for r in csv.DictReader(f)}
    groups = {(g["key"]["framework"], g["metric"]): g["stats"]["n"] for g in data["breakdown"]}
    expected: dict[tuple[str, str], int] = {}
    for r in held:
        key = (framework[r["id"]], r["metric"])
        expected[key] = expected.get(key, 0) + 1
    assert groups == expected and {r["gpu"] for r in held} == {HELD_OUT}
