"""``bench train`` on CPU with the bundled tiny-llama config: step times per batch size; OOM is a result."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from gpuplan.adapters.bench.train import runner as train_runner  # noqa: E402
from gpuplan.adapters.bench.train.config import TrainBenchConfig  # noqa: E402
from gpuplan.adapters.bench.train.model import resolve_config  # noqa: E402
from gpuplan.adapters.store.database import Store  # noqa: E402
from gpuplan.adapters.store.measurements import run_measurements  # noqa: E402
from gpuplan.core.errors import UserInputError  # noqa: E402

BASE = {"model": "tiny-llama", "seq_len": 16, "device": "cpu", "steps": 2, "warmup_steps": 1}


@pytest.mark.parametrize("method", ["full", "lora"])
def test_tiny_model_steps_are_timed_and_stored(tmp_path: Path, method: str) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    cfg = TrainBenchConfig.model_validate(BASE | {"batch_sizes": (1, 2), "method": method})
    summary = train_runner.run_train_bench(cfg, url)
    stored = run_measurements(Store(url), summary["run_id"])
    assert [m["name"] for m in stored] == ["bs1", "bs2"]
    for m in stored:
        assert m["status"] == "ok" and m["value"] > 0 and len(m["step_s"]) == 2
        assert m["tokens_per_s"] == pytest.approx(m["batch_size"] * 16 / m["value"])
        assert m["model_flops_per_step"] > 0 and m["dtype"] == "fp32"
    cond = Store(url).run(summary["run_id"]).conditions
    assert (
        cond["trainable_params"] < cond["params"]
        if method == "lora"
        else cond["trainable_params"] == cond["params"]
    )


def test_oom_is_recorded_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: object, ids: object) -> float:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")

    monkeypatch.setattr(train_runner._Bench, "step", boom)
    cfg = TrainBenchConfig.model_validate(BASE | {"batch_sizes": (4,)})
    result = train_runner.run_train_bench(cfg, f"sqlite:///{tmp_path / 'r.sqlite'}")["results"][0]
    assert result["status"] == "oom" and "out of memory" in result["reason"]


def test_model_lookup() -> None:
    assert resolve_config("tiny-llama")["num_hidden_layers"] == 2
    assert resolve_config("Qwen/Qwen3-0.6B")["model_type"] == "qwen3"
    with pytest.raises(UserInputError):
        resolve_config("no/such-model")
