"""``gpuplan validate --by``: the error grouped by columns of the validation file (framework, method,
GPU, ...) and the model's class (dense or MoE), one group per metric.

A row's keys come from its own CSV row (matched by id); ``class`` is ``moe`` when the row's model has
routed experts (``ModelSpec.moe``), ``dense`` when it has none, ``?`` when the model is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from gpuplan.adapters.models.registry import get_model
from gpuplan.core.errors import GpuplanError, UserInputError
from gpuplan.usecases.validation.cases import Case, read_cases
from gpuplan.usecases.validation.predict import RowResult
from gpuplan.usecases.validation.report import GroupStats, stats

__all__ = ["BY_KEYS", "breakdown", "grouped", "parse_by"]

_MODEL_CLASS = "class"
BY_KEYS = ("framework", _MODEL_CLASS, "method", "gpu", "model")
"""What ``--by`` groups on: CSV columns, and ``class`` (dense / MoE)."""
_UNKNOWN = "?"


def parse_by(raw: str) -> tuple[str, ...]:
    """``--by framework,class,method`` → the keys; UserInputError naming ``--by`` on an unknown one."""
    keys = tuple(k.strip().lower() for k in raw.split(",") if k.strip())
    unknown = [k for k in keys if k not in BY_KEYS]
    if not keys or unknown:
        raise UserInputError(
            f"--by {raw!r}: {', '.join(unknown) or 'no key'} is not one of {', '.join(BY_KEYS)}",
            hint="e.g. --by framework,class,method",
        )
    return keys


def _model_class(model_id: str) -> str:
    if not model_id:
        return _UNKNOWN
    try:
        return "moe" if get_model(model_id).moe is not None else "dense"
    except GpuplanError:
        return _UNKNOWN


def _value(case: Case, key: str) -> str:
    return _model_class(case.get("model")) if key == _MODEL_CLASS else case.get(key) or _UNKNOWN


def breakdown(cases: Sequence[Case], rows: Sequence[RowResult], by: Sequence[str]) -> list[GroupStats]:
    """Error statistics per (group, metric) over the rows with an APE, largest groups first."""
    by_id = {c.id: c for c in cases}
    groups: dict[tuple[tuple[str, ...], str], list[float]] = {}
    for row in rows:
        case = by_id.get(row.id)
        if row.ape is None or case is None:
            continue
        values = tuple(_value(case, key) for key in by)
        groups.setdefault((values, row.metric), []).append(row.ape)
    ranked = sorted(groups.items(), key=lambda item: (item[0][1], -len(item[1]), item[0][0]))
    return [
        GroupStats(key=dict(zip(by, values, strict=True)), metric=metric, stats=stats(apes))
        for (values, metric), apes in ranked
    ]


class _Grouped(Protocol):
    @property
    def rows(self) -> list[RowResult]: ...

    def model_copy(self, *, update: dict[str, object] | None = None, deep: bool = False) -> _Grouped: ...


_ReportT = TypeVar("_ReportT", bound=_Grouped)


def grouped(path: Path, report: _ReportT, by: Sequence[str]) -> _ReportT:
    """``report`` (a validation or a cross-validation) with its ``breakdown`` by ``by`` (unchanged when
    ``by`` is empty)."""
    if not by:
        return report
    _, cases = read_cases(path)
    copied = report.model_copy(update={"breakdown": breakdown(cases, report.rows, by)})
    return copied  # type: ignore[return-value]
