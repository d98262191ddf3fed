"""Moving a prompt's KV cache from a prefill worker to a decode worker (disaggregated serving).

Each GPU of a worker holds its shard of the KV cache (``kv_bytes_for_sequence_per_gpu``) and sends or
receives it over its own link, all shards at once, so one request's transfer takes

    t = latency + max(KV bytes per prefill GPU, KV bytes per decode GPU) / link bytes/s per GPU

(the side with fewer shards carries more bytes per GPU and sets the time). The engines' default
connectors move the cache after the prefill has finished: vLLM's NixlConnector is pull-based (the
decode instance reads the prefill instance's blocks once the prompt is done,
https://docs.vllm.ai/en/stable/features/nixl_connector_usage.html), so ``overlapped`` is off by
default. Layer-wise senders (Mooncake, SGLang's ``--disaggregation-transfer-backend``) overlap the
transfer with the prefill's later layers: then only what outlasts the prefill, and at least one
layer's share, is exposed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuplan.core.dtypes import DType
from gpuplan.core.frozen import FiniteModel
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.memory import kv_bytes_for_sequence_per_gpu, recurrent_state_bytes_per_gpu
from gpuplan.core.units import GBIT_BYTES

KvTransportKind = Literal["rdma", "nvlink", "tcp"]

RDMA_GBPS_PER_GPU = 400.0
"""One 400 Gb/s ConnectX-7 InfiniBand/RoCE NIC per GPU on the rail-optimised east-west fabric of HGX
H100/H200/B200 systems (https://docs.nvidia.com/reference-architectures/hgx-ai-factory-h100-h200-b200/network-logical-architecture.md;
MLPerf's H200-SXM-141GBx8 system lists 10x 400 Gb InfiniBand,
https://raw.githubusercontent.com/mlcommons/inference_results_v4.1/main/closed/NVIDIA/systems/H200-SXM-141GBx8_TRT_MaxQ.json)."""
TCP_GBPS_PER_GPU = 50.0
"""The same reference architecture's north-south network: two 200 GbE ports per 8-GPU node, so
400 Gb/s shared by 8 GPUs when the cache travels over TCP (no RDMA)."""
TRANSFER_LATENCY_S = 0.5e-3
"""Per-request control round trip (router → decode → prefill block table → read completion) on one
data-centre network: an assumption of half a millisecond, small beside every prefill it follows."""
DISAGGREGATING_ENGINES = frozenset({"vllm", "sglang", "trtllm"})
"""Engines with a prefill/decode disaggregated mode: vLLM KV connectors (NixlConnector), SGLang
``--disaggregation-mode prefill|decode`` (https://docs.sglang.ai/advanced_features/pd_disaggregation.html),
TensorRT-LLM disaggregated serving (``trtllm-serve disaggregated``)."""


class KvTransport(FiniteModel):
    """How prefill workers hand a prompt's KV cache to decode workers."""

    kind: KvTransportKind = "rdma"
    gbps_per_gpu: float | None = Field(
        default=None,
        gt=0,
        le=10_000,
        description="link Gb/s per GPU, one direction (default: 400 rdma, 50 tcp, the GPU's scale-up link for nvlink)",
    )
    overlapped: bool = Field(default=False, description="layer-wise transfer overlapped with the prefill")

    def bytes_per_s(self, gpu: GpuSpec) -> float:
        """One direction's bytes/s per GPU of ``gpu`` on this transport."""
        if self.gbps_per_gpu is not None:
            return self.gbps_per_gpu * GBIT_BYTES
        if self.kind == "nvlink":
            return gpu.interconnect.scale_up_bytes_per_s / 2  # bidirectional per GPU in the catalog
        return (RDMA_GBPS_PER_GPU if self.kind == "rdma" else TCP_GBPS_PER_GPU) * GBIT_BYTES

    @property
    def label(self) -> str:
        """The transport in words, as plans' explanations name it: ``rdma 400 Gb/s``."""
        rate = f" {self.gbps_per_gpu:g} Gb/s" if self.gbps_per_gpu is not None else ""
        return f"{self.kind}{rate}{', overlapped' if self.overlapped else ''}"


def kv_bytes_per_gpu(model: ModelSpec, layout: Layout, *, prompt_tokens: int, kv_dtype: DType) -> float:
    """One prompt's KV cache (and recurrent state) on one GPU of ``layout``."""
    tp, pp = layout.tp, layout.pp
    kv = kv_bytes_for_sequence_per_gpu(model, tokens=prompt_tokens, kv_dtype=kv_dtype, tp=tp, pp=pp)
    return kv + recurrent_state_bytes_per_gpu(model, tp=tp, pp=pp)


def kv_transfer_s(
    *,
    model: ModelSpec,
    transport: KvTransport,
    prefill: tuple[GpuSpec, Layout],
    decode: tuple[GpuSpec, Layout],
    prompt_tokens: int,
    prefill_s: float,
) -> float:
    """Exposed seconds of one prompt's KV transfer (module docstring); ``prefill_s``: its prefill."""
    (p_gpu, p_layout), (d_gpu, d_layout) = prefill, decode
    kv_dtype = p_layout.resolved_kv_dtype
    per_gpu = max(
        kv_bytes_per_gpu(model, p_layout, prompt_tokens=prompt_tokens, kv_dtype=kv_dtype),
        kv_bytes_per_gpu(model, d_layout, prompt_tokens=prompt_tokens, kv_dtype=kv_dtype),
    )
    wire_s = per_gpu / min(transport.bytes_per_s(p_gpu), transport.bytes_per_s(d_gpu))
    if transport.overlapped:
        wire_s = max(wire_s - prefill_s, wire_s / max(model.num_layers, 1))
    return TRANSFER_LATENCY_S + wire_s


def kv_link_busy_s(
    *, model: ModelSpec, transport: KvTransport, end: tuple[GpuSpec, Layout], prompt_tokens: int
) -> float:
    """Seconds one prompt's KV shard holds one GPU link of one end (the prefill GPU sending it, or the
    decode GPU receiving it): the link's load per transfer, whether or not the transfer is exposed."""
    gpu, layout = end
    shard = kv_bytes_per_gpu(model, layout, prompt_tokens=prompt_tokens, kv_dtype=layout.resolved_kv_dtype)
    return shard / transport.bytes_per_s(gpu)
