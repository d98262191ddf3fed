"""Two stored runs side by side: key metrics, their change, and the settings that differ."""

from __future__ import annotations

from typing import Any

from gpuplan.adapters.store.database import RunInfo

METRICS = (  # (key, sub-key) in the stored summary's JSON: "achieved_rate" is BenchSummary.achieved_rate_rps
    ("achieved_rate", None),
    ("requests_completed", None),
    ("requests_failed", None),
    ("output_tokens_per_s", None),
    ("goodput_rps", None),
    ("ttft_ms", "mean"),
    ("ttft_ms", "p50"),
    ("ttft_ms", "p99"),
    ("ttft_from_schedule_ms", "p99"),
    ("tpot_ms", "mean"),
    ("tpot_ms", "p99"),
    ("itl_ms", "mean"),
    ("itl_ms", "p99"),
    ("e2e_ms", "mean"),
    ("e2e_ms", "p99"),
)


def _value(summary: dict[str, Any], key: str, sub: str | None) -> float | None:
    value = summary.get(key)
    if sub is not None:
        value = value.get(sub) if isinstance(value, dict) else None
    return float(value) if isinstance(value, int | float) else None


def compare(a: RunInfo, b: RunInfo) -> dict[str, Any]:
    """``metrics``: name, A, B, B − A, (B − A)/A in %; ``config_diff``: setting → [A, B] where they differ."""
    sa, sb = a.summary or {}, b.summary or {}
    rows = []
    for key, sub in METRICS:
        va, vb = _value(sa, key, sub), _value(sb, key, sub)
        delta = vb - va if va is not None and vb is not None else None
        pct = delta / va * 100.0 if delta is not None and va else None
        rows.append(
            {"metric": f"{key}.{sub}" if sub else key, "a": va, "b": vb, "delta": delta, "delta_pct": pct}
        )
    keys = sorted(a.config.keys() | b.config.keys())
    diff = {k: [a.config.get(k), b.config.get(k)] for k in keys if a.config.get(k) != b.config.get(k)}
    return {
        "a": a.run_id,
        "b": b.run_id,
        "metrics": rows,
        "config_diff": diff,
        "status": [a.status, b.status],
    }
