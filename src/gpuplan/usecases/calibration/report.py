"""Prediction error of a calibration on result rows: mean absolute percentage error per kind.

The APE is the one ``gpuplan validate`` reports (``|predicted / measured − 1|``), but the mean is
``statistics.fmean`` (exactly rounded), where the validation report's ``stats`` takes numpy's
pairwise mean with the median and p90; the two differ in the last bit, so each keeps its own to keep
the ``gpuplan calibrate`` and ``gpuplan validate`` JSON unchanged.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.usecases.calibration.measured_predict import predict_row
from gpuplan.usecases.calibration.measured_rows import ResultRow


class KindError(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str
    rows: int
    predicted: int
    mape_before: float | None
    mape_after: float | None


def _apes(
    rows: Sequence[ResultRow], catalog: Catalog, cal: Calibration, training: TrainingCalibration
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        p = predict_row(row, catalog, cal, training)
        if p is not None and row.value > 0:
            out[row.kind].append(abs(p / row.value - 1.0))
    return out


def _mean_ape(apes: Sequence[float]) -> float | None:
    return statistics.fmean(apes) if apes else None


def mape(
    rows: Sequence[ResultRow], catalog: Catalog, cal: Calibration, training: TrainingCalibration
) -> float:
    """Mean APE over every predicted row (all kinds)."""
    values = [v for apes in _apes(rows, catalog, cal, training).values() for v in apes]
    return statistics.fmean(values) if values else float("nan")


def compare(
    rows: Sequence[ResultRow],
    catalog: Catalog,
    before: tuple[Calibration, TrainingCalibration],
    after: tuple[Calibration, TrainingCalibration],
) -> list[KindError]:
    """Per kind (and ``all``): rows, rows predicted, MAPE before and after."""
    b, a = _apes(rows, catalog, *before), _apes(rows, catalog, *after)
    kinds = sorted({r.kind for r in rows})
    out = [
        KindError(
            kind=k,
            rows=sum(r.kind == k for r in rows),
            predicted=len(a.get(k, [])),
            mape_before=_mean_ape(b.get(k, [])),
            mape_after=_mean_ape(a.get(k, [])),
        )
        for k in kinds
    ]
    every_b, every_a = [v for x in b.values() for v in x], [v for x in a.values() for v in x]
    out.append(
        KindError(
            kind="all",
            rows=len(rows),
            predicted=len(every_a),
            mape_before=_mean_ape(every_b),
            mape_after=_mean_ape(every_a),
        )
    )
    return out
