"""Step time of one optimizer step: compute at calibrated efficiency, pipeline bubble, communication.

t_compute = F_gemm / (P_dtype · η[family:dtype] · h/(h + h½)) + F_attn / (P_bf16 · η[family:bf16] · η_attn)
            (each GEMM pass also bounded below by streaming the weights from HBM)
t_pipe    = t_compute · (1 + (p − 1)/(v·m))      1F1B bubble (p−1)/(m+p−1) of the step; interleaving
                                                v chunks per rank divides it by v (Narayanan 2021 §2.2)
t_dp      = ZeRO-0/1/2: reduce-scatter + all-gather of bf16 grads/params (= one all-reduce);
            ZeRO-3/FSDP: 2 all-gathers + 1 reduce-scatter per micro-batch; exposed beyond dp_overlap·t
t_mp      = TP 4 all-reduces per layer per micro-batch (6 with full recompute), CP ring KV exchange,
            PP sends; (1 − tp_overlap) of it is exposed
t_ep      = 4 all-to-alls (dispatch, combine; fwd, bwd) per MoE layer per micro-batch, deduplicated per
            node across nodes (core.training.moe); (1 − tp_overlap) of it is exposed
            routed-expert GEMMs run at the grouped-GEMM efficiency η_e of core.training.moe
t_opt     = optimizer update streaming 32 bytes per local trainable parameter from HBM
t_host    = micro-batches · local layers · passes · host_overhead_s: the CPU issuing the kernels
            (passes: forward, activation and weight backward, + recompute); launches are asynchronous,
            so only t_host − (t_compute + t_dequant) > 0 is exposed (launch-bound small steps)
step      = t_pipe + exposed t_dp + exposed t_mp + exposed t_ep + t_opt (+ QLoRA dequantisation passes)
            + exposed t_host
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.arith import routed_flops_per_token
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.peaks import power_cap
from gpuplan.core.training import comm, moe
from gpuplan.core.training.flops import (
    executed_flops_per_token,
    forward_flops_per_token,
    model_flops_per_token,
)
from gpuplan.core.training.memory import NF4_DOUBLE_QUANT_BYTES, SIXTEEN_BIT_BYTES
from gpuplan.core.training.params import lora_params, shard_params, widths
from gpuplan.core.training.spec import TrainingJob, TrainingLayout, micro_batches_per_step
from gpuplan.core.units import TFLOPS

OPTIMIZER_UPDATE_BYTES = 32.0
"""AdamW update reads and writes fp32 master, m, v and reads the grad: ~32 bytes per parameter."""
TP_COLLECTIVES_PER_LAYER = 4
"""Megatron TP: 2 all-reduces forward (attention, MLP) and 2 backward (Shoeybi et al. 2019 §3)."""
DEQUANT_BYTES_PER_PARAM = NF4_DOUBLE_QUANT_BYTES + 2 * SIXTEEN_BIT_BYTES
"""bitsandbytes dequantisation reads nf4, writes bf16, and the GEMM reads the bf16 copy back."""
WEIGHT_STREAM_EFFICIENCY = 0.8
"""Achieved fraction of HBM bandwidth when a GEMM is bound by reading weights (small batches)."""


class StepPrediction(FrozenModel):
    """Predicted time of one optimizer step, its parts, and the rates derived from it. ``mfu`` and
    ``hfu`` follow ``flops.MFU_CONVENTION``."""

    step_time_s: float
    compute_s: float
    bubble_s: float
    dp_comm_exposed_s: float
    mp_comm_exposed_s: float
    optimizer_s: float
    dequant_s: float
    host_s: float = Field(default=0.0, description="host (kernel launch) time the GPU waits for")
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float
    mfu: float
    hfu: float = Field(description="executed FLOPs (recompute, causal attention) / the same peak as mfu")

    def breakdown(self) -> tuple[tuple[str, float], ...]:
        """The step's parts, which add up to ``step_time_s``: compute, exposed communication (data
        parallel; tensor/context/expert/pipeline), pipeline bubble, optimizer and other (QLoRA
        dequantisation) and host (kernel launches the GPU waits for)."""
        return (
            ("compute", self.compute_s),
            ("exposed comm, data parallel", self.dp_comm_exposed_s),
            ("exposed comm, TP/CP/EP/PP", self.mp_comm_exposed_s),
            ("pipeline bubble", self.bubble_s),
            ("optimizer", self.optimizer_s),
            ("other (QLoRA dequant)", self.dequant_s),
            ("host (kernel launch)", self.host_s),
        )


@dataclass(frozen=True)
class _Ctx:
    model: ModelSpec
    gpu: GpuSpec
    job: TrainingJob
    layout: TrainingLayout
    cal: TrainingCalibration
    micro_batches: int

    @property
    def tokens_per_micro(self) -> float:
        """Tokens one GPU processes per micro-batch (sequence split by CP)."""
        return self.layout.micro_batch * self.job.seq_len / self.layout.cp


def _peak(gpu: GpuSpec, dtype: str) -> tuple[float, str]:
    """Dense peak FLOP/s of the GEMM path and the dtype key it falls back to."""
    if dtype in ("fp8", "fp4") and gpu.tflops(dtype) is not None:
        return float(gpu.tflops(dtype) or 0.0) * TFLOPS, dtype
    if dtype == "fp4" and gpu.tflops("fp8") is not None:
        return float(gpu.tflops("fp8") or 0.0) * TFLOPS, "fp8"
    return gpu.sixteen_bit_tflops * TFLOPS, "bf16"


def _mfu_key(ctx: _Ctx, path: str) -> str:
    return "int4" if ctx.job.method == "qlora" else path


def machine_balance(gpu: GpuSpec, dtype: str) -> float:
    """Dense peak FLOP/s of the ``dtype`` GEMM path over HBM bytes/s (``TrainingCalibration.mfu_for``)."""
    return _peak(gpu, dtype)[0] / gpu.memory_bandwidth_bytes_per_s


def mfu_key(*, gpu: GpuSpec, job: TrainingJob) -> str:
    """The ``family:dtype`` key of the ``mfu`` factor that prices this job's GEMMs on this GPU (the key a
    fit on measured steps must move): QLoRA reads ``int4``, fp8/fp4 their own peak where the GPU has
    one, everything else ``bf16``."""
    return f"{gpu.family}:{'int4' if job.method == 'qlora' else _peak(gpu, job.dtype)[1]}"


def compute_s(ctx: _Ctx) -> float:
    """GEMM + attention time of all micro-batches on one GPU (no bubble)."""
    job, lay, gpu, cal = ctx.job, ctx.layout, ctx.gpu, ctx.cal
    flops = executed_flops_per_token(
        ctx.model, job.seq_len, method=job.method, checkpointing=lay.checkpointing
    )
    tokens = ctx.tokens_per_micro * ctx.micro_batches
    shards = lay.tp * lay.pp
    peak, path = _peak(gpu, job.dtype)
    capped = power_cap(gpu, cal.power_limit_exponent)  # a PCIe/NVL board holds less than its spec peak
    peak *= capped
    size = ctx.model.hidden_size / (ctx.model.hidden_size + cal.gemm_half_width)
    gemm_rate = peak * cal.mfu_for(gpu.family, _mfu_key(ctx, path), machine_balance(gpu, path)) * size
    bf16_peak = _peak(gpu, "bf16")[0] * capped
    bf16_mfu = cal.mfu_for(gpu.family, _mfu_key(ctx, "bf16"), machine_balance(gpu, "bf16"))
    attn_rate = bf16_peak * bf16_mfu * cal.attention_efficiency
    gemm_s = tokens * flops.gemm / shards / gemm_rate * _expert_slowdown(ctx)
    passes = flops.gemm / max(forward_flops_per_token(ctx.model, job.seq_len).gemm, 1.0)
    weights = sum(shard_params(ctx.model, tp=lay.tp, pp=lay.pp, ep=lay.ep)) * SIXTEEN_BIT_BYTES
    stream_s = (
        ctx.micro_batches * passes * weights / (gpu.memory_bandwidth_bytes_per_s * WEIGHT_STREAM_EFFICIENCY)
    )
    return max(gemm_s, stream_s) + tokens * flops.attention / shards / attn_rate


def _expert_slowdown(ctx: _Ctx) -> float:
    """GEMM time relative to all-dense GEMMs: the routed experts' share of the GEMM FLOPs runs at the
    grouped-GEMM efficiency of ``core.training.moe`` (1 for a dense model)."""
    model = ctx.model
    if model.moe is None:
        return 1.0
    share = routed_flops_per_token(model) / max(forward_flops_per_token(model, ctx.job.seq_len).gemm, 1.0)
    eta = moe.expert_gemm_efficiency(
        model=model, tokens=ctx.tokens_per_micro / ctx.layout.tp, ep=ctx.layout.ep, cal=ctx.cal
    )
    return 1.0 - share + share / eta


def _ep_comm_s(ctx: _Ctx) -> float:
    """Expert-parallel dispatch + combine of all micro-batches on one GPU (``core.training.moe``)."""
    model, lay = ctx.model, ctx.layout
    if model.moe is None or lay.ep <= 1:
        return 0.0
    recompute = 1.5 if lay.checkpointing == "full" else 1.0
    one = moe.alltoall_s(
        tokens=ctx.tokens_per_micro / lay.tp,
        model=model,
        ep=lay.ep,
        stride=lay.tp * lay.cp,
        gpu=ctx.gpu,
        cal=ctx.cal,
    )
    return (
        ctx.micro_batches * moe.ALLTOALLS_PER_MOE_LAYER * recompute * model.moe.num_moe_layers / lay.pp * one
    )


def _dp_comm_s(ctx: _Ctx) -> float:
    lay = ctx.layout
    n = lay.dp * lay.cp
    if n <= 1:
        return 0.0
    link = comm.group_link(ctx.gpu, lay.tp * lay.cp * lay.dp, ctx.cal)
    if ctx.job.is_adapter:
        trainable = lora_params(ctx.model, rank=ctx.job.lora_rank, targets=ctx.job.lora_targets)
        grads_s = comm.allreduce_s(SIXTEEN_BIT_BYTES * trainable / (lay.tp * lay.pp), n, link)
        if lay.zero_stage < 3:
            return grads_s
        # ZeRO-3 gathers the sharded frozen base before forward and again before backward.
        base = SIXTEEN_BIT_BYTES * sum(shard_params(ctx.model, tp=lay.tp, pp=lay.pp, ep=lay.ep))
        return grads_s + ctx.micro_batches * 2 * comm.allgather_s(base, n, link)
    # Expert weights are already split over EP: their gradients (and ZeRO-3 shards) span only the
    # dp·cp/ep expert-data-parallel ranks (Megatron-Core expert_data_parallel group, FSDP2 + EP).
    dense, routed = shard_params(ctx.model, tp=lay.tp, pp=lay.pp, ep=lay.ep)
    groups = [(SIXTEEN_BIT_BYTES * dense, n), (SIXTEEN_BIT_BYTES * routed, max(n // lay.ep, 1))]
    if lay.zero_stage >= 3:
        return ctx.micro_batches * 3 * sum(comm.allgather_s(m, k, link) for m, k in groups if m > 0)
    return sum(comm.allreduce_s(m, k, link) for m, k in groups if m > 0)


def _mp_comm_s(ctx: _Ctx) -> float:
    """TP + CP + PP traffic of all micro-batches on one GPU (EP: ``_ep_comm_s``)."""
    model, lay, cal = ctx.model, ctx.layout, ctx.cal
    layers = model.num_layers / lay.pp
    act = ctx.tokens_per_micro * model.hidden_size * SIXTEEN_BIT_BYTES
    recompute = 1.5 if lay.checkpointing == "full" else 1.0
    tp_s = (
        TP_COLLECTIVES_PER_LAYER
        * recompute
        * layers
        * comm.allreduce_s(act, lay.tp, comm.group_link(ctx.gpu, lay.tp, cal))
    )
    _, kv = widths(model)
    kv_bytes = ctx.tokens_per_micro * 2 * kv * SIXTEEN_BIT_BYTES
    cp_link = comm.group_link(ctx.gpu, lay.tp * lay.cp, cal)
    cp_s = 3 * layers * (lay.cp - 1) * kv_bytes / cp_link.bytes_per_s if lay.cp > 1 else 0.0
    pp_s = 0.0
    if lay.pp > 1:
        pp_link = comm.group_link(ctx.gpu, lay.num_gpus, cal)
        pp_s = 2 * lay.virtual_stages * act / lay.tp / pp_link.bytes_per_s  # v× more boundary sends
    return ctx.micro_batches * (tp_s + cp_s + pp_s)


def _optimizer_s(ctx: _Ctx) -> float:
    lay = ctx.layout
    if ctx.job.is_adapter:
        local = lora_params(ctx.model, rank=ctx.job.lora_rank, targets=ctx.job.lora_targets) / (
            lay.tp * lay.pp
        )
    else:
        local = sum(shard_params(ctx.model, tp=lay.tp, pp=lay.pp, ep=lay.ep))
        local /= lay.dp * lay.cp if lay.zero_stage >= 1 else 1
    return OPTIMIZER_UPDATE_BYTES * local / ctx.gpu.memory_bandwidth_bytes_per_s


def _dequant_s(ctx: _Ctx) -> float:
    if ctx.job.method != "qlora":
        return 0.0
    lay = ctx.layout
    passes = 3.0 if lay.checkpointing == "full" else 2.0
    base = sum(shard_params(ctx.model, tp=lay.tp, pp=lay.pp, ep=lay.ep))
    rate = ctx.gpu.memory_bandwidth_bytes_per_s * ctx.cal.dequant_bandwidth_efficiency
    return ctx.micro_batches * passes * base * DEQUANT_BYTES_PER_PARAM / rate


HOST_PASSES = {"none": 3.0, "selective": 3.0, "full": 4.0}
"""Passes over a layer per micro-batch whose kernels the host issues: forward, activation backward and
weight backward (the backward launches about twice the forward's kernels), plus the recomputed
forward under full checkpointing (selective recomputation re-runs ops inside a pass)."""


FUSED_LAUNCH_SHARE = 0.2
"""Kernels per layer of a Transformer-Engine block relative to an eager HF/PEFT block: TE fuses the norm
into the following GEMM (``LayerNormLinear``, ``LayerNormMLP``), runs attention in one fused kernel and
the bias/activation and RoPE in fused ops (about 15 launches per forward against about 75 for an eager
block with LoRA adapters: norm 8 ops ×2, q/k/v/o/gate/up/down with 5 adapter ops each, RoPE ~12):
https://docs.nvidia.com/deeplearning/transformer-engine/user-guide/api/pytorch.html."""


def _host_s(ctx: _Ctx) -> float:
    """Host time to issue all micro-batches' kernels on one GPU (``host_overhead_s`` per layer pass)."""
    layers = ctx.model.num_layers / ctx.layout.pp
    share = FUSED_LAUNCH_SHARE if ctx.job.kernel_launch == "fused" else 1.0
    passes = HOST_PASSES[ctx.layout.checkpointing]
    return ctx.micro_batches * layers * passes * share * ctx.cal.host_overhead_s


def predict_step(
    model: ModelSpec, gpu: GpuSpec, job: TrainingJob, layout: TrainingLayout, cal: TrainingCalibration
) -> StepPrediction:
    """Time of one optimizer step of ``job`` on ``layout`` (module docstring gives the formula)."""
    m = micro_batches_per_step(job, layout)
    ctx = _Ctx(model=model, gpu=gpu, job=job, layout=layout, cal=cal, micro_batches=m)
    t_compute = compute_s(ctx)
    bubble = t_compute * (layout.pp - 1) / (interleaving(layout.pp, m, layout.virtual_stages) * m)
    dp_exposed = max(0.0, _dp_comm_s(ctx) - cal.dp_overlap * t_compute)
    mp_exposed = (1.0 - cal.tp_overlap) * _mp_comm_s(ctx) + (1.0 - cal.tp_overlap) * _ep_comm_s(ctx)
    opt, deq = _optimizer_s(ctx), _dequant_s(ctx)
    host = max(0.0, _host_s(ctx) - t_compute - deq)
    step = t_compute + bubble + dp_exposed + mp_exposed + opt + deq + host
    tokens = job.global_batch * job.seq_len
    per_gpu = tokens / step / layout.num_gpus
    model_tflops = per_gpu * model_flops_per_token(model, job.seq_len, method=job.method) / TFLOPS
    executed = executed_flops_per_token(
        model, job.seq_len, method=job.method, checkpointing=layout.checkpointing
    ).total
    peak, _ = _peak(gpu, job.dtype)
    return StepPrediction(
        step_time_s=step,
        compute_s=t_compute,
        bubble_s=bubble,
        dp_comm_exposed_s=dp_exposed,
        mp_comm_exposed_s=mp_exposed,
        optimizer_s=opt,
        dequant_s=deq,
        host_s=host,
        tokens_per_s=tokens / step,
        tokens_per_s_per_gpu=per_gpu,
        model_tflops_per_gpu=model_tflops,
        mfu=model_tflops * TFLOPS / peak,
        hfu=per_gpu * executed / peak,
    )


def interleaving(pp: int, micro_batches: int, virtual_stages: int) -> int:
    """Chunks per rank that shorten the bubble: the interleaved schedule needs at least ``pp``
    micro-batches in flight (Megatron-LM requires their number to be a multiple of the pipeline size,
    Narayanan et al. 2021 §2.2.2); with fewer, each micro-batch crosses the ranks v times in turn and
    the bubble is plain 1F1B's."""
    return virtual_stages if micro_batches >= pp else 1


def pipeline_bubble_fraction(*, pp: int, micro_batches: int, virtual_stages: int = 1) -> float:
    """Share of a 1F1B step the pipeline idles: (p − 1)/(v·m + p − 1), i.e. bubble time (p − 1)/(v·m) of
    the ideal time; v = 1 is plain 1F1B (Narayanan et al. 2021 §2.2.1-2.2.2), and so is any v when
    m < p (:func:`interleaving`)."""
    v = interleaving(pp, micro_batches, virtual_stages)
    return (pp - 1) / (v * micro_batches + pp - 1)
