"""Render each command's result as a rich table or the documented JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import ModelSummary
from gpuplan.core.calibration.uncertainty import Bounds
from gpuplan.core.dtypes import DTYPES
from gpuplan.core.pricing import PriceBasis, PriceQuote, quote_label
from gpuplan.core.recommend.layout_kinds import plan_cells
from gpuplan.core.recommend.narrowing import narrowing_lines
from gpuplan.core.recommend.request import Plan, Recommendation
from gpuplan.core.units import GB, GIB, MS_PER_S, TB
from gpuplan.interfaces.cli.app import Format
from gpuplan.interfaces.cli.render import console, emit_json, group_read, json_or_table, lines, ranged, table
from gpuplan.usecases.fit import FitResult
from gpuplan.usecases.predict import PredictResult
from gpuplan.usecases.validation.intervals import IntervalReport
from gpuplan.usecases.validation.report import ValidationReport

if TYPE_CHECKING:
    from gpuplan.usecases.calibration.crossval import CrossValidation


def gpus(catalog: Catalog, f: Format) -> None:
    specs = [catalog.get_gpu(g) for g in catalog.gpu_ids()]
    if f == "json":
        emit_json(
            {
                "gpus": [s.model_dump(mode="json") for s in specs],
                "prices": [p.model_dump(mode="json") for p in catalog.prices],
            }
        )
        return
    rows = []
    for s in specs:
        price = catalog.price(s.id)
        rows.append(
            (
                s.id,
                s.family,
                s.memory_bytes / GB,
                s.memory_bandwidth_bytes_per_s / TB,
                s.sixteen_bit_tflops,
                s.dense_tflops.fp8,
                s.dense_tflops.fp4,
                f"{s.interconnect.scale_up} {s.interconnect.scale_up_bytes_per_s / GB:.0f} GB/s",
                s.tdp_watts,
                price.usd if price else None,
            )
        )
    table(
        "GPU catalog (dense TFLOPS; links bidirectional per GPU)",
        ["id", "family", "mem GB", "TB/s", "bf16", "fp8", "fp4", "scale-up link", "TDP W", "$/GPU-h"],
        rows,
    )


def quote_lines(
    basis: PriceBasis | None, quotes: Sequence[PriceQuote | None], gpus: Sequence[str]
) -> list[str]:
    """The price basis in words, then each GPU's quote once: provider, kind, $/GPU-h, date, link."""
    out = [f"Basis {basis.key}: {basis.label}."] if basis else []
    seen: set[str] = set()
    for gpu, q in zip(gpus, quotes, strict=True):
        if q is None or gpu in seen:
            continue
        seen.add(gpu)
        if q.origin == "user override":
            out.append(f"{gpu}: your ${q.usd_per_gpu_hour:.2f}/GPU-h ({q.kind.replace('_', '-')}).")
            continue
        stale = f" STALE (older than {basis.stale_after_days} days)" if q.stale and basis else ""
        mine = " from your catalog" if q.origin == "user catalog" else ""
        out.append(
            f"{gpu}: {q.provider} {q.kind.replace('_', '-')} ${q.usd_per_gpu_hour:.2f}/GPU-h{mine}, as of {q.as_of}"
            f"{stale}, {q.source_url}"
        )
    return out


def dtypes(f: Format) -> None:
    rows = [
        (d.name, d.bytes_per_element, d.bytes_per_element * 8, d.compute_key, d.fallback_compute_key, d.note)
        for d in DTYPES.values()
    ]
    if f == "json":
        emit_json(
            {
                "dtypes": [
                    dict(
                        zip(
                            (
                                "name",
                                "bytes_per_element",
                                "bits_per_element",
                                "compute",
                                "fallback_compute",
                                "note",
                            ),
                            r,
                            strict=True,
                        )
                    )
                    for r in rows
                ]
            }
        )
        return
    table(
        "Dtypes (bytes include block-scale overhead)",
        ["id", "bytes", "bits", "GEMM path", "fallback", "note"],
        rows,
    )


def models(summaries: Sequence[ModelSummary], f: Format) -> None:
    if f == "json":
        emit_json({"models": [m.model_dump(mode="json") for m in summaries]})
        return
    table(
        "Bundled models",
        ["model", "type", "params B", "active B", "KV KiB/token (bf16)"],
        [
            (m.id, m.model_type, m.params_b, m.active_params_b, m.kv_bytes_per_token_bf16 / 1024)
            for m in summaries
        ],
    )


@json_or_table
def fit(r: FitResult) -> None:
    m = r.memory
    table(
        f"{r.model} on {r.layout.gpus_per_replica}x {r.gpu} ({r.layout.weight_dtype}, {r.layout.engine}) - per GPU",
        ["part", "GiB"],
        [
            ("weights", _banded(m.weights_bytes, r.interval, "weights_bytes", 1 / GIB)),
            ("activation peak", _banded(m.activation_bytes, r.interval, "activation_bytes", 1 / GIB)),
            ("runtime overhead", _banded(m.overhead_bytes, r.interval, "overhead_bytes", 1 / GIB)),
            (
                "KV-cache pool" if m.kv_pool_bytes >= 0 else "KV-cache pool: short by",
                _banded(m.kv_pool_bytes, r.interval, "kv_pool_bytes", 1 / GIB)
                if m.kv_pool_bytes >= 0
                else abs(m.kv_pool_bytes) / GIB,
            ),
            ("budget (usable x utilization)", m.budget_bytes / GIB),
            ("usable", m.usable_bytes / GIB),
        ],
    )
    if r.interval is not None:  # before the verdict: it stays the last line (scripts tail it)
        lines(_bounds_sources(r.interval), title="Intervals")
    verdict = "fits" if m.fits else "does NOT fit"
    console.print(
        f"{verdict}: {m.kv_tokens:,} KV tokens per replica; {m.max_concurrency:.2f} requests of "
        f"{m.max_model_len:,} tokens at once",
        highlight=False,
    )
    if not m.fits:
        fixes = (
            "; ".join(r.nearest) if r.nearest else "none within 64 GPUs, int4 weights or a shorter context"
        )
        console.print(f"nearest that fit: {fixes}", highlight=False)


def _banded(value: float, b: Bounds | None, name: str, scale: float = 1.0) -> str | float:
    """``value × scale``, with its interval when ``b`` has one: ``412 (350-980)``."""
    low, high = (b.low.get(name), b.high.get(name)) if b is not None and name in b.sources else (None, None)
    if low is None or high is None:
        return value * scale
    return ranged(value * scale, low * scale, high * scale)


def _bounds_sources(b: Bounds) -> list[str]:
    """What a result's intervals are made of: the level, then each figure's error-model group."""
    head = (
        f"(low-high) next to a figure: its {b.level:.0%} interval from the error model of held-out residuals"
    )
    return [head] + [f"{name}: {group_read(s)}" for name, s in b.sources.items()]


@json_or_table
def predict(r: PredictResult) -> None:
    p = r.prediction
    table(
        f"{r.model} on {p.num_gpus}x {r.gpu} (tp={r.layout.tp} pp={r.layout.pp} x{r.layout.replicas}, "
        f"{r.layout.weight_dtype}, {r.workload.scenario})",
        ["metric", "value"],
        [
            ("TTFT ms", _banded(p.ttft_s, r.interval, "ttft_s", MS_PER_S)),
            ("TPOT ms", _banded(p.tpot_s, r.interval, "tpot_s", MS_PER_S)),
            ("E2E ms", p.e2e_s * MS_PER_S),
            ("output tokens/s", _banded(p.output_tokens_per_s, r.interval, "output_tokens_per_s")),
            ("output tokens/s per GPU", p.output_tokens_per_s_per_gpu),
            ("requests/s", p.requests_per_s),
            ("running per replica", p.running_per_replica),
            ("decode bound", p.bound),
            ("$/hour", r.usd_per_hour if r.price_quote else "no quote on the basis"),
            ("$/1M output tokens", r.usd_per_million_output_tokens),
        ],
    )
    lines(quote_lines(r.price_basis, [r.price_quote], [r.gpu]), title="Quotes")
    if r.interval is not None:
        lines(_bounds_sources(r.interval), title="Intervals")


P99_FROM = {"simulator": "sim", "tail model": "model"}
"""The plan table's short words for ``Plan.p99_source`` (the table is already 14 columns wide)."""


@json_or_table
def recommendation(r: Recommendation) -> None:
    tail = any(p.sized_on == "p99" for p in r.plans)
    latency = ["P99 TTFT", "P99 TPOT", "P99 from"] if tail else ["TTFT ms", "TPOT ms"]
    at_q = r.confidence is not None
    sized = f" at {r.confidence:.0%} confidence" if r.confidence is not None else ""
    table(
        f"Plans for {r.model} (objective: {r.objective}{sized}; best first)",
        [
            "gpu",
            "count",
            *(["at point"] if at_q else []),
            "tp",
            "pp",
            "repl",
            "dtype",
            *latency,
            "tok/s",
            *MONEY,
        ],
        [_plan_row(p, tail, at_q) for p in r.plans],
    )
    lines(
        quote_lines(r.price_basis, [p.price_quote for p in r.plans], [p.gpu for p in r.plans]), title="Quotes"
    )
    lines(r.explanation, title="Why")
    if r.plans and r.plans[0].interval is not None:
        lines(_interval_sources(r.plans[0]), title="Intervals")
    if shrink := narrowing_lines(r.plans):
        lines(shrink, title="What would shrink it")
    lines(r.assumptions, title="Assumptions")


MONEY = ("$/h", "$/month", "$/1M out", "GiB/GPU", "quote")
"""The plan table's columns after the figures."""


def _plan_row(p: Plan, tail: bool, at_q: bool) -> tuple[object, ...]:
    """One row of the plan table: P99s when the plans are sized on them, the point count at a confidence."""
    lay = p.layout
    latency = (
        (_fig(p, "ttft_p99_ms"), _fig(p, "tpot_p99_ms"), P99_FROM.get(p.p99_source or ""))
        if tail
        else (_fig(p, "ttft_ms"), _fig(p, "tpot_ms"))
    )
    gpu, count, tp, pp, replicas = plan_cells(p)
    return (
        gpu,
        count,
        *([p.count_at_point_estimate] if at_q else []),
        tp,
        pp,
        replicas,
        lay.weight_dtype,
        *latency,
        p.output_tokens_per_s,  # its interval is in the JSON and the Intervals lines: the table is 160 wide
        p.usd_per_hour,
        p.usd_per_month,
        p.usd_per_million_output_tokens,
        p.memory_per_gpu_gib,
        quote_label(p.price_quote) if p.price_quote else "-",
    )


def _fig(p: Plan, name: str) -> str | float | None:
    """A plan's figure, with its interval when it has one: ``412 (350-980)``."""
    value = getattr(p, name)
    if p.low is None or p.high is None:
        return value  # type: ignore[no-any-return]
    return ranged(value, getattr(p.low, name), getattr(p.high, name))


def _interval_sources(p: Plan) -> list[str]:
    """What the best plan's intervals are made of: one line per figure, its error-model group."""
    assert p.interval is not None
    head = (
        f"(low-high) next to a figure: its {p.interval.level:.0%} interval from the error model of held-out "
        "residuals (docs/validate.md, Intervals); the best plan's read:"
    )
    out = [head]
    out += [f"{name}: {group_read(s)}" for name, s in p.interval.sources.items()]
    if p.low is not None and p.high is not None:
        out.append(
            f"output tokens/s {ranged(p.output_tokens_per_s, p.low.output_tokens_per_s, p.high.output_tokens_per_s)}"
        )
    if p.interval.capacity is not None:
        c = p.interval.capacity
        out.append(
            f"P99s also carry the capacity interval of {group_read(c)} through the "
            "tail model: wider near the replica's capacity (an open high end: past it)"
        )
    return out


@json_or_table
def validation(r: ValidationReport) -> None:
    s = r.summary
    rows = [
        (m, st.n, _pct(st.median_ape), _pct(st.mape), _pct(st.p90_ape), _grade(st.median_ape))
        for m, st in s.by_metric.items()
    ]
    table(
        f"{r.file} ({r.schema_name}, grades {','.join(r.grades)}): {s.predicted}/{s.rows} predicted",
        ["metric", "n", "median APE", "MAPE", "p90 APE", "quality"],
        rows,
    )
    if isinstance(r, IntervalReport):
        _interval_coverage(r)
    table(
        "By grade",
        ["grade", "n", "median APE", "MAPE", "p90 APE"],
        [(g, st.n, _pct(st.median_ape), _pct(st.mape), _pct(st.p90_ape)) for g, st in s.by_grade.items()],
    )
    if len(s.by_regime) > 1:
        table(
            "By regime",
            ["regime", "metric", "n", "median APE", "MAPE", "p90 APE"],
            [
                (regime, m, st.n, _pct(st.median_ape), _pct(st.mape), _pct(st.p90_ape))
                for regime, metrics in s.by_regime.items()
                for m, st in metrics.items()
            ],
        )
    reasons: dict[str, int] = {}  # skip reason -> rows
    for row in r.rows:
        if row.skip_reason:
            reasons[row.skip_reason] = reasons.get(row.skip_reason, 0) + 1
    if reasons:
        ranked = sorted(reasons, key=lambda reason: reasons[reason], reverse=True)
        table("Skipped", ["reason", "rows"], [(reason, reasons[reason]) for reason in ranked])


def _interval_coverage(r: IntervalReport) -> None:
    """Coverage of the error model's intervals (docs/validate.md, Intervals)."""
    level = r.summary.interval
    table(
        f"{level * 100:g} % intervals (bundled error model): share of measured values inside",
        ["metric", "rows with interval", "coverage", "median width (high/low - 1)"],
        [
            (
                m,
                sum(1 for row in r.rows if row.metric == m and row.low is not None),
                _pct(st.coverage),
                _pct(st.median_width),
            )
            for m, st in r.summary.by_metric.items()
        ],
    )


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def _grade(median: float | None) -> str:
    """A plain-words grade of a median APE (docs/validate.md)."""
    if median is None:
        return "-"
    return "good" if median <= 0.1 else "fair" if median <= 0.2 else "rough" if median <= 0.4 else "poor"


@json_or_table
def cross_validation(r: CrossValidation) -> None:
    table(
        f"Held-out error, leaving one {r.by} out at a time (refit on the rest)",
        ["group", "rows", "median APE", "MAPE", "p90 APE"],
        [
            (
                fold.group,
                fold.rows,
                _pct(fold.stats.median_ape),
                _pct(fold.stats.mape),
                _pct(fold.stats.p90_ape),
            )
            for fold in r.folds
        ],
    )
    table(
        "Pooled held-out error by metric",
        ["metric", "n", "median APE", "MAPE", "p90 APE"],
        [
            (m, st.n, _pct(st.median_ape), _pct(st.mape), _pct(st.p90_ape))
            for m, st in r.summary.by_metric.items()
        ],
    )
