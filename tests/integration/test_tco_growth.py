"""``gpuplan tco PLAN.json --load-growth X [--model M]``: the growth question answered by re-planning the
recorded workload at its recorded SLA on the plan's GPU, dtype and price basis (docs/json.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Invoke = Callable[..., Any]
RATE_RPS = 20.0
LIMITS = {"ttft_ms": 1000.0, "tpot_ms": 50.0}
RECOMMEND: tuple[str, ...] = (
    "recommend",
    "--model",
    "meta-llama/Llama-3.1-8B",
    "--input-tokens",
    "2048",
    "--output-tokens",
)
RECOMMEND += (
    "300",
    "--rate",
    f"{RATE_RPS:g}",
    "--ttft-ms",
    "1000",
    "--tpot-ms",
    "50",
    "--gpus",
    "L40S,H100-SXM",
)


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from typer.testing import CliRunner

    from gpuplan.interfaces.cli.app import app

    run = CliRunner().invoke(app, [*RECOMMEND, "--format", "json"])
    assert run.exit_code == 0, run.output
    path = tmp_path_factory.mktemp("growth") / "plan.json"
    path.write_text(run.stdout, encoding="utf-8")
    return path


def _tco(invoke: Invoke, *args: str | Path) -> Any:
    run = invoke("tco", *args, "--format", "json")
    assert run.exit_code == 0, run.stderr
    return json.loads(run.stdout)


def test_recommend_json_records_its_sla_once(plan_file: Path) -> None:
    plan = json.loads(plan_file.read_text(encoding="utf-8"))
    assert {k: v for k, v in plan["sla"].items() if v is not None} == LIMITS
    assert all("sla" not in p for p in plan["plans"])


def test_twice_the_rate_needs_at_least_the_gpus_and_at_most_twice_plus_a_replica(
    invoke: Invoke, plan_file: Path
) -> None:
    """Replicas scale with the rate: at 2R a replica's capacity c is unchanged, so ceil(2R/c) replicas,
    which is at least ceil(R/c) and at most 2 ceil(R/c); a re-search may change the layout, so allow one
    replica of the grown layout on top."""
    plan = json.loads(plan_file.read_text(encoding="utf-8"))
    answer = _tco(invoke, plan_file, "--load-growth", "2")
    g = answer["growth"]
    today, grown = g["today"], g["grown"]
    assert today["gpu"] == grown["gpu"] == plan["plans"][0]["gpu"] == answer["gpu"]
    assert today["gpus"] == plan["plans"][0]["count"]
    assert g["workload"]["rate_rps"] == pytest.approx(2 * RATE_RPS)
    assert g["workload"]["input_tokens"] == plan["workload"]["input_tokens"]
    assert today["gpus"] <= grown["gpus"] <= 2 * today["gpus"] + grown["tp"] * grown["pp"]
    assert grown["weight_dtype"] == today["weight_dtype"]
    assert answer["gpus"] == grown["gpus"] and g["extra_gpus"] == grown["gpus"] - today["gpus"]
    assert answer["price_basis"] == plan["price_basis"]
    assert answer["rent_quote"] == plan["plans"][0]["price_quote"]  # the same GPU on the same basis
    # upfront = purchase x (1 + server overhead) x GPUs, so the extra GPUs cost that many times the unit
    unit_usd = answer["purchase"]["usd_per_gpu"] * (1 + answer["ownership"]["server_overhead"])
    assert g["extra_upfront_usd"] == pytest.approx(g["extra_gpus"] * unit_usd)
    # upfront and monthly savings both scale with the GPU count: the break-even month does not move
    assert grown["break_even_months"] == pytest.approx(today["break_even_months"])
    assert answer["break_even_months"] == pytest.approx(grown["break_even_months"])


def test_growth_of_one_reproduces_the_plan_and_a_bigger_model_needs_more(
    invoke: Invoke, plan_file: Path
) -> None:
    plan = json.loads(plan_file.read_text(encoding="utf-8"))
    same = _tco(invoke, plan_file, "--load-growth", "1")["growth"]
    assert same["grown"]["gpus"] == same["today"]["gpus"] == plan["plans"][0]["count"]
    assert same["extra_gpus"] == 0
    bigger = _tco(invoke, plan_file, "--model", "meta-llama/Llama-3.1-70B")["growth"]
    assert bigger["grown"]["model"] == "meta-llama/Llama-3.1-70B"
    assert bigger["workload"]["rate_rps"] == pytest.approx(RATE_RPS)
    assert bigger["grown"]["gpus"] > bigger["today"]["gpus"]  # ~9x the weights at the same rate


def test_table_shows_both_plans_and_the_extra_gpus(invoke: Invoke, plan_file: Path) -> None:
    data = _tco(invoke, plan_file, "--load-growth", "2")["growth"]
    run = invoke("tco", plan_file, "--load-growth", "2")
    assert run.exit_code == 0, run.stderr
    assert "grown x2" in run.stdout and f"Buy {data['extra_gpus']:+d} {data['grown']['gpu']}" in run.stdout


def test_growth_errors_are_one_line_naming_the_flag(invoke: Invoke, plan_file: Path, tmp_path: Path) -> None:
    old = json.loads(plan_file.read_text(encoding="utf-8"))
    del old["sla"]  # a file written before plans recorded their SLA
    old_file = tmp_path / "old.json"
    old_file.write_text(json.dumps(old), encoding="utf-8")
    run = invoke("tco", old_file, "--load-growth", "2")
    assert run.exit_code != 0
    assert "records no sla" in run.error_line() and "--load-growth" in run.error_line()
    assert invoke("tco", old_file).exit_code == 0  # rent vs buy of the plan itself needs no SLA
    for bad in ("0", "-1", "1e9", "nan"):
        run = invoke("tco", plan_file, "--load-growth", bad)
        assert run.exit_code != 0 and run.error_line().startswith("error: --load-growth"), bad
    run = invoke("tco", "--gpu", "H100-SXM", "--count", "2", "--load-growth", "2")
    assert run.exit_code != 0 and "--load-growth" in run.error_line()


@pytest.mark.parametrize(
    "extra",
    [
        ("--confidence", "0.9"),
        ("--spec-method", "ngram", "--spec-tokens", "4", "--spec-acceptance", "0.7"),
        ("--layouts", "disaggregated", "--kv-transport", "tcp", "--kv-gbps", "25"),
    ],
    ids=["confidence", "speculative", "disaggregated-tcp"],
)
def test_growth_one_reproduces_a_plan_made_with_its_settings(
    invoke: Invoke, tmp_path: Path, extra: tuple[str, ...]
) -> None:
    """The re-plan keeps what the plan file records (confidence, speculation, layout kind and KV link):
    at x1 it is today's plan, so there is nothing to buy; both pools are counted."""
    run = invoke(*RECOMMEND, *extra, "--format", "json")
    assert run.exit_code == 0, run.output
    plan = tmp_path / "plan.json"
    plan.write_text(run.stdout, encoding="utf-8")
    best = json.loads(run.stdout)["plans"][0]
    out = _tco(invoke, plan, "--load-growth", "1")
    assert out["growth"]["extra_gpus"] == 0
    assert out["growth"]["today"]["gpus"] == out["growth"]["grown"]["gpus"] == best["count"]


def test_a_plan_the_file_cannot_reproduce_is_refused(invoke: Invoke, tmp_path: Path, plan_file: Path) -> None:
    answer = json.loads(plan_file.read_text(encoding="utf-8"))
    answer["plans"][0]["count"] *= 2  # as if made with a --calibration profile the file does not record
    answer["plans"][0]["replicas"] *= 2
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(answer), encoding="utf-8")
    run = invoke("tco", plan, "--load-growth", "2")
    assert run.exit_code != 0
    assert "re-planning its own load gives" in run.output and "Traceback" not in run.output
