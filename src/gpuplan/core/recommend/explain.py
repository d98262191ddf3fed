"""The explanation layer: the seeds' decision tree (model size, workload kind, precision, rent vs
own, growth) written from the numbers of this search, never as canned answers."""

from __future__ import annotations

from collections.abc import Sequence

from gpuplan.core.cost import OwnershipAssumptions, break_even_months
from gpuplan.core.dtypes import BF16, FP8
from gpuplan.core.model import arith
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.memory import weight_bytes_per_gpu
from gpuplan.core.pricing import PriceBasis
from gpuplan.core.recommend.layout_kinds import plan_words, pools_label, versus
from gpuplan.core.recommend.request import GpuOffer, Plan, Rejection, SearchSpace
from gpuplan.core.recommend.tail import FINALISTS
from gpuplan.core.sla import Sla
from gpuplan.core.units import GIB
from gpuplan.core.workload import Workload

GROWTH_FACTOR = 2.0
"""The "future growth" branch: what the plan becomes at twice the load."""


def explain(
    model: ModelSpec,
    plans: Sequence[Plan],
    rejected: Sequence[Rejection],
    offers: Sequence[GpuOffer],
    target: Workload,
    sla: Sla,
    ownership: OwnershipAssumptions,
) -> list[str]:
    """Lines, most important first: winner, size, bound, runner-ups, rejections, rent-vs-own, growth."""
    best = plans[0]
    lines = [_winner(best, target, sla), _size(model)]
    if not best.calibrated:
        lines.append(
            f"Confidence: no published measurements of {best.gpu}'s GPU family were in the calibration, so its "
            "efficiency factors are priors; benchmark it (or the runner-up) before you commit."
        )
    lines.append(
        f"Decode on {best.gpu} is {best.bound}-bound at {best.concurrency_per_replica:.0f} requests per replica: "
        + (
            "memory bandwidth (GB/s per $) decides, so lower-precision weights and KV pay off directly."
            if best.bound == "memory"
            else "tensor throughput decides, so FP8/INT8 compute paths pay off."
        )
    )
    lines += versus(plans)
    lines += [_runner_up(p, best) for p in plans[1:4] if p.gpu != best.gpu]
    unquoted = {o.gpu.id for o in offers if o.price_missing}
    lines += [f"Not {r.gpu}: {r.reason}." for r in rejected if not (r.kind == "price" and r.gpu in unquoted)]
    lines += _unquoted(offers)
    offer = next((o for o in offers if o.gpu.id == best.gpu), None)
    if offer is not None:
        lines.append(_rent_vs_own(offer, best, ownership))
    lines.append(
        f"Growth: at {GROWTH_FACTOR:.0f}x the load, {_scaled(best)} "
        f"({best.num_gpus * GROWTH_FACTOR:.0f} GPUs"
        + (f", ${best.usd_per_hour * GROWTH_FACTOR:,.2f}/h)" if best.usd_per_hour else ")")
        + "; re-run with the new rate to re-check the layout."
    )
    return lines


def _scaled(p: Plan) -> str:
    """What grows with the load: replicas, or both pools' workers."""
    if p.prefill is not None and p.decode is not None:
        workers = (p.prefill.workers * GROWTH_FACTOR, p.decode.workers * GROWTH_FACTOR)
        return "the pools scale to about {:.0f}P{:.0f}D".format(*workers)
    return f"replicas scale to about {p.layout.replicas * GROWTH_FACTOR:.0f}"


def _unquoted(offers: Sequence[GpuOffer]) -> list[str]:
    """One line for the GPUs the price basis does not quote (their own reasons say the same per GPU)."""
    missing = [o for o in offers if o.price_missing]
    if not missing:
        return []
    kind = missing[0].price_kind
    return [
        f"Not priced on this basis (no {kind.replace('_', '-')} quote from its providers), so not ranked: "
        f"{', '.join(o.gpu.id for o in missing)}. Add a quote in a --catalog file (prices: [{{gpu: ID, kind: "
        f"{kind}, provider: NAME, usd: N, as_of: YYYY-MM-DD, source_url: URL}}]) or choose another basis "
        "(--provider NAME, --price-basis hyperscaler|specialist|marketplace)."
    ]


def _winner(p: Plan, target: Workload, sla: Sla) -> str:
    # .15g: a whole number of requests in flight prints as one (16, not 16.0), up to the 1e7 cap
    load = (
        f"{target.rate_rps:g} req/s" if target.rate_rps else f"{target.concurrency:.15g} concurrent requests"
    )
    price = (
        f" for ${p.usd_per_hour:,.2f}/h (${p.usd_per_month:,.0f}/month)"
        if p.usd_per_hour and p.usd_per_month
        else ""
    )
    limits = (
        ", ".join(
            x
            for x in (
                f"TTFT <= {sla.ttft_ms:g} ms" if sla.ttft_ms else "",
                f"TPOT <= {sla.tpot_ms:g} ms" if sla.tpot_ms else "",
                f"P99 TTFT <= {sla.ttft_p99_ms:g} ms" if sla.ttft_p99_ms else "",
                f"P99 TPOT <= {sla.tpot_p99_ms:g} ms" if sla.tpot_p99_ms else "",
            )
            if x
        )
        or "no latency limit"
    )
    tail = ""
    if p.ttft_p99_ms is not None and p.tpot_p99_ms is not None:
        source = "simulated" if p.p99_source == "simulator" else "tail-model"
        tail = f", {source} P99 TTFT {p.ttft_p99_ms:.0f} ms and P99 TPOT {p.tpot_p99_ms:.1f} ms"
    return (
        f"Best: {plan_words(p)} serves {load} ({target.input_tokens} in / {target.output_tokens} out tokens) "
        f"with mean TTFT {p.ttft_ms:.0f} ms and TPOT {p.tpot_ms:.1f} ms{tail} ({limits}){price}."
    )


def _size(model: ModelSpec) -> str:
    counts = arith.param_counts(model)
    bf16 = weight_bytes_per_gpu(model, weight_dtype=BF16, tp=1).total / GIB
    fp8 = weight_bytes_per_gpu(model, weight_dtype=FP8, tp=1).total / GIB
    active = f", {counts.active / 1e9:.1f}B active per token" if counts.active < counts.total else ""
    return (
        f"Model size: {model.id} has {counts.total / 1e9:.1f}B parameters{active}; weights need "
        f"{bf16:.0f} GiB in BF16 and {fp8:.0f} GiB in FP8, before the KV cache."
    )


def _runner_up(p: Plan, best: Plan) -> str:
    if p.usd_per_hour and best.usd_per_hour:
        delta = f"+{(p.usd_per_hour / best.usd_per_hour - 1) * 100:.0f}% cost (${p.usd_per_hour:,.2f}/h)"
    else:
        delta = "no price in the catalog"
    lay = p.layout
    kind = f", disaggregated {pools_label(p)}" if p.layout_kind == "disaggregated" else ""
    return (
        f"Runner-up {p.num_gpus}x {p.gpu} (tp={lay.tp}, {lay.weight_dtype}{kind}): {delta}, TPOT {p.tpot_ms:.1f} ms, "
        f"TTFT {p.ttft_ms:.0f} ms."
    )


def _rent_vs_own(offer: GpuOffer, p: Plan, a: OwnershipAssumptions) -> str:
    if not (offer.purchase_usd and offer.usd_per_gpu_hour and offer.gpu.tdp_watts):
        return f"Rent vs own: no purchase price for {offer.gpu.id} in the catalog; add one to compare."
    months = break_even_months(
        purchase_usd=offer.purchase_usd,
        cloud_usd_per_gpu_hour=offer.usd_per_gpu_hour,
        tdp_watts=offer.gpu.tdp_watts,
        a=a,
    )
    verdict = (
        "buying pays off within the amortisation period"
        if months < a.amortisation_years * 12
        else "renting is cheaper over the amortisation period"
    )
    return (
        f"Rent vs own: a {offer.gpu.id} at ${offer.purchase_usd:,.0f} (+{a.server_overhead:.0%} server) breaks "
        f"even after {months:.0f} months of renting at ${offer.usd_per_gpu_hour:.2f}/GPU-h and "
        f"{a.utilisation:.0%} utilisation: {verdict}."
    )


def price_basis(offers: Sequence[GpuOffer], basis: PriceBasis | None = None) -> str:
    """Where the $/GPU-hour came from: the user's override, or the catalog's quotes of a kind on one basis."""
    if offers and all(o.price_source == "user override" for o in offers):
        return "Prices: your $/GPU-hour"
    kinds = sorted({o.price_kind.replace("_", "-") for o in offers}) or ["on-demand"]
    if basis is None:
        return f"Prices: catalog {'/'.join(kinds)} $/GPU-hour (median of the latest quotes)"
    stale = sum(1 for o in offers if o.price_quote is not None and o.price_quote.stale)
    flagged = (
        f"; {stale} GPU type(s) priced from quotes older than {basis.stale_after_days} days on {basis.priced_on}"
        " (marked stale)"
        if stale
        else ""
    )
    return f"Prices: catalog {'/'.join(kinds)} $/GPU-hour on one basis for every GPU, {basis.label}{flagged}"


def assumptions(
    space: SearchSpace, sla: Sla, offers: Sequence[GpuOffer] = (), basis: PriceBasis | None = None
) -> list[str]:
    """What the numbers rest on, stated with every answer."""
    if sla.has_percentiles:
        sizing = [
            "P99 limits are sized on the tail: per replica, the highest Poisson rate whose P99 TTFT/TPOT meet "
            "them (fixed lengths); replicas = target rate / that rate. Every GPU type and layout is sized with "
            f"the analytic tail model; every plan listed is run on the serving simulator: the best plans of the "
            f"{FINALISTS} leading GPU types at the fewest replicas whose runs meet the limits, the others at "
            "the tail model's count (a plan that misses gets a replica more); the P99s shown are the "
            "simulated ones, and plans not run show the tail model's (p99_source in JSON).",
        ]
    else:
        sizing = [
            "Latency limits are checked on steady-state mean TTFT/TPOT; give P99 limits "
            "(--ttft-p99-ms/--tpot-p99-ms) to size on the simulated tail.",
            f"Replicas run at <= {space.headroom:.0%} of their SLA-limited throughput (queueing headroom).",
        ]
    return [
        f"Engine {space.engine} defaults (batching limits, KV paging); continuous batching at steady state.",
        *sizing,
        price_basis(offers, basis) + "; owned TCO excludes staff.",
    ]
