"""All-reduce bus bandwidth across ranks (torch.distributed; NCCL on GPUs, gloo on CPU for tests).

One process per rank (``python -m gpuplan.adapters.bench.gpu.allreduce``, as torchrun would), rendezvous
on a free loopback port. Each rank all-reduces a random
fp32 buffer; rank 0 reports the median time. Bus bandwidth follows nccl-tests:
``busbw = bytes / t · 2(n − 1)/n`` (what each link carries in a ring), comparable to the link's
one-direction bandwidth.
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import torch
import torch.distributed as dist

from gpuplan.adapters.bench.gpu.config import GpuBenchConfig, Measurement
from gpuplan.adapters.bench.gpu.kernels import skipped

TIMEOUT_S = 300.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _elapsed(tensor: torch.Tensor, device: torch.device) -> float:
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        dist.all_reduce(tensor)
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3
    t0 = time.perf_counter()
    dist.all_reduce(tensor)
    return time.perf_counter() - t0


def _worker(rank: int, world: int, port: int, job: dict[str, Any]) -> None:
    """One rank; rank 0 prints its timings (JSON list of seconds) on stdout."""
    backend = job["backend"]
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        tensor = torch.randn(job["bytes"] // 4, device=device)
        for _ in range(job["warmup"]):
            dist.all_reduce(tensor)
        dist.barrier()
        samples = [_elapsed(tensor, device) for _ in range(job["repeats"])]
        if rank == 0:
            sys.stdout.write(json.dumps(samples) + "\n")
    finally:
        dist.destroy_process_group()


def _reason_to_skip(cfg: GpuBenchConfig, ranks: int) -> str | None:
    if ranks < 2:
        return f"{ranks} rank(s): all-reduce needs at least 2 GPUs (set --allreduce-ranks with gloo on CPU)"
    if cfg.allreduce_backend == "nccl":
        if not torch.cuda.is_available():
            return "NCCL needs CUDA GPUs"
        if torch.cuda.device_count() < ranks:
            return f"{ranks} ranks asked, {torch.cuda.device_count()} GPU(s) visible"
        if not dist.is_nccl_available():
            return "this torch build has no NCCL"
    return None


def _launch(job: dict[str, Any], ranks: int) -> tuple[list[float], str]:
    """Run one worker process per rank; (rank 0's timings, or [] and why not)."""
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "gpuplan.adapters.bench.gpu.allreduce",
        json.dumps(job),
        str(ranks),
        str(port),
    ]
    procs = [
        subprocess.Popen([*cmd, str(r)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in range(ranks)
    ]
    outputs: list[tuple[str, str]] = []
    try:
        outputs = [p.communicate(timeout=TIMEOUT_S) for p in procs]
    except subprocess.TimeoutExpired:
        return [], f"ranks did not finish within {TIMEOUT_S:.0f} s"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(p.returncode for p in procs):
        tail = next((err for p, (_, err) in zip(procs, outputs, strict=True) if p.returncode), "")
        return [], f"a rank failed: {tail.strip().splitlines()[-1] if tail.strip() else 'no message'}"
    return [float(x) for x in json.loads(outputs[0][0])], ""


def allreduce(cfg: GpuBenchConfig, ranks: int) -> Measurement:
    """Bus bandwidth of an all-reduce of ``cfg.allreduce_bytes`` over ``ranks`` processes."""
    params = {"bytes": cfg.allreduce_bytes, "ranks": ranks, "backend": cfg.allreduce_backend}
    why = _reason_to_skip(cfg, ranks)
    if why is not None:
        return skipped("allreduce", "allreduce", "GB/s", why, params=params)
    job = {
        "backend": cfg.allreduce_backend,
        "bytes": cfg.allreduce_bytes,
        "warmup": max(cfg.warmup, 1),
        "repeats": cfg.repeats,
    }
    samples, problem = _launch(job, ranks)
    if not samples:
        return Measurement(
            kind="allreduce", name="allreduce", status="error", unit="GB/s", params=params, reason=problem
        )
    t = statistics.median(samples)
    busbw = cfg.allreduce_bytes / t * 2 * (ranks - 1) / ranks / 1e9
    return Measurement(
        kind="allreduce",
        name="allreduce",
        status="ok",
        unit="GB/s",
        value=busbw,
        median_s=t,
        min_s=min(samples),
        max_s=max(samples),
        repeats=len(samples),
        params=params | {"algbw_gb_per_s": cfg.allreduce_bytes / t / 1e9},
    )


if __name__ == "__main__":  # one rank: JOB WORLD PORT RANK
    _worker(int(sys.argv[4]), int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[1]))
