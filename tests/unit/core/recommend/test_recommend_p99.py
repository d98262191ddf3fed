"""``recommend`` with P99 limits: plans sized with the serving simulator (issue 3, capacity search)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.errors import UserInputError
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.recommend import confirm, recommend, tail
from gpuplan.core.recommend.confirm import run_at
from gpuplan.core.recommend.request import GpuOffer, Plan, Recommendation, SearchSpace
from gpuplan.core.recommend.search import one_replica
from gpuplan.core.recommend.tail import FINALISTS
from gpuplan.core.sim.capacity import offline_requests_per_s
from gpuplan.core.sim.metrics import SimSummary
from gpuplan.core.sim.tail_model import tail_estimate
from gpuplan.core.sla import Sla
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases import resolve
from gpuplan.usecases.pricing import price_basis

AWS = price_basis(default_catalog(), provider="AWS")
"""Priced on AWS, the one provider that quotes every GPU these tests use (L4, A10G, L40S, A100, H100)."""
TARGET = Workload(scenario="rate", input_tokens=512, output_tokens=128, rate_rps=12)
CAL = default_calibration()
TOGETHER = SearchSpace(layout_kinds=("aggregated",))
"""Aggregated replicas: the tail model and the replica search these tests are about (disaggregated
plans under P99 limits: test_disaggregated_p99.py)."""


@pytest.fixture(scope="module")
def model() -> ModelSpec:
    return get_model("meta-llama/Llama-3.1-8B")


@pytest.fixture(scope="module")
def offers() -> list[GpuOffer]:
    return resolve.offers(default_catalog(), ["L4"], basis=AWS)


def _rec(model: ModelSpec, offers: list[GpuOffer], **limits: float) -> Recommendation:
    return recommend(model, offers, TARGET, sla=Sla(**limits), space=TOGETHER, cal=CAL)


def test_p99_plans_meet_their_limits_at_the_target_load(model: ModelSpec, offers: list[GpuOffer]) -> None:
    rec = _rec(model, offers, ttft_p99_ms=1500, tpot_p99_ms=80)
    assert rec.plans
    for p in rec.plans:
        assert p.sized_on == "p99"
        assert p.ttft_p99_ms is not None and p.ttft_p99_ms <= 1500
        assert p.tpot_p99_ms is not None and p.tpot_p99_ms <= 80
        capacity = p.p99_capacity_rps_per_replica or 0.0
        assert p.layout.replicas == math.ceil(12 / capacity)  # the fewest replicas whose rate each can hold
    assert any("serving simulator" in line for line in rec.assumptions)


def test_tighter_p99_never_needs_fewer_gpus(model: ModelSpec, offers: list[GpuOffer]) -> None:
    loose = _rec(model, offers, tpot_p99_ms=120).plans[0]
    tight = _rec(model, offers, tpot_p99_ms=60).plans[0]
    assert tight.layout.num_gpus >= loose.layout.num_gpus and (tight.tpot_p99_ms or 0) <= 60


def test_mean_limits_alone_are_not_simulated(model: ModelSpec, offers: list[GpuOffer]) -> None:
    plan = _rec(model, offers, tpot_ms=80).plans[0]
    assert plan.sized_on == "mean" and plan.ttft_p99_ms is None


def test_p99_needs_a_rate(model: ModelSpec, offers: list[GpuOffer]) -> None:
    closed = Workload(scenario="concurrency", input_tokens=512, output_tokens=128, concurrency=16)
    with pytest.raises(UserInputError, match="--rate"):
        recommend(model, offers, closed, sla=Sla(ttft_p99_ms=1000), cal=CAL)


def test_every_gpu_type_is_sized_and_the_leaders_are_simulated(model: ModelSpec) -> None:
    """No shortlist: every GPU type gets a P99 plan (none is left out as 'ranks below'), and the
    leading plans' P99s come from a simulator run that meets the limits."""
    many = resolve.offers(default_catalog(), ["L4", "A10G", "L40S", "A100-80GB-SXM", "H100-SXM"], basis=AWS)
    rec = recommend(
        model,
        many,
        TARGET,
        sla=Sla(tpot_p99_ms=80),
        space=TOGETHER.model_copy(update={"p99_gpu_types": 2}),
        cal=CAL,
    )
    sized = {p.gpu for p in rec.plans} | {r.gpu for r in rec.rejected if r.reason.startswith("feasible")}
    assert sized == {o.gpu.id for o in many}
    assert not any("re-sized on simulated P99s" in r.reason for r in rec.rejected)
    for p in rec.plans:
        assert p.sized_on == "p99" and (p.tpot_p99_ms or 0) <= 80


def test_p99_sizing_reports_progress(model: ModelSpec, offers: list[GpuOffer]) -> None:
    seen: list[float] = []
    recommend(model, offers, TARGET, sla=Sla(tpot_p99_ms=80), progress=seen.append, cal=CAL)
    assert seen and seen == sorted(seen) and seen[-1] == 1.0
    seen.clear()
    recommend(model, offers, TARGET, sla=Sla(tpot_ms=80), progress=seen.append, cal=CAL)
    assert not seen  # mean limits are not simulated


FIVE_GPUS = ["L4", "A10G", "L40S", "A100-80GB-SXM", "H100-SXM"]


def _sources(model: ModelSpec, sla: Sla, rec: Recommendation) -> list[tuple[Plan, str, bool]]:
    """Each plan listed, its P99 source, and whether its P99s are what they say: a simulator plan's a
    run at its share of the target as long as its confirmation ran (``steady_run_at``), a tail-model
    plan's the tail model's at its share; and for a simulator plan whether a replica fewer misses."""
    by_gpu = {o.gpu.id: o for o in resolve.offers(default_catalog(), FIVE_GPUS, basis=AWS)}
    out: list[tuple[Plan, str, bool]] = []
    for p in rec.plans:
        replica = one_replica(model, by_gpu[p.gpu].gpu, p.layout, TARGET, CAL)
        share = 12 / p.layout.replicas
        if p.p99_source == "simulator":
            offline = offline_requests_per_s(replica, confirm.spec(TARGET, 1.0))
            summary, why = confirm.steady_run_at(replica, TARGET, share, sla, offline)
            assert why is None and (p.ttft_p99_ms, p.tpot_p99_ms) == (
                summary.ttft.p99_ms,
                summary.tpot.p99_ms,
            )
            fewer = (
                p.layout.replicas > 1
                and run_at(replica, TARGET, 12 / (p.layout.replicas - 1), sla)[1] is not None
            )
            out.append((p, "simulator", fewer or p.layout.replicas == 1))
        else:
            est = tail_estimate(replica, input_tokens=512, output_tokens=128, rate_rps=share)
            assert (p.ttft_p99_ms, p.tpot_p99_ms) == (est.ttft_p99_ms, est.tpot_p99_ms)
            out.append((p, str(p.p99_source), False))
    return out


def test_every_plan_listed_carries_simulated_p99s(model: ModelSpec) -> None:
    """``p99_source``: every plan listed is simulated at its share of the target; the best plans of the
    ``FINALISTS`` leading GPU types at the fewest replicas that pass (a replica fewer misses), and the
    explanation says so."""
    sla = Sla(ttft_p99_ms=1500, tpot_p99_ms=80)
    offers = resolve.offers(default_catalog(), FIVE_GPUS, basis=AWS)
    rec = recommend(model, offers, TARGET, sla=sla, space=TOGETHER, cal=CAL)
    listed = _sources(model, sla, rec)
    assert len(listed) > FINALISTS and {source for _, source, _ in listed} == {"simulator"}
    leaders = list(dict.fromkeys(p.gpu for p in rec.plans))[:FINALISTS]
    for gpu in leaders:
        assert next(fewest for p, _, fewest in listed if p.gpu == gpu)
    assert "simulated P99 TTFT" in " ".join(rec.explanation)


def test_plans_past_the_simulation_bound_keep_the_tail_models_p99s(
    model: ModelSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the simulator calls bounded at the finalists, the leaders are simulated and the other plans
    listed carry the tail model's P99s at their share."""
    monkeypatch.setattr(tail, "MAX_CONFIRMED", FINALISTS)
    sla = Sla(ttft_p99_ms=1500, tpot_p99_ms=80)
    offers = resolve.offers(default_catalog(), FIVE_GPUS, basis=AWS)
    rec = recommend(model, offers, TARGET, sla=sla, space=TOGETHER, cal=CAL)
    sources = [source for _, source, _ in _sources(model, sla, rec)]
    assert set(sources) == {"simulator", "tail model"} and sources.count("simulator") <= FINALISTS


def test_a_checked_plan_that_misses_at_its_count_is_demoted() -> None:
    """``confirm.check`` runs a plan once at its count: a count whose run misses the limits demotes the
    plan one replica (re-sized on the tail model), and a count that passes is confirmed there with that
    run's P99s, no fewer replicas tried."""
    model = get_model("meta-llama/Llama-3.1-8B")
    l4 = resolve.offers(default_catalog(), ["L4"], basis=AWS)
    best = _rec(model, l4, ttft_p99_ms=1500, tpot_p99_ms=80).plans[0]
    replica = one_replica(model, l4[0].gpu, best.layout, TARGET, CAL)
    sla = Sla(ttft_p99_ms=1500, tpot_p99_ms=80)
    base = confirm.Candidate(best, replica, l4[0])
    for replicas in (best.layout.replicas, best.layout.replicas + 1):
        cand = confirm.Candidate(
            confirm.on_tail_model(base, replicas, 12 / replicas, TARGET, CAL), replica, l4[0]
        )
        checked = confirm.check(cand, TARGET, sla, SearchSpace(), CAL)
        assert isinstance(checked, confirm.Candidate) and checked.confirmed
        assert checked.plan.layout.replicas == replicas and checked.plan.p99_source == "simulator"
    assert best.layout.replicas > 1  # premise: one replica fewer exists and misses
    fewer = best.layout.replicas - 1
    cand = confirm.Candidate(confirm.on_tail_model(base, fewer, 12 / fewer, TARGET, CAL), replica, l4[0])
    demoted = confirm.check(cand, TARGET, sla, SearchSpace(), CAL)
    assert isinstance(demoted, confirm.Candidate) and not demoted.confirmed
    assert (demoted.plan.layout.replicas, demoted.misses_at) == (best.layout.replicas, fewer)


def test_mean_sized_plans_have_no_p99_source(model: ModelSpec, offers: list[GpuOffer]) -> None:
    assert all(p.p99_source is None for p in _rec(model, offers, tpot_ms=80).plans)


def test_replica_search_walks_to_the_fewest_passing_count() -> None:
    """``_fewest_passing`` from a count that passes: down one at a time to the fewest, saying whether a
    count below was seen to miss; stopped by the floor; None when still passing three counts down."""
    runs: list[int] = []
    summary = cast(SimSummary, object())

    def judge_from(fewest: int) -> Callable[[int], SimSummary | str]:
        def judge(replicas: int) -> SimSummary | str:
            runs.append(replicas)
            return summary if replicas >= fewest else "misses"

        return judge

    assert confirm._fewest_passing(judge_from(4), 5, summary, 1) == (4, summary, True) and runs == [4, 3]
    assert confirm._fewest_passing(judge_from(1), 2, summary, 2) == (2, summary, False)
    assert confirm._fewest_passing(judge_from(1), 1, summary, 1) == (1, summary, False)
    assert confirm._fewest_passing(judge_from(1), 9, summary, 1) is None


def test_a_plan_near_saturation_is_judged_on_a_long_run() -> None:
    """Llama-3.1-8B fp8 on one MI300X at 20 req/s of 2,048/300 tokens runs at ~1.0 of its analytic
    offline rate: an 800-request run reads P99 TPOT ~46 ms, a 20,000-request run ~73 ms (the queue's
    steady state). At a 65 ms limit one replica must not pass; at 100 ms it does, reporting the long run."""
    model = get_model("meta-llama/Llama-3.1-8B")
    target = Workload(scenario="rate", input_tokens=2048, output_tokens=300, rate_rps=20)
    offers = resolve.offers(default_catalog(), ["MI300X"])
    space = TOGETHER.model_copy(update={"weight_dtypes": ("fp8",), "max_gpus": 8})
    replica = one_replica(model, offers[0].gpu, _best(model, offers, target, 100, space).layout, target, CAL)
    short, _ = run_at(replica, target, 20, Sla(tpot_p99_ms=65))
    assert (short.tpot.p99_ms or 0) < 65  # what the short run alone would have accepted
    loose, tight = (_best(model, offers, target, limit, space) for limit in (100, 65))
    assert loose.layout.replicas == 1 and 65 < (loose.tpot_p99_ms or 0) <= 100
    assert tight.layout.num_gpus == 2 and (tight.tpot_p99_ms or 0) <= 65


def _best(
    model: ModelSpec, offers: list[GpuOffer], target: Workload, tpot_p99_ms: float, space: SearchSpace
) -> Plan:
    sla = Sla(ttft_p99_ms=2000, tpot_p99_ms=tpot_p99_ms)
    return recommend(model, offers, target, sla=sla, space=space, cal=CAL).plans[0]


def test_mean_limits_floor_a_confirmation_at_the_analytic_count(
    model: ModelSpec, offers: list[GpuOffer]
) -> None:
    """With mean limits beside the P99s, the simulator may confirm fewer replicas than the tail model
    sized, down to the analytic (mean) plan's count, ``mean_floor``, and never below it."""
    sla = Sla(ttft_p99_ms=1500, tpot_p99_ms=80, tpot_ms=500)
    best = _rec(model, offers, ttft_p99_ms=1500, tpot_p99_ms=80).plans[0]
    fewest = best.layout.replicas
    replica = one_replica(model, offers[0].gpu, best.layout, TARGET, CAL)
    base = confirm.Candidate(best, replica, offers[0])
    above = confirm.on_tail_model(base, fewest + 1, 12 / (fewest + 1), TARGET, CAL)
    for floor, expected in ((1, fewest), (fewest + 1, fewest + 1)):
        cand = confirm.Candidate(above, replica, offers[0], mean_floor=floor)
        confirmed = confirm.confirm(cand, TARGET, sla, SearchSpace(), CAL)
        assert isinstance(confirmed, confirm.Candidate) and confirmed.plan.layout.replicas == expected
