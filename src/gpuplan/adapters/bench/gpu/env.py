"""The conditions a micro-benchmark's numbers depend on: device, driver, clocks, library versions."""

from __future__ import annotations

import platform
import shutil
import socket
import subprocess
import sys
from typing import Any

import torch

from gpuplan import __version__
from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.core.errors import GpuplanError

SMI_FIELDS = (
    "name",
    "driver_version",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "clocks.max.mem",
    "power.limit",
    "memory.total",
    "pcie.link.gen.current",
    "pcie.link.width.current",
)


def resolve_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        from gpuplan.core.errors import BenchmarkError

        raise BenchmarkError(
            "--device cuda: torch sees no CUDA GPU", hint="use --device cpu, or check the driver"
        )
    return torch.device(requested)


def catalog_gpu(name: str) -> str | None:
    """The catalog id of a device name as CUDA reports it ('NVIDIA H100 80GB HBM3' → 'H100-SXM')."""
    catalog = load_catalog()
    for candidate in (name, name.removeprefix("NVIDIA ").strip()):
        try:
            return catalog.get_gpu(candidate).id
        except GpuplanError:
            continue
    return None


def nvidia_smi(index: int = 0) -> dict[str, str]:
    """Driver, clocks and power limit from nvidia-smi (empty when it is not there)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader", f"-i={index}"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in out.strip().split(",")]
    return dict(zip(SMI_FIELDS, values, strict=False))


def _cuda(device: torch.device) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(device)
    nccl = torch.cuda.nccl.version() if torch.distributed.is_nccl_available() else None  # type: ignore[no-untyped-call]
    cudnn = torch.backends.cudnn.version()  # type: ignore[no-untyped-call]
    smi = nvidia_smi(device.index or 0)
    return {
        "device_name": props.name,
        "device_count": torch.cuda.device_count(),
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory,
        "driver": smi.get("driver_version"),
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "nccl": ".".join(map(str, nccl)) if nccl else None,
        "clocks": {k: v for k, v in smi.items() if k.startswith(("clocks", "power", "pcie"))},
        "gpu": catalog_gpu(props.name),
    }


def _cpu() -> dict[str, Any]:
    return {
        "device_name": platform.processor() or platform.machine(),
        "device_count": 0,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "gpu": None,
    }


def conditions(device: torch.device) -> dict[str, Any]:
    """Everything a result needs to stay comparable with another one."""
    base = {
        "device": device.type,
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "gpuplan": __version__,
    }
    return base | (_cuda(device) if device.type == "cuda" else _cpu())
