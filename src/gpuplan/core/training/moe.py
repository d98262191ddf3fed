"""Mixture-of-experts training: expert-parallel all-to-all and grouped-GEMM efficiency.

Expert parallelism (Megatron-Core ``MoEAlltoAllTokenDispatcher`` / ``MoEFlexTokenDispatcher``,
https://docs.nvidia.com/megatron-core/developer-guide/latest/apidocs/core/core.transformer.moe.token_dispatcher.html)
sends each token's hidden state to the ranks that hold its ``top_k`` experts (dispatch) and sends
the expert outputs back (combine), forward and again backward: 4 all-to-alls per MoE layer and
micro-batch. One token copy is ``width × 2`` bytes (bf16), ``width`` the hidden size, or the latent
size of a LatentMoE (Nemotron-3 dispatches in the latent width).

Across nodes the Megatron-Bridge and NeMo AutoModel MoE recipes dispatch with DeepEP / HybridEP
(``flex`` dispatcher; AutoModel's table lists ``kernels=TE + DeepEP``), which sends a token **once per
destination node** over RDMA and forwards the copies to the GPUs of that node over NVLink
(https://github.com/deepseek-ai/DeepEP, "asymmetric-domain bandwidth forwarding"). With experts spread
evenly over ``N`` nodes and ``k`` experts per token, a token reaches on average
``(N − 1)·(1 − (1 − 1/N)^k)`` remote nodes (uniform routing, which the published benchmarks force:
"force-balanced token routing", "fake balanced MoE gate"). RDMA and NVLink stages run concurrently,
so one all-to-all takes the longer of the two.

Grouped GEMMs: every local expert multiplies only the tokens routed to it,
``M_e = tokens · top_k · ep / experts`` rows per micro-batch under balanced routing, and an expert's
narrow width (``min(width, expert_intermediate)``) under-fills the tensor cores like a small model's
hidden size does. Efficiency relative to a dense GEMM of the same dtype:
``η_e = expert_gemm_efficiency · M_e / (M_e + expert_tokens_half) · w/(w + h½)``.
"""

from __future__ import annotations

import math

from gpuplan.core.calibration.training import TrainingCalibration
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.training.comm import group_link

DISPATCH_BYTES_PER_ELEMENT = 2.0
"""Dispatch and combine carry bf16 hidden states (Megatron-Core's token dispatcher permutes the
activations in the model's compute dtype; FP8 dispatch is an opt-in DeepEP mode)."""
ALLTOALLS_PER_MOE_LAYER = 4
"""Dispatch and combine in forward, and their transposes in backward (Megatron-Core token dispatcher)."""


def dispatch_width(model: ModelSpec) -> int:
    """Elements of one token copy: the latent width of a LatentMoE, else the hidden size."""
    if model.moe is not None and model.moe.latent_size:
        return model.moe.latent_size
    return model.hidden_size


def tokens_per_expert(*, tokens: float, top_k: int, experts: int, ep: int) -> float:
    """Rows of one local expert's GEMM: ``tokens`` per GPU, each copied to ``top_k`` experts, the
    ``experts`` spread over ``ep`` ranks (balanced routing)."""
    return tokens * top_k * ep / experts


def remote_nodes_per_token(*, top_k: int, nodes: int) -> float:
    """Mean number of other nodes a token's ``top_k`` experts live on (uniform routing)."""
    if nodes <= 1:
        return 0.0
    return (nodes - 1) * (1.0 - (1.0 - 1.0 / nodes) ** top_k)


def alltoall_s(
    *, tokens: float, model: ModelSpec, ep: int, stride: int, gpu: GpuSpec, cal: TrainingCalibration
) -> float:
    """One dispatch (or combine) of ``tokens`` per GPU over an EP group of ``ep`` ranks ``stride``
    apart (TP × CP inside it): intra-node over the scale-up link, across nodes deduplicated per node
    over the scale-out link with NVLink forwarding (module docstring)."""
    if model.moe is None or ep <= 1:
        return 0.0
    top_k = model.moe.top_k
    copy_bytes = dispatch_width(model) * DISPATCH_BYTES_PER_ELEMENT
    extent = stride * ep
    node = gpu.interconnect.node_gpus
    if extent <= node:
        link = group_link(gpu, extent, cal)
        return tokens * top_k * copy_bytes * (ep - 1) / ep / link.bytes_per_s + (ep - 1) * link.latency_s
    nodes = math.ceil(extent / node)
    local = max(ep // nodes, 1)
    ib = group_link(gpu, extent, cal)
    nvl = group_link(gpu, node, cal)
    ib_s = tokens * copy_bytes * remote_nodes_per_token(top_k=top_k, nodes=nodes) / ib.bytes_per_s
    nvl_s = tokens * top_k * copy_bytes * (local - 1) / local / nvl.bytes_per_s
    return max(ib_s, nvl_s) + (nodes - 1) * ib.latency_s + (local - 1) * nvl.latency_s


def expert_gemm_efficiency(*, model: ModelSpec, tokens: float, ep: int, cal: TrainingCalibration) -> float:
    """Routed experts' grouped-GEMM efficiency relative to a dense GEMM at the model's hidden size
    (module docstring); 1 for a dense model."""
    moe = model.moe
    if moe is None:
        return 1.0
    m_e = tokens_per_expert(tokens=tokens, top_k=moe.top_k, experts=moe.num_experts, ep=ep)
    width = min(dispatch_width(model), moe.expert_intermediate_size)
    half = cal.gemm_half_width
    size = (width / (width + half)) / (model.hidden_size / (model.hidden_size + half))
    return cal.expert_gemm_efficiency * m_e / (m_e + cal.expert_tokens_half) * size
