"""Wide expert parallelism in serving: the MoE all-to-all, expert load imbalance, attention DP groups.

A replica with ``attention_dp = D`` data-parallel attention ranks (``core/perf/layout.py``) runs
attention, its KV cache and the dense weights on every rank for that rank's own requests, and
splits the routed experts over all ``tp x D`` GPUs. Every MoE layer then moves tokens twice
(DeepEP dispatch and combine, https://github.com/deepseek-ai/DeepEP; vLLM's all2all backends
likewise run only when ``dp_size > 1``: inside one TP group the tokens are already on every rank and
the MLP's all-reduce combines the experts' outputs):

    one collective = max(intra, inter) + α
    intra = T/ep · k · b · (local − 1)/ep / (link · η_link)        over NVLink, local = min(ep, node)
    inter = T/ep · k · b · (ep − local)/ep / NIC                    over the scale-out NIC

for ``T`` tokens of the replica's step (``T/ep`` per GPU), top-``k`` routing, ``b`` bytes per
copied element: the dispatch carries fp8 with one fp32 scale per 128 channels when the weights are
fp8 (DeepEP's low-latency mode, as SGLang and DeepSeek run it), else 16 bits; the combine 16 bits.
The NIC runs at its nominal rate: DeepEP's low-latency kernels saturate it (below). Against
DeepEP's published low-latency table (H800, one 400 Gb/s CX7 per GPU, 128 tokens per GPU, hidden
7168, top-8; ``tests/unit/core/perf/test_expert_parallel.py``) this gives 126/164/183/192 µs for
the EP16/32/64/128 dispatch (measured 118/155/173/192) and 197/270/307/325 µs for the combine
(measured 195/273/314/369).

The slowest rank sets the step: routed-expert GEMMs and the all-to-all volume of the busiest rank are
the mean times ``EXPERT_IMBALANCE`` whenever experts are split by EP (``ep > 1``).

The experts split by TP over attention-DP ranks (``ep = 1``, SGLang 0.4's ``--enable-dp-attention``
default) gather every rank's tokens and all-reduce the MoE output: two all-reduces per layer of the
replica's whole step over the ``tp x D`` ranks, the Megatron TP formula at that group size.
"""

from __future__ import annotations

from gpuplan.core.dtypes import FP8, DType
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.layout import Layout

SCALE_OUT_BYTES_PER_S = 50e9
"""One-direction scale-out bandwidth per GPU across nodes: one 400 Gb/s ConnectX-7 per GPU in DGX and
HGX H100/H200 ("Four OSFP ports serving eight single-port NVIDIA ConnectX-7 VPI ... up to 400 Gb/s
InfiniBand/Ethernet",
https://docs.nvidia.com/dgx-basepod/reference-architecture-infrastructure-foundation-enterprise-ai/latest/core-components.html;
DeepEP measures "~50 GB/s maximum bandwidth" on the same card). The training model's
``ib_bytes_per_s_per_gpu`` carries the same figure; pass ``scale_out_bytes_per_s`` to override it."""
ALLTOALL_LATENCY_S = 50e-6
"""Fixed time of one dispatch or combine: DeepEP's low-latency table (docs/legacy.md of
https://github.com/deepseek-ai/DeepEP/blob/0297fc801788b14b338a46554faca28d419e518a/docs/legacy.md)
minus its off-node bytes at 50 GB/s leaves 40-50 µs per dispatch and 48-57 µs per combine at EP16-64."""
FP8_DISPATCH_BYTES_PER_ELEMENT = 1.0 + 4.0 / 128.0
"""DeepEP low-latency FP8 dispatch: e4m3 values plus one fp32 scale per 128 channels."""
SIXTEEN_BIT_BYTES = 2.0
COLLECTIVES_PER_MOE_LAYER = 2
"""A dispatch before the experts, a combine after them."""
EXPERT_IMBALANCE = 1.2
"""Busiest EP rank's routed tokens over the mean, EPLB on. SGLang's DeepSeek-V3 prefill on 4 x 8 H100
(EP32) ran 50,302 tokens/s per node with its default expert placement and 59,337 with simulated
perfect balance, 1.18x (https://lmsys.org/blog/2025-05-05-large-scale-ep, "Overall Throughput"); the
blog's EPLB ablation gains 1.49x (prefill) and 2.54x (decode) over no balancing at all, so an
unbalanced deployment is worse. A named constant that calibration could fit."""
ALLTOALL_HIDDEN_SHARE = 0.0
"""Share of the all-to-all hidden behind compute. Two-batch overlap hides most of it (SGLang's TBO:
+25.5 % decode throughput at 256 tokens per GPU, +27-35 % prefill, and -27 % at 32 tokens; DeepSeek
runs it in production, https://lmsys.org/blog/2025-05-05-large-scale-ep), but it is opt-in in both
engines (SGLang ``--enable-two-batch-overlap``, vLLM ``--enable-dbo``), so the default exposes it all."""


def uses_alltoall(layout: Layout) -> bool:
    """Whether MoE layers dispatch and combine tokens: experts split by EP over attention-DP ranks."""
    return layout.attention_dp > 1 and layout.ep > 1


def imbalance_factor(layout: Layout, *, factor: float = EXPERT_IMBALANCE) -> float:
    """The busiest rank's routed work over the mean: ``factor`` when experts are split by EP, else 1."""
    return factor if layout.ep > 1 else 1.0


def allreduce_group(layout: Layout) -> tuple[int, float]:
    """(ranks of the all-reduces, share of the replica's tokens each reduces). TP all-reduces run
    inside each attention-DP rank on its own tokens when experts are split by EP; when experts are
    split by TP over the DP ranks, every rank all-reduces the whole step over all ``tp x D`` GPUs."""
    dp = layout.attention_dp
    if dp == 1:
        return layout.tp, 1.0
    if layout.ep > 1:
        return layout.tp, 1.0 / dp
    return layout.tp * dp, 1.0


def dispatch_bytes_per_element(weight_dtype: DType) -> float:
    """Bytes of one dispatched element: fp8 plus scales for fp8 weights, else 16 bits."""
    return FP8_DISPATCH_BYTES_PER_ELEMENT if weight_dtype == FP8 else SIXTEEN_BIT_BYTES


def alltoall_s(
    *,
    tokens_per_gpu: float,
    hidden: int,
    top_k: int,
    bytes_per_element: float,
    ep: int,
    node_gpus: int,
    intra_bytes_per_s: float,
    inter_bytes_per_s: float = SCALE_OUT_BYTES_PER_S,
    latency_s: float = ALLTOALL_LATENCY_S,
) -> float:
    """One dispatch or combine of ``tokens_per_gpu`` tokens from every GPU of an EP group (module
    docstring): NVLink and NIC traffic flow at once, so the longer of the two plus the latency."""
    if ep <= 1:
        return 0.0
    sent = tokens_per_gpu * top_k * hidden * bytes_per_element
    local = min(ep, node_gpus)
    intra = sent * (local - 1) / ep / intra_bytes_per_s
    inter = sent * (ep - local) / ep / inter_bytes_per_s
    return max(intra, inter) + latency_s


def alltoall_terms_s(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: Layout,
    *,
    intra_bytes_per_s: float,
    inter_bytes_per_s: float = SCALE_OUT_BYTES_PER_S,
    imbalance: float = EXPERT_IMBALANCE,
    hidden_share: float = ALLTOALL_HIDDEN_SHARE,
) -> tuple[float, float]:
    """(fixed, per replica token) exposed seconds of one pipeline stage's dispatches and combines;
    (0, 0) when the layout moves no tokens (``uses_alltoall``). The busiest rank receives
    ``imbalance`` times the mean."""
    if model.moe is None or not uses_alltoall(layout):
        return 0.0, 0.0
    moe = model.moe
    layers = moe.num_moe_layers / layout.pp
    exposed = 1.0 - hidden_share

    def per_gpu_token_s(bytes_per_element: float) -> float:
        return alltoall_s(
            tokens_per_gpu=1.0,
            hidden=model.hidden_size,
            top_k=moe.top_k,
            bytes_per_element=bytes_per_element,
            ep=layout.ep,
            node_gpus=gpu.interconnect.node_gpus,
            intra_bytes_per_s=intra_bytes_per_s,
            inter_bytes_per_s=inter_bytes_per_s,
            latency_s=0.0,
        )

    per_token_s = per_gpu_token_s(dispatch_bytes_per_element(layout.weight_dtype)) + per_gpu_token_s(
        SIXTEEN_BIT_BYTES
    )
    fixed_s = COLLECTIVES_PER_MOE_LAYER * ALLTOALL_LATENCY_S
    return layers * fixed_s * exposed, layers * per_token_s * imbalance * exposed / layout.ep
