"""Workloads for the serving simulator: arrival processes, length distributions and traces.

Everything here is pure: a trace arrives as text (the CLI reads the file) and every random draw
comes from one ``numpy.random.Generator`` seeded by the caller, so a (spec, seed) pair always gives
the same requests.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, model_validator

from gpuplan.core import jsontext
from gpuplan.core.errors import FileFormatError, UserInputError
from gpuplan.core.frozen import FiniteModel
from gpuplan.core.workload import MAX_TOKENS

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class LengthDist(FiniteModel):
    """Token count of each request: ``fixed`` (value), ``uniform`` (low..high inclusive), ``normal``
    (mean, std), ``lognormal`` (mean, std of the tokens themselves), ``empirical`` (resample values)."""

    kind: Literal["fixed", "uniform", "normal", "lognormal", "empirical"] = "fixed"
    value: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    low: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    high: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    mean: float | None = Field(default=None, gt=0, le=MAX_TOKENS)
    std: float | None = Field(default=None, ge=0, le=MAX_TOKENS)
    values: tuple[int, ...] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _needs(self) -> LengthDist:
        need = {
            "fixed": ("value",),
            "uniform": ("low", "high"),
            "normal": ("mean", "std"),
            "lognormal": ("mean", "std"),
            "empirical": ("values",),
        }[self.kind]
        missing = [name for name in need if getattr(self, name) is None]
        if missing:
            raise ValueError(f"a {self.kind} length needs {', '.join(missing)}")
        if self.kind == "uniform" and self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"uniform length: low {self.low} > high {self.high}")
        if self.values is not None and min(self.values) < 1:
            raise ValueError("empirical lengths must be >= 1 token")
        return self

    @property
    def mean_tokens(self) -> float:
        """Expected tokens per request (before rounding and clipping at 1)."""
        if self.kind == "fixed":
            return float(self.value or 1)
        if self.kind == "uniform":
            return ((self.low or 1) + (self.high or 1)) / 2.0
        if self.kind == "empirical":
            return float(np.mean(self.values or (1,)))
        return float(self.mean or 1.0)

    def sample(self, rng: np.random.Generator, n: int) -> IntArray:
        """``n`` draws, rounded to whole tokens and clipped to [1, MAX_TOKENS]."""
        if self.kind == "fixed":
            raw: FloatArray = np.full(n, float(self.value or 1))
        elif self.kind == "uniform":
            raw = rng.integers(self.low or 1, (self.high or 1) + 1, size=n).astype(np.float64)
        elif self.kind == "normal":
            raw = rng.normal(self.mean or 1.0, self.std or 0.0, size=n)
        elif self.kind == "lognormal":
            mean, std = self.mean or 1.0, self.std or 0.0
            sigma2 = math.log1p((std / mean) ** 2)
            raw = rng.lognormal(math.log(mean) - sigma2 / 2.0, math.sqrt(sigma2), size=n)
        else:
            raw = rng.choice(np.asarray(self.values, dtype=np.float64), size=n)
        return np.clip(np.rint(raw), 1, MAX_TOKENS).astype(np.int64)


class ArrivalSpec(FiniteModel):
    """``poisson`` / ``gamma`` at ``rate_rps`` (gamma: coefficient of variation ``cv`` of the gaps,
    > 1 is bursty), ``closed_loop`` with ``concurrency`` clients (a client sends its next request when
    the last one finishes, no think time), or ``trace`` (times from the trace file).

    ``ramp_up_s`` (closed loop only): client ``i`` of ``C`` sends its first request at ``i·ramp_up_s/C``
    instead of all at 0. With identical requests a loop started all at once stays in lock-step (every
    request of a wave prefills together, forever); real loops drift apart through answer lengths and
    timing jitter. A ramp of one request's E2E starts the clients evenly spread over their cycle, the
    state such a loop settles in."""

    kind: Literal["poisson", "gamma", "closed_loop", "trace"] = "poisson"
    rate_rps: float | None = Field(default=None, gt=0, le=1e7)
    cv: float = Field(default=1.0, gt=0, le=100)
    concurrency: int | None = Field(default=None, ge=1, le=1_000_000)
    ramp_up_s: float = Field(default=0.0, ge=0, le=1e7)

    @model_validator(mode="after")
    def _needs(self) -> ArrivalSpec:
        if self.kind in ("poisson", "gamma") and self.rate_rps is None:
            raise ValueError(f"{self.kind} arrivals need rate_rps > 0")
        if self.kind == "closed_loop" and self.concurrency is None:
            raise ValueError("closed_loop arrivals need concurrency >= 1")
        if self.ramp_up_s and self.kind != "closed_loop":
            raise ValueError(f"ramp_up_s applies to closed_loop arrivals only, not {self.kind}")
        if self.kind in ("closed_loop", "trace") and self.rate_rps is not None:
            raise ValueError(f"rate_rps does not apply to {self.kind} arrivals (remove it, or use poisson)")
        if self.kind != "closed_loop" and self.concurrency is not None:
            raise ValueError(f"concurrency applies to closed_loop arrivals only, not {self.kind}")
        return self


class WorkloadSpec(FiniteModel):
    """A whole simulated workload: arrivals, prompt and answer lengths, how many requests, the seed."""

    arrival: ArrivalSpec
    input_tokens: LengthDist = LengthDist(kind="fixed", value=1)
    output_tokens: LengthDist = LengthDist(kind="fixed", value=1)
    num_requests: int = Field(default=1000, ge=1, le=10_000_000)
    seed: int = Field(default=0, ge=0)


@dataclass(frozen=True)
class Requests:
    """Requests as parallel arrays; ``arrival_s`` is NaN for closed-loop requests (set at run time)."""

    arrival_s: FloatArray
    input_tokens: IntArray
    output_tokens: IntArray
    closed_loop_concurrency: int | None = None
    closed_loop_ramp_s: float = 0.0
    """Closed loop: the clients' first requests are spread evenly over this many seconds."""

    def __len__(self) -> int:
        return int(self.input_tokens.shape[0])


def generate(spec: WorkloadSpec, trace: Requests | None = None) -> Requests:
    """Draw the requests of ``spec``; ``trace`` supplies arrivals and lengths when kind is ``trace``."""
    if spec.arrival.kind == "trace":
        if trace is None:
            raise UserInputError("trace arrivals need a trace file", hint="set workload.trace: requests.csv")
        return trace
    rng = np.random.default_rng(spec.seed)
    n = spec.num_requests
    inputs = spec.input_tokens.sample(rng, n)
    outputs = spec.output_tokens.sample(rng, n)
    arrival = spec.arrival
    if arrival.kind == "closed_loop":
        return Requests(
            np.full(n, np.nan),
            inputs,
            outputs,
            closed_loop_concurrency=arrival.concurrency,
            closed_loop_ramp_s=arrival.ramp_up_s,
        )
    return Requests(arrival_times(arrival, rng, n), inputs, outputs)


def arrival_times(arrival: ArrivalSpec, rng: np.random.Generator, n: int) -> FloatArray:
    """Open-loop arrival times starting at 0: exponential (Poisson) or gamma gaps of mean 1/rate."""
    rate = arrival.rate_rps or 1.0
    if arrival.kind == "gamma":
        shape = 1.0 / arrival.cv**2
        gaps = rng.gamma(shape, 1.0 / (shape * rate), size=n)
    else:
        gaps = rng.exponential(1.0 / rate, size=n)
    gaps[0] = 0.0
    return np.cumsum(gaps)


TRACE_COLUMNS = ("arrival_s", "input_tokens", "output_tokens")


def parse_trace(text: str, *, origin: str, fmt: Literal["csv", "jsonl"]) -> Requests:
    """A trace (CSV with a header, or JSON lines) of arrival_s, input_tokens, output_tokens.

    FileFormatError names ``origin`` and the line of the first bad record; rows are sorted by arrival.
    """
    rows = _csv_rows(text, origin) if fmt == "csv" else _jsonl_rows(text, origin)
    if not rows:
        raise FileFormatError(
            f"{origin}: the trace has no requests", hint="add rows of " + ", ".join(TRACE_COLUMNS)
        )
    arr = np.asarray(rows, dtype=np.float64)
    order = np.argsort(arr[:, 0], kind="stable")
    arr = arr[order]
    return Requests(arr[:, 0] - arr[0, 0], arr[:, 1].astype(np.int64), arr[:, 2].astype(np.int64))


def _record(values: dict[str, object], origin: str, line: int) -> tuple[float, int, int]:
    try:
        t, inp, out = (float(str(values[c]).strip()) for c in TRACE_COLUMNS)
    except KeyError as exc:
        raise FileFormatError(f"{origin} line {line}: missing column {exc.args[0]}") from None
    except (TypeError, ValueError):
        raise FileFormatError(
            f"{origin} line {line}: arrival_s, input_tokens, output_tokens must be numbers"
        ) from None
    if not (math.isfinite(t) and t >= 0):
        raise FileFormatError(f"{origin} line {line}: arrival_s must be a finite time >= 0, got {t}")
    if not (1 <= out <= MAX_TOKENS and 0 <= inp <= MAX_TOKENS) or inp != int(inp) or out != int(out):
        raise FileFormatError(
            f"{origin} line {line}: token counts must be whole numbers, input in [0, {MAX_TOKENS:,}] and "
            f"output in [1, {MAX_TOKENS:,}] "
            f"(got {inp:g}, {out:g})"
        )
    return t, int(inp), int(out)


def _newline_terminated_lines(text: str) -> list[str]:
    r"""The lines of ``text``, endings kept, split at line feeds only, as ``io.StringIO`` iterates them:
    a lone ``\r`` or a form feed ends no line, so ``\r\n`` rows and quoted fields reach the CSV reader
    unchanged and its line numbers stay those of the file."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _csv_rows(text: str, origin: str) -> list[tuple[float, int, int]]:
    reader = csv.DictReader(_newline_terminated_lines(text))
    missing = [c for c in TRACE_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise FileFormatError(
            f"{origin} line 1: header lacks {', '.join(missing)}", hint="columns: " + ", ".join(TRACE_COLUMNS)
        )
    return [_record(dict(row), origin, reader.line_num) for row in reader]


def _jsonl_rows(text: str, origin: str) -> list[tuple[float, int, int]]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = jsontext.loads(line)
        except json.JSONDecodeError as exc:
            raise FileFormatError(f"{origin} line {number}: not JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise FileFormatError(
                f"{origin} line {number}: expected an object with " + ", ".join(TRACE_COLUMNS)
            )
        rows.append(_record(item, origin, number))
    return rows
