"""``gpuplan calibrate RESULTS.csv -o PROFILE`` end to end, and the store path without any runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from typer.testing import CliRunner

from gpuplan.interfaces.cli.app import app
from gpuplan.usecases.calibration.measured_rows import rows_to_csv
from gpuplan.usecases.calibration.profile import load_calibration

_spec = importlib.util.spec_from_file_location(
    "_calibrate_synthetic",
    Path(__file__).parents[1] / "unit" / "usecases" / "calibration" / "test_calibrate.py",
)
assert _spec is not None and _spec.loader is not None
_synthetic = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_synthetic)
TRUE, synthetic = _synthetic.TRUE, _synthetic.synthetic


def test_calibrate_csv_writes_profile_and_reports_errors(tmp_path: Path) -> None:
    csv_path, profile = tmp_path / "results.csv", tmp_path / "profile.yaml"
    csv_path.write_text(rows_to_csv(synthetic()), encoding="utf-8")
    result = CliRunner().invoke(app, ["calibrate", str(csv_path), "-o", str(profile), "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    overall = next(e for e in out["errors"] if e["kind"] == "all")
    assert overall["mape_after"] < overall["mape_before"]
    cal = load_calibration(profile)
    assert abs(cal.engine("vllm") / TRUE["vllm_eff"] - 1) < 0.05
    assert "results.csv" in cal.provenance.data
    table = CliRunner().invoke(app, ["calibrate", str(csv_path)])
    assert table.exit_code == 0 and "engine_efficiency.vllm" in table.stdout


def test_calibrate_needs_a_source_and_rows(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["calibrate"]).exit_code == 1
    empty = runner.invoke(app, ["calibrate", "--from-store", "--store", f"sqlite:///{tmp_path / 's.sqlite'}"])
    assert empty.exit_code == 1 and "no usable results" in empty.output
