"""Run ``gpuplan bench train``: one stored result per batch size, OOM recorded rather than raised.

Per batch size: ``warmup_steps`` untimed steps, then ``steps`` timed ones (synchronised wall time
per step; median). One step = forward with labels (causal-LM loss) + backward + AdamW step + zero
grad. Model FLOPs per step: ``flops.credited_flops_per_token`` (6N + causal attention, × 2/3 for
LoRA) × tokens. Peak memory: ``max_memory_allocated``
on CUDA (None on CPU).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from gpuplan.adapters.bench.gpu.env import conditions, resolve_device
from gpuplan.adapters.bench.train.config import TrainBenchConfig, TrainResult
from gpuplan.adapters.bench.train.flops import credited_flops_per_token
from gpuplan.adapters.bench.train.lora import apply_lora
from gpuplan.adapters.bench.train.model import build_model, resolve_config
from gpuplan.adapters.models.hf_config import parse_hf_config
from gpuplan.adapters.store.measurements import open_measurement_run, store_each
from gpuplan.core.errors import GpuplanError

RUN_KIND = "bench-train"


def _flops_per_token(config: dict[str, Any], model_id: str, seq_len: int, method: str) -> float | None:
    try:
        return credited_flops_per_token(
            parse_hf_config(config, model_id=model_id), seq_len=seq_len, method=method
        )
    except GpuplanError:
        return None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


class _Bench:
    def __init__(self, cfg: TrainBenchConfig, device: torch.device, dtype: str) -> None:
        self.cfg, self.device, self.dtype = cfg, device, dtype
        config = resolve_config(cfg.model)
        self.vocab = int(config.get("vocab_size") or 32000)
        self.model = build_model(config, dtype, device)
        if cfg.gradient_checkpointing:
            self.model.gradient_checkpointing_enable()  # type: ignore[operator]
        self.trainable = (
            apply_lora(self.model, cfg.lora_rank)
            if cfg.method == "lora"
            else sum(p.numel() for p in self.model.parameters())
        )
        self.model.train()
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate)
        self.flops_per_token = _flops_per_token(config, cfg.model, cfg.seq_len, cfg.method)

    def step(self, ids: torch.Tensor) -> float:
        t0 = time.perf_counter()
        loss = self.model(input_ids=ids, labels=ids).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        _sync(self.device)
        return time.perf_counter() - t0

    def measure(self, batch: int) -> TrainResult:
        cfg = self.cfg
        base = {
            "name": f"bs{batch}",
            "batch_size": batch,
            "seq_len": cfg.seq_len,
            "method": cfg.method,
            "dtype": self.dtype,
        }
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        try:
            ids = torch.randint(0, self.vocab, (batch, cfg.seq_len), device=self.device)
            for _ in range(cfg.warmup_steps):
                self.step(ids)
            times = [self.step(ids) for _ in range(cfg.steps)]
        except (RuntimeError, torch.cuda.OutOfMemoryError) as exc:
            self._recover()
            status = "oom" if _is_oom(exc) else "error"
            return TrainResult(status=status, reason=f"{type(exc).__name__}: {str(exc)[:300]}", **base)
        return self._result(base, times)

    def _result(self, base: dict[str, Any], times: list[float]) -> TrainResult:
        t = statistics.median(times)
        tokens = base["batch_size"] * base["seq_len"]
        flops = self.flops_per_token * tokens if self.flops_per_token is not None else None
        peak = int(torch.cuda.max_memory_allocated(self.device)) if self.device.type == "cuda" else None
        return TrainResult(
            status="ok",
            value=t,
            step_s=times,
            tokens_per_s=tokens / t,
            model_flops_per_step=flops,
            achieved_tflops=flops / t / 1e12 if flops is not None else None,
            peak_memory_bytes=peak,
            **base,
        )

    def _recover(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def run_train_bench(
    cfg: TrainBenchConfig,
    store_url: str | None = None,
    *,
    on_result: Callable[[TrainResult], None] | None = None,
    announce: Callable[[str, str], None] | None = None,
) -> dict[str, Any]:
    """Build the model once, measure each batch size in turn, store each result as it is measured."""
    device = resolve_device(cfg.device)
    dtype = cfg.dtype or ("bf16" if device.type == "cuda" else "fp32")
    torch.manual_seed(cfg.seed)
    bench = _Bench(cfg, device, dtype)
    cond = conditions(device) | {
        "transformers": _transformers_version(),
        "trainable_params": bench.trainable,
        "params": sum(p.numel() for p in bench.model.parameters()),
    }
    config = cfg.model_dump(mode="json") | {"dtype": dtype}
    store, run_id = open_measurement_run(store_url, RUN_KIND, config, cond, announce)
    results = store_each(
        store,
        run_id,
        (bench.measure(batch) for batch in cfg.batch_sizes),
        lambda result: result.model_dump(mode="json"),
        on_result,
        interrupted_message="interrupted; the batch sizes measured so far are stored",
    )
    summary = {
        "run_id": run_id,
        "model": cfg.model,
        "device": device.type,
        "device_name": cond["device_name"],
        "gpu": cond.get("gpu"),
        "dtype": dtype,
        "results": [r.model_dump(mode="json") for r in results],
    }
    store.finish_run(run_id, "completed", summary)
    return summary


def _transformers_version() -> str:
    import transformers

    return str(transformers.__version__)
