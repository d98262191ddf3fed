"""plots: figures from real answers, offline HTML export, PNG export (or its one-line error)."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

pytest.importorskip("plotly")

from gpuplan.adapters.catalog.loader import Catalog, load_catalog
from gpuplan.adapters.models.registry import get_model, model_for_seq_len
from gpuplan.adapters.scenario_files.deployment import ScenarioFile
from gpuplan.core.errors import UserInputError
from gpuplan.core.recommend.request import Recommendation
from gpuplan.core.training.search import search_layouts
from gpuplan.data.bundled_calibration import default_training_calibration
from gpuplan.interfaces.plots import serving as plots
from gpuplan.interfaces.plots import training as plots_training
from gpuplan.usecases.fit import fit
from gpuplan.usecases.recommend import (
    SCALING_GPU_COUNTS,
    ScalingPoint,
    recommend_from_scenario,
    throughput_scaling,
)
from gpuplan.usecases.resolve import offers, scenario_from_mapping
from gpuplan.usecases.train import (
    TrainMemoryBar,
    TrainPlanRequest,
    TrainPlanResult,
    plan_training,
    train_memory_bars,
    training_job,
)

SCENARIO = {
    "model": "meta-llama/Llama-3.1-8B",
    "workload": {"input_tokens": 1024, "output_tokens": 128, "rate_rps": 4},
    "sla": {"ttft_ms": 2000, "tpot_ms": 80},
    "hardware": {"gpus": ["L4", "A10G", "L40S", "H100-SXM"], "max_gpus": 8},
}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def scenario() -> ScenarioFile:
    return scenario_from_mapping(SCENARIO)


@pytest.fixture(scope="module")
def rec(scenario: ScenarioFile, catalog: Catalog) -> Recommendation:
    return recommend_from_scenario(scenario, catalog)


def test_pareto_has_one_point_per_plan_coloured_by_gpu(rec: Recommendation) -> None:
    fig = plots.pareto_figure(rec, "usd_per_million_output_tokens", "tpot_ms")
    points = [t for t in fig.data if t.mode == "markers"]
    assert sum(len(t.x) for t in points) == len(rec.plans)
    assert [t.name for t in points] == list(dict.fromkeys(p.gpu for p in rec.plans))
    assert len({t.marker.color for t in points}) == len(points)
    assert fig.layout.xaxis.title.text == plots.AXIS_TITLES["usd_per_million_output_tokens"]
    front = next(t for t in fig.data if t.name == "Pareto front")
    cheapest = min(p.usd_per_million_output_tokens or 0 for p in rec.plans)
    assert front.x[0] == pytest.approx(cheapest)


def test_pareto_front_keeps_only_undominated_points() -> None:
    front = plots.pareto_front([(1, 5), (2, 3), (3, 4), (4, 1), (5, 2)])
    assert front == [(1, 5), (2, 3), (4, 1)]


def test_memory_bars_stack_the_breakdown_of_the_top_plans(rec: Recommendation) -> None:
    fig = plots.memory_figure(rec.plans)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [b.name for b in bars] == [name for _, name in plots.MEMORY_PARTS]
    top = rec.plans[: plots.MEMORY_MAX_PLANS]
    assert list(bars[0].y) == pytest.approx([p.memory_breakdown_gib.weights for p in top])
    assert fig.layout.barmode == "stack"


@pytest.fixture(scope="module")
def scaling(scenario: ScenarioFile, catalog: Catalog, rec: Recommendation) -> list[ScalingPoint]:
    return throughput_scaling(scenario, catalog, rec)


def test_throughput_scaling_predicts_each_top_gpu(rec: Recommendation, scaling: list[ScalingPoint]) -> None:
    assert scaling, "no layout fitted"
    assert {p.gpu for p in scaling} <= {p.gpu for p in rec.plans}
    assert all(p.output_tokens_per_s > 0 and p.gpus in SCALING_GPU_COUNTS for p in scaling)
    fig = plots.throughput_figure(scaling, [p.gpu for p in rec.plans])
    assert sum(len(t.x) for t in fig.data) == len(scaling)
    line = next(t for t in fig.data if t.name.startswith(f"{scaling[0].gpu} "))
    mine = [p for p in scaling if p.gpu == scaling[0].gpu]
    assert list(line.x) == [p.gpus for p in mine]
    assert list(line.y) == pytest.approx([p.output_tokens_per_s for p in mine])


def test_gpu_comparison_has_a_bar_per_gpu_and_metric(catalog: Catalog) -> None:
    fig = plots.gpu_comparison_figure(offers(catalog, ["L4", "H100-SXM"]))
    assert len(fig.data) == 4
    assert all(list(t.x) == ["L4", "H100-SXM"] for t in fig.data)


def test_fit_figure_stacks_to_the_breakdown(catalog: Catalog) -> None:
    result = fit(
        "meta-llama/Llama-3.1-8B",
        "L4",
        catalog,
        count=1,
        tp=None,
        pp=1,
        weight_dtype="bf16",
        kv_dtype=None,
        engine="vllm",
        context_tokens=4096,
        utilization=None,
    )
    fig = plots.fit_figure(result)
    assert sum(t.y[0] for t in fig.data) * 2**30 == pytest.approx(
        result.memory.weights_bytes
        + result.memory.activation_bytes
        + result.memory.overhead_bytes
        + result.memory.kv_pool_bytes
    )


def test_html_export_embeds_plotly_js_and_needs_no_network(
    rec: Recommendation, scaling: list[ScalingPoint], tmp_path: Path
) -> None:
    out = tmp_path / "plans.html"
    plots.write_recommendation_plot(out, rec, scaling)
    html = out.read_text(encoding="utf-8")
    assert "<script src=" not in html.replace('<script src="data:', "")
    assert "Plotly.newPlot" in html and len(html) > 1_000_000  # plotly.js itself is inside
    assert rec.plans[0].gpu in html


def test_other_suffixes_are_a_one_line_user_error(rec: Recommendation, tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match=r"must end in \.html or \.png"):
        plots.write_figure(plots.memory_figure(rec.plans), tmp_path / "plans.svg")


def test_unwritable_path_is_a_user_error(rec: Recommendation, tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="cannot write"):
        plots.write_figure(plots.memory_figure(rec.plans), tmp_path / "missing" / "plans.html")


def _png_possible() -> bool:
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return False
    return any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome", "chrome"))


@pytest.mark.skipif(not _png_possible(), reason="PNG export needs kaleido and a local Chromium")
def test_png_export_offline(rec: Recommendation, tmp_path: Path) -> None:
    out = tmp_path / "memory.png"
    plots.write_figure(plots.memory_figure(rec.plans), out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_png_without_a_browser_is_one_line(
    rec: Recommendation, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fig = plots.memory_figure(rec.plans)

    def no_browser(*_: object, **__: object) -> None:
        raise RuntimeError("Kaleido requires Google Chrome to be installed.\nmore detail")

    monkeypatch.setattr(type(fig), "write_image", no_browser)
    monkeypatch.setattr(importlib, "import_module", lambda _name: object())  # the one plots uses
    with pytest.raises(UserInputError) as info:
        plots.write_figure(fig, tmp_path / "memory.png")
    assert "\n" not in info.value.one_line()
    assert "Kaleido requires Google Chrome" in info.value.one_line()


TRAIN_REQUEST = TrainPlanRequest(
    model="meta-llama/Llama-3.1-8B",
    method="lora",
    tokens=1e8,
    seq_len=4096,
    gpus=("L40S", "H100-SXM"),
    max_gpus=8,
)


@pytest.fixture(scope="module")
def train_result(catalog: Catalog) -> TrainPlanResult:
    return plan_training(TRAIN_REQUEST, catalog)


def test_training_pareto_is_cost_vs_time_one_point_per_plan(train_result: TrainPlanResult) -> None:
    fig = plots_training.train_pareto_figure(train_result)
    points = [t for t in fig.data if t.mode == "markers"]
    assert sum(len(t.x) for t in points) == len(train_result.plans)
    assert [t.name for t in points] == list(dict.fromkeys(p.gpu for p in train_result.plans))
    assert len({t.marker.color for t in points}) == len(points)
    best = train_result.plans[0]
    first = next(t for t in points if t.name == best.gpu)
    assert first.x[0] == pytest.approx(best.cost.usd_by_price_kind["on_demand"])
    assert first.y[0] == pytest.approx(best.cost.wall_hours)
    front = next(t for t in fig.data if t.name == "Pareto front")
    assert front.x[0] == pytest.approx(min(p.cost.usd_by_price_kind["on_demand"] for p in train_result.plans))


@pytest.fixture(scope="module")
def train_bars(catalog: Catalog, train_result: TrainPlanResult) -> list[TrainMemoryBar]:
    return train_memory_bars(train_result, limit=plots.MEMORY_MAX_PLANS)


def test_training_memory_bars_are_the_plans_own_layouts(
    train_result: TrainPlanResult, train_bars: list[TrainMemoryBar]
) -> None:
    assert [(b.rank, b.gpu, b.gpus, b.layout) for b in train_bars] == [
        (rank, p.gpu, p.gpus, p.layout)
        for rank, p in enumerate(train_result.plans[: plots.MEMORY_MAX_PLANS], start=1)
    ]
    for bar, plan in zip(train_bars, train_result.plans, strict=False):
        assert bar.memory == plan.memory
        assert bar.memory.total_bytes / 2**30 == pytest.approx(plan.memory_gib_per_gpu)
        assert bar.memory.total_bytes / 2**30 <= bar.usable_gib


def test_training_plans_carry_the_searched_memory_outside_the_json(
    catalog: Catalog, train_result: TrainPlanResult
) -> None:
    model = model_for_seq_len(get_model(TRAIN_REQUEST.model), TRAIN_REQUEST.seq_len)
    job = training_job(TRAIN_REQUEST, model)
    for plan in train_result.plans[:2]:
        found = search_layouts(
            model, catalog.get_gpu(plan.gpu), job, plan.gpus, default_training_calibration()
        )
        assert found.candidates[0].layout.label() == plan.layout
        assert plan.memory == found.candidates[0].memory
        assert "memory" not in plan.model_dump(mode="json")
    assert all("memory" not in p for p in train_result.model_dump(mode="json")["plans"])


def test_training_memory_figure_stacks_the_bars(train_bars: list[TrainMemoryBar]) -> None:
    fig = plots_training.train_memory_figure(train_bars)
    stacked = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in stacked] == [name for _, name in plots_training.TRAIN_MEMORY_PARTS]
    assert list(stacked[0].y) == pytest.approx([b.memory.weights_bytes / 2**30 for b in train_bars])
    assert fig.layout.barmode == "stack"


def test_recommend_plot_draws_the_statistic_the_plans_were_sized_on(
    rec: Recommendation, scaling: list[ScalingPoint]
) -> None:
    """The page and ``recommend --plot`` alike: plans sized on P99 are drawn at their P99 (the table's
    column), with the axis saying so; mean-sized plans at their mean."""
    p99_plans = [
        p.model_copy(update={"sized_on": "p99", "ttft_p99_ms": 3 * (p.ttft_ms or 1)}) for p in rec.plans
    ]
    sized_on_p99 = rec.model_copy(update={"plans": p99_plans})
    for answer, field in ((rec, "ttft_ms"), (sized_on_p99, "ttft_p99_ms")):
        fig = plots.recommendation_figure(answer, scaling)
        drawn = sorted(
            y for t in fig.data if t.type == "scatter" and t.mode == "markers" and t.xaxis == "x" for y in t.y
        )
        assert drawn == pytest.approx(sorted(getattr(p, field) for p in answer.plans))
        assert fig.layout.yaxis.title.text == plots.AXIS_TITLES[field]
