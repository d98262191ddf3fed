"""Rows of a disaggregated deployment's decode instance are predicted decode-only at their EP layout, and
a row's EP beyond its TP group (or SGLang's --enable-dp-attention) becomes attention data parallelism."""

from __future__ import annotations

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.perf.inference import ReplicaModel
from gpuplan.core.perf.layout import Layout
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases.validation.cases import Case, Skip
from gpuplan.usecases.validation.layouts import attention_groups, row_layouts
from gpuplan.usecases.validation.predict_decode import (
    decode_context_tokens,
    is_decode_instance_row,
    predict_decode_case,
)

DISAGGREGATED = "PD-disaggregated deployment: 1 prefill node + 1 decode instance (16 GPUs, EP16)"


def _row(metric: str = "output_tokens_per_s_per_gpu", **fields: str) -> Case:
    base = {
        "framework": "sglang",
        "model": "deepseek-ai/DeepSeek-V3",
        "gpu": "H800",
        "num_gpus": "16",
        "tp": "1",
        "ep": "16",
        "weight_dtype": "fp8",
        "input_len": "4096",
        "output_len": "1024",
        "scenario": "concurrency",
        "concurrency": "1024",
        "notes": DISAGGREGATED,
    }
    return Case(
        schema_name="inference", id="D1", metric=metric, value=1.0, quality="C", fields={**base, **fields}
    )


def test_the_notes_wording_marks_a_decode_instance() -> None:
    assert is_decode_instance_row(_row())
    assert is_decode_instance_row(_row(notes="decode deployment unit EP144 over 18 nodes"))
    assert not is_decode_instance_row(_row(notes="aggregated TP8 serving"))
    assert not is_decode_instance_row(_row("tpot_ms_mean"))


def test_decode_context_is_input_plus_half_the_output_else_the_notes_kv_length() -> None:
    assert decode_context_tokens(_row()) == 4096 + 512
    assert decode_context_tokens(_row(input_len="", notes="avg KV length per output token 4,989")) == 4989
    with pytest.raises(Skip, match="without input length or average KV length"):
        decode_context_tokens(_row(input_len="", notes=DISAGGREGATED))


def test_decode_instance_throughput_is_its_batch_over_one_decode_step() -> None:
    model, gpu, cal = (
        get_model("deepseek-ai/DeepSeek-V3"),
        default_catalog().get_gpu("H800"),
        default_calibration(),
    )
    layout = Layout(tp=1, attention_dp=16, ep=16, weight_dtype="fp8", engine="sglang")
    replica = ReplicaModel.build(model, gpu, layout, context_tokens=4608, cal=cal)
    assert replica.memory.kv_tokens / 4608 > 1024  # the row's 1,024 requests fit: batch = concurrency
    expected = 1024 / replica.step.decode_s(batch=1024, context=4608) / 16
    assert predict_decode_case(_row(), model, gpu, cal) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    ("tp", "ep", "notes", "groups"),
    [
        (1, 16, "", (1, 16, 16)),  # EP = TP x DP over the EP group
        (2, 16, "", (2, 8, 16)),
        (4, 6, "", (0, 1, 6)),  # EP not a multiple of TP: no such layout
        (8, 1, "sglang.launch_server --tp 8 --enable-dp-attention", (1, 8, 1)),  # SGLang 0.4: dp = tp
        (8, 1, "--tp 8 --dp 4 --enable-dp-attention", (2, 4, 1)),
        (8, 1, "--tp 8 --enable-dp-attention --enable-ep-moe", (1, 8, 8)),
        (8, 4, "trtllm-serve --tp_size 8 --ep_size 4", (8, 1, 4)),  # EP inside the TP group
    ],
)
def test_attention_groups_from_the_row(tp: int, ep: int, notes: str, groups: tuple[int, int, int]) -> None:
    assert attention_groups(_row(notes=notes), tp=tp, ep=ep) == groups


def test_a_row_without_tp_tries_every_attention_tp_of_its_ep_group() -> None:
    layouts = row_layouts(_row(tp=""), get_model("deepseek-ai/DeepSeek-V3"))
    assert [(x.tp, x.attention_dp, x.ep, x.replicas) for x in layouts] == [
        (1, 16, 16, 1),
        (2, 8, 16, 1),
        (4, 4, 16, 1),
        (8, 2, 16, 1),
    ]
