"""Shared fixtures: one Llama-3.1-8B replica on an H100-SXM (bundled model and catalog, offline)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.data.bundled_calibration import default_calibration

MODEL = "meta-llama/Llama-3.1-8B"
GPU = "H100-SXM"


def build(layout: Layout | None = None, context: int = 4096) -> ReplicaModel:
    return ReplicaModel.build(
        get_model(MODEL),
        load_catalog().get_gpu(GPU),
        layout or Layout(),
        context_tokens=context,
        cal=default_calibration(),
    )


Builder = Callable[..., ReplicaModel]


@pytest.fixture(scope="session")
def replica() -> ReplicaModel:
    return build()


@pytest.fixture(scope="session")
def build_replica() -> Builder:
    return build
