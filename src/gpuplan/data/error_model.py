"""The bundled error model (``calibration/error_model.json``): held-out residuals and how they were
obtained, and the shrunk per-group quantiles built from them (``core/calibration/error_model.py``)."""

from __future__ import annotations

import json
from functools import lru_cache

from gpuplan.core.calibration.error_model import ErrorModel, ErrorModelData
from gpuplan.core.errors import DataError, validate_data
from gpuplan.data import read_bundled_text

__all__ = ["ERROR_MODEL_FILE", "default_error_model", "error_model_data", "parse_error_model_data"]

ERROR_MODEL_FILE = ("calibration", "error_model.json")


def parse_error_model_data(text: str, *, origin: str) -> ErrorModelData:
    """Validate the file's text; DataError names ``origin`` and the field."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{origin}: not JSON ({exc})") from None
    return validate_data(ErrorModelData, raw, origin=origin)


@lru_cache(maxsize=1)
def error_model_data() -> ErrorModelData:
    """The bundled residuals and provenance (read once)."""
    return parse_error_model_data(read_bundled_text(*ERROR_MODEL_FILE), origin="bundled error_model.json")


@lru_cache(maxsize=1)
def default_error_model() -> ErrorModel:
    """The bundled error model's groups (built once from the bundled residuals)."""
    return error_model_data().model()
