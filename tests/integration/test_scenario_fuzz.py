"""Fuzz the scenario reader and ``gpuplan predict`` with hostile YAML documents.

``parse_scenario`` may only return a ScenarioFile or raise FileFormatError (one line, naming the
origin); the CLI may only exit with a documented code (0 ok, 1 user error, 2 infeasible, 3 data
error) and never print a traceback.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpuplan.adapters.scenario_files.deployment import ScenarioFile, parse_scenario
from gpuplan.core.errors import FileFormatError

Invoke = Callable[..., Any]

# --- strategies ------------------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
"""Any unicode except lone surrogates (which YAML cannot carry)."""

NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, 1, -1, 2**31, 2**63, 10_000_000, 10_000_001, 4096, 4097]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 1e308, 0.5, 1.0000001]),
)


def leaves(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.booleans(), NUMBERS, text)


def trees(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Arbitrary nested lists and mappings (text, int, bool or None keys)."""
    keys = st.one_of(text, st.integers(-5, 5), st.booleans(), st.none())
    return st.recursive(
        leaves(text),
        lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(keys, kids, max_size=4)),
        max_leaves=20,
    )


@st.composite
def deep(draw: st.DrawFn, text: st.SearchStrategy[str]) -> Any:
    """One value buried 1..50 levels deep in lists and single-key mappings."""
    value = draw(leaves(text))
    for _ in range(draw(st.integers(1, 50))):
        value = [value] if draw(st.booleans()) else {draw(text): value}
    return value


def values(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.one_of(leaves(text), trees(text), deep(text))


Field = tuple[list[Any], list[Any]]
"""(values the schema accepts, values it must reject or that later steps refuse)."""

GPU_IDS = ["H100-SXM", "A100-80GB-SXM", "L4", "T4", "MI300X"]
SECTIONS: dict[str, dict[str, Field]] = {
    "hardware": {
        "gpu": (GPU_IDS, ["H100", ""]),
        "count": ([1, 2, 4, 8, 3], [0, -1, 200_001]),
        "gpus": ([["H100-SXM"], ["L4", "T4"]], [["H100"], "L4"]),
        "max_gpus": ([1, 8, 64], [0, 5000]),
    },
    "parallelism": {"tp": ([1, 2, 4, 8, 3], [0, 2048]), "pp": ([1, 2, 200], [0]), "ep": ([1, 2, 8], [0])},
    "precision": {
        "weights": (["bf16", "fp16", "fp8", "int4", "fp4", "nf4", "fp9"], [4]),
        "kv_cache": (["bf16", "fp8", "int8", "int4", "xx"], [[]]),
    },
    "workload": {
        "scenario": (["concurrency", "offline", "single", "static_batch", "rate"], ["server", ""]),
        "input_tokens": ([1, 128, 2048, 100_000, 10_000_000], [0, -5, 10_000_001, 1.5]),
        "output_tokens": ([1, 2, 256, 10_000_000], [0, "many"]),
        "concurrency": ([1, 16, 10_000_000], [0]),
        "rate_rps": ([0.001, 1.0, 1e6], [0.0, 1e7]),
        "batch_size": ([1, 8, 10_000_000], [0]),
    },
    "sla": {"ttft_ms": ([1.0, 1000.0], [-1.0]), "tpot_ms": ([1.0, 50.0], [0.0])},
    "prices": {
        "usd_per_gpu_hour": ([0.5, 2.0], [-1.0]),
        "kind": (["on_demand", "spot", "reserved_1y", "reserved_3y"], ["free"]),
        "max_usd_per_hour": ([1.0, 1000.0], [0]),
    },
}
TOP: dict[str, Field] = {
    "model": (
        [
            "meta-llama/Llama-3.1-8B",
            "Qwen/Qwen2.5-32B-Instruct",
            "mistralai/Mixtral-8x7B-v0.1",
            "meta-llama/Llama-3.1-70B",
            "no/such-model",
        ],
        [None, ["meta-llama/Llama-3.1-8B"]],
    ),
    "engine": (["vllm", "trtllm", "sglang", "tgi", "llama.cpp", "nope"], [1]),
    "gpu_memory_utilization": ([0.9, 0.5, 0.01, 1.0], [1.5, 0.0]),
    "max_model_len": ([1, 4096, 10_000_000], [0]),
    "objective": (["cost", "latency", "throughput"], ["vibes"]),
}


@st.composite
def scenario_docs(draw: st.DrawFn, text: st.SearchStrategy[str]) -> dict[Any, Any]:
    """Well-shaped scenarios; at a drawn noise level, fields turn invalid or into garbage."""
    garbage = values(text)
    noise = draw(st.sampled_from([0, 0, 1, 3]))  # chance in 8 that one field is invalid / garbage

    def field(spec: Field) -> Any:
        roll = draw(st.integers(0, 15))  # Hypothesis favours small draws: low rolls stay valid
        if roll >= 16 - noise:
            return draw(garbage)
        if roll >= 16 - 2 * noise:
            return draw(st.sampled_from(spec[1]))
        return draw(st.sampled_from(spec[0]))

    doc: dict[Any, Any] = {}
    for key, spec in TOP.items():
        if key == "model" or draw(st.integers(0, 3)) == 0:
            doc[key] = field(spec)
    for section, fields in SECTIONS.items():
        if section == "hardware":
            doc[section] = {"gpu": field(fields["gpu"])}
        elif section != "workload" and draw(st.booleans()):
            continue
        if noise and draw(st.integers(0, 15)) == 15:
            doc[section] = draw(garbage)
            continue
        chosen = {
            k: field(spec)
            for k, spec in fields.items()
            if k in ("input_tokens", "output_tokens") or draw(st.integers(0, 2)) == 0
        }
        doc[section] = {**doc.get(section, {}), **chosen}
    if noise and draw(st.integers(0, 4)) == 4:
        doc[draw(text)] = draw(garbage)
    return doc


def documents(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.one_of(
        scenario_docs(text),
        scenario_docs(text),
        st.dictionaries(text, values(text), max_size=6),
        values(text),
    )


def dump(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


# --- parse_scenario ----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents(TEXT))
def test_parse_scenario_only_raises_file_format_error(doc: Any) -> None:
    text = dump(doc)
    try:
        result = parse_scenario(text, origin="x.yaml")
    except FileFormatError as exc:
        assert exc.one_line().startswith("x.yaml"), exc.one_line()
        event("rejected")
        return
    event("accepted")
    assert isinstance(result, ScenarioFile)
    assert result.workload.input_tokens >= 1 and result.workload.output_tokens >= 1
    for value in (
        result.workload.rate_rps,
        result.sla.ttft_ms,
        result.sla.tpot_ms,
        result.gpu_memory_utilization,
    ):
        assert value is None or (math.isfinite(value) and value > 0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "~",
        "null",
        "[]",
        "42",
        "'just a string'",
        "model: [\n",
        "\t- tab",
        "{a: 1, a: 2}",
        "!!python/object:os.system ls",
        "a: &x [1]\nb: *x\n",
        "model: *undefined\n",
        "%YAML 9.9\n---\nmodel: x\n",
        "--- 1\n--- 2\n",
        "\x00",
    ],
)
def test_parse_scenario_odd_texts(text: str) -> None:
    with pytest.raises(FileFormatError) as info:
        parse_scenario(text, origin="x.yaml")
    assert info.value.one_line().startswith("x.yaml")


def test_parse_scenario_deep_nesting_beyond_recursion_limit() -> None:
    text = "model: m\nworkload: {input_tokens: 1, output_tokens: 1}\nextra: " + "[" * 3000 + "]" * 3000 + "\n"
    with pytest.raises(FileFormatError):
        parse_scenario(text, origin="x.yaml")


def test_parse_scenario_alias_bomb_is_fast() -> None:
    """'Billion laughs': aliases are shared references in safe_load, and validation fails early."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    lines += ["model: *a8", "workload: {input_tokens: 1, output_tokens: 1}"]
    with pytest.raises(FileFormatError):
        parse_scenario("\n".join(lines) + "\n", origin="x.yaml")


def test_error_for_key_with_newline_is_one_line() -> None:
    doc = {"model": "m", "workload": {"input_tokens": 1, "output_tokens": 1}, "bad\nkey": 1}
    with pytest.raises(FileFormatError) as info:
        parse_scenario(dump(doc), origin="x.yaml")
    assert "\n" not in info.value.one_line()


# --- the CLI -----------------------------------------------------------------------------------------


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(doc=st.one_of(scenario_docs(TEXT), scenario_docs(TEXT), values(TEXT)))
def test_predict_cli_never_crashes(invoke: Invoke, tmp_path: Path, doc: Any) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(dump(doc), encoding="utf-8")
    run = invoke("predict", path, "--format", "json")  # fails on any escaped exception
    event(f"exit {run.exit_code}")
    assert run.exit_code in (0, 1, 2, 3), (run.exit_code, run.stderr)
    assert "Traceback" not in run.output
    if run.exit_code:
        assert run.stderr.lstrip().startswith("error:"), run.stderr
    else:
        assert run.stdout.lstrip().startswith("{")


def test_predict_cli_key_with_markup(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "markup.yaml"
    path.write_text(
        dump({"model": "m", "workload": {"input_tokens": 1, "output_tokens": 1}, "[/x]": 1}), encoding="utf-8"
    )
    run = invoke("predict", path)
    assert run.exit_code == 1 and "[/x]" in run.stderr


def test_gpu_name_with_markup_is_shown_verbatim(invoke: Invoke) -> None:
    run = invoke("fit", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "[red]H100")
    assert run.exit_code == 1 and "[red]H100" in run.stderr
