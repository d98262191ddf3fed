"""What gets deployed: one :class:`PoolDeployment` per pool, from a fleet plan or a recommend plan.

Engine limits derived from the plan:
- ``max_model_len`` = prompt + answer tokens of the class (the context the plan was sized for);
- ``max_num_seqs`` = requests a replica runs at its SLA-limited load: the running count at the
  design load divided by the utilisation (running grows about linearly with load, Little's law). It
  is not capped at vLLM's 256: that is a default, not a limit (``--max-num-seqs`` takes any positive
  int, https://docs.vllm.ai/en/v0.10.1/configuration/engine_args.html; SGLang's
  ``--max-running-requests`` is unset by default and sized from the KV pool,
  https://docs.sglang.ai/backend/server_arguments.html), and the plan's memory check already holds
  the KV cache of every running request. How it splits over attention-DP ranks: :mod:`parallel_args`;
- ``maxUnavailable`` of the PodDisruptionBudget = replicas the others can cover: ⌊N·(1 − u)⌋,
  at least 1 so that a node drain can always proceed.

A replica is one pod, so its GPUs must fit one node (the catalog's ``interconnect.node_gpus``): a
worker across nodes needs a multi-node launch (LeaderWorkerSet), which is not rendered, and is
refused naming the plan field.

A disaggregated recommend plan is two pools, ``<name>-prefill`` and ``<name>-decode`` (``role`` set),
each on its own GPU type and layout; prefill workers keep the engine's default ``max_num_seqs`` (their
steps are bounded by prompt tokens, not by running requests) and their PDB covers their busy share.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.catalog.product_names import product_label
from gpuplan.adapters.k8s.engine_args import Role
from gpuplan.adapters.k8s.labels import amd_product_labels
from gpuplan.core.errors import UserInputError
from gpuplan.core.fleet.planner import FleetPlan, Tier, tier_of
from gpuplan.core.fleet.pool_units import PoolUnit, mig_unit, whole_gpu_unit
from gpuplan.core.fleet.spec import DNS_LABEL
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec, Vendor
from gpuplan.core.perf.layout import Layout
from gpuplan.core.recommend.request import GpuOffer, Plan, PoolPlan
from gpuplan.core.units import MIB

DEFAULT_MAX_NUM_SEQS = 256
"""vLLM's default max_num_seqs (docs/model.md; the vllm entry of ENGINE_PROFILES, core/perf/engine_profiles.py):
what prefill workers keep (their steps are bounded by prompt tokens, not by running requests)."""
PLAN_HEADROOM = 0.85
"""A recommend plan runs replicas at ≤ 85 % of the SLA-limited load (SearchSpace.headroom)."""
MEMORY_LABEL_FLOOR = 0.9
"""GFD's nvidia.com/gpu.memory is nvidia-smi's MiB total (ECC and reservations vary); a node
matches when it reports at least 90 % of the nominal size."""


class PoolDeployment(FrozenModel):
    """One Deployment (and its Service and PDB)."""

    name: str = Field(pattern=DNS_LABEL, max_length=52)
    fleet: str = Field(pattern=DNS_LABEL, max_length=63)
    model: str
    gpu: str
    product_label: str
    min_memory_mib: int
    mig_profile: str | None
    tier: Literal["hpc", "general", "cost"]
    layout: Layout = Field(description="the plan's layout: TP x PP per replica, replicas, dtypes")
    max_model_len: int = Field(ge=1, le=10_000_000)
    max_num_seqs: int = Field(ge=1)
    max_unavailable: int = Field(ge=0)
    rate_rps: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    checkpoint: str | None = Field(
        default=None, description="pre-quantised weights to load (`k8s render --checkpoint`)"
    )
    role: Role | None = Field(
        default=None, description="a disaggregated plan's prefill or decode pool; None: aggregated replicas"
    )
    vendor: Vendor = Field(default="NVIDIA", description="the GPU's vendor: device plugin, labels, image")
    family: str | None = Field(default=None, description="the GPU's architecture family (ROCm image choice)")
    product_labels: tuple[str, ...] = Field(
        default=(), description="node label values any of which names the GPU (AMD: product-name variants)"
    )
    kv_overlapped: bool = Field(
        default=False, description="the plan priced the KV transfer as layer-wise overlapped with the prefill"
    )


def _max_num_seqs(plan: Plan, utilisation: float) -> int:
    return max(1, math.ceil(plan.concurrency_per_replica / max(utilisation, 1e-3)))


def require_one_node(layout: Layout, gpu: GpuSpec, *, field: str, mig: bool = False) -> None:
    """UserInputError naming ``field`` when one replica's GPUs exceed one node of ``gpu`` (module docstring)."""
    per_node, need = gpu.interconnect.node_gpus, layout.gpus_per_replica
    if mig or need <= per_node:
        return
    raise UserInputError(
        f"{field} (tp={layout.tp} pp={layout.pp} attention_dp={layout.attention_dp}) needs {need} GPUs per "
        f"worker across {math.ceil(need / per_node)} nodes of {per_node} {gpu.id}; multi-node workers "
        "(LeaderWorkerSet) are not rendered",
        hint="pick a plan whose workers fit one node (recommend lists others, e.g. --gpus), or deploy it by hand",
    )


def _vendor_fields(gpu: GpuSpec) -> dict[str, Any]:
    """PoolDeployment fields that follow the GPU's vendor: its node label values (GFD's
    ``nvidia.com/gpu.product``, or the AMD labeller's product names, :mod:`labels`) and family."""
    if gpu.vendor == "NVIDIA":
        return {"product_label": product_label(gpu), "family": gpu.family}
    if gpu.vendor != "AMD":
        raise UserInputError(
            f"{gpu.id} is a {gpu.vendor} GPU: only NVIDIA and AMD GPUs are rendered for Kubernetes",
            hint="plan on NVIDIA or AMD GPUs (recommend --gpus)",
        )
    labels = amd_product_labels(gpu)
    return {"vendor": gpu.vendor, "family": gpu.family, "product_label": labels[0], "product_labels": labels}


def _max_unavailable(replicas: int, utilisation: float) -> int:
    return max(1, math.floor(replicas * (1.0 - utilisation)))


def from_fleet(plan: FleetPlan, catalog: Catalog) -> list[PoolDeployment]:
    out = []
    for pool in plan.pools:
        gpu = catalog.get_gpu(pool.gpu)
        require_one_node(pool.plan.layout, gpu, field=f"pool {pool.name}", mig=pool.mig_profile is not None)
        out.append(
            PoolDeployment(
                **_vendor_fields(gpu),
                name=pool.name[:52].rstrip("-"),
                fleet=plan.name,
                model=pool.model,
                gpu=gpu.id,
                min_memory_mib=int(gpu.memory_bytes / MIB * MEMORY_LABEL_FLOOR),
                mig_profile=pool.mig_profile,
                tier=pool.tier,
                layout=pool.plan.layout,
                max_model_len=pool.input_tokens + pool.output_tokens,
                max_num_seqs=_max_num_seqs(pool.plan, pool.utilisation),
                max_unavailable=_max_unavailable(pool.plan.layout.replicas, pool.utilisation),
                rate_rps=pool.rate_rps,
                input_tokens=pool.input_tokens,
                output_tokens=pool.output_tokens,
                checkpoint=pool.checkpoint,
            )
        )
    return out


def from_plan(
    plan: Plan, model: str, catalog: Catalog, *, max_model_len: int, name: str, field: str = "the plan"
) -> PoolDeployment:
    """A recommend plan (``plan.gpu`` a catalog id, or ``GPU/profile`` for a MIG slice); ``field`` names
    the layout in a refusal."""
    unit = _unit(plan.gpu, catalog)
    require_one_node(plan.layout, unit.parent, field=field, mig=unit.mig is not None)
    tier: Tier = tier_of(unit)
    return PoolDeployment(
        **_vendor_fields(unit.parent),
        name=name,
        fleet=name,
        model=model,
        gpu=unit.parent.id,
        min_memory_mib=int(unit.parent.memory_bytes / MIB * MEMORY_LABEL_FLOOR),
        mig_profile=unit.mig.name if unit.mig else None,
        tier=tier,
        layout=plan.layout,
        max_model_len=max_model_len,
        max_num_seqs=_max_num_seqs(plan, PLAN_HEADROOM),
        max_unavailable=_max_unavailable(plan.layout.replicas, PLAN_HEADROOM),
        rate_rps=plan.requests_per_s,
    )


def from_disaggregated_plan(
    plan: Plan, model: str, catalog: Catalog, *, max_model_len: int, name: str
) -> list[PoolDeployment]:
    """The prefill and decode pools of a disaggregated recommend plan (in that order)."""
    if plan.prefill is None:
        raise ValueError("from_disaggregated_plan needs a plan with a prefill pool")
    prefill = from_plan(
        _prefill_as_plan(plan, plan.prefill),
        model,
        catalog,
        max_model_len=max_model_len,
        name=f"{name}-prefill",
        field="prefill",
    )
    decode = from_plan(
        plan, model, catalog, max_model_len=max_model_len, name=f"{name}-decode", field="decode"
    )
    busy = plan.prefill.busy_share
    prefill = prefill.model_copy(
        update={
            "fleet": name,
            "role": "prefill",
            # the engine default per scheduler: one per attention-DP rank (parallel_args.max_seqs_value)
            "max_num_seqs": DEFAULT_MAX_NUM_SEQS * prefill.layout.attention_dp,
            "max_unavailable": _max_unavailable(plan.prefill.workers, busy),
        }
    )
    return [prefill, decode.model_copy(update={"fleet": name, "role": "decode"})]


def _prefill_as_plan(plan: Plan, pool: PoolPlan) -> Plan:
    """``plan`` with the prefill pool's GPU and layout (what ``from_plan`` reads)."""
    return plan.model_copy(update={"gpu": pool.gpu, "layout": pool.to_layout(plan.layout)})


def _unit(gpu_ref: str, catalog: Catalog) -> PoolUnit:
    base, _, profile = gpu_ref.partition("/")
    offer = GpuOffer(gpu=catalog.get_gpu(base))
    return mig_unit(offer, profile) if profile else whole_gpu_unit(offer)
