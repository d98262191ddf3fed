"""Property-based fuzzing (issue 22): CLI flags, web API bodies and ``config.json`` parsing.

Each input is a valid seed with one to three of its fields replaced by a hostile value (huge, negative,
non-finite, wrong type, 5,000-digit, markup, empty), deleted, or joined by an unknown key, or plain
garbage. The contract: the CLI exits 0-3 with one ``error:`` line and never a traceback; the web
answers below 500 with a one-line ``error``; ``parse_hf_config`` returns a spec or raises
``FileFormatError``.

Profiles: the default is fast and derandomised (for CI: about 30 s on 2 cores); ``GPUPLAN_FUZZ=long``
runs each property ``LONG_FACTOR`` times as many cases, randomised (over 10,000 in all; the count per
property is printed by ``pytest -s --hypothesis-show-statistics``).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpuplan.adapters.models.hf_config import parse_hf_config
from gpuplan.core.errors import FileFormatError
from gpuplan.core.model.spec import ModelSpec

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

from gpuplan.interfaces.web.app import create_app

Invoke = Callable[..., Any]
LONG = os.environ.get("GPUPLAN_FUZZ", "").lower() == "long"
LONG_FACTOR = 25
"""Cases per property in the long profile, per case in the fast one."""
CONFIGS = Path(__file__).resolve().parents[2] / "src" / "gpuplan" / "data" / "models" / "configs"


def profile(fast: int) -> Callable[[Any], Any]:
    """``fast`` cases (derandomised) by default, ``fast * LONG_FACTOR`` random ones when long."""
    return settings(
        max_examples=fast * LONG_FACTOR if LONG else fast,
        derandomize=not LONG,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


# --- hostile values ------------------------------------------------------------------------------------

HOSTILE_NUMBERS: list[Any] = [
    0, -1, 1, 2, 3, 7, 2**31, 2**63, 10**12, 10**30, 10**400, -(10**400), 0.0, -0.0, 0.5, 1e-300, 1e308,
    float("inf"), float("-inf"), float("nan"), True, False,
]  # fmt: skip
HOSTILE_TEXT: list[str] = [
    "", " ", "0", "-1", "1e400", "nan", "inf", "-inf", "9" * 5000, "1_0", "0x10", "010", "1:30", "abc",
    "[red]x[/red]", "[/x]", "\n", "a\nb", "\x00", "../../etc/passwd", "/etc/passwd", "~", "é" * 50,
    "H100-SXM", "L4", "bf16", "fp8", "int4", "vllm", "meta-llama/Llama-3.1-8B", "x" * 300,
]  # fmt: skip
LEAF = st.one_of(
    st.sampled_from(HOSTILE_NUMBERS),
    st.sampled_from(HOSTILE_TEXT),
    st.none(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
VALUE = st.recursive(
    LEAF,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=6), kids, max_size=3)
    ),
    max_leaves=6,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a nested document (dict keys and list positions)."""
    found: list[tuple[Any, ...]] = [prefix] if prefix else []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for key, value in items:
        found += _paths(value, (*prefix, key))
    return found


@st.composite
def mutated(draw: st.DrawFn, seed: dict[str, Any]) -> Any:
    """``seed`` with 1-3 fields replaced, deleted or added; one case in ten is garbage."""
    if draw(st.integers(0, 9)) == 0:
        return draw(VALUE)
    doc = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(VALUE)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "", "model ", "__proto__"]))] = draw(VALUE)
    return doc


# --- config.json ---------------------------------------------------------------------------------------

SEED_CONFIGS = [
    "meta-llama__Llama-3.1-8B.json",
    "Qwen__Qwen3-30B-A3B.json",
    "mistralai__Mixtral-8x7B-v0.1.json",
    "deepseek-ai__DeepSeek-V3.json",
    "google__gemma-2-9b.json",
]


def _seed_config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / name).read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("name", [n for n in SEED_CONFIGS if (CONFIGS / n).exists()])
@profile(fast=60)
@given(data=st.data())
def test_config_json_parses_or_is_one_file_format_error(name: str, data: st.DataObject) -> None:
    config = data.draw(mutated(_seed_config(name)))
    try:
        spec = parse_hf_config(config, model_id="fuzz/model")
    except FileFormatError as exc:
        line = exc.one_line()
        assert line.startswith("config.json for fuzz/model") and "\n" not in line, line
        event("rejected")
        return
    event("parsed")
    assert isinstance(spec, ModelSpec) and spec.num_layers >= 1


# --- web API -------------------------------------------------------------------------------------------

WEB_SEEDS: dict[str, dict[str, Any]] = {
    "/api/recommend": {
        "model": "meta-llama/Llama-3.1-8B",
        "workload": {"input_tokens": 512, "output_tokens": 64, "rate_rps": 2},
        "sla": {"ttft_ms": 1000, "tpot_ms": 50},
        "hardware": {"gpus": ["L4", "H100-SXM"]},
    },
    "/api/predict": {
        "model": "meta-llama/Llama-3.1-8B",
        "hardware": {"gpu": "L40S", "count": 2},
        "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 8},
    },
    "/api/fit": {"model": "meta-llama/Llama-3.1-8B", "gpu": "L4", "dtype": "fp8", "context": 8192},
    "/api/simulate": {
        "model": "meta-llama/Llama-3.1-8B",
        "hardware": {"gpu": "H100-SXM", "count": 1},
        "workload": {
            "arrival": {"kind": "poisson", "rate_rps": 4},
            "input_tokens": {"kind": "fixed", "value": 256},
            "output_tokens": {"kind": "fixed", "value": 32},
            "num_requests": 40,
            "seed": 7,
        },
    },
    "/api/train-plan": {
        "model": "meta-llama/Llama-3.1-8B",
        "method": "lora",
        "tokens": 1e8,
        "seq_len": 2048,
        "gpus": ["H100-SXM"],
        "max_gpus": 4,
    },
}
WEB_SEEDS["/api/fit-config"] = {
    **WEB_SEEDS["/api/fit"],
    "model": "my/llama",
    "config_json": _seed_config("meta-llama__Llama-3.1-8B.json"),
}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.mark.parametrize("path", sorted(WEB_SEEDS))
@profile(fast=25)
@given(data=st.data())
def test_web_bodies_never_answer_5xx(client: TestClient, path: str, data: st.DataObject) -> None:
    body = data.draw(mutated(WEB_SEEDS[path]))
    content = json.dumps(body).encode()  # NaN and Infinity are written as Python writes them
    url = path.removesuffix("-config")
    answer = client.post(url, content=content, headers={"Content-Type": "application/json"})
    event(f"HTTP {answer.status_code}")
    assert answer.status_code < 500, (answer.status_code, answer.text[:300], body)
    if answer.status_code >= 400:
        error = answer.json()["error"]
        assert isinstance(error, str) and error and "\n" not in error, answer.text[:300]


# --- CLI flags -----------------------------------------------------------------------------------------

FLAG_VALUES = st.one_of(st.sampled_from(HOSTILE_TEXT), st.sampled_from([str(n) for n in HOSTILE_NUMBERS]))
CLI_SEEDS: dict[str, list[tuple[str, str]]] = {
    "fit": [
        ("--model", "meta-llama/Llama-3.1-8B"),
        ("--gpu", "L4"),
        ("--dtype", "fp8"),
        ("--context", "8192"),
    ],
    "predict": [
        ("--model", "meta-llama/Llama-3.1-8B"),
        ("--gpu", "L40S"),
        ("--count", "2"),
        ("--input-tokens", "512"),
        ("--output-tokens", "128"),
        ("--concurrency", "8"),
    ],
    "recommend": [
        ("--model", "meta-llama/Llama-3.1-8B"),
        ("--input-tokens", "512"),
        ("--output-tokens", "64"),
        ("--rate", "2"),
        ("--ttft-ms", "1000"),
        ("--tpot-ms", "50"),
        ("--gpus", "L4,H100-SXM"),
    ],
    "train-plan": [
        ("--model", "meta-llama/Llama-3.1-8B"),
        ("--method", "lora"),
        ("--tokens", "1e8"),
        ("--seq-len", "2048"),
        ("--gpus", "H100-SXM"),
        ("--max-gpus", "4"),
    ],
}
EXTRA_FLAGS = ["--tp", "--pp", "--count", "--kv-dtype", "--engine", "--utilization", "--seq-len", "--tokens"]


@st.composite
def cli_args(draw: st.DrawFn, command: str) -> list[str]:
    flags = dict(CLI_SEEDS[command])
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "add":
            flags[draw(st.sampled_from(EXTRA_FLAGS))] = draw(FLAG_VALUES)
        elif flags:
            name = draw(st.sampled_from(sorted(flags)))
            if action == "delete":
                del flags[name]
            else:
                flags[name] = draw(FLAG_VALUES)
    return [command, *(part for pair in flags.items() for part in pair), "--format", "json"]


@pytest.mark.parametrize("command", sorted(CLI_SEEDS))
@profile(fast=15)
@given(data=st.data())
def test_cli_flags_never_crash(invoke: Invoke, command: str, data: st.DataObject) -> None:
    args = data.draw(cli_args(command))
    run = invoke(*args)  # fails on an escaped exception or a traceback
    event(f"exit {run.exit_code}")
    if run.exit_code == 2 and run.stderr.startswith("Usage:"):
        return  # click refused the value; the console script makes that one line and exit 1 (main())
    assert run.exit_code in (0, 1, 2, 3), (run.exit_code, run.stderr, args)
    if run.exit_code == 0 or (run.exit_code == 2 and run.stdout.strip()):
        json.loads(run.stdout)  # an answer (exit 2: fit's "does not fit" is an answer too)
    else:
        assert run.error_line().startswith("error:"), run.stderr


# --- what the fuzzing found --------------------------------------------------------------------------


def test_a_body_key_holding_a_newline_is_named_on_one_line(client: TestClient) -> None:
    """Found by the long profile: ``{"\\n": null}`` gave a two-line 422 error."""
    answer = client.post("/api/recommend", json={"\n": None, "model": "m"})
    assert answer.status_code == 422
    assert answer.json()["error"] == r"workload: Field required; \n: Extra inputs are not permitted"
