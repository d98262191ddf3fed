"""The web API's price basis, as the CLI's ``--provider`` / ``--price-basis``: train-plan's body fields
``provider`` and ``price_basis``, a recommend scenario's ``prices.provider`` / ``prices.basis``. The
answers equal the CLI's, every plan is priced on the chosen basis, and a bad one is the CLI's one
line naming the field."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

from gpuplan.interfaces.web.app import create_app

Invoke = Callable[..., Any]
TRAIN = {
    "model": "meta-llama/Llama-3.1-8B",
    "method": "lora",
    "tokens": 1e8,
    "seq_len": 4096,
    "gpus": ["L40S", "H100-SXM"],
    "max_gpus": 8,
}
TRAIN_FLAGS: tuple[str, ...] = ("train-plan", "--model", "meta-llama/Llama-3.1-8B", "--method", "lora")
TRAIN_FLAGS += ("--tokens", "1e8", "--seq-len", "4096", "--gpus", "L40S,H100-SXM", "--max-gpus", "8")
MODEL = "meta-llama/Llama-3.1-8B"
RECOMMEND: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "workload": {"input_tokens": 2048, "output_tokens": 300, "rate_rps": 20},
    "sla": {"ttft_ms": 1000, "tpot_ms": 50},
    "hardware": {"gpus": ["L4", "L40S", "H100-SXM"]},
}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), raise_server_exceptions=False)


def _cli(invoke: Invoke, *args: str) -> Any:
    run = invoke(*args, "--format", "json")
    assert run.exit_code == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize(
    ("fields", "flags", "key"),
    [
        ({"provider": "AWS"}, ("--provider", "AWS"), "provider:aws"),
        ({"price_basis": "hyperscaler"}, ("--price-basis", "hyperscaler"), "class:hyperscaler"),
    ],
    ids=["provider", "class"],
)
def test_train_plan_prices_on_the_chosen_basis_like_the_cli(
    client: TestClient, invoke: Invoke, fields: dict[str, str], flags: tuple[str, str], key: str
) -> None:
    answer = client.post("/api/train-plan", json={**TRAIN, **fields})
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data == _cli(invoke, *TRAIN_FLAGS, *flags)
    assert data["price_basis"]["key"] == key
    providers = set(data["price_basis"]["providers"])
    quoted = [p["price_quote"] for p in data["plans"] if p["price_quote"] is not None]
    assert quoted and all(q["provider"] in providers for q in quoted)
    default = client.post("/api/train-plan", json=TRAIN).json()
    assert default["price_basis"]["key"] == "market-median" != key
    plots = client.post("/api/plots/train-plan", json={**TRAIN, **fields})
    assert plots.status_code == 200 and plots.json()["result"]["price_basis"]["key"] == key


def test_train_plan_bad_provider_is_the_cli_line_naming_the_field(client: TestClient, invoke: Invoke) -> None:
    answer = client.post("/api/train-plan", json={**TRAIN, "provider": "Nope"})
    assert answer.status_code == 400, answer.text
    cli = invoke(*TRAIN_FLAGS, "--provider", "Nope")
    assert cli.exit_code == 1
    line = cli.error_line().removeprefix("error: ")
    assert line.startswith("--provider 'Nope' is not a provider")
    assert answer.json() == {
        "error": line.replace("--provider", "provider", 1),
        "field": "provider",
        "exit_code": 1,
    }
    both = client.post("/api/train-plan", json={**TRAIN, "provider": "AWS", "price_basis": "hyperscaler"})
    assert both.status_code == 400 and both.json()["field"] == "provider"
    bad_class = client.post("/api/plots/train-plan", json={**TRAIN, "price_basis": "cheap"})
    assert bad_class.status_code == 400 and bad_class.json()["field"] == "price_basis"


def test_recommend_prices_section_is_the_basis_and_a_bad_one_names_its_field(
    client: TestClient, invoke: Invoke
) -> None:
    doc = {**RECOMMEND, "prices": {"provider": "AWS"}}
    answer = client.post("/api/recommend", json=doc)
    assert answer.status_code == 200, answer.text
    flags = ["recommend", "--model", MODEL, "--input-tokens", "2048", "--output-tokens", "300"]
    flags += ["--rate", "20", "--ttft-ms", "1000", "--tpot-ms", "50", "--gpus", "L4,L40S,H100-SXM"]
    cli = _cli(invoke, *flags, "--provider", "AWS")
    assert answer.json()["price_basis"] == cli["price_basis"]
    assert answer.json()["plans"] == cli["plans"]
    assert all(p["price_quote"]["provider"] == "AWS" for p in cli["plans"])
    bad = client.post("/api/plots/recommend", json={**RECOMMEND, "prices": {"provider": "Nope"}})
    assert bad.status_code == 400, bad.text
    assert bad.json()["field"] == "prices.provider"
    assert bad.json()["error"].startswith("prices.provider 'Nope' is not a provider in the catalog")
