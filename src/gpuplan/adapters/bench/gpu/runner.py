"""Run ``gpuplan bench gpu``: each measurement is stored the moment it is taken, then a summary."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import torch

from gpuplan import __version__
from gpuplan.adapters.bench.gpu.allreduce import allreduce
from gpuplan.adapters.bench.gpu.config import (
    CPU_COPY_BYTES,
    CPU_GEMM_SIZE,
    CUDA_COPY_BYTES,
    CUDA_GEMM_SIZE,
    GpuBenchConfig,
    Measurement,
)
from gpuplan.adapters.bench.gpu.env import conditions, resolve_device
from gpuplan.adapters.bench.gpu.kernels import device_copy, gemm, host_copies
from gpuplan.adapters.store.database import Store
from gpuplan.adapters.store.measurements import add_measurement, ensure_table
from gpuplan.core.errors import BenchmarkError

RUN_KIND = "bench-gpu"


def _measurements(cfg: GpuBenchConfig, device: torch.device) -> Iterator[Measurement]:
    cuda = device.type == "cuda"
    n = cfg.gemm_size or (CUDA_GEMM_SIZE if cuda else CPU_GEMM_SIZE)
    nbytes = cfg.copy_bytes or (CUDA_COPY_BYTES if cuda else CPU_COPY_BYTES)
    if "gemm" not in cfg.skip:
        for dtype in cfg.dtypes:
            yield gemm(cfg, device, dtype, n)
    if "copy" not in cfg.skip:
        yield device_copy(cfg, device, nbytes)
    if "h2d" not in cfg.skip or "d2h" not in cfg.skip:
        yield from (m for m in host_copies(cfg, device, nbytes) if m.name not in cfg.skip)
    if "allreduce" not in cfg.skip:
        ranks = cfg.allreduce_ranks or (torch.cuda.device_count() if cuda else 1)
        yield allreduce(cfg, ranks)


def run_gpu_bench(
    cfg: GpuBenchConfig,
    store_url: str | None = None,
    *,
    on_result: Callable[[Measurement], None] | None = None,
    announce: Callable[[str, str], None] | None = None,
) -> dict[str, Any]:
    """Measure, storing each result as it comes; returns the run summary (also stored)."""
    device = resolve_device(cfg.device)
    torch.manual_seed(cfg.seed)
    store = Store(store_url)
    ensure_table(store)
    run_id = uuid.uuid4().hex
    cond = conditions(device)
    store.create_run(run_id, RUN_KIND, cfg.model_dump(mode="json"), cond, __version__)
    if announce is not None:
        announce(run_id, store.url)
    results: list[Measurement] = []
    try:
        for m in _measurements(cfg, device):
            add_measurement(store, run_id, m.row())
            results.append(m)
            if on_result is not None:
                on_result(m)
    except KeyboardInterrupt:
        store.set_status(run_id, "interrupted")
        raise BenchmarkError("interrupted; the measurements taken so far are stored") from None
    summary = {
        "run_id": run_id,
        "device": cond["device"],
        "device_name": cond["device_name"],
        "gpu": cond.get("gpu"),
        "results": [m.row() for m in results],
    }
    store.finish_run(run_id, "completed", summary)
    return summary
