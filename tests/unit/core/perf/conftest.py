"""Fixtures shared by the performance-model tests: the reference model and GPU of their hand checks."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec


@pytest.fixture(scope="session")
def llama8b() -> ModelSpec:
    return get_model("meta-llama/Llama-3.1-8B")


@pytest.fixture(scope="session")
def h100() -> GpuSpec:
    return default_catalog().get_gpu("H100-SXM")
