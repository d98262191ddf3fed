"""``gpuplan tco`` through the CLI: its JSON contract (break_even_months among the fields), the price
basis it rents at, a recommend PLAN.json as input, and one-line errors naming the flag."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuplan.usecases.pricing import PRICE_DATE_ENV

Invoke = Callable[..., Any]


@pytest.fixture(autouse=True)
def _priced_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PRICE_DATE_ENV, "2026-12-03")


def _json(invoke: Invoke, *args: str | Path) -> Any:
    run = invoke("tco", *args, "--format", "json")
    assert run.exit_code == 0, run.output
    return json.loads(run.stdout)


def test_an_a100_rents_at_its_quote_and_breaks_even_as_by_hand(invoke: Invoke) -> None:
    out = _json(invoke, "--gpu", "A100-80GB-SXM", "--count", "8")
    assert out["rent_quote"]["provider"] == "CoreWeave" and out["rent_quote"]["usd_per_gpu_hour"] == 2.70
    assert out["purchase"]["usd_per_gpu"] == 10_000  # the catalog's 'roughly $10,000 chip' (CNBC)
    assert out["price_basis"]["key"] == "market-median"
    assert out["break_even_months"] == pytest.approx(
        13_500 / (2.70 * 0.7 * 730 - 0.4 * 0.7 * 1.3 * 0.12 * 730)
    )
    assert out["upfront_usd"] == pytest.approx(8 * 13_500) and out["cheaper"] == "own"
    aws = _json(invoke, "--gpu", "A100-80GB-SXM", "--provider", "AWS")
    assert aws["rent_quote"]["provider"] == "AWS" and aws["break_even_months"] < out["break_even_months"]


def test_flags_change_the_assumptions(invoke: Invoke) -> None:
    base = _json(invoke, "--gpu", "A100-80GB-SXM", "--usd-per-gpu-hour", "2.0")
    assert base["break_even_months"] == pytest.approx(13.63, abs=0.01)  # the articles' "about 14 months"
    idle = _json(invoke, "--gpu", "A100-80GB-SXM", "--usd-per-gpu-hour", "2.0", "--utilisation", "0.35")
    assert idle["break_even_months"] > 2 * base["break_even_months"] - 1
    assert idle["ownership"]["utilisation"] == 0.35 and idle["rent_quote"]["origin"] == "user override"


def test_a_recommend_answer_is_a_plan_to_price(invoke: Invoke, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    run = invoke("recommend", "--example", "--format", "json")
    plan.write_text(run.stdout, encoding="utf-8")
    out = _json(invoke, plan, "--purchase-usd", "15000")
    best = json.loads(run.stdout)["plans"][0]
    assert (out["gpu"], out["gpus"]) == (best["gpu"], best["count"])
    assert out["rent_quote"] == best["price_quote"] and out["purchase"]["provider"] is None


def test_a_disaggregated_plan_is_priced_with_both_pools(invoke: Invoke, tmp_path: Path) -> None:
    ask: tuple[str, ...] = ("recommend", "--model", "meta-llama/Llama-3.1-70B", "--rate", "20")
    ask += ("--input-tokens", "8000", "--output-tokens", "500", "--ttft-ms", "2000", "--tpot-ms", "40")
    ask += ("--gpus", "H200-SXM")
    run = invoke(*ask, "--layouts", "disaggregated", "--format", "json")
    assert run.exit_code == 0, run.output
    answer = json.loads(run.stdout)
    best = answer["plans"][0]
    assert best["layout_kind"] == "disaggregated"
    plan = tmp_path / "plan.json"
    plan.write_text(run.stdout, encoding="utf-8")
    out = _json(invoke, plan, "--purchase-usd", "30000")
    assert out["gpus"] == best["count"] == best["prefill"]["count"] + best["decode"]["count"]
    best["prefill"]["gpu"] = "H100-SXM"  # pools on two GPU types: one tco per type
    plan.write_text(json.dumps(answer), encoding="utf-8")
    two = invoke("tco", plan)
    assert two.exit_code != 0
    assert "pools on two GPU types (H100-SXM+H200-SXM); tco prices one type" in two.output


def test_flags_a_plan_file_would_ignore_are_refused(
    invoke: Invoke, user_error: Callable[..., str], tmp_path: Path
) -> None:
    """Review: ``tco PLAN.json --provider aws --count 8`` priced the plan as it was, silently."""
    plan = tmp_path / "plan.json"
    plan.write_text(invoke("recommend", "--example", "--format", "json").stdout, encoding="utf-8")
    line = user_error("tco", plan, "--provider", "AWS", "--count", "8")
    assert "--provider, --count would be ignored with PLAN.json" in line
    empty = tmp_path / "empty.json"
    doc = json.loads(plan.read_text(encoding="utf-8")) | {"plans": []}
    empty.write_text(json.dumps(doc), encoding="utf-8")
    assert "has no plan to price" in user_error("tco", empty)


@pytest.mark.parametrize(
    ("args", "start"),
    [
        ((), "error: give exactly one of PLAN.json and --gpu"),
        (
            ("--gpu", "A100-80GB-SXM", "--pue", "0.5"),
            "error: --pue 0.5: input should be greater than or equal to 1",
        ),
        (("--gpu", "A100-80GB-SXM", "--count", "0"), "error: --count must be a whole number >= 1"),
        (
            (
                "--gpu",
                "H800",
            ),
            "error: no on-demand quote for H800",
        ),
        (
            (
                "--gpu",
                "MI300X",
            ),
            "error: no purchase price for MI300X in the catalog",
        ),
    ],
)
def test_bad_input_is_one_line(user_error: Callable[..., str], args: tuple[str, ...], start: str) -> None:
    assert user_error("tco", *args).startswith(start)


def test_plot_draws_money_spent_and_the_break_even_month(invoke: Invoke, tmp_path: Path) -> None:
    """Issue 18 item 2: the break-even month with a plot."""
    pytest.importorskip("plotly")
    page = tmp_path / "tco.html"
    run = invoke("tco", "--gpu", "A100-80GB-SXM", "--count", "8", "--plot", str(page), "--format", "json")
    assert run.exit_code == 0, run.stderr
    out = json.loads(run.stdout)
    assert len(out["by_month"]) == 37 and out["by_month"][-1]["own_usd"] == pytest.approx(
        out["own_total_usd"]
    )
    html = page.read_text(encoding="utf-8")
    assert "break-even 10.0 months" in html and '"name":"rent"' in html and '"name":"own"' in html
