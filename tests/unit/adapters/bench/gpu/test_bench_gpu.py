"""``bench gpu`` on CPU: every measurement is stored as taken; unsupported ones are skipped with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from gpuplan.adapters.bench.gpu.config import GpuBenchConfig
from gpuplan.adapters.bench.gpu.runner import run_gpu_bench
from gpuplan.adapters.store.database import Store
from gpuplan.adapters.store.measurements import run_measurements

SMALL = {
    "device": "cpu",
    "gemm_size": 64,
    "copy_bytes": 1 << 20,
    "warmup": 1,
    "repeats": 3,
    "min_repeat_s": 0.0,
}


def test_cpu_run_stores_each_measurement(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    seen: list[str] = []
    summary = run_gpu_bench(
        GpuBenchConfig.model_validate(SMALL | {"skip": ("allreduce",)}),
        url,
        on_result=lambda m: seen.append(m.name),
    )
    stored = run_measurements(Store(url), summary["run_id"])
    assert (
        [m["name"] for m in stored]
        == seen
        == ["gemm_fp32", "gemm_tf32", "gemm_bf16", "gemm_fp16", "gemm_fp8", "d2d", "h2d", "d2h"]
    )
    by = {m["name"]: m for m in stored}
    assert by["gemm_fp32"]["status"] == "ok" and by["gemm_fp32"]["value"] > 0
    assert by["gemm_fp32"]["params"] == {"m": 64, "n": 64, "k": 64}
    assert by["d2d"]["value"] > 0 and by["d2d"]["params"]["counted"] == "read+write"
    assert "CUDA" in by["gemm_tf32"]["reason"] and "CUDA" in by["gemm_fp8"]["reason"]
    assert by["h2d"]["status"] == "skipped"
    run = Store(url).run(summary["run_id"])
    assert run.kind == "bench-gpu" and run.status == "completed"
    assert run.conditions["device"] == "cpu" and run.conditions["torch"]


def test_allreduce_skips_with_one_rank_and_runs_with_gloo(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    only = ("gemm", "copy", "h2d", "d2h")
    one = run_gpu_bench(GpuBenchConfig.model_validate(SMALL | {"skip": only}), url)["results"]
    assert one[0]["status"] == "skipped" and "at least 2" in one[0]["reason"]
    two = run_gpu_bench(
        GpuBenchConfig.model_validate(
            SMALL
            | {"skip": only, "allreduce_ranks": 2, "allreduce_backend": "gloo", "allreduce_bytes": 1 << 16}
        ),
        url,
    )["results"]
    assert two[0]["status"] == "ok", two[0]
    assert two[0]["value"] > 0 and two[0]["params"]["ranks"] == 2
