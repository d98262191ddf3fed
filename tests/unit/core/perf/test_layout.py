"""A layout's dtypes and engine: read from names (any accepted spelling), held as the table's objects,
written as canonical names; the pre-Ampere dtype rule."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.core.dtypes import DTYPES, get_dtype
from gpuplan.core.errors import UnknownNameError, UserInputError
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.engine_profiles import get_engine
from gpuplan.core.perf.layout import Layout, check_layout, tp_choices


def test_names_and_aliases_become_the_table_objects() -> None:
    layout = Layout(weight_dtype="FP8", kv_dtype="e4m3", engine="TensorRT-LLM")
    assert layout.weight_dtype is DTYPES["fp8"] and layout.kv_dtype is DTYPES["fp8"]
    assert layout.engine is get_engine("trtllm")
    default = Layout()
    assert (default.weight_dtype, default.kv_dtype, default.engine) == (
        DTYPES["bf16"],
        None,
        get_engine("vllm"),
    )


def test_objects_are_taken_as_they_are() -> None:
    int4, sglang = get_dtype("int4"), get_engine("sglang")
    layout = Layout(weight_dtype=int4, kv_dtype=int4, engine=sglang)
    assert layout.weight_dtype is int4 and layout.kv_dtype is int4 and layout.engine is sglang


def test_json_writes_canonical_names_and_reads_them_back() -> None:
    layout = Layout(tp=2, weight_dtype="nvfp4", kv_dtype="float8", engine="tensorrt_llm")
    dumped = layout.model_dump_json()
    assert json.loads(dumped) == {
        "tp": 2,
        "pp": 1,
        "ep": 1,
        "attention_dp": 1,
        "replicas": 1,
        "weight_dtype": "fp4",
        "kv_dtype": "fp8",
        "engine": "trtllm",
        "engine_version": None,
        "gpu_memory_utilization": None,
        "speculative": None,
    }
    assert Layout().model_dump()["kv_dtype"] is None
    assert Layout.model_validate_json(dumped) == layout


def test_unknown_names_raise_the_lookups_error() -> None:
    for field, name in (("weight_dtype", "fp9"), ("kv_dtype", "fp9")):
        with pytest.raises(UnknownNameError) as info:
            Layout.model_validate({field: name})
        assert str(info.value) == str(_dtype_error(name))
    with pytest.raises(UnknownNameError, match=r"unknown engine 'vlm'; did you mean vllm\?"):
        Layout(engine="vlm")


def _dtype_error(name: str) -> UnknownNameError:
    """The error ``get_dtype`` itself raises for ``name``."""
    try:
        get_dtype(name)
    except UnknownNameError as error:
        return error
    raise AssertionError(f"{name!r} is a dtype")


def test_a_name_that_is_not_a_string_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="Input should be a valid string"):
        Layout.model_validate({"weight_dtype": 8})
    with pytest.raises(ValidationError, match="Input should be a valid string"):
        Layout.model_validate({"engine": True})


def test_an_empty_kv_name_follows_the_weights() -> None:
    layout = Layout(weight_dtype="fp8", kv_dtype="")
    assert layout.kv_dtype is None and layout.resolved_kv_dtype is DTYPES["fp8"]


def test_the_schema_says_string_with_the_default_names() -> None:
    for mode in ("validation", "serialization"):
        props = Layout.model_json_schema(mode=mode)["properties"]
        assert props["weight_dtype"] == {"default": "bf16", "title": "Weight Dtype", "type": "string"}
        assert props["engine"] == {"default": "vllm", "title": "Engine", "type": "string"}
        assert props["kv_dtype"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    # dtypes and engines are names, not objects (a speculative proposer's model spec is one)
    assert not {"DType", "EngineProfile"} & set(Layout.model_json_schema().get("$defs", {}))


def test_messages_print_the_names() -> None:
    layout = Layout(tp=2, weight_dtype="awq", engine="llama.cpp")
    assert f"{layout.weight_dtype}/{layout.resolved_kv_dtype}/{layout.engine}" == "int4/bf16/llamacpp"
    assert layout.replica_label == "tp=2 pp=1, int4"


@pytest.mark.parametrize(
    ("dtype", "refused"), [("fp8", True), ("FP8", True), ("nvfp4", True), ("int4", False)]
)
def test_pre_ampere_gpus_refuse_fp8_and_fp4_weights(llama8b: ModelSpec, dtype: str, refused: bool) -> None:
    v100 = default_catalog().get_gpu("V100-32GB")
    layout = Layout(weight_dtype=dtype)
    if refused:
        with pytest.raises(
            UserInputError, match=f"{layout.weight_dtype.name} weights need an Ampere-or-newer GPU"
        ):
            check_layout(llama8b, v100, layout)
    else:
        check_layout(llama8b, v100, layout)


def test_tp_choices_are_the_head_divisors_up_to_the_node() -> None:
    assert tp_choices(96, max_tp=8) == [1, 2, 3, 4, 6, 8]
    assert tp_choices(6, max_tp=8) == [1, 2, 3, 6]
    # the work is max_tp steps whatever the head count: 2^40 - 1 = 3 x 5^2 x 11 x 17 x 31 x 41 x 61681
    assert tp_choices(2**40 - 1, max_tp=16) == [1, 3, 5, 11, 15]


def test_a_tp_that_does_not_divide_the_heads_suggests_the_node_s_sizes(
    llama8b: ModelSpec, h100: GpuSpec
) -> None:
    with pytest.raises(UserInputError) as err:
        check_layout(llama8b, h100, Layout(tp=3))
    assert err.value.one_line() == (
        "tp=3 does not divide meta-llama/Llama-3.1-8B's 32 attention heads (use tp in [1, 2, 4, 8])"
    )


def test_tp_stays_inside_one_server(llama8b: ModelSpec) -> None:
    """Issue 18: ``predict`` took tp=8 on GH200, whose rented nodes are single superchips
    (``server_gpus: 1``); PCIe cards with an NVLink pair still take TP over their 8-GPU server."""
    catalog = default_catalog()
    gh200, h100_pcie = catalog.get_gpu("GH200"), catalog.get_gpu("H100-PCIe")
    assert (gh200.interconnect.node_gpus, h100_pcie.interconnect.node_gpus) == (1, 8)
    with pytest.raises(UserInputError, match="tp=2 spans more than one GH200 node"):
        check_layout(llama8b, gh200, Layout(tp=2))
    check_layout(llama8b, gh200, Layout(tp=1, replicas=8))
    check_layout(llama8b, h100_pcie, Layout(tp=8))


def test_bf16_weights_on_a_gpu_without_bf16_name_the_fp16_fix(llama8b: ModelSpec) -> None:
    t4 = default_catalog().get_gpu("T4")
    with pytest.raises(UserInputError, match="T4 has none") as info:
        check_layout(llama8b, t4, Layout(weight_dtype="bf16"))
    assert "--dtype fp16" in str(info.value)
    check_layout(llama8b, t4, Layout(weight_dtype="fp16"))
