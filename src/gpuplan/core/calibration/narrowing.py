"""What would shrink an interval: the error-model group a figure would read once its GPU is calibrated.

A figure on a GPU whose family has no measurements reads a ``gpu priors only`` group (or, where that
has no residuals, its broader parent); once the user's own benchmark of that GPU is fitted
(``gpuplan calibrate``), the family counts as calibrated and the same figure reads the ``gpu
calibrated`` group of its regime. Of a result's figures, the one whose interval would shrink most
(relatively: 1 − width_after / width_now, width = high / low − 1 of the group's band, as ``validate
--intervals`` measures it) is named with the benchmark that does it. A figure whose calibrated group
is not narrower (a sparse group can be wider) is not a reason to benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuplan.core.calibration.error_model import ErrorModel
from gpuplan.core.calibration.uncertainty import band, source
from gpuplan.core.frozen import FrozenModel


class NarrowWith(FrozenModel):
    """The one benchmark that would narrow a result's intervals most, and by how much."""

    gpu: str
    """The GPU to benchmark."""
    command: str
    """The benchmark, then the ``calibrate`` that fits it (shell words; ``URL`` is the user's server)."""
    metric: str
    """The figure whose interval shrinks most (a figure name of the result, e.g. ``tpot_ms``)."""
    level: float
    width_now: float
    """high / low − 1 of that figure's band at ``level``, from the group it reads now."""
    width_after: float
    """The same for the group it reads once the GPU is calibrated."""
    group_now: str
    group_after: str


def band_width(*, model: ErrorModel, path: Sequence[str], level: float) -> float | None:
    """high / low − 1 of ``path``'s band at ``level`` (None: no group has residuals)."""
    ends = band(model=model, path=path, level=level)
    return None if ends is None else ends[1] / ends[0] - 1.0


def narrow_with(
    *,
    model: ErrorModel,
    level: float,
    gpu: str,
    command: str,
    figures: Mapping[str, tuple[Sequence[str], Sequence[str]]],
) -> NarrowWith | None:
    """Of ``figures`` (``name: (path now, path once calibrated)``), the one whose band shrinks most;
    None when calibrating narrows none of them."""
    best: tuple[float, NarrowWith] | None = None
    for name, (now, after) in figures.items():
        w_now, w_after = (
            band_width(model=model, path=now, level=level),
            band_width(model=model, path=after, level=level),
        )
        g_now, g_after = source(model=model, path=now), source(model=model, path=after)
        if w_now is None or w_after is None or g_now is None or g_after is None or w_after >= w_now:
            continue
        gain = 1.0 - w_after / w_now
        if best is None or gain > best[0]:
            found = NarrowWith(
                gpu=gpu,
                command=command,
                metric=name,
                level=level,
                width_now=w_now,
                width_after=w_after,
                group_now=g_now.group,
                group_after=g_after.group,
            )
            best = (gain, found)
    return None if best is None else best[1]
