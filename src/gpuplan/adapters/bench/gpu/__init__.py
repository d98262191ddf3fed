"""GPU micro-benchmarks (``gpuplan bench gpu``): dense GEMM TFLOP/s per dtype, device memory copy,
host↔device copy and all-reduce bus bandwidth. torch is imported lazily (extra ``gpuplan[gpu]``)."""

from gpuplan.adapters.bench.gpu.config import GEMM_DTYPES, GpuBenchConfig, Measurement

__all__ = ["GEMM_DTYPES", "GpuBenchConfig", "Measurement"]
