"""``train-plan``'s Why: each line follows from the plans' own numbers (step time, wall time, cost per
run, memory, layout, the parts of the step), in the use case's result, its JSON and its table."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuplan.adapters.catalog.loader import load_catalog
from gpuplan.interfaces.cli.app import app
from gpuplan.usecases.train import TrainPlanRequest, TrainPlanResult, plan_training
from gpuplan.usecases.train_why import OVERHEAD_HINTS, explain_training, hours, money
from gpuplan.usecases.training_plan import TrainPlan

MODEL = "meta-llama/Llama-3.1-8B"
GPUS = ("H100-SXM", "A100-80GB-SXM")


def _plan(objective: str = "time", deadline_hours: float | None = None) -> TrainPlanResult:
    req = TrainPlanRequest(
        model=MODEL,
        tokens=1e9,
        seq_len=4096,
        gpus=GPUS,
        objective=objective,
        deadline_hours=deadline_hours,
    )
    return plan_training(req, load_catalog())


@pytest.fixture(scope="module")
def by_time() -> TrainPlanResult:
    return _plan()


def _name(p: TrainPlan) -> str:
    return f"{p.gpus}x {p.gpu}"


def test_why_names_the_winner_and_its_margin_over_the_next_plan(by_time: TrainPlanResult) -> None:
    best, second = by_time.plans[:2]
    why = by_time.why
    assert why[0].startswith(
        f"Best: {_name(best)} trains the 1e+09 tokens in {hours(best.cost.wall_hours)} h"
    )
    assert f"{money(best.cost.usd_by_price_kind['on_demand'])} on demand" in why[0]
    assert "ranked by wall time" in why[0]
    # one job, one global batch: every plan's tokens per step are the same, so the ratio of step times
    # is the ratio of wall times (the Why says so)
    ratio = second.step.step_time_s / best.step.step_time_s
    assert second.cost.wall_hours / best.cost.wall_hours == pytest.approx(ratio, rel=1e-9)
    versus = next(line for line in why if line.startswith(f"Against {_name(second)} "))
    assert f"({ratio:.2f}x the time per step" in versus and ratio >= 1.0
    mine, theirs = (p.cost.usd_by_price_kind["on_demand"] for p in (best, second))
    assert f"cost per run {money(mine)} vs {money(theirs)}" in versus
    other = next(p for p in by_time.plans if p.gpu != best.gpu)
    assert any(line.startswith(f"Against {_name(other)} ") for line in why)


def test_why_memory_layout_and_limit_follow_from_the_winner(by_time: TrainPlanResult) -> None:
    best = by_time.plans[0]
    free_gib = best.usable_gib_per_gpu - best.memory_gib_per_gpu
    assert 0 < free_gib < best.usable_gib_per_gpu
    memory = next(line for line in by_time.why if line.startswith("Memory headroom"))
    assert f"{best.memory_gib_per_gpu:.1f} of {best.usable_gib_per_gpu:.1f} GiB" in memory
    assert f"{free_gib:.1f} GiB ({free_gib / best.usable_gib_per_gpu:.0%}) free" in memory
    layout = next(line for line in by_time.why if line.startswith("Layout:"))
    assert f"({best.layout})" in layout
    dp = best.parallel.dp
    assert (f"{dp}-way data parallel" in layout) == (dp > 1)
    assert f"ZeRO stage {best.parallel.zero_stage}" in layout
    limit = next(line for line in by_time.why if line.startswith("Limit:"))
    assert f"compute is {best.step.compute_s / best.step.step_time_s:.0%} of the step" in limit


def test_why_limit_names_the_largest_overhead_when_compute_is_not_most_of_the_step(
    by_time: TrainPlanResult,
) -> None:
    """A step of 1 s compute and 3 s exposed data-parallel traffic is communication-bound: 25% compute,
    the data-parallel part 75% of the step, and its remedy named."""
    best = by_time.plans[0]
    step = best.step.model_copy(
        update={
            "compute_s": 1.0,
            "dp_comm_exposed_s": 3.0,
            "mp_comm_exposed_s": 0.0,
            "bubble_s": 0.0,
            "optimizer_s": 0.0,
            "dequant_s": 0.0,
            "step_time_s": 4.0,
        }
    )
    comm_bound = best.model_copy(update={"step": step})
    why = explain_training([comm_bound], tokens=1e9, objective="time", deadline_hours=None)
    limit = next(line for line in why if line.startswith("Limit:"))
    assert "compute is 25% of the step; exposed comm, data parallel takes 3 s (75%)" in limit
    assert OVERHEAD_HINTS["exposed comm, data parallel"] in limit
    assert not any(line.startswith("Against") for line in why)  # one plan: nothing to beat


def test_why_by_cost_names_the_fastest_and_the_deadline_slack() -> None:
    deadline_h = 24.0
    result = _plan(objective="cost", deadline_hours=deadline_h)
    best = result.plans[0]
    assert "ranked by on-demand cost per run" in result.why[0]
    fastest = min(result.plans, key=lambda p: p.cost.wall_hours)
    assert fastest is not best  # the cheapest run here is a few GPUs for longer
    assert any(line.startswith(f"Fastest shown: {_name(fastest)} ") for line in result.why)
    spare_h = deadline_h - best.cost.wall_hours
    assert (
        f"Deadline: {hours(best.cost.wall_hours)} h of the 24 h allowed ({hours(spare_h)} h to spare)."
        in result.why
    )


def test_train_plan_json_and_table_carry_the_why(by_time: TrainPlanResult) -> None:
    flags = ["train-plan", "--model", MODEL, "--tokens", "1e9", "--seq-len", "4096", "--gpus", ",".join(GPUS)]
    as_json = CliRunner().invoke(app, [*flags, "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    assert data["why"] == by_time.why
    assert data["plans"][0]["usable_gib_per_gpu"] == pytest.approx(by_time.plans[0].usable_gib_per_gpu)
    table = CliRunner(env={"COLUMNS": "400"}).invoke(app, flags)
    assert table.exit_code == 0, table.output
    assert "Why" in table.stdout and by_time.why[0] in table.stdout
