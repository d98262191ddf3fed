"""Read and write calibration profiles: the inference factors (``core/calibration/serving.py``) plus
an optional ``training_mfu`` table (``family:dtype`` → MFU) merged into the training calibration; and
the provenance every fit stamps on the factors it writes."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import yaml

from gpuplan.adapters import yamltext
from gpuplan.core.calibration.serving import Calibration, FitProvenance, parse_calibration
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.errors import DataError, FileFormatError
from gpuplan.data.bundled_calibration import default_training_calibration

TRAINING_KEY = "training_mfu"
HEADER = (
    "# gpuplan calibration profile: efficiency factors fitted by `gpuplan calibrate`\n"
    "# (meanings: docs/model.md section 4). Load with --calibration THIS_FILE.\n"
)


def fit_provenance(*, method: str, data: str, rows: int, command: str) -> FitProvenance:
    """How a fit obtained its factors, dated today (so a user can judge and repeat it)."""
    return FitProvenance(
        method=method, data=data, rows=rows, command=command, fitted_on=date.today().isoformat()
    )


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yamltext.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FileFormatError(
            f"cannot read calibration profile {path}: {exc.strerror}",
            hint="write one with gpuplan calibrate -o PROFILE.yaml",
        ) from None
    except yaml.YAMLError as exc:
        raise FileFormatError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: a calibration profile is a mapping")
    return data


def load_calibration(path: Path) -> Calibration:
    """The inference calibration of a profile (what ``predict``/``recommend``/``simulate`` use)."""
    data = _read(path)
    data.pop(TRAINING_KEY, None)
    return parse_calibration(data, origin=str(path))


def load_training_calibration(path: Path) -> TrainingCalibration:
    """The bundled training calibration with the profile's ``training_mfu`` entries laid over it (what
    ``train-plan``, ``train-fit`` and ``recommend --task train`` use). When the profile has entries, the
    provenance is the profile's fit, so the plan can say where its factors came from."""
    data = _read(path)
    mfu = data.get(TRAINING_KEY) or {}
    base = default_training_calibration()
    if not isinstance(mfu, dict) or not all(_is_share(v) for v in mfu.values()):
        raise DataError(f"{path}: {TRAINING_KEY} must map family:dtype to a share in (0, 1.5]")
    if not mfu:
        return base
    provenance = parse_calibration({k: v for k, v in data.items() if k != TRAINING_KEY}, origin=str(path))
    return base.model_copy(
        update={
            "mfu": base.mfu | {str(k): float(v) for k, v in mfu.items()},
            "provenance": provenance.provenance,
        }
    )


def _is_share(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < float(value) <= 1.5


def write_profile(path: Path, cal: Calibration, training_mfu: dict[str, float]) -> None:
    data: dict[str, Any] = cal.model_dump(mode="json")
    if training_mfu:
        data[TRAINING_KEY] = dict(sorted(training_mfu.items()))
    path.write_text(HEADER + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
