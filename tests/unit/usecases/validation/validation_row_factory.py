"""Validation rows of Llama-3.1-8B on one H100 for the row tests: fields as the CSVs spell them."""

from __future__ import annotations

from gpuplan.usecases.validation.cases import Case


def llama8b_row(metric: str, **fields: str) -> Case:
    """A vLLM row, TP1 bf16, 512 in / 128 out; ``fields`` override or add columns (scenario, load, notes)."""
    base = {
        "framework": "vllm",
        "model": "meta-llama/Llama-3.1-8B",
        "gpu": "H100-SXM",
        "num_gpus": "1",
        "tp": "1",
        "weight_dtype": "bf16",
        "input_len": "512",
        "output_len": "128",
        "scenario": "concurrency",
        "notes": "",
    }
    return Case(
        schema_name="inference", id="T1", metric=metric, value=1.0, quality="A", fields={**base, **fields}
    )
