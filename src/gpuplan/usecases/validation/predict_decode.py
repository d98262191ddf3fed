"""Predict the decode instance of a prefill/decode-disaggregated deployment (its throughput rows).

Rows whose notes say the deployment is ``disaggregated`` or name its ``decode instance`` / ``decode
deployment unit`` (``shared/validation/README.md``: DeepSeek's, RTP-LLM's and SGLang-on-H20's rows, the
instance's output tokens/s with ``num_gpus`` its GPUs) are priced as a decode-only deployment: prompts
are prefilled elsewhere, so every step of the decode replica is a decode step of its running batch,

    tokens/s = replicas · B / t_decode(B, c)

at the row's layout (its EP, attention DP over the EP group), the decode context ``c`` = input +
output/2 (the input alone when the output is not stated; else an ``avg KV length`` the notes give),
and ``B`` the row's concurrency spread over the replicas, capped by what one replica holds (KV and
the engine's sequence limit), or that capacity when the row gives no concurrency (a saturated
decode instance).
"""

from __future__ import annotations

import re

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import GpuplanError
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.usecases.validation.cases import Case, Skip
from gpuplan.usecases.validation.layouts import row_layouts

DECODE_METRICS = ("output_tokens_per_s", "output_tokens_per_s_per_gpu")
_DECODE_WORDS = ("disaggregated", "decode instance", "decode deployment unit")
_KV_LENGTH = re.compile(r"KV(?:-cache)? length[^0-9|]*?([0-9][0-9,]*)", re.IGNORECASE)


def is_decode_instance_row(case: Case) -> bool:
    """A throughput row of a disaggregated deployment's decode instance (module docstring)."""
    notes = case.get("notes").lower()
    decode_only = any(word in notes for word in _DECODE_WORDS)
    return case.metric in DECODE_METRICS and decode_only and "decode" in notes


def decode_context_tokens(case: Case) -> int:
    """Mean context of a decoding request: input + output/2, else the notes' average KV length."""
    inp, out = case.int_field("input_len"), case.int_field("output_len") or 0
    if inp:
        return inp + out // 2
    found = _KV_LENGTH.search(case.get("notes"))
    if found:
        return int(found.group(1).replace(",", ""))
    raise Skip("decode instance row without input length or average KV length")


def predict_decode_case(case: Case, model: ModelSpec, gpu: GpuSpec, cal: Calibration) -> float:
    """The decode instance's throughput metric: the best of the row's layouts (module docstring)."""
    context = decode_context_tokens(case)
    gpus = case.int_field("num_gpus") or 1
    concurrency = case.float_field("concurrency")
    best, last = None, "no layout divides the GPU count"
    for layout in row_layouts(case, model):
        try:
            replica = ReplicaModel.build(model, gpu, layout.with_replicas(1), context_tokens=context, cal=cal)
        except GpuplanError as exc:
            last = exc.one_line()
            continue
        step, held = replica.step, replica.memory.kv_tokens / context
        batch = min(float(step.max_seqs), held)
        if concurrency:
            batch = min(batch, concurrency / layout.replicas)
        tokens_per_s = layout.replicas * batch / step.decode_s(batch=max(batch, 1.0), context=context)
        best = tokens_per_s if best is None else max(best, tokens_per_s)
    if best is None:
        raise Skip(last)
    return best / gpus if case.metric.endswith("_per_gpu") else best
