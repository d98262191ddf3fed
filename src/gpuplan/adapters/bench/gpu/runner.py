"""Run ``gpuplan bench gpu``: each measurement is stored the moment it is taken, then a summary."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

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
from gpuplan.adapters.store.measurements import open_measurement_run, store_each

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
    cond = conditions(device)
    store, run_id = open_measurement_run(store_url, RUN_KIND, cfg.model_dump(mode="json"), cond, announce)
    results = store_each(
        store,
        run_id,
        _measurements(cfg, device),
        Measurement.row,
        on_result,
        interrupted_message="interrupted; the measurements taken so far are stored",
    )
    summary = {
        "run_id": run_id,
        "device": cond["device"],
        "device_name": cond["device_name"],
        "gpu": cond.get("gpu"),
        "results": [m.row() for m in results],
    }
    store.finish_run(run_id, "completed", summary)
    return summary
