"""Prices on one basis through the CLI (issue 18 item 1): every plan of one answer priced from the same
basis and showing its quote, ``--provider`` / ``--price-basis`` changing the basis and the ranking, a
GPU the basis does not quote saying so (and a ``--catalog`` price fixing it), stale flags, bad flags,
and the JSON contract read back."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuplan.core.recommend.request import Recommendation
from gpuplan.data.price_providers import price_providers
from gpuplan.usecases.pricing import PRICE_DATE_ENV

Invoke = Callable[..., Any]

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "docs" / "playbooks" / "inputs" / "04-fleet-tiers.yaml"
QUOTE_KEYS = [
    "provider",
    "kind",
    "usd_per_gpu_hour",
    "as_of",
    "source_url",
    "stale",
    "origin",
    "providers_quoting",
]


@pytest.fixture(autouse=True)
def _priced_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PRICE_DATE_ENV, "2026-12-03")


def _json(invoke: Invoke, *args: str | Path) -> Any:
    run = invoke(*args, "--format", "json")
    assert run.exit_code == 0, run.output
    return json.loads(run.stdout)


def _same_basis(answer: dict[str, Any]) -> set[str]:
    """Every plan's quote comes from a provider of the answer's basis; the providers used."""
    members = set(answer["price_basis"]["providers"])
    used = {p["price_quote"]["provider"] for p in answer["plans"]}
    assert used <= members, (used, members)
    assert all(list(p["price_quote"]) == QUOTE_KEYS for p in answer["plans"])
    for p in answer["plans"]:  # a disaggregated plan: its decode pool is priced from the plan's quote
        gpus = p["decode"]["count"] if p["decode"] else p["count"]
        pools = p["prefill"]["usd_per_hour"] if p["prefill"] else 0.0
        assert p["price_quote"]["usd_per_gpu_hour"] * gpus + pools == pytest.approx(p["usd_per_hour"])
    return used


def test_the_example_is_priced_on_one_named_basis_and_provider_changes_it(invoke: Invoke) -> None:
    default = _json(invoke, "recommend", "--example")
    assert default["price_basis"]["key"] == "market-median"
    assert default["price_basis"]["providers"] == sorted(
        (p.name for p in price_providers() if p.market_median), key=str.casefold
    )
    assert not {"AWS", "Azure", "GCP"} & _same_basis(default)
    aws = _json(invoke, "recommend", "--example", "--provider", "aws")
    assert aws["price_basis"]["key"] == "provider:aws" and _same_basis(aws) == {"AWS"}
    table = invoke("recommend", "--example").stdout
    assert "Basis market-median: market median of the latest quotes of" in table
    assert "MI300X: TensorWave on-demand $1.50/GPU-h, as of 2026-05-18 STALE (older than 180 days)" in table


def test_the_ranking_changes_with_the_basis(invoke: Invoke) -> None:
    """Among the GPU clouds MI300X at TensorWave's $1.50 wins (6 x $1.50 = $9/h); on AWS, which rents no
    MI300X, the H100-SXM at $6.88 (after its June 2025 cut) wins; the hyperscalers' median prices H100-SXM
    at GCP's $10.98 and puts it below the H200-SXM (GCP $10.44)."""
    market = _json(invoke, "recommend", "--example")
    aws = _json(invoke, "recommend", "--example", "--provider", "AWS")
    hyper = _json(invoke, "recommend", "--example", "--price-basis", "hyperscaler")
    assert market["plans"][0]["gpu"] == "MI300X" and market["plans"][0]["usd_per_hour"] == pytest.approx(9.0)
    best_aws = aws["plans"][0]  # one GPU type in both pools when disaggregated: count x $6.88
    assert best_aws["gpu"] == "H100-SXM" and best_aws["usd_per_hour"] == pytest.approx(
        best_aws["count"] * 6.88
    )
    assert hyper["price_basis"]["key"] == "class:hyperscaler" and _same_basis(hyper) <= {
        "AWS",
        "Azure",
        "GCP",
    }

    def order(answer: dict[str, Any]) -> list[str]:
        return list(dict.fromkeys(p["gpu"] for p in answer["plans"]))

    assert order(market).index("H100-SXM") < order(market).index("H200-SXM")
    assert order(hyper).index("H200-SXM") < order(hyper).index("H100-SXM")


def test_a_gpu_without_a_quote_on_the_basis_says_so_and_a_catalog_price_fixes_it(
    invoke: Invoke, tmp_path: Path
) -> None:
    args: tuple[str, ...] = (
        "recommend",
        "--model",
        "meta-llama/Llama-3.1-8B",
        "--input-tokens",
        "512",
        "--output-tokens",
        "128",
    )
    args += ("--rate", "5", "--tpot-ms", "50", "--gpus", "H800,H100-SXM")
    bare = _json(invoke, *args)
    assert {p["gpu"] for p in bare["plans"]} == {"H100-SXM"}
    [h800] = [r for r in bare["rejected"] if r["gpu"] == "H800"]
    assert h800["kind"] == "price" and "no on-demand quote for H800" in h800["reason"]
    assert "--catalog" in h800["reason"]
    assert "$ -" not in invoke(*args).stdout
    mine = tmp_path / "h800.yaml"
    mine.write_text(
        "prices:\n  - {gpu: H800, kind: on_demand, provider: MyCloud, usd: 2.0, as_of: 2026-11-30,\n"
        "     source_url: https://example.com/contract}\n",
        encoding="utf-8",
    )
    priced = _json(invoke, *args, "--catalog", mine)
    [plan] = [p for p in priced["plans"] if p["gpu"] == "H800"][:1]
    assert plan["price_quote"] == {
        "provider": "MyCloud",
        "kind": "on_demand",
        "usd_per_gpu_hour": 2.0,
        "as_of": "2026-11-30",
        "source_url": "https://example.com/contract",
        "stale": False,
        "origin": "user catalog",
        "providers_quoting": 1,
    }


def test_stale_flags_follow_the_pricing_date(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = {p["gpu"]: p["price_quote"]["stale"] for p in _json(invoke, "recommend", "--example")["plans"]}
    assert stale["MI300X"] and not stale["H100-SXM"]  # 2026-05-18 is 199 days before 2026-12-03
    monkeypatch.setenv(PRICE_DATE_ENV, "2026-06-01")
    assert not _json(invoke, "recommend", "--example")["plans"][0]["price_quote"]["stale"]


def test_the_json_contract_reads_back(invoke: Invoke) -> None:
    raw = _json(invoke, "recommend", "--example")
    keys = list(raw)
    assert keys.index("price_basis") == keys.index("objective") + 1
    assert Recommendation.model_validate(raw).model_dump(mode="json") == raw


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("--provider", "nope"),
            "error: --provider 'nope' is not a provider in the catalog; valid: AWS, Azure",
        ),
        (("--price-basis", "cheap"), "error: --price-basis 'cheap' is not one of market-median, hyperscaler"),
        (
            ("--provider", "AWS", "--price-basis", "specialist"),
            "error: --provider and --price-basis both choose",
        ),
    ],
)
def test_bad_basis_flags_are_one_line_errors(
    user_error: Callable[..., str], args: tuple[str, ...], expected: str
) -> None:
    assert user_error("recommend", "--example", *args).startswith(expected)


def test_train_plan_prices_on_the_basis_and_by_cost_rejects_the_unquoted(invoke: Invoke) -> None:
    args: tuple[str, ...] = (
        "train-plan",
        "--model",
        "Qwen/Qwen2.5-7B-Instruct",
        "--method",
        "lora",
        "--tokens",
        "1e8",
    )
    args += ("--seq-len", "2048", "--gpus", "H800,H100-SXM", "--max-gpus", "2")
    by_time = _json(invoke, *args)
    assert by_time["price_basis"]["key"] == "market-median"
    h800 = [p for p in by_time["plans"] if p["gpu"] == "H800"]
    assert h800 and all(p["price_quote"] is None and "no on-demand quote" in p["price_missing"] for p in h800)
    assert "no quote" in invoke(*args).stdout
    by_cost = _json(invoke, *args, "--objective", "cost")
    assert {p["gpu"] for p in by_cost["plans"]} == {"H100-SXM"}
    assert any(name == "H800" and "no on-demand quote" in why for name, why in by_cost["rejected"])
    aws = _json(invoke, *args, "--objective", "cost", "--provider", "AWS")
    assert {p["price_quote"]["provider"] for p in aws["plans"]} == {"AWS"}


def test_fleet_takes_the_basis_flags_and_refuses_two_bases(
    invoke: Invoke, tmp_path: Path, user_error: Callable[..., str]
) -> None:
    plan = _json(invoke, "fleet", FLEET, "--price-basis", "hyperscaler")
    assert plan["price_basis"]["key"] == "class:hyperscaler"
    assert {p["plan"]["price_quote"]["provider"] for p in plan["pools"]} <= {"AWS", "Azure", "GCP"}
    with_provider = tmp_path / "fleet.yaml"
    with_provider.write_text(FLEET.read_text(encoding="utf-8") + "price_provider: AWS\n", encoding="utf-8")
    line = user_error("fleet", with_provider, "--provider", "Lambda")
    assert "--provider and the fleet file's price_provider both choose the price basis" in line
