"""``narrow_with``: of a result's figures, the one whose band shrinks most once its GPU is calibrated."""

from __future__ import annotations

from gpuplan.core.calibration.error_model import Residual, build_error_model
from gpuplan.core.calibration.narrowing import band_width, narrow_with

PRIOR, FITTED = "gpu priors only", "gpu calibrated"


def _rows(family: str, evidence: str, spread: float) -> list[Residual]:
    """Ten GPUs, one residual each, evenly spread over ±``spread`` in log space."""
    return [
        Residual(
            source="t.csv", id=f"{family}{evidence}{i}", gpu=f"{evidence}{i}", setup=f"{evidence}{i}",
            path=(family, "light load", evidence), log_ratio=spread * (i / 4.5 - 1.0),
        )
        for i in range(10)
    ]  # fmt: skip


MODEL = build_error_model(
    residuals=[
        *_rows("ttft", PRIOR, 1.0), *_rows("ttft", FITTED, 0.2),  # calibrating TTFT narrows it 5x in log
        *_rows("tpot", PRIOR, 0.4), *_rows("tpot", FITTED, 0.3),  # TPOT a little
        *_rows("throughput", PRIOR, 0.1), *_rows("throughput", FITTED, 0.5),  # throughput: wider
    ]
)  # fmt: skip


def _figures(*families: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    return {f: ((f, "light load", PRIOR), (f, "light load", FITTED)) for f in families}


def test_the_figure_that_shrinks_most_is_named() -> None:
    found = narrow_with(model=MODEL, level=0.8, gpu="X", command="bench", figures=_figures("tpot", "ttft"))
    assert found is not None and found.metric == "ttft"
    assert found.group_now == "ttft/light load/gpu priors only"
    assert found.group_after == "ttft/light load/gpu calibrated"
    now = band_width(model=MODEL, path=("ttft", "light load", PRIOR), level=0.8)
    assert found.width_now == now and found.width_after < now


def test_no_benchmark_when_calibrating_would_not_narrow() -> None:
    assert narrow_with(model=MODEL, level=0.8, gpu="X", command="b", figures=_figures("throughput")) is None
    assert narrow_with(model=MODEL, level=0.8, gpu="X", command="b", figures={}) is None
