"""``gpuplan fit``'s nearest fits: every suggestion, applied, fits (issue 18: a deployment that did
not fit printed a negative KV pool and nothing to do about it)."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.core.errors import UserInputError
from gpuplan.usecases.fit import FitResult, fit

CATALOG = default_catalog()


def _fit(model: str, gpu: str, **flags: object) -> FitResult:
    args: dict[str, object] = {"count": 1, "tp": None, "pp": 1, "weight_dtype": "bf16", "kv_dtype": None}
    args |= {"engine": "vllm", "context_tokens": None, "utilization": None} | flags
    return fit(model, gpu, CATALOG, **args)  # type: ignore[arg-type]


def _applied(hint: str) -> dict[str, object]:
    words = hint.split()
    names = {
        "--count": "count",
        "--tp": "tp",
        "--pp": "pp",
        "--dtype": "weight_dtype",
        "--context": "context_tokens",
    }
    return {names[k]: (v if k == "--dtype" else int(v)) for k, v in zip(words[::2], words[1::2], strict=True)}


@pytest.mark.parametrize(
    ("model", "gpu", "context", "expected"),
    [
        ("meta-llama/Llama-3.1-8B", "L4", 131072, {"--count 2 --tp 2", "--dtype fp8"}),
        ("meta-llama/Llama-3.1-70B", "GH200", None, {"--count 2 --tp 1 --pp 2", "--dtype fp8"}),
    ],
)
def test_each_nearest_fit_fits_when_applied(
    model: str, gpu: str, context: int | None, expected: set[str]
) -> None:
    missed = _fit(model, gpu, context_tokens=context)
    assert not missed.memory.fits and expected <= set(missed.nearest)
    for hint in missed.nearest:
        flags = {"context_tokens": context} | _applied(hint)
        assert _fit(model, gpu, **flags).memory.fits, hint


def test_a_shorter_context_is_offered_only_when_the_weights_fit() -> None:
    short = _fit("meta-llama/Llama-3.1-8B", "L4", context_tokens=131072)
    context = [h for h in short.nearest if h.startswith("--context")]
    assert len(context) == 1 and int(context[0].split()[1]) <= short.memory.kv_tokens
    assert not any(h.startswith("--context") for h in _fit("meta-llama/Llama-3.1-70B", "L4").nearest)


def test_a_deployment_that_fits_has_no_hints() -> None:
    assert _fit("meta-llama/Llama-3.1-8B", "H100-SXM", context_tokens=8192).nearest == ()


def test_a_large_count_without_tp_names_the_count_and_the_fix() -> None:
    """Issue 22: ``fit --count 5000`` reported ``--tp: … ≤ 1024``, a flag the user had not typed."""
    with pytest.raises(UserInputError, match=r"--count 5000 with no --tp makes tp=5000") as info:
        _fit("meta-llama/Llama-3.1-8B", "L4", count=5000)
    assert "--tp 8" in str(info.value)
    assert _fit("meta-llama/Llama-3.1-8B", "L4", count=5000, tp=8, context_tokens=8192).layout.replicas == 625
