"""The single-device measurements: dense GEMM per dtype, device copy, host↔device copy.

Data are random (``torch.randn``/``rand``), never zeros: zero operands let some hardware and
drivers skip work or compress traffic. Rates use the conventions of the datasheets they are compared
with: GEMM ``2·n³`` FLOPs; device copy counts bytes read plus bytes written (STREAM "copy"); a
host↔device copy counts the bytes transferred once.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gpuplan.adapters.bench.gpu.config import GpuBenchConfig, Measurement
from gpuplan.adapters.bench.gpu.timing import Timing, time_op

TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
FP8_MIN_CAPABILITY = (8, 9)
"""torch._scaled_mm needs FP8 tensor cores: Ada (sm_89), Hopper (sm_90) and newer."""


def _timed(cfg: GpuBenchConfig, device: torch.device, fn: Callable[[], object]) -> Timing:
    return time_op(fn, device, warmup=cfg.warmup, repeats=cfg.repeats, min_repeat_s=cfg.min_repeat_s)


def _measured(kind: str, name: str, unit: str, amount: float, t: Timing, **extra: object) -> Measurement:
    return Measurement.model_validate(
        {
            "kind": kind,
            "name": name,
            "status": "ok",
            "unit": unit,
            "value": amount / t.median_s,
            "median_s": t.median_s,
            "min_s": t.min_s,
            "max_s": t.max_s,
            "repeats": t.repeats,
            "iters_per_repeat": t.iters,
            **extra,
        }
    )


def skipped(kind: str, name: str, unit: str, reason: str, **extra: object) -> Measurement:
    return Measurement.model_validate(
        {"kind": kind, "name": name, "status": "skipped", "unit": unit, "reason": reason, **extra}
    )


def _fp8_operands(n: int, device: torch.device) -> Callable[[], object]:
    if device.type != "cuda":
        raise _Unsupported("fp8 GEMM needs a CUDA GPU (torch._scaled_mm)")
    if torch.cuda.get_device_capability(device) < FP8_MIN_CAPABILITY:
        raise _Unsupported("fp8 GEMM needs compute capability ≥ 8.9 (Ada, Hopper or newer)")
    fp8 = torch.float8_e4m3fn
    a = torch.randn(n, n, device=device).to(fp8)
    b = torch.randn(n, n, device=device).to(fp8).t()  # column-major, as cuBLASLt wants it
    scale = torch.ones((), device=device, dtype=torch.float32)
    return lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)


class _Unsupported(Exception):
    """This device cannot run the measurement; the message is the recorded reason."""


def _gemm_op(dtype: str, n: int, device: torch.device) -> Callable[[], object]:
    if dtype == "fp8":
        return _fp8_operands(n, device)
    if dtype == "tf32" and device.type != "cuda":
        raise _Unsupported("tf32 is a CUDA tensor-core mode")
    if dtype not in TORCH_DTYPES:
        raise _Unsupported(f"unknown dtype {dtype}")
    a = torch.randn(n, n, device=device, dtype=TORCH_DTYPES[dtype])
    b = torch.randn(n, n, device=device, dtype=TORCH_DTYPES[dtype])
    out = torch.empty(n, n, device=device, dtype=TORCH_DTYPES[dtype])
    return lambda: torch.matmul(a, b, out=out)


def gemm(cfg: GpuBenchConfig, device: torch.device, dtype: str, n: int) -> Measurement:
    """Dense n×n×n GEMM in ``dtype``; TFLOP/s = 2n³ / median time."""
    params = {"m": n, "n": n, "k": n}
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        op = _gemm_op(dtype, n, device)
        t = _timed(cfg, device, op)
    except _Unsupported as why:
        return skipped("gemm", f"gemm_{dtype}", "TFLOP/s", str(why), dtype=dtype, params=params)
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        return skipped(
            "gemm",
            f"gemm_{dtype}",
            "TFLOP/s",
            f"{type(exc).__name__}: {str(exc)[:200]}",
            dtype=dtype,
            params=params,
        )
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return _measured("gemm", f"gemm_{dtype}", "TFLOP/s", 2.0 * n**3 / 1e12, t, dtype=dtype, params=params)


def device_copy(cfg: GpuBenchConfig, device: torch.device, nbytes: int) -> Measurement:
    """dst.copy_(src) on the device; GB/s counts the bytes read and written (2·nbytes)."""
    src = torch.rand(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    t = _timed(cfg, device, lambda: dst.copy_(src))
    return _measured(
        "copy",
        "d2d",
        "GB/s",
        2.0 * src.numel() * 4 / 1e9,
        t,
        params={"bytes": src.numel() * 4, "counted": "read+write"},
    )


def host_copies(cfg: GpuBenchConfig, device: torch.device, nbytes: int) -> list[Measurement]:
    """Pinned host → device and device → host; GB/s counts the bytes moved once."""
    if device.type != "cuda":
        reason = "host↔device copy needs a CUDA device"
        return [skipped("copy", name, "GB/s", reason) for name in ("h2d", "d2h")]
    dev = torch.rand(nbytes // 4, device=device)
    host = torch.empty(dev.shape, dtype=dev.dtype, pin_memory=True)
    host.copy_(dev)
    params = {"bytes": dev.numel() * 4, "pinned": True, "counted": "once"}
    h2d = _timed(cfg, device, lambda: dev.copy_(host, non_blocking=True))
    d2h = _timed(cfg, device, lambda: host.copy_(dev, non_blocking=True))
    amount = dev.numel() * 4 / 1e9
    return [
        _measured("copy", "h2d", "GB/s", amount, h2d, params=params),
        _measured("copy", "d2h", "GB/s", amount, d2h, params=params),
    ]
