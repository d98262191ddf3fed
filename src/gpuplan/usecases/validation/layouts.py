"""Layouts a validation row describes: its TP/PP/EP when stated, else every TP that divides the
GPU count and the heads (the source chose it; the caller picks the best), with the row's dtypes,
engine and memory-utilisation note."""

from __future__ import annotations

import re

from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.engine_profiles import engines
from gpuplan.core.perf.layout import Layout
from gpuplan.usecases.validation.cases import Case

_VERSION_WORD = re.compile(r"(?<![\w.-])v?(\d+\.\d+[\w.+]*)")
_BRACKETS = re.compile(r"\([^)]*\)")
_DATE = re.compile(r"\b20\d\d-\d\d-\d\d")
_DP_FLAG = re.compile(r"--dp(?:-size)?[ =](\d+)")
TP_CHOICES = (1, 2, 4, 8)
"""TP sizes tried when a row does not state its layout (one node)."""


def row_engine(case: Case) -> str:
    name = case.get("framework") or "other"
    return name if name in engines() else "other"


def row_engine_version(case: Case) -> str | None:
    """The version the row's ``framework_reported=`` note names (``vLLM 0.7.4.dev181`` → '0.7.4.dev181',
    a dated commit → its date), None when it names none."""
    reported = case.get("notes").partition("framework_reported=")[2].split(" | ")[0]
    found = _VERSION_WORD.search(_BRACKETS.sub(" ", reported))  # not a model or image name in brackets
    if found:
        return found.group(1)
    dated = _DATE.search(reported)
    return dated.group(0) if dated else None


def row_dtype(raw: str, default: str = "bf16") -> str:
    return raw if raw else default


def row_layouts(case: Case, model: ModelSpec) -> list[Layout]:
    gpus = case.int_field("num_gpus") or 1
    tp, pp, ep = case.int_field("tp"), case.int_field("pp") or 1, case.int_field("ep") or 1
    tps = [tp] if tp else [d for d in TP_CHOICES if gpus % d == 0 and _divides_heads(model, d)]
    layouts = []
    for t in tps:
        attn_tp, dp, experts = attention_groups(case, tp=t, ep=ep)
        if not attn_tp or gpus % (attn_tp * pp * dp):
            continue
        layouts.append(
            Layout(
                tp=attn_tp,
                pp=pp,
                ep=experts,
                attention_dp=dp,
                replicas=gpus // (attn_tp * pp * dp),
                weight_dtype=row_dtype(case.get("weight_dtype")),
                kv_dtype=case.get("kv_dtype") or None,
                engine=row_engine(case),
                engine_version=row_engine_version(case),
                gpu_memory_utilization=_float_or_none(case.note("gpu_memory_utilization")),
            )
        )
    return layouts


def attention_groups(case: Case, *, tp: int, ep: int) -> tuple[int, int, int]:
    """(attention TP, attention-DP ranks, EP) of a row run at ``tp`` (0 attention TP: no such layout).

    An EP larger than the TP group means data-parallel attention over the EP group (vLLM
    ``--data-parallel-size`` with ``--enable-expert-parallel``, SGLang ``--enable-dp-attention``:
    EP = TP x DP). A launch with ``--enable-dp-attention`` and no wider EP splits its ``--tp`` ranks
    into ``--dp`` attention ranks (SGLang up to 0.4.3 set dp = tp), the experts split by TP over all
    of them unless ``--enable-ep-moe`` spreads them by EP."""
    if ep > tp:
        return (tp, ep // tp, ep) if ep % tp == 0 else (0, 1, ep)
    notes = case.get("notes")
    if "--enable-dp-attention" not in notes:
        return tp, 1, ep
    found = _DP_FLAG.search(notes)
    dp = int(found.group(1)) if found else tp
    if dp <= 1 or tp % dp:
        return tp, 1, ep
    return tp // dp, dp, tp if "--enable-ep-moe" in notes else 1


def _divides_heads(model: ModelSpec, tp: int) -> bool:
    return model.num_attention_heads is None or model.num_attention_heads % tp == 0


def _float_or_none(raw: str | None) -> float | None:
    try:
        return float(raw) if raw else None
    except ValueError:
        return None
