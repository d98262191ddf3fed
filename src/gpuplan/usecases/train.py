"""Training use cases for the CLI (and later ``recommend --task train|finetune``): resolve the model
and the catalog, search layouts per GPU × count, rank the plans, and explain the rejections.

Entry points: :func:`plan_training` (``gpuplan train-plan``), :func:`train_memory_bars` (the memory
of its top plans, for the web page's chart) and :func:`fit_training` (``gpuplan train-fit``).
"""

from __future__ import annotations

import math

from pydantic import Field

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model, model_for_seq_len
from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.errors import InfeasibleError, UserInputError, check_whole_number
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import MAX_GPU_COUNT
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.memory import usable_memory_bytes
from gpuplan.core.pricing import PriceBasis, missing_quote
from gpuplan.core.training.flops import MFU_CONVENTION
from gpuplan.core.training.memory import TrainingMemory, training_memory
from gpuplan.core.training.plan import training_cost
from gpuplan.core.training.search import search_layouts
from gpuplan.core.training.spec import (
    MAX_GLOBAL_BATCH,
    MAX_LORA_RANK,
    MAX_SEQ_LEN,
    MAX_TRAIN_TOKENS,
    Method,
    Optimizer,
    TrainingJob,
    TrainingLayout,
    check_layout,
    micro_batches_per_step,
)
from gpuplan.core.training.step import StepPrediction, predict_step
from gpuplan.core.units import GIB
from gpuplan.data.bundled_calibration import default_training_calibration
from gpuplan.usecases.pricing import price_basis
from gpuplan.usecases.train_why import explain_training
from gpuplan.usecases.training_plan import TrainPlan

MIN_INTER_NODE_GBPS = 1.0
"""Slowest scale-out link accepted: 1 Gb/s Ethernet."""
MAX_INTER_NODE_GBPS = 1600.0
"""Twice the fastest per-GPU NIC shipping, ConnectX-8 at 800 Gb/s
(https://docs.nvidia.com/networking/display/connectx8supernic/introduction)."""
BITS_PER_BYTE = 8
GBPS_TO_BYTES_PER_S = 1e9 / BITS_PER_BYTE
"""Decimal gigabits per second to bytes per second."""
PLAN_LIMIT = 10
"""Plans shown by train-plan (ranked)."""
PRICE_KINDS = ("on_demand", "spot", "reserved_1y")


class TrainPlanRequest(FrozenModel):
    """What ``train-plan`` (and ``recommend --task train``) asks."""

    model: str
    method: Method = "pretrain"
    tokens: float = Field(
        gt=0, le=MAX_TRAIN_TOKENS, description="tokens to train on (epochs × samples × seq_len)"
    )
    seq_len: int = Field(ge=1, le=MAX_SEQ_LEN)
    global_batch: int = Field(default=256, ge=1, le=MAX_GLOBAL_BATCH)
    dtype: str = "bf16"
    optimizer: Optimizer = "adamw"
    lora_rank: int = Field(default=16, ge=0, le=MAX_LORA_RANK)
    gpus: tuple[str, ...] = ()
    max_gpus: int = Field(default=64, ge=1, le=MAX_GPU_COUNT)
    deadline_hours: float | None = Field(default=None, gt=0)
    objective: str = Field(default="time", pattern="^(time|cost)$")
    inter_node_gbps: float | None = Field(
        default=None,
        ge=MIN_INTER_NODE_GBPS,
        le=MAX_INTER_NODE_GBPS,
        description="scale-out bandwidth per GPU, Gb/s one direction (None: the calibration's, 400 Gb/s NDR)",
    )


class TrainingFactors(FrozenModel):
    """Where a plan's training factors came from, and what a profile changed."""

    source: str = Field(description="the fit's data and date (bundled: training.csv grades A+B)")
    mfu_changed: dict[str, float] = Field(description="family:dtype MFU factors that differ from the bundled")
    mfu_bundled: dict[str, float] = Field(description="the bundled value of each changed factor")
    inter_node_gbps: float = Field(description="scale-out bandwidth per GPU used, Gb/s one direction")
    notes: list[str]


class TrainPlanResult(FrozenModel):
    model: str
    method: str
    tokens: float
    mfu_convention: str = MFU_CONVENTION
    factors: TrainingFactors
    price_basis: PriceBasis | None = None
    plans: list[TrainPlan]
    why: list[str] = Field(description="why the winner beats the next plan, from the plans' numbers")
    rejected: list[tuple[str, str]]


def _counts(max_gpus: int) -> list[int]:
    out, n = [], 1
    while n <= max_gpus:
        out.append(n)
        n *= 2
    return out


METHODS: dict[str, Method] = {
    "full": "full_ft",
    "full_ft": "full_ft",
    "pretrain": "pretrain",
    "lora": "lora",
    "qlora": "qlora",
}
"""``--method`` words (train-plan, the web form) → the planner's method."""
TASK_METHODS: dict[tuple[str, str], Method] = {("train", "full"): "pretrain", ("finetune", "full"): "full_ft"}
"""``recommend --task train|finetune --method full`` → the planner's method."""


def resolve_method(method: str, *, task: str | None = None) -> Method:
    """A ``--method`` word as the planner's method; UserInputError naming the valid words."""
    if task is not None:
        if method not in ("full", "lora", "qlora"):
            raise UserInputError(f"--method {method!r} is not one of full, lora, qlora")
        if task == "train" and method != "full":
            raise UserInputError("--task train trains all weights: use --task finetune for lora/qlora")
        return TASK_METHODS.get((task, method), METHODS[method])
    if method not in METHODS:
        raise UserInputError(f"--method {method!r} is not one of full, lora, qlora, pretrain")
    return METHODS[method]


def tokens_to_train(tokens: float | None, epochs: float | None, samples: int | None, seq_len: int) -> float:
    """The token budget: ``tokens``, or ``epochs × samples × seq_len`` (samples and seq_len bounded
    first, naming their flag, so that the product is a float)."""
    if tokens is not None:
        if not (math.isfinite(tokens) and tokens > 0):
            raise UserInputError(f"--tokens must be a finite number > 0, got {tokens}")
        return tokens
    if epochs is not None and samples is not None:
        check_whole_number("--samples", samples, maximum=int(MAX_TRAIN_TOKENS))
        check_whole_number("--seq-len", seq_len, maximum=MAX_SEQ_LEN)
        budget = epochs * samples * seq_len
        if not math.isfinite(budget):
            raise UserInputError(f"epochs × samples × seq_len = {budget} tokens is not a finite number")
        return budget
    raise UserInputError("give --tokens, or --epochs with --samples")


def training_job(req: TrainPlanRequest, model: ModelSpec) -> TrainingJob:
    """The planner's job for a request (dtype rules applied, checked against the model)."""
    dtype = "bf16" if req.dtype in ("bf16", "int4", "nf4") else req.dtype
    if dtype not in ("bf16", "fp16", "fp8", "fp4"):
        raise UserInputError(f"dtype {req.dtype!r} is not one of bf16, fp16, fp8, fp4")
    job = TrainingJob.model_validate(
        {
            "method": req.method,
            "dtype": dtype,
            "seq_len": req.seq_len,
            "global_batch": req.global_batch,
            "optimizer": req.optimizer,
            "lora_rank": req.lora_rank,
        }
    )
    check_layout(model, job, TrainingLayout(micro_batch=1, dp=1))
    return job


def check_inter_node_gbps(gbps: float | None) -> float | None:
    """``--inter-node-gbps`` as given, or UserInputError naming the flag and its range."""
    if gbps is not None and not (math.isfinite(gbps) and MIN_INTER_NODE_GBPS <= gbps <= MAX_INTER_NODE_GBPS):
        raise UserInputError(
            f"--inter-node-gbps must be between {MIN_INTER_NODE_GBPS:g} and {MAX_INTER_NODE_GBPS:g} "
            f"(Gb/s per GPU, one direction), got {gbps}",
            hint="e.g. --inter-node-gbps 400 for one NDR InfiniBand NIC per GPU, 100 for 100 GbE",
        )
    return gbps


def with_inter_node_gbps(cal: TrainingCalibration | None, gbps: float | None) -> TrainingCalibration:
    """``cal`` (a profile) or the bundled factors, with ``--inter-node-gbps`` laid over their scale-out
    bandwidth when given."""
    base = cal or default_training_calibration()
    if gbps is None:
        return base
    return base.model_copy(update={"ib_bytes_per_s_per_gpu": gbps * GBPS_TO_BYTES_PER_S})


def training_factors(cal: TrainingCalibration, catalog: Catalog) -> TrainingFactors:
    """What ``cal`` changes against the bundled factors, in words a plan can print."""
    bundled = default_training_calibration()
    changed = {k: v for k, v in sorted(cal.mfu.items()) if bundled.mfu.get(k) != v}
    before = {k: bundled.factor("mfu", k) if ":" in k else bundled.mfu["default"] for k in changed}
    source = f"{cal.provenance.data} ({cal.provenance.fitted_on})"
    notes = [f"training factors: fitted on {source}"]
    for key, value in changed.items():
        family = key.split(":", 1)[0]
        sharing = sorted(g for g in catalog.gpu_ids() if catalog.get_gpu(g).family == family)
        notes.append(
            f"mfu {key} = {value:.3f} (bundled {before[key]:.3f}): a factor per GPU family, so it applies to "
            f"every {family} GPU ({', '.join(sharing) or 'none in the catalog'}), measured or not"
        )
    gbps = cal.ib_bytes_per_s_per_gpu / GBPS_TO_BYTES_PER_S
    bundled_gbps = bundled.ib_bytes_per_s_per_gpu / GBPS_TO_BYTES_PER_S
    if gbps != bundled_gbps:
        notes.append(f"inter-node bandwidth {gbps:g} Gb/s per GPU (bundled {bundled_gbps:g})")
    return TrainingFactors(
        source=source, mfu_changed=changed, mfu_bundled=before, inter_node_gbps=gbps, notes=notes
    )


def _plan(
    req: TrainPlanRequest,
    catalog: Catalog,
    gpu_id: str,
    count: int,
    model: ModelSpec,
    job: TrainingJob,
    cal: TrainingCalibration,
    basis: PriceBasis,
) -> tuple[TrainPlan | None, str]:
    gpu = catalog.get_gpu(gpu_id)
    found = search_layouts(model, gpu, job, count, cal)
    if not found.candidates:
        reason = found.rejected[-1][1] if found.rejected else "no layout"
        return None, f"nothing fits: {reason}"
    best = found.candidates[0]
    quotes = {k: q for k in PRICE_KINDS if (q := catalog.quote(gpu.id, k, basis)) is not None}
    missing = "" if "on_demand" in quotes else missing_quote(gpu=gpu.id, kind="on_demand", basis=basis)
    prices = {k: q.usd_per_gpu_hour for k, q in quotes.items()}
    cost = training_cost(
        tokens=req.tokens,
        tokens_per_s=best.step.tokens_per_s,
        gpus=count,
        usd_per_gpu_hour=prices,
        tdp_watts=gpu.tdp_watts,
    )
    plan = TrainPlan(
        gpu=gpu.id,
        gpus=count,
        layout=best.layout.label(),
        step=best.step,
        memory_gib_per_gpu=best.memory.total_bytes / GIB,
        usable_gib_per_gpu=usable_memory_bytes(gpu) / GIB,
        cost=cost,
        price_quote=quotes.get("on_demand"),
        price_missing=missing,
        memory=best.memory,
        parallel=best.layout,
    )
    if req.deadline_hours is not None and cost.wall_hours > req.deadline_hours:
        return None, f"{cost.wall_hours:.1f} h misses the {req.deadline_hours:g} h deadline"
    return plan, ""


def _cost_key(plan: TrainPlan) -> float:
    return plan.cost.usd_by_price_kind.get("on_demand", float("inf"))


def plan_training(
    req: TrainPlanRequest,
    catalog: Catalog,
    cal: TrainingCalibration | None = None,
    *,
    basis: PriceBasis | None = None,
) -> TrainPlanResult:
    """Rank GPU × count × layout plans for a training job; InfeasibleError when none fits. ``cal``: the
    training factors (a ``--calibration`` profile, loaded once by the caller); None: the bundled ones.
    Every GPU is priced on ``basis`` (default: the market median); by cost, a GPU it does not quote is
    rejected."""
    basis = basis or price_basis(catalog)
    model = model_for_seq_len(get_model(req.model), req.seq_len)
    job = training_job(req, model)
    factors = with_inter_node_gbps(cal, req.inter_node_gbps)  # the factors the plans use
    gpu_ids = list(req.gpus) or catalog.gpu_ids()
    plans: list[TrainPlan] = []
    rejected: list[tuple[str, str]] = []
    for gpu_id in gpu_ids:
        if req.objective == "cost" and catalog.quote(gpu_id, "on_demand", basis) is None:
            gid = catalog.get_gpu(gpu_id).id
            rejected.append((gid, missing_quote(gpu=gid, kind="on_demand", basis=basis)))
            continue
        for count in _counts(req.max_gpus):
            if job.global_batch % count and count > 1:
                continue
            plan, miss = _plan(req, catalog, gpu_id, count, model, job, factors, basis)
            if plan is not None:
                plans.append(plan)
            else:
                rejected.append((f"{gpu_id} x{count}", miss))
    if not plans:
        misses = "; ".join(f"{name}: {why}" for name, why in rejected[:3])
        raise InfeasibleError(f"no plan fits or meets the deadline ({misses})")
    key = _cost_key if req.objective == "cost" else (lambda p: p.cost.wall_hours)
    plans.sort(key=key)
    shown = plans[:PLAN_LIMIT]
    return TrainPlanResult(
        model=model.id,
        method=job.method,
        tokens=req.tokens,
        factors=training_factors(factors, catalog),
        price_basis=basis,
        plans=shown,
        why=explain_training(
            shown, tokens=req.tokens, objective=req.objective, deadline_hours=req.deadline_hours
        ),
        rejected=rejected,
    )


class TrainMemoryBar(FrozenModel):
    """The training memory of the most loaded GPU of one ranked plan (``train-fit`` of its layout)."""

    rank: int
    gpu: str
    gpus: int
    layout: str
    memory: TrainingMemory
    usable_gib: float = Field(description="usable memory of one GPU")


def train_memory_bars(result: TrainPlanResult, *, limit: int) -> list[TrainMemoryBar]:
    """Memory by part of the top ``limit`` plans, as the layout search found it for each plan (and
    the usable memory of its GPU, carried by the plan)."""
    return [
        TrainMemoryBar(
            rank=rank,
            gpu=plan.gpu,
            gpus=plan.gpus,
            layout=plan.layout,
            memory=plan.memory,
            usable_gib=plan.usable_gib_per_gpu,
        )
        for rank, plan in enumerate(result.plans[:limit], start=1)
    ]


class TrainFitResult(FrozenModel):
    model: str
    gpu: str
    mfu_convention: str = MFU_CONVENTION
    layout: str
    memory: TrainingMemory
    usable_gib: float
    fits: bool
    step: StepPrediction | None


def fit_training(
    model_id: str,
    gpu_id: str,
    job: TrainingJob,
    layout: TrainingLayout,
    catalog: Catalog,
    cal: TrainingCalibration | None = None,
) -> TrainFitResult:
    """Memory breakdown (and step time when it fits) of one training layout (``cal`` None: bundled)."""
    model = model_for_seq_len(get_model(model_id), job.seq_len)
    gpu = catalog.get_gpu(gpu_id)
    check_layout(model, job, layout)
    memory = training_memory(model, job, layout, micro_batches=micro_batches_per_step(job, layout))
    usable = usable_memory_bytes(gpu)
    fits = memory.total_bytes <= usable
    step = predict_step(model, gpu, job, layout, cal or default_training_calibration()) if fits else None
    return TrainFitResult(
        model=model.id,
        gpu=gpu.id,
        layout=layout.label(),
        memory=memory,
        usable_gib=usable / GIB,
        fits=fits,
        step=step,
    )
