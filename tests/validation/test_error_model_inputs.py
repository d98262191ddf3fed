"""The shipped error model (``data/calibration/error_model.json``) is what its builder produces from
the validation files it records (``usecases/calibration/error_model_build.py``).

The full rebuild refits the calibration once per GPU (minutes); these tests check that the recorded
inputs are today's files, rebuild the memory residuals in full and one held-out GPU of the serving and
training cross-validations, and compare with the shipped residuals."""

from __future__ import annotations

import pytest
from validation_data import SHARED

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.core.calibration.error_model import Residual
from gpuplan.data.bundled_calibration import prior_calibration
from gpuplan.data.error_model import error_model_data
from gpuplan.usecases.calibration.error_model_build import (
    GRADES,
    MEMORY_FILES,
    family_fitted_in_fold,
    memory_residuals,
    residuals_of,
    sha256,
    training_residuals,
)
from gpuplan.usecases.calibration.published_serving import fit_calibration, fit_rows
from gpuplan.usecases.validation.cases import read_cases
from gpuplan.usecases.validation.predict import predict_case

pytestmark = pytest.mark.validation
REBUILD = "rebuild it: " + error_model_data().provenance.command


def _shared() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"validation data not found at {SHARED} (clone the repo next to shared/)")


def _shipped(source: str, gpu: str | None = None) -> list[Residual]:
    return [r for r in error_model_data().residuals if r.source == source and gpu in (None, r.gpu)]


def _same(rebuilt: list[Residual], shipped: list[Residual]) -> None:
    assert [r.id for r in rebuilt] == [r.id for r in shipped], REBUILD
    for a, b in zip(rebuilt, shipped, strict=True):
        assert a.path == b.path, (a.id, REBUILD)
        assert a.log_ratio == pytest.approx(b.log_ratio, abs=2e-6), (a.id, REBUILD)


def test_recorded_inputs_are_the_current_files() -> None:
    _shared()
    for name, recorded in error_model_data().provenance.inputs.items():
        assert sha256(SHARED / name) == recorded.sha256, (
            f"{name} changed since the error model was built; {REBUILD}"
        )
        rows = [c for c in read_cases(SHARED / name)[1] if c.quality in GRADES]
        assert len(rows) == recorded.rows


@pytest.mark.parametrize("name", MEMORY_FILES)
def test_memory_residuals_rebuild(name: str) -> None:
    _shared()
    rebuilt, _ = memory_residuals(SHARED, default_catalog(), name)
    _same(rebuilt, _shipped(name))


def test_one_serving_fold_rebuilds() -> None:
    """H100-NVL held out: the serving factors refitted on every other GPU's rows (as ``--cross-validate
    gpu`` does), its rows predicted with them."""
    _shared()
    gpu, catalog = "H100-NVL", default_catalog()
    cases = [c for c in read_cases(SHARED / "inference.csv")[1] if c.quality in GRADES]
    train = [c for c in cases if c.get("gpu") != gpu]
    cal = fit_calibration(train, catalog, prior_calibration(), data="test", command="test")[0]
    held = [c for c in cases if c.get("gpu") == gpu]
    results = [predict_case(c, catalog, cal) for c in held]
    fitted = family_fitted_in_fold(fit_rows(cases), catalog)
    _same(residuals_of("inference.csv", held, results, fitted=fitted), _shipped("inference.csv", gpu))


def test_one_training_fold_rebuilds() -> None:
    _shared()
    gpu = "H200-NVL"
    rebuilt, _ = training_residuals(SHARED, default_catalog(), gpus={gpu})
    shipped = _shipped("training.csv", gpu)
    assert shipped, f"no shipped training residual of {gpu}"
    _same(rebuilt, shipped)
