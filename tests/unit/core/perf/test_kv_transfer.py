"""One prompt's KV-cache transfer from a prefill worker to a decode worker, checked by hand."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.dtypes import get_dtype
from gpuplan.core.perf.kv_transfer import TRANSFER_LATENCY_S, KvTransport, kv_transfer_s
from gpuplan.core.perf.layout import Layout

LLAMA_70B = get_model("meta-llama/Llama-3.1-70B")
H200 = default_catalog().get_gpu("H200-SXM")
FP8 = {"weight_dtype": "fp8"}
# Llama-3.1-70B: 80 layers x (K, V) x 8 KV heads x 128 dims x 1 byte of fp8 (and its per-block scale,
# 1/4096 of a byte) = 163,880 bytes a token.
BYTES_PER_TOKEN = 80 * 2 * 8 * 128 * get_dtype("fp8").bytes_per_element
PROMPT = 8000


def _transfer(transport: KvTransport, tp_prefill: int, tp_decode: int, prefill_s: float = 1.0) -> float:
    return kv_transfer_s(
        model=LLAMA_70B,
        transport=transport,
        prefill=(H200, Layout(tp=tp_prefill, **FP8)),
        decode=(H200, Layout(tp=tp_decode, **FP8)),
        prompt_tokens=PROMPT,
        prefill_s=prefill_s,
    )


def test_rdma_moves_the_larger_shard_at_400_gbps() -> None:
    # tp2 prefill holds half the cache per GPU (the larger shard of the two sides): 655 MB at 50 GB/s.
    shard = PROMPT * BYTES_PER_TOKEN / 2
    assert _transfer(KvTransport(), 2, 4) == pytest.approx(TRANSFER_LATENCY_S + shard / 50e9)
    assert _transfer(KvTransport(), 4, 2) == pytest.approx(_transfer(KvTransport(), 2, 4))
    assert _transfer(KvTransport(), 2, 4) == pytest.approx(13.6e-3, rel=0.01)


def test_the_other_links_and_an_explicit_rate() -> None:
    shard = PROMPT * BYTES_PER_TOKEN / 4
    nvlink = H200.interconnect.scale_up_bytes_per_s / 2  # one direction of the bidirectional figure
    assert _transfer(KvTransport(kind="nvlink"), 4, 4) == pytest.approx(TRANSFER_LATENCY_S + shard / nvlink)
    assert _transfer(KvTransport(kind="tcp"), 4, 4) == pytest.approx(TRANSFER_LATENCY_S + shard / 6.25e9)
    assert _transfer(KvTransport(gbps_per_gpu=800), 4, 4) == pytest.approx(TRANSFER_LATENCY_S + shard / 100e9)


def test_an_overlapped_transfer_exposes_what_outlasts_the_prefill_or_one_layer() -> None:
    wire = PROMPT * BYTES_PER_TOKEN / 2 / 50e9
    overlapped = KvTransport(overlapped=True)
    assert _transfer(overlapped, 2, 2, prefill_s=0.005) == pytest.approx(TRANSFER_LATENCY_S + wire - 0.005)
    assert _transfer(overlapped, 2, 2, prefill_s=1.0) == pytest.approx(TRANSFER_LATENCY_S + wire / 80)
