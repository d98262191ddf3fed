"""``results report``'s use case on runs written straight into a store: curves by load, CDFs from the
request rows, the deployment from the run or the flags, the predicted curve from the simulator, and
the notes and errors a user sees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import summarise
from gpuplan.adapters.catalog.loader import Catalog, load_catalog
from gpuplan.adapters.scenario_files.simulate import SimulateScenario
from gpuplan.adapters.store.database import Store
from gpuplan.adapters.store.records import RequestRecord
from gpuplan.core.errors import UserInputError
from gpuplan.usecases import results_report as rr
from gpuplan.usecases.results_report.model import CDF_POINTS, Deployment
from gpuplan.usecases.results_report.predict import GRID_POINTS, RATE_REQUESTS
from gpuplan.usecases.simulate import simulate_scenario

MODEL = "meta-llama/Llama-3.1-8B"
DEPLOYMENT = {"gpu": "H100-SXM", "model": MODEL, "tp": 1, "engine": "vllm"}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _records(n: int, ttft_ms: float, *, warmup: int = 0, output_tokens: int = 8) -> list[RequestRecord]:
    """``n`` requests, the i-th with TTFT ``ttft_ms + i`` and TPOT 2 ms over 8 tokens; the first
    ``warmup`` marked warm-up."""
    return [
        RequestRecord(
            index=i,
            scheduled_s=i * 0.05,
            sent_s=i * 0.05,
            done_s=i * 0.05 + 0.03,
            warmup=i < warmup,
            ttft_ms=ttft_ms + i,
            ttft_sched_ms=ttft_ms + i,
            e2e_ms=ttft_ms + i + 14.0,
            e2e_sched_ms=ttft_ms + i + 14.0,
            tpot_ms=2.0,
            itl_ms=(2.0,) * 7,
            input_tokens=64,
            output_tokens=output_tokens,
        )
        for i in range(n)
    ]


def _store_run(
    store: Store,
    run_id: str,
    load: dict[str, Any],
    records: list[RequestRecord],
    *,
    conditions: dict[str, Any] | None = None,
    kind: str = "serve",
    finished: bool = True,
) -> None:
    config = LoadConfig.model_validate(
        {"url": "http://127.0.0.1:1", "model": "m", "duration_s": 1.0, "input_tokens": 64, "output_tokens": 8}
        | load
    )
    store.create_run(run_id, kind, config.model_dump(mode="json"), conditions or {"host": "h"}, "0")
    store.add(run_id, records)
    if finished:
        store.finish_run(run_id, "completed", summarise(run_id, config, records).model_dump(mode="json"))


@pytest.fixture()
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    db = Store(url)
    _store_run(db, "rate-low", {"rate_rps": 8.0}, _records(8, 10.0))
    _store_run(db, "rate-high", {"rate_rps": 16.0}, _records(20, 30.0))
    _store_run(db, "conc-4", {"concurrency": 4}, _records(20, 20.0, warmup=5))
    _store_run(db, "burst-1", {"all_at_once": True, "num_prompts": 20}, _records(20, 50.0))
    return url


def test_runs_differing_only_in_load_form_one_curve_sorted_by_load(store: str, catalog: Catalog) -> None:
    report = rr.build_report(store, ["rate-high", "conc", "rate-low", "burst"], catalog)
    assert [(c.mode, [v.run.run_id for v in c.runs]) for c in report.curves] == [
        ("rate", ["rate-low", "rate-high"]),
        ("concurrency", ["conc-4"]),
    ]
    assert report.modes == ("rate", "concurrency")
    loads = {v.run.run_id: v.load for v in report.runs}
    assert loads["conc-4"] == 4.0 and loads["burst-1"] is None
    # the achieved rate: 8 and 20 sends within the 1 s window
    assert (loads["rate-low"], loads["rate-high"]) == pytest.approx((8.0, 20.0))
    assert any("burst-1" in n and "no load to plot" in n for n in report.notes)


def test_cdf_holds_every_measured_request_sorted_and_leaves_warmup_out(store: str, catalog: Catalog) -> None:
    report = rr.build_report(store, ["conc-4"], catalog)
    (view,) = report.runs
    assert view.ttft_cdf_ms == tuple(20.0 + i for i in range(5, 20))
    assert view.tpot_cdf_ms == (2.0,) * 15


def test_cdf_of_a_large_run_keeps_quantiles(catalog: Catalog, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'big.sqlite'}"
    _store_run(Store(url), "big", {"rate_rps": 4.0}, _records(1001, 0.0))
    (view,) = rr.build_report(url, ["big"], catalog).runs
    assert len(view.ttft_cdf_ms) == CDF_POINTS
    assert view.ttft_cdf_ms[0] == 0.0 and view.ttft_cdf_ms[-1] == 1000.0
    assert list(view.ttft_cdf_ms) == sorted(view.ttft_cdf_ms)


def test_without_a_deployment_the_report_says_how_to_add_one(store: str, catalog: Catalog) -> None:
    report = rr.build_report(store, ["rate-low", "rate-high"], catalog)
    assert all(c.predicted == () and c.deployment is None for c in report.curves)
    (note,) = report.notes
    assert "rate-low, rate-high record no GPU or model" in note and "--gpu GPU --model HF_ID" in note


def _direct(load: dict[str, Any], output_tokens: int = 8) -> float | None:
    """TTFT P50 of ``gpuplan simulate`` on the same deployment and workload, built by hand."""
    sc = SimulateScenario.model_validate(
        {
            "model": MODEL,
            "hardware": {"gpu": "H100-SXM", "count": 1},
            "engine": "vllm",
            "workload": {"input_tokens": 64, "output_tokens": output_tokens} | load,
            "arrival": {"num_requests": RATE_REQUESTS, "seed": 0},
        }
    )
    return simulate_scenario(sc, load_catalog(), base_dir=None).summary.ttft.p50_ms


def test_recorded_deployment_gives_the_simulated_curve(tmp_path: Path, catalog: Catalog) -> None:
    url = f"sqlite:///{tmp_path / 'dep.sqlite'}"
    db = Store(url)
    for name, rate in (("a", 2.0), ("b", 8.0)):
        recs = _records(int(rate), 10.0)
        _store_run(db, name, {"rate_rps": rate}, recs, conditions={"deployment": DEPLOYMENT})
    report = rr.build_report(url, ["a", "b"], catalog)
    (curve,) = report.curves
    assert report.notes == ()
    assert curve.deployment == Deployment(gpu="H100-SXM", model=MODEL)
    loads = [p.load for p in curve.predicted]
    assert {2.0, 8.0} <= set(loads) and loads == sorted(loads) and len(loads) == GRID_POINTS
    for view in curve.runs:
        assert view.predicted is not None and view.predicted.load == view.load
        assert view.predicted.latency_ms["ttft_ms"]["p50"] == _direct(
            {"scenario": "rate", "rate_rps": view.load}
        )
        # below saturation every arriving request leaves: output tokens/s = rate x 8 tokens
        assert view.predicted.output_tokens_per_s == pytest.approx(8 * (view.load or 0), rel=0.15)


def test_the_prediction_simulates_the_lengths_the_runs_measured(tmp_path: Path, catalog: Catalog) -> None:
    """Answers cut short by EOS (4 tokens of the 8 asked for): the simulator gets 4."""
    url = f"sqlite:///{tmp_path / 'eos.sqlite'}"
    _store_run(Store(url), "short", {"rate_rps": 4.0}, _records(4, 10.0, output_tokens=4))
    (view,) = rr.build_report(url, ["short"], catalog, deployment=DEPLOYMENT).runs
    assert view.predicted is not None
    assert view.predicted.latency_ms["ttft_ms"]["p50"] == _direct({"scenario": "rate", "rate_rps": 4.0}, 4)
    assert view.predicted.output_tokens_per_s == pytest.approx(4 * 4.0, rel=0.15)


def test_flags_override_and_complete_the_recorded_deployment(store: str, catalog: Catalog) -> None:
    flags = rr.deployment_flags(gpu="h100-sxm", model=MODEL, tp=2, engine="vLLM", weight_dtype="bfloat16")
    report = rr.build_report(store, ["conc-4"], catalog, deployment=flags)
    (curve,) = report.curves
    assert curve.deployment == Deployment(gpu="H100-SXM", model=MODEL, tp=2, engine="vllm")
    loads = [p.load for p in curve.predicted]
    assert 4.0 in loads and all(x == int(x) for x in loads)  # a closed loop simulates whole clients
    assert "H100-SXM tp2" in curve.label


def test_served_name_that_is_no_known_model_is_a_note(store: str, catalog: Catalog) -> None:
    report = rr.build_report(store, ["rate-low"], catalog, deployment={"gpu": "H100-SXM"})
    assert report.curves[0].predicted == ()
    assert any(n.startswith("no predicted curve for m 64->8 tokens") for n in report.notes)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"gpu": "H999"}, "--gpu: unknown GPU 'H999'"),
        ({"gpu": "H100-SXM", "engine": "vllmm"}, "--engine: unknown engine 'vllmm'"),
        ({"gpu": "H100-SXM", "weight_dtype": "bf17"}, "--weight-dtype: unknown"),
        ({"gpu": "H100-SXM", "tp": 0}, "--tp must be >= 1, got 0"),
    ],
)
def test_bad_deployment_flags_name_the_flag(
    store: str, catalog: Catalog, flags: dict[str, Any], message: str
) -> None:
    with pytest.raises(UserInputError, match="^" + message):
        rr.build_report(store, ["rate-low"], catalog, deployment=flags)


def test_bad_run_ids_point_at_results_list(store: str, catalog: Catalog, tmp_path: Path) -> None:
    with pytest.raises(UserInputError) as missing:
        rr.build_report(store, ["rate-low", "nope"], catalog)
    assert "no run matches 'nope'" in missing.value.one_line()
    assert "gpuplan results list" in missing.value.one_line()
    with pytest.raises(UserInputError, match="more than one run matches 'rate'"):
        rr.build_report(store, ["rate"], catalog)
    _store_run(Store(store), "gpu-run", {"rate_rps": 1.0}, [], kind="bench-gpu")
    with pytest.raises(UserInputError, match="is a bench-gpu run"):
        rr.build_report(store, ["gpu-run"], catalog)


def test_unfinished_runs_are_left_out_with_a_note(store: str, catalog: Catalog) -> None:
    _store_run(Store(store), "running-1", {"rate_rps": 1.0}, _records(3, 1.0), finished=False)
    report = rr.build_report(store, ["running-1", "rate-low", "rate-low"], catalog)
    assert [v.run.run_id for v in report.runs] == ["rate-low"]
    assert report.notes[0] == "run running-1 (running) has no summary yet and is left out"
    with pytest.raises(UserInputError, match="none of the runs named has finished"):
        rr.build_report(store, ["running-1"], catalog)


def test_runs_against_two_endpoints_make_two_curves_told_apart(tmp_path: Path, catalog: Catalog) -> None:
    url = f"sqlite:///{tmp_path / 'two.sqlite'}"
    db = Store(url)
    _store_run(db, "a1", {"rate_rps": 2.0}, _records(2, 1.0), conditions={"target": "http://127.0.0.1:1"})
    _store_run(db, "a2", {"rate_rps": 4.0}, _records(4, 1.0), conditions={"target": "http://127.0.0.1:1"})
    _store_run(db, "b1", {"rate_rps": 2.0}, _records(2, 1.0), conditions={"target": "http://127.0.0.1:2"})
    report = rr.build_report(url, ["a1", "b1", "a2"], catalog)
    assert [[v.run.run_id for v in c.runs] for c in report.curves] == [["a1", "a2"], ["b1"]]
    first, second = (c.label for c in report.curves)
    assert first.endswith("#1 (completions at http://127.0.0.1:1)")
    assert second.endswith("#2 (completions at http://127.0.0.1:2)")
    assert first.startswith("m 64->8 tokens, rate, deployment not recorded")
