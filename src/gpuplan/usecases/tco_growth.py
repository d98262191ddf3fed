"""``gpuplan tco PLAN.json --load-growth X [--model M]``: the growth question answered by re-planning.

The recommend answer in PLAN.json records its model, workload, SLA and price basis. The grown
workload (the rate, or the requests in flight, times X; the model M when given) is re-planned by
:func:`gpuplan.core.recommend.recommend` on the plan's own GPU type, weight dtype, engine and layout
kind, priced on the same basis (the same providers, the same quote kind and date), so that the answer
is how many more of the GPUs already chosen to buy. Rent vs buy is then priced for the grown plan
(buying for the grown load now) and for today's plan (buying for today's load; the extra GPUs later).
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import Field

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.calibration.uncertainty import Uncertainty
from gpuplan.core.errors import FileFormatError, UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import MAX_GPU_COUNT
from gpuplan.core.perf.kv_transfer import KvTransport
from gpuplan.core.pricing import PriceQuote, typed_quote
from gpuplan.core.recommend import recommend
from gpuplan.core.recommend.request import Plan, Recommendation, SearchSpace
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.data.error_model import default_error_model
from gpuplan.usecases.resolve import offers
from gpuplan.usecases.tco import TcoAnswer, TcoRequest, read_plan_file, tco_answer

MAX_LOAD_GROWTH = 1000.0
"""Largest --load-growth taken: three orders of magnitude (the grown rate still meets the workload's caps)."""
DEFAULT_MAX_GPUS = SearchSpace().max_gpus
"""The search's GPU ceiling when today's plan is small (recommend's own default)."""


class GrowthRequest(FrozenModel):
    """The growth asked about: the load times ``load_growth``, and a bigger ``model`` when given."""

    load_growth: float = Field(default=1.0, gt=0, le=MAX_LOAD_GROWTH, allow_inf_nan=False)
    model: str | None = None


class PlanSummary(FrozenModel):
    """One plan as the growth answer shows it."""

    model: str
    gpu: str
    gpus: int
    tp: int
    pp: int
    replicas: int
    weight_dtype: str
    layout_kind: str
    usd_per_hour: float | None
    upfront_usd: float = Field(description="what buying its GPUs costs (tco's upfront_usd)")
    break_even_months: float | None = Field(description="months of renting that pay for buying them")


class Growth(FrozenModel):
    """Today's plan against the re-planned one, and the GPUs to add."""

    load_growth: float
    workload: Workload = Field(description="the grown workload that was re-planned")
    today: PlanSummary
    grown: PlanSummary
    extra_gpus: int = Field(description="grown.gpus - today.gpus: the GPUs to buy for the growth")
    extra_upfront_usd: float = Field(description="grown.upfront_usd - today.upfront_usd")


class TcoGrowthAnswer(TcoAnswer):
    """``tco PLAN.json --load-growth``: rent vs buy of the grown plan (buying for the grown load now),
    and ``growth``: today's plan against it."""

    growth: Growth


def tco_for_growth(
    catalog: Catalog, path: Path, *, req: TcoRequest, growth: GrowthRequest
) -> TcoGrowthAnswer:
    """Re-plan the grown workload of PLAN.json on its GPU, dtype and price basis; rent vs buy of both plans."""
    rec = read_plan_file(path)
    if rec.sla is None or rec.workload is None:
        raise FileFormatError(
            f"{path}: records no sla, which --load-growth/--model re-plan at (written before plans recorded it)",
            hint="re-run gpuplan recommend ... --format json and pass that file",
        )
    today = rec.plans[0]
    check_replans_today(catalog, rec, today, req, path)
    target = _grown(rec.workload, growth.load_growth)
    grown_rec = _replan(catalog, rec, today, target, growth, req)
    grown = grown_rec.plans[0]
    now = tco_answer(catalog, grown.gpu, grown.num_gpus, _quote(grown, req, path), rec.price_basis, req)
    before = tco_answer(catalog, today.gpu, today.num_gpus, _quote(today, req, path), rec.price_basis, req)
    summary = Growth(
        load_growth=growth.load_growth,
        workload=target,
        today=_summary(rec.model, today, before),
        grown=_summary(grown_rec.model, grown, now),
        extra_gpus=grown.num_gpus - today.num_gpus,
        extra_upfront_usd=now.upfront_usd - before.upfront_usd,
    )
    return TcoGrowthAnswer(**now.model_dump(), growth=summary)


def _grown(workload: Workload, factor: float) -> Workload:
    """The workload with its load (rate, or requests in flight) times ``factor``; lengths unchanged."""
    if workload.rate_rps is not None:
        return workload.model_validate({**workload.model_dump(), "rate_rps": workload.rate_rps * factor})
    if workload.concurrency is not None:
        return workload.model_validate(
            {**workload.model_dump(), "concurrency": workload.concurrency * factor}
        )
    raise UserInputError(
        "--load-growth needs a plan sized for a rate or a concurrency (not an offline batch)"
    )


def _replan(
    catalog: Catalog,
    rec: Recommendation,
    today: Plan,
    target: Workload,
    growth: GrowthRequest,
    req: TcoRequest,
) -> Recommendation:
    """``recommend`` for the grown target on today's GPU, dtype, engine and layout kind, on the same basis."""
    quote = today.price_quote
    typed = quote.usd_per_gpu_hour if quote is not None and quote.origin == "user override" else None
    wanted = math.ceil(growth.load_growth * today.num_gpus) * 2
    space = SearchSpace(
        weight_dtypes=(today.layout.weight_dtype.name,),
        max_gpus=min(MAX_GPU_COUNT, max(DEFAULT_MAX_GPUS, wanted)),
        engine=today.layout.engine.name,
        engine_version=today.layout.engine_version,
        layout_kinds=(today.layout_kind,),
        speculative=today.layout.speculative,
        kv_transport=today.kv_transport or KvTransport(),
    )
    kind = quote.kind if quote is not None else req.kind
    sure = (
        None
        if rec.confidence is None
        else Uncertainty(model=default_error_model(), confidence=rec.confidence)
    )
    return recommend(
        get_model(growth.model or rec.model),
        offers(catalog, [today.gpu], price_kind=kind, usd_per_gpu_hour=typed, basis=rec.price_basis),
        target,
        sla=rec.sla,
        space=space,
        objective=rec.objective,
        cal=default_calibration(),
        ownership=req.ownership,
        price_basis=rec.price_basis,
        uncertainty=sure,
    )


def check_replans_today(
    catalog: Catalog, rec: Recommendation, today: Plan, req: TcoRequest, path: Path
) -> None:
    """UserInputError unless re-planning PLAN.json's own load gives its own GPU count: a plan made with
    settings the file does not record (a ``--calibration`` profile) would otherwise be grown from
    another baseline, and the GPUs to buy would be wrong."""
    assert rec.workload is not None
    again = _replan(catalog, rec, today, rec.workload, GrowthRequest(), req).plans[0]
    if again.num_gpus != today.num_gpus:
        raise UserInputError(
            f"{path}: re-planning its own load gives {again.num_gpus} GPUs, not its {today.num_gpus}: "
            "the plan was made with a setting the file does not record (a --calibration profile?)",
            hint="re-run gpuplan recommend without --calibration, then --load-growth on that file",
        )


def _quote(plan: Plan, req: TcoRequest, path: Path) -> PriceQuote:
    """The rent of one plan: the typed --usd-per-gpu-hour, else the plan's own quote."""
    if req.rent_usd_per_gpu_hour is not None:
        return typed_quote(usd_per_gpu_hour=req.rent_usd_per_gpu_hour, kind=req.kind)
    if plan.price_quote is None:
        raise UserInputError(
            f"{path}: the plan of {plan.gpu} has no price_quote", hint="give --usd-per-gpu-hour"
        )
    return plan.price_quote


def _summary(model: str, plan: Plan, tco: TcoAnswer) -> PlanSummary:
    lay = plan.layout
    return PlanSummary(
        model=model,
        gpu=plan.gpu_types,
        gpus=plan.num_gpus,
        tp=lay.tp,
        pp=lay.pp,
        replicas=lay.replicas,
        weight_dtype=lay.weight_dtype.name,
        layout_kind=plan.layout_kind,
        usd_per_hour=plan.usd_per_hour,
        upfront_usd=tco.upfront_usd,
        break_even_months=tco.break_even_months,
    )
