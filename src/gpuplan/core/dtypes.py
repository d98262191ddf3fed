"""The dtype table: storage bytes per element (with block-scale overhead) and the compute path used.

Quantised formats carry scales: the effective bits per weight include them, e.g. INT4 AWQ/GPTQ with
group size 128 stores one fp16 scale and one 4-bit zero per 128 weights: 4 + (16 + 4)/128 ≈ 4.16
bits. The compute dtype is the GEMM path a serving engine uses for that storage format: weight-only
formats (int4, nf4) dequantise to fp16/bf16 and run 16-bit tensor cores; W8A8 formats run 8-bit
tensor cores where the GPU has them, otherwise they fall back to 16-bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuplan.core.errors import UnknownNameError

__all__ = ["BF16", "DTYPES", "FP4", "FP8", "FP32", "WEIGHT_DTYPE_NAMES", "ComputeKey", "DType", "get_dtype"]

ComputeKey = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]


@dataclass(frozen=True)
class DType:
    """One storage format. ``bytes_per_element`` includes block-scale overhead."""

    name: str
    bytes_per_element: float
    compute_key: ComputeKey
    """Catalog throughput key of the GEMM path when the GPU supports it natively."""
    fallback_compute_key: ComputeKey
    """Throughput key used when the GPU lacks ``compute_key`` (e.g. FP8 weights on an A100)."""
    note: str
    kernels_need_ampere: bool = False
    """Its weight kernels need Ampere (sm80) or newer: native FP8 on Ada/Hopper and FP4 on Blackwell,
    weight-only Marlin kernels (W8A16, MXFP4) on Ampere (vLLM quantization support table,
    https://docs.vllm.ai/en/latest/features/quantization/supported_hardware.html). A catalog GPU with
    no bf16 tensor rate (Volta, Turing) predates them. Set for fp8 and fp4 (NVFP4)."""

    def __str__(self) -> str:
        """The canonical name, as messages and tables print a dtype."""
        return self.name


def _bits(bits: float) -> float:
    return bits / 8.0


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("fp32", 4.0, "tf32", "fp32", "IEEE single; GEMMs on TF32 tensor cores where present"),
        DType("fp16", 2.0, "fp16", "fp16", "IEEE half"),
        DType("bf16", 2.0, "bf16", "fp16", "bfloat16; GPUs without BF16 (T4, V100) run it as fp16"),
        DType(
            "fp8",
            _bits(8 + 32 / (128 * 128)),
            "fp8",
            "fp16",
            "E4M3 with one fp32 scale per 128x128 block (DeepSeek-V3 block FP8); per-tensor is ~1 byte",
            kernels_need_ampere=True,
        ),
        DType(
            "int8",
            _bits(8 + 16 / 128),
            "int8",
            "fp16",
            "W8A8 SmoothQuant-style, one fp16 scale per channel-group of 128",
        ),
        DType(
            "int4",
            _bits(4 + 20 / 128),
            "fp16",
            "fp16",
            "AWQ/GPTQ group 128: fp16 scale + 4-bit zero per group",
        ),
        DType(
            "nf4",
            _bits(4 + 8 / 64 + 32 / (64 * 256)),
            "bf16",
            "fp16",
            "QLoRA NF4, block 64, double-quantised scales",
        ),
        DType(
            "fp4",
            _bits(4 + 8 / 16),
            "fp4",
            "fp8",
            "NVFP4: E2M1 with one FP8 scale per 16 elements",
            kernels_need_ampere=True,
        ),
        DType(
            "mxfp4", _bits(4 + 8 / 32), "fp4", "fp8", "OCP MXFP4: E2M1 with one E8M0 scale per 32 elements"
        ),
    )
}

WEIGHT_DTYPE_NAMES = tuple(DTYPES)
"""Every storage format a user may name for weights or the KV cache."""
FP32, BF16, FP8, FP4 = DTYPES["fp32"], DTYPES["bf16"], DTYPES["fp8"], DTYPES["fp4"]
"""The formats the rules name: the 16-bit default, fp32, and the fp8 KV cache that fp8 and NVFP4
checkpoints pair with (:attr:`gpuplan.core.perf.layout.Layout.resolved_kv_dtype`)."""


def get_dtype(name: str) -> DType:
    """Look up a dtype by name (case-insensitive), with did-you-mean on a miss."""
    key = name.strip().lower()
    aliases = {
        "float16": "fp16",
        "half": "fp16",
        "bfloat16": "bf16",
        "float32": "fp32",
        "awq": "int4",
        "gptq": "int4",
        "w4a16": "int4",
        "w8a8": "int8",
        "nvfp4": "fp4",
        "float8": "fp8",
        "e4m3": "fp8",
    }
    key = aliases.get(key, key)
    if key not in DTYPES:
        raise UnknownNameError("dtype", name, DTYPES, hint="run 'gpuplan dtypes' for the list")
    return DTYPES[key]
