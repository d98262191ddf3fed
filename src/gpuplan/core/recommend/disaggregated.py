"""Disaggregated plans: a prefill pool and a decode pool, each sized on its own, paired and priced.

The pools are sized in ``decode_pool.py`` and ``prefill_pool.py``; prompts queue at a prefill worker as M/D/1
(Pollaczek–Khinchine, deterministic service): TTFT_prefill = t₁ + ρ·s / (2(1 − ρ)) at utilisation
ρ = λ_p · s.

**Together.** TTFT = TTFT_prefill + the KV transfer (``core/perf/kv_transfer.py``) + 1.5 decode steps
(the decode worker admits the request at its next step boundary, half a step on average, and emits
the first token after one step). For a pair the prefill budget W = TTFT limit − t₁ − transfer −
1.5·TPOT gives the highest utilisation ρ* = 2W / (s + 2W) (the M/D/1 wait solved for ρ), capped at
the headroom, and the pool has W_p = ⌈λ · s / ρ*⌉ workers. Each decode option is paired with every
prefill option of the same weight dtype on the same GPU type (with ``SearchSpace.mixed_pools``, on any
GPU type of the same vendor: prefill on compute-rich cards, decode on bandwidth-rich ones) and keeps
its cheapest prefill pool; NVLink transfer needs both workers in one node of one GPU type.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.cost import monthly_usd, usd_per_million_tokens
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import decode_bound
from gpuplan.core.perf.kv_transfer import KvTransport, kv_link_busy_s, kv_transfer_s
from gpuplan.core.perf.layout import Layout
from gpuplan.core.recommend.decode_pool import DecodeOption, decode_options
from gpuplan.core.recommend.prefill_pool import PrefillOption, prefill_options
from gpuplan.core.recommend.request import (
    GpuOffer,
    MemoryBreakdownGib,
    Plan,
    PoolPlan,
    Rejection,
    SearchSpace,
    memory_in_use_gib,
)
from gpuplan.core.sla import Sla
from gpuplan.core.units import MS_PER_S
from gpuplan.core.workload import Workload

FIRST_TOKEN_DECODE_STEPS = 1.5
"""Decode steps between a prompt's KV arriving and its first token: half a step waiting for the step
in progress (the worker is busy), one step that emits it."""
VLLM_DECODE_TP_RULE = (
    "vLLM's NixlConnector reads a prefill worker's blocks with tp_ratio = divide(decode TP, prefill TP) "
    "and asserts 'Decode TP cannot be smaller than prefill TP' "
    "(https://github.com/vllm-project/vllm/blob/main/vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py)"
)
"""Why vLLM pairs only decode workers whose TP is a multiple of the prefill workers' TP."""
LINK_MAX_UTILISATION = 0.9
"""Highest share of a GPU's KV link a plan may keep busy: at 0.9 the M/D/1 wait is already 4.5
transfers long, and past 1 the queue grows without bound."""
MAX_EXTRA_PREFILL_WORKERS = 64
"""Prefill workers added one at a time beyond the M/D/1 estimate while the link queue still misses TTFT."""


@dataclass(frozen=True)
class Pairing:
    """A decode option with its cheapest prefill pool."""

    decode: DecodeOption
    prefill: PrefillOption
    prefill_workers: int
    utilisation: float
    transfer_s: float
    ttft_s: float

    @property
    def num_gpus(self) -> int:
        return self.decode.layout.num_gpus + self.prefill_workers * self.prefill.layout.gpus_per_replica


def pair(
    model: ModelSpec,
    decode: DecodeOption,
    prefills: Sequence[PrefillOption],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
) -> Pairing | None:
    """The cheapest prefill pool that meets the TTFT limit beside ``decode`` (module docstring)."""
    best: Pairing | None = None
    for option in prefills:
        if option.layout.weight_dtype != decode.layout.weight_dtype or not _reachable(option, decode, space):
            continue
        found = _pairing(model, decode, option, target, sla, space)
        if found is not None and (best is None or _cost(found) < _cost(best)):
            best = found
    return best


def _reachable(prefill: PrefillOption, decode: DecodeOption, space: SearchSpace) -> bool:
    """The cache moves between GPUs of one vendor (NIXL/UCX and Mooncake register CUDA or ROCm memory,
    not a mix), between GPU types only when ``space.mixed_pools`` allows; NVLink carries it only between
    GPUs of one type on one NVLink fabric (the whole plan inside it: checked once the pools are sized).
    vLLM's NixlConnector needs the decode TP to be a multiple of the prefill TP (:data:`VLLM_DECODE_TP_RULE`)."""
    same_type = prefill.offer.gpu.id == decode.offer.gpu.id
    if not (same_type or (space.mixed_pools and prefill.offer.gpu.vendor == decode.offer.gpu.vendor)):
        return False
    if space.engine == "vllm" and decode.layout.tp % prefill.layout.tp:
        return False
    return space.kv_transport.kind != "nvlink" or same_type


def _within_nvlink(p: Pairing, space: SearchSpace) -> bool:
    """Over NVLink every GPU of both pools sits on the decode GPU's one scale-up fabric."""
    if space.kv_transport.kind != "nvlink":
        return True
    return p.num_gpus <= p.decode.offer.gpu.interconnect.scale_up_domain_gpus


def _pairing(
    model: ModelSpec,
    decode: DecodeOption,
    prefill: PrefillOption,
    target: Workload,
    sla: Sla,
    space: SearchSpace,
) -> Pairing | None:
    """The fewest prefill workers meeting the TTFT limit beside ``decode``, or None (module docstring)."""
    rate = target.rate_rps or 0.0
    link, base = _start(model, decode, prefill, target, space)
    if math.isinf(base.transfer_s):  # the decode GPUs' links cannot take the transfers
        return None
    utilisation = space.headroom
    if sla.ttft_ms is not None:
        wait = sla.ttft_ms / MS_PER_S - base.transfer_s - base.other_s
        if wait <= 0:
            return None
        utilisation = min(utilisation, 2 * wait / (prefill.busy_s + 2 * wait))
    ranks = prefill.layout.attention_dp
    workers = max(
        math.ceil(rate * prefill.busy_s / utilisation),
        math.ceil(rate * link.prefill_busy_s / (LINK_MAX_UTILISATION * ranks)),
        1,
    )
    for extra in range(MAX_EXTRA_PREFILL_WORKERS):
        found = _with_workers(decode, prefill, workers + extra, rate, base, link)
        if found is not None and (sla.ttft_ms is None or found.ttft_s * MS_PER_S <= sla.ttft_ms):
            return found if _within_nvlink(found, space) else None
    return None


def paired_at(
    model: ModelSpec,
    decode: DecodeOption,
    prefill: PrefillOption,
    workers: int,
    target: Workload,
    space: SearchSpace,
) -> Pairing:
    """``workers`` prefill workers beside ``decode`` with their queues (compute and both links); TTFT
    infinite when a queue has no steady state."""
    rate = target.rate_rps or 0.0
    link, base = _start(model, decode, prefill, target, space)
    found = _with_workers(decode, prefill, workers, rate, base, link)
    if found is None:
        rho = rate * prefill.busy_s / workers
        return Pairing(decode, prefill, workers, rho, base.transfer_s, math.inf)
    return found


@dataclass(frozen=True)
class _Link:
    """One prompt's KV transfer: exposed seconds, and how long it holds one prefill / decode GPU's link."""

    exposed_s: float
    prefill_busy_s: float
    decode_busy_s: float


@dataclass(frozen=True)
class _Base:
    """A pairing's TTFT before the prefill pool's queues: the transfer with the decode link's wait, and
    the lone prefill plus the first decode steps."""

    transfer_s: float
    other_s: float


def _start(
    model: ModelSpec, decode: DecodeOption, prefill: PrefillOption, target: Workload, space: SearchSpace
) -> tuple[_Link, _Base]:
    """The transfer's link loads and the TTFT terms that do not depend on the prefill workers; the
    transfer is infinite when the decode GPUs' links are past :data:`LINK_MAX_UTILISATION`."""
    link = _link(model, decode, prefill, target, space)
    decode_wait = _link_wait_s((target.rate_rps or 0.0) / decode.ranks, link.decode_busy_s)
    transfer = link.exposed_s + (math.inf if decode_wait is None else decode_wait)
    return link, _Base(transfer, prefill.alone_s + FIRST_TOKEN_DECODE_STEPS * decode.tpot_s)


def _with_workers(
    decode: DecodeOption, prefill: PrefillOption, workers: int, rate: float, base: _Base, link: _Link
) -> Pairing | None:
    """The pairing with ``workers`` prefill workers: their M/D/1 compute queue and link queue."""
    rho = rate * prefill.busy_s / workers
    link_wait = _link_wait_s(rate / (workers * prefill.layout.attention_dp), link.prefill_busy_s)
    if rho >= 1 or link_wait is None:
        return None
    queue = md1_mean_wait_s(rho=rho, service_s=prefill.busy_s)
    transfer = base.transfer_s + link_wait
    return Pairing(decode, prefill, workers, rho, transfer, base.other_s + transfer + queue)


def _link(
    model: ModelSpec, decode: DecodeOption, prefill: PrefillOption, target: Workload, space: SearchSpace
) -> _Link:
    ends = ((prefill.offer.gpu, prefill.layout), (decode.offer.gpu, decode.layout))
    exposed = kv_transfer_s(
        model=model,
        transport=space.kv_transport,
        prefill=ends[0],
        decode=ends[1],
        prompt_tokens=target.input_tokens,
        prefill_s=prefill.alone_s,
    )
    busy = [
        kv_link_busy_s(model=model, transport=space.kv_transport, end=end, prompt_tokens=target.input_tokens)
        for end in ends
    ]
    return _Link(exposed, busy[0], busy[1])


def _link_wait_s(rate_rps: float, busy_s: float) -> float | None:
    """M/D/1 wait for one GPU's link carrying ``rate_rps`` transfers of ``busy_s`` each; None past
    :data:`LINK_MAX_UTILISATION` (at 1 the queue grows without bound)."""
    rho = rate_rps * busy_s
    if rho >= LINK_MAX_UTILISATION:
        return None
    return md1_mean_wait_s(rho=rho, service_s=busy_s)


def md1_mean_wait_s(*, rho: float, service_s: float) -> float:
    """Mean wait in an M/D/1 queue at utilisation ``rho`` < 1 with deterministic service ``service_s``
    (Pollaczek–Khinchine with zero service variance): ρ·s / (2(1 − ρ))."""
    return rho * service_s / (2 * (1 - rho))


def nvlink_refusal(offer: GpuOffer, space: SearchSpace) -> Rejection | None:
    """Why ``--kv-transport nvlink`` cannot carry the cache on ``offer``'s GPU (no NVLink switch
    fabric: PCIe cards, two-GPU NVLink bridges, AMD's xGMI mesh), or None."""
    link = offer.gpu.interconnect.scale_up
    if space.kv_transport.kind != "nvlink" or link == "nvlink":
        return None
    reason = f"disaggregated: --kv-transport nvlink needs an NVLink switch fabric; {offer.gpu.id} has {link}"
    return Rejection(gpu=offer.gpu.id, kind="layout", reason=reason + " (use rdma or tcp)")


def _cost(p: Pairing) -> tuple[float, int]:
    per_hour = (
        (p.prefill.offer.usd_per_gpu_hour or math.inf) * p.prefill_workers * p.prefill.layout.gpus_per_replica
    )
    return per_hour + p.decode.usd_per_hour, p.num_gpus


def disaggregated_plan(p: Pairing, target: Workload, cal: Calibration, transport: KvTransport) -> Plan:
    """The plan of a pairing: the decode pool is its layout (``gpu``, flat keys), both pools priced."""
    d, pre = p.decode, p.prefill
    prefill_layout = pre.layout.with_replicas(p.prefill_workers)
    pools = (
        PoolPlan.of(
            pre.offer.gpu.id,
            prefill_layout,
            usd_per_gpu_hour=pre.offer.usd_per_gpu_hour,
            busy_share=p.utilisation,
        ),
        PoolPlan.of(
            d.offer.gpu.id,
            d.layout,
            usd_per_gpu_hour=d.offer.usd_per_gpu_hour,
            busy_share=d.running / d.capacity,
        ),
    )
    prices = [pool.usd_per_hour for pool in pools]
    per_hour = None if None in prices else sum(x for x in prices if x is not None)
    rate = target.rate_rps or 0.0
    tokens_per_s = rate * target.output_tokens
    context = target.input_tokens + target.output_tokens
    return Plan(
        gpu=d.offer.gpu.id,
        layout=d.layout,
        layout_kind="disaggregated",
        prefill=pools[0],
        decode=pools[1],
        kv_transfer_ms=p.transfer_s * MS_PER_S,
        kv_transport=transport,
        concurrency_per_replica=d.running,
        ttft_ms=p.ttft_s * MS_PER_S,
        tpot_ms=d.tpot_s * MS_PER_S,
        output_tokens_per_s=tokens_per_s,
        requests_per_s=rate,
        usd_per_hour=per_hour,
        usd_per_month=monthly_usd(usd_per_hour=per_hour) if per_hour else None,
        usd_per_million_output_tokens=usd_per_million_tokens(usd_per_hour=per_hour, tokens_per_s=tokens_per_s)
        if per_hour
        else None,
        memory_per_gpu_gib=memory_in_use_gib(
            d.replica.memory, running=d.running / d.layout.attention_dp, context_tokens=context
        ),
        memory_breakdown_gib=MemoryBreakdownGib.of(d.replica.memory),
        bound=decode_bound(d.replica.step, d.running),
        price_source=d.offer.price_source,
        price_quote=d.offer.price_quote,
        calibrated=cal.is_fitted(d.offer.gpu.family) and cal.is_fitted(pre.offer.gpu.family),
    )


def disaggregated_plans(
    model: ModelSpec,
    offers: Sequence[GpuOffer],
    layouts: dict[str, list[Layout]],
    target: Workload,
    sla: Sla,
    space: SearchSpace,
    cal: Calibration,
) -> tuple[list[Plan], list[Rejection]]:
    """Every decode option's plan with its cheapest prefill pool within ``space.max_gpus``, and for
    each GPU type with none as the decode pool, why."""
    prefills: dict[tuple[str, str], list[PrefillOption]] = {}  # by the pairs ``pair`` admits (1.6x faster)
    for option in prefill_options(model, offers, layouts, target, cal):
        prefills.setdefault(_pairs_with(option.offer, option.layout, space), []).append(option)
    plans: list[Plan] = []
    why: dict[str, Rejection] = {}
    nearest: dict[str, int] = {}
    for decode in decode_options(model, offers, layouts, target, sla, space, cal):
        if isinstance(decode, Rejection):
            why[decode.gpu] = decode
            continue
        if (refused := nvlink_refusal(decode.offer, space)) is not None:
            why[decode.offer.gpu.id] = refused
            continue
        gpu = decode.offer.gpu.id
        near = prefills.get(_pairs_with(decode.offer, decode.layout, space), [])
        found = pair(model, decode, near, target, sla, space)
        if found is None and gpu not in nearest:
            why[gpu] = Rejection(gpu=gpu, kind="latency", reason=_NO_PREFILL.format(ttft=sla.ttft_ms))
        elif found is None:
            continue
        elif found.num_gpus > space.max_gpus:
            nearest[gpu] = min(nearest.get(gpu, found.num_gpus), found.num_gpus)
            reason = f"disaggregated: needs {nearest[gpu]} GPUs > max {space.max_gpus}"
            why[gpu] = Rejection(gpu=gpu, kind="count", reason=reason)
        else:
            plans.append(disaggregated_plan(found, target, cal, space.kv_transport))
    done = {p.gpu for p in plans}
    return plans, [r for g, r in why.items() if g not in done]


_NO_PREFILL = (
    "disaggregated: no prefill pool meets TTFT {ttft} ms after the KV transfer and first decode step"
)


def _pairs_with(offer: GpuOffer, layout: Layout, space: SearchSpace) -> tuple[str, str]:
    """Workers that may pair share this: the GPU type (its vendor with mixed pools) and weight dtype."""
    return (offer.gpu.vendor if space.mixed_pools else offer.gpu.id), layout.weight_dtype.name
