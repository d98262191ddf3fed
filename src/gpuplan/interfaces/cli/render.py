"""The only module that imports rich: tables and one-line errors."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from pydantic import BaseModel
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from gpuplan.core.calibration.uncertainty import IntervalSource
from gpuplan.core.redact import redact
from gpuplan.interfaces.jsonout import finite

PIPE_WIDTH = 160
"""Columns when stdout is not a terminal (logs, CI, docs): rich would otherwise assume 80 and cut the
13-column plan table; COLUMNS still wins."""


def _width() -> int | None:
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() else PIPE_WIDTH


console = Console(soft_wrap=True, width=_width())
err_console = Console(stderr=True, soft_wrap=True, width=_width())


def emit_json(obj: BaseModel | dict[str, Any] | list[Any]) -> None:
    """Stable JSON on stdout (pydantic field names, no rich markup)."""
    data = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    sys.stdout.write(json.dumps(finite(data), indent=2, allow_nan=False, default=str) + "\n")


_ResultT = TypeVar("_ResultT", bound=BaseModel)


def json_or_table(draw: Callable[[_ResultT], None]) -> Callable[[_ResultT, str], None]:
    """A view of one result: the documented JSON for ``--format json``, else ``draw``'s tables."""

    def view(result: _ResultT, f: str) -> None:
        if f == "json":
            emit_json(result)
        else:
            draw(result)

    view.__doc__ = draw.__doc__
    return view


def error(message: str) -> None:
    """One line on stderr, no traceback; URL passwords and API keys in it masked."""
    line = Text("error: ", style="bold red")
    line.append(redact(message))
    err_console.print(line, highlight=False)


def note(message: str) -> None:
    """One advisory line on stderr (a deprecated name read, ...); stdout stays the result."""
    line = Text("note: ", style="bold yellow")
    line.append(redact(message))
    err_console.print(line, highlight=False)


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    t = Table(title=title, title_justify="left", header_style="bold")
    for c in columns:
        t.add_column(
            c,
            justify="left"
            if c in ("id", "gpu", "model", "metric", "reason", "layout", "note", "part", "level")
            else "right",
        )
    for r in rows:
        t.add_row(*[_cell(v) for v in r])
    console.print(t)


def lines(items: Sequence[str], *, title: str | None = None) -> None:
    if title:
        console.print(f"[bold]{title}[/]")
    for item in items:
        console.print(f"  - {item}", highlight=False, markup=False)


def _cell(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return "-"
        return f"{v:,.0f}" if abs(v) >= 100 else (f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}")
    return str(v)


def group_read(s: IntervalSource) -> str:
    """The error-model group an interval read, with its size: ``ttft/… (12 rows, 2 GPU(s), 3 setup(s))``
    (no setups in answers written before they were recorded)."""
    setups = "" if s.setups is None else f", {s.setups} setup(s)"
    return f"{s.group} ({s.rows} rows, {s.gpus} GPU(s){setups})"


def ranged(value: float | None, low: float | None, high: float | None) -> str:
    """A figure and its interval as one cell, the ends to 3 significant digits: ``2,560 (1.4k-2.4k)``;
    an open low end (null) prints as ``-``, an open high end as ``open``; a figure without spread (ends
    equal to it) alone."""
    if value is None:
        return "-"
    if low == high == value:
        return _cell(value)
    return f"{_cell(value)} ({_short(low)}-{_short(high) if high is not None else 'open'})"


def _short(v: float | None) -> str:
    if v is None or v != v or v in (float("inf"), float("-inf")):
        return "-"
    return f"{v / 1e3:.3g}k" if abs(v) >= 1e3 else f"{v:.3g}"


@contextmanager
def progress_bar(description: str) -> Iterator[Callable[[float], None] | None]:
    """A transient progress bar on stderr when it is a terminal; yields an update(fraction) function,
    or None when there is no terminal (logs and pipes get no bar)."""
    if not err_console.is_terminal:
        yield None
        return
    with Progress(transient=True, console=err_console) as bar:
        task = bar.add_task(description, total=1.0)
        yield lambda fraction: bar.update(task, completed=fraction)
