"""Aggregated against disaggregated plans in words: a plan's layout, why the winning kind wins, and
which kinds a request can search (``scope``)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuplan.core.errors import UserInputError
from gpuplan.core.perf.kv_transfer import DISAGGREGATING_ENGINES, KvTransport
from gpuplan.core.recommend.disaggregated_tail import DISAGGREGATED_FINALISTS, MAX_DISAGGREGATED_CONFIRMED
from gpuplan.core.recommend.request import Plan, PoolPlan, SearchSpace
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload


def plan_words(p: Plan) -> str:
    """A plan's GPUs and layout: ``8x H100-SXM (2 replica(s) of tp=4 pp=1, fp8 weights, fp8 KV)`` or
    its two pools."""
    lay = p.layout
    kv = f"{lay.resolved_kv_dtype} KV"
    if p.prefill is None or p.decode is None:
        return f"{lay.num_gpus}x {p.gpu} ({lay.replicas} replica(s) of {lay.replica_label} weights, {kv})"
    return (
        f"{p.num_gpus} GPUs disaggregated {pools_label(p)} ({_pool(p.prefill)} prefill + "
        f"{_pool(p.decode)} decode, {lay.weight_dtype} weights, {kv}, KV transfer {p.kv_transfer_ms or 0:.1f} ms)"
    )


def pools_label(p: Plan) -> str:
    """``3P1D``: prefill and decode workers (the xPyD notation of Dynamo and aiconfigurator)."""
    if p.prefill is None or p.decode is None:
        dp = f"dp{p.layout.attention_dp}" if p.layout.attention_dp > 1 else ""
        return f"tp{p.layout.tp}{dp}x{p.layout.replicas}"
    return f"{p.prefill.workers}P{p.decode.workers}D"


def plan_cells(p: Plan) -> tuple[str, int, int | str, int | str, int | str]:
    """A plan table's gpu, count, tp, pp and replicas cells; a disaggregated plan's are both pools'
    (``H100-SXM+H200-SXM``, ``2/4``, ``23P5D``: prefill first)."""
    lay = p.layout
    if p.prefill is None or p.decode is None:
        return p.gpu, lay.num_gpus, lay.tp, lay.pp, lay.replicas
    pre, dec = p.prefill, p.decode
    return p.gpu_types, p.num_gpus, f"{pre.tp}/{dec.tp}", f"{pre.pp}/{dec.pp}", pools_label(p)


def _pool(pool: PoolPlan) -> str:
    ep = f" ep={pool.ep}" if pool.ep > 1 else ""
    dp = f" attention_dp={pool.attention_dp}" if pool.attention_dp > 1 else ""
    return f"{pool.workers}x tp={pool.tp}{ep}{dp} on {pool.gpu}"


def versus(plans: Sequence[Plan]) -> list[str]:
    """One line on why the best plan's kind beats the best plan of the other kind, when both exist."""
    best = plans[0]
    others = [p for p in plans if p.layout_kind != best.layout_kind and p.usd_per_hour]
    if not others or not best.usd_per_hour:
        return []
    other = min(others, key=lambda p: (p.usd_per_hour or 0.0, p.num_gpus))
    saving = (1 - best.usd_per_hour / (other.usd_per_hour or best.usd_per_hour)) * 100
    if saving < 0:  # ranked first on latency or throughput per dollar, at a higher cost
        return [_ranks_first_at_a_cost(best, other, -saving)]
    if best.layout_kind == "disaggregated":
        return [_split_wins(best, other, saving)]
    return [_together_wins(best, other, saving)]


def _ranks_first_at_a_cost(best: Plan, other: Plan, extra: float) -> str:
    kind, other_kind = best.layout_kind.capitalize(), other.layout_kind
    per_usd = best.output_tokens_per_s / (best.usd_per_hour or 1.0)
    other_per_usd = other.output_tokens_per_s / (other.usd_per_hour or 1.0)
    return (
        f"{kind} {pools_label(best)} ranks above {other_kind} {pools_label(other)} on {other.gpu_types} at "
        f"{extra:.0f}% more cost (${best.usd_per_hour:,.2f}/h vs ${other.usd_per_hour:,.2f}/h): TPOT "
        f"{best.tpot_ms:.1f} vs {other.tpot_ms:.1f} ms, TTFT {best.ttft_ms:.0f} vs {other.ttft_ms:.0f} ms, "
        f"{per_usd:,.0f} vs {other_per_usd:,.0f} output tokens/s per $/h."
    )


def _split_wins(split: Plan, together: Plan, saving: float) -> str:
    assert split.prefill is not None and split.decode is not None
    share = together.prefill_share or 0.0
    return (
        f"Disaggregated {pools_label(split)} beats aggregated {pools_label(together)} on {together.gpu} by "
        f"{saving:.0f}% (${split.usd_per_hour:,.2f}/h vs ${together.usd_per_hour:,.2f}/h): an aggregated replica's "
        f"prompts take {share:.0%} of its GPU time and stretch every decode step, so it carries "
        f"{together.concurrency_per_replica:.0f} requests at TPOT {together.tpot_ms:.1f} ms, where a decode "
        f"worker with no prompts in its steps carries {split.concurrency_per_replica:.0f} at {split.tpot_ms:.1f} ms; "
        f"the prompts run on {split.prefill.count}x {split.prefill.gpu} at {split.prefill.busy_share:.0%} busy "
        f"and the KV transfer adds {split.kv_transfer_ms or 0:.1f} ms to TTFT."
    )


def _together_wins(together: Plan, split: Plan, saving: float) -> str:
    assert split.prefill is not None
    other = f"the best disaggregated plan ({pools_label(split)}, {split.num_gpus} GPUs, ${split.usd_per_hour:,.2f}/h)"
    verdict = (
        f"beats {other} by {saving:.0f}%"
        if saving >= 0.5
        else f"ties {other} and ranks first (one kind of worker, no KV transfer)"
    )
    share = together.prefill_share
    prompts = f"Its prompts take {share:.0%} of its GPU time, but a" if share is not None else "A"
    return (
        f"Aggregated {pools_label(together)} {verdict}. {prompts} prefill pool of their own costs as much or more "
        f"({split.prefill.workers} worker(s) at {split.prefill.busy_share:.0%} busy; whole workers on each side) "
        f"and adds {split.kv_transfer_ms or 0:.1f} ms of KV transfer."
    )


def scope(
    space: SearchSpace, target: Workload, sla: Sla, *, at_confidence: bool
) -> tuple[SearchSpace, list[str]]:
    """The layout kinds this request can search and, when one asked for is dropped, why (an assumption
    line): disaggregated pools need a request rate and an engine with the mode."""
    if "disaggregated" not in space.layout_kinds:
        return space, _unused_disaggregation_flags(space)
    reason = ""
    if space.engine not in DISAGGREGATING_ENGINES:
        reason = f"engine {space.engine} (it has no disaggregated mode; {', '.join(sorted(DISAGGREGATING_ENGINES))} do)"
    elif target.rate_rps is None:
        reason = "a concurrency target (give --rate)"
    if not reason:
        return space, [_transport_line(space, sla, at_confidence=at_confidence)]
    kinds = tuple(k for k in space.layout_kinds if k != "disaggregated")
    note = f"Disaggregated prefill/decode plans are not searched with {reason}."
    if not kinds:
        raise UserInputError(
            f"--layouts disaggregated cannot be searched with {reason}",
            hint="add aggregated (--layouts aggregated,disaggregated), give a rate or pick vllm, sglang or trtllm",
        )
    return space.model_copy(update={"layout_kinds": kinds}), [note]


def _transport_line(space: SearchSpace, sla: Sla, *, at_confidence: bool) -> str:
    p99 = (
        f" Under P99 limits the {DISAGGREGATED_FINALISTS} best (more while a mean-sized price undercuts them, at "
        f"most {MAX_DISAGGREGATED_CONFIRMED}) are confirmed on the simulator, a pool grown where its P99 misses; "
        "the others are not listed."
        if sla.has_percentiles
        else ""
    )
    confidence = (
        " At a confidence each pool is sized at its GPU's error-model factors (the stricter where the pools "
        "differ); they carry no intervals (the error model is fitted on aggregated deployments)."
        if at_confidence
        else ""
    )
    return (
        f"Disaggregated plans: KV cache over {space.kv_transport.label} per GPU, moved after each prefill unless "
        "overlapped; prefill queues as M/D/1 per worker, decode workers run no prompts (docs/model.md)."
        f"{p99}{confidence}"
    )


def _unused_disaggregation_flags(space: SearchSpace) -> list[str]:
    """An assumption line when the KV-link or pool flags were given but no disaggregated plan is searched."""
    if space.kv_transport == KvTransport() and not space.mixed_pools:
        return []
    return [
        "--kv-transport, --kv-gbps, --kv-overlap and --mixed-pools shape disaggregated plans only; "
        "none was searched (--layouts aggregated)."
    ]
