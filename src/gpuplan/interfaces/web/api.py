"""The JSON API: one route per CLI command, each a call to its use case (:mod:`gpuplan.usecases`) with the
CLI's models; a ``/plots/...`` route calls the use case, then draws (:mod:`gpuplan.interfaces.plots`).

The web answers only for bundled models (by id or alias) or a pasted config.json: it never reads
a server path or reaches the Hub on a request's behalf. A recommend search is bounded
(``max_gpus`` ≤ :data:`WEB_MAX_GPUS`, duplicate GPU and dtype ids dropped, :data:`TIME_LIMIT_S`
of compute); the bound is stated in the ``X-Gpuplan-Search-Bound`` header and the assumptions.
A train-plan search has the same bounds (``max_gpus``, duplicate GPU ids, time) and the same header.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Request, Response

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.hf_config import parse_hf_config
from gpuplan.adapters.models.registry import aliases, bundled_ids, hub_hint, list_models
from gpuplan.adapters.scenario_files.simulate import SimulateScenario
from gpuplan.core.calibration.uncertainty import Uncertainty
from gpuplan.core.errors import FileFormatError, UnknownNameError, UserInputError
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.pricing import PriceBasis
from gpuplan.core.recommend.request import Recommendation
from gpuplan.data.error_model import default_error_model
from gpuplan.interfaces.plots import serving as plots
from gpuplan.interfaces.plots import training as plots_training
from gpuplan.interfaces.web import isolated
from gpuplan.interfaces.web.errors import FieldError
from gpuplan.interfaces.web.schemas import (
    ApiError,
    FitRequest,
    RecommendPlots,
    SearchBound,
    SimulateResponse,
    TrainPlanBody,
    TrainPlots,
    WebScenario,
)
from gpuplan.usecases import fit as fit_usecase
from gpuplan.usecases.fit import FitResult
from gpuplan.usecases.predict import PredictResult, predict_from_scenario
from gpuplan.usecases.pricing import price_basis, scenario_price_basis
from gpuplan.usecases.recommend import recommend_from_scenario, throughput_scaling
from gpuplan.usecases.resolve import offers
from gpuplan.usecases.simulate import requests_planned, simulate_scenario
from gpuplan.usecases.train import (
    TrainPlanRequest,
    TrainPlanResult,
    plan_training,
    resolve_method,
    tokens_to_train,
    train_memory_bars,
)
from gpuplan.usecases.train_intervals import with_training_intervals

WEB_MAX_SIM_REQUESTS = 20_000
"""Most simulated requests one web request may ask for (a few seconds of CPU)."""
WEB_MAX_GPUS = 256
"""Most GPUs in one plan that a web recommend searches (the CLI allows 4096)."""
TIME_LIMIT_S = 30.0
"""Compute time one API request may take; past it the answer is 422 with the limit."""
BOUND_HEADER = "X-Gpuplan-Search-Bound"
"""The P99 field of each mean latency a plan has (Plan.ttft_p99_ms, Plan.tpot_p99_ms)."""
T = TypeVar("T")

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ApiError, "description": "bad input: a value out of range, a malformed config_json"},
    404: {"model": ApiError, "description": "an unknown model, GPU or dtype id (with did-you-mean)"},
    405: {"model": ApiError, "description": "the method is not allowed on this path"},
    413: {"model": ApiError, "description": "the body is over the size limit"},
    422: {"model": ApiError, "description": "schema mismatch, nothing feasible, or past the time limit"},
    500: {"model": ApiError, "description": "bad bundled or catalog data (exit code 3)"},
}
"""Every status the API answers besides 200, each with the error body (``ApiError``), for the OpenAPI schema."""

router = APIRouter(prefix="/api", responses=ERROR_RESPONSES)


def catalog_dep(request: Request) -> Catalog:
    catalog: Catalog = request.app.state.catalog
    return catalog


CatalogDep = Annotated[Catalog, Depends(catalog_dep)]


def model_spec(name: str, config_json: dict[str, Any] | None) -> ModelSpec | None:
    """The pasted config's spec, None for a bundled id or alias (the use case looks it up).

    Anything else is the CLI's unknown-model error: the web never treats a name as a path.
    """
    if config_json is not None:
        try:
            return parse_hf_config(config_json, model_id=name.strip() or "pasted config.json")
        except FileFormatError as exc:
            raise FieldError(exc.message, field="config_json", hint=exc.hint) from None
    known = {m.lower() for m in (*bundled_ids(), *aliases())}
    if name.strip().lower() not in known:
        raise UnknownNameError("model", name.strip(), [*bundled_ids(), *aliases()], hint=hub_hint())
    return None


def field_checked(fn: Callable[[], T], fields: tuple[str, ...]) -> T:
    """``fn()``, its UserInputError tagged with the field its message starts with (of ``fields``)."""
    try:
        return fn()
    except UserInputError as exc:
        field = next((f for f in fields if exc.message.startswith(f)), None)
        if field is None:
            raise
        raise FieldError(exc.message, field=field, hint=exc.hint) from None


def train_basis(body: TrainPlanBody, catalog: Catalog) -> PriceBasis:
    """The price basis of ``train-plan``'s ``--provider`` / ``--price-basis``, from the body's fields of
    those names (a bad one: the CLI's message, naming the field)."""
    return field_checked(
        lambda: price_basis(
            catalog,
            provider=body.provider,
            basis=body.price_basis,
            provider_flag="provider",
            basis_flag="price_basis",
        ),
        ("provider", "price_basis"),
    )


async def bounded_call(fn: Callable[[], T]) -> T:
    """Run ``fn`` in a child process (``isolated.bounded``); past TIME_LIMIT_S answer 422, the child
    killed so that no work outlives the answer."""
    try:
        return await isolated.bounded(fn, limit_s=TIME_LIMIT_S)
    except TimeoutError:
        raise HTTPException(
            422,
            f"the request ran past the web API's {TIME_LIMIT_S:.0f} s limit; narrow it "
            "(fewer GPU types or dtypes, a lower max_gpus) or use the CLI",
        ) from None


def search_bound(asked: int) -> SearchBound:
    """The web's limits on a search that asked for plans of up to ``asked`` GPUs."""
    return SearchBound(
        max_gpus_requested=asked,
        max_gpus_searched=min(asked, WEB_MAX_GPUS),
        max_gpus_limit=WEB_MAX_GPUS,
        time_limit_s=TIME_LIMIT_S,
        clamped=asked > WEB_MAX_GPUS,
    )


def bound_search(sc: WebScenario) -> tuple[WebScenario, SearchBound]:
    """The scenario with the web's search limits applied, and what they were."""
    bound = search_bound(sc.hardware.max_gpus)
    hardware = sc.hardware.model_copy(
        update={
            "max_gpus": bound.max_gpus_searched,
            "gpus": list(dict.fromkeys(sc.hardware.gpus)) if sc.hardware.gpus else None,
        }
    )
    allowed = sc.precision.allowed
    precision = sc.precision.model_copy(update={"allowed": list(dict.fromkeys(allowed)) if allowed else None})
    return sc.model_copy(update={"hardware": hardware, "precision": precision}), bound


def _bound_header(bound: SearchBound, response: Response) -> None:
    response.headers[BOUND_HEADER] = (
        f"max_gpus={bound.max_gpus_searched} (asked {bound.max_gpus_requested}, limit {bound.max_gpus_limit}); "
        f"time_limit_s={bound.time_limit_s:g}"
    )


def _state_bound(rec: Recommendation, bound: SearchBound, response: Response) -> Recommendation:
    _bound_header(bound, response)
    if not bound.clamped:
        return rec
    note = (
        f"Web API bound: plans of at most {bound.max_gpus_searched} GPUs were searched "
        f"(asked {bound.max_gpus_requested}); the CLI searches up to 4096."
    )
    return rec.model_copy(update={"assumptions": [*rec.assumptions, note]})


def intervals(confidence: float | None = None) -> Uncertainty:
    """The bundled error model at the CLI's default level (80 %), plans sized at ``confidence`` (None:
    the point estimate): the web's answers equal the CLI's."""
    return Uncertainty(model=default_error_model(), confidence=confidence)


async def _recommend(
    body: WebScenario, catalog: Catalog, response: Response
) -> tuple[WebScenario, Recommendation, SearchBound]:
    sc, bound = bound_search(body)
    field_checked(lambda: scenario_price_basis(sc, catalog), ("prices.provider", "prices.basis"))
    spec = model_spec(sc.model, sc.config_json)
    sure = intervals(sc.confidence)
    rec = await bounded_call(lambda: recommend_from_scenario(sc, catalog, spec=spec, uncertainty=sure))
    return sc, _state_bound(rec, bound, response), bound


@router.get("/gpus", summary="the GPU catalog (gpuplan gpus --format json)")
def gpus(catalog: CatalogDep) -> dict[str, Any]:
    return {
        "gpus": [catalog.get_gpu(g).model_dump(mode="json") for g in catalog.gpu_ids()],
        "prices": [p.model_dump(mode="json") for p in catalog.prices],
    }


@router.get("/models", summary="the bundled models (gpuplan models --format json)")
def models() -> dict[str, Any]:
    return {"models": [m.model_dump(mode="json") for m in list_models()]}


@router.post("/recommend", response_model=Recommendation, summary="gpuplan recommend --format json")
async def recommend(body: WebScenario, catalog: CatalogDep, response: Response) -> Recommendation:
    """Ranked plans for a scenario document; the search bound is in the X-Gpuplan-Search-Bound header."""
    _, rec, _ = await _recommend(body, catalog, response)
    return rec


@router.post("/predict", response_model=PredictResult, summary="gpuplan predict --format json")
async def predict(body: WebScenario, catalog: CatalogDep) -> PredictResult:
    spec = model_spec(body.model, body.config_json)
    sure = intervals()
    return await bounded_call(lambda: predict_from_scenario(body, catalog, spec=spec, uncertainty=sure))


@router.post("/fit", response_model=FitResult, summary="gpuplan fit --format json")
async def fit(body: FitRequest, catalog: CatalogDep) -> FitResult:
    spec, sure = model_spec(body.model, body.config_json), intervals()
    return await bounded_call(
        lambda: fit_usecase.fit(
            body.model,
            body.gpu,
            catalog,
            count=body.count,
            tp=body.tp,
            pp=body.pp,
            weight_dtype=body.dtype,
            kv_dtype=body.kv_dtype,
            engine=body.engine,
            context_tokens=body.context,
            utilization=body.utilization,
            spec=spec,
            uncertainty=sure,
        )
    )


@router.post("/simulate", response_model=SimulateResponse, summary="gpuplan simulate --format json")
async def simulate(body: SimulateScenario, catalog: CatalogDep) -> SimulateResponse:
    """Simulate a scenario document (no trace files; at most WEB_MAX_SIM_REQUESTS requests)."""
    model_spec(body.model, None)  # bundled ids only: the web never reads a path
    planned = requests_planned(body)
    if planned > WEB_MAX_SIM_REQUESTS:
        raise HTTPException(
            422,
            f"arrival.num_requests {planned} is over the web API's limit of "
            f"{WEB_MAX_SIM_REQUESTS}; use gpuplan simulate for longer runs",
        )
    sure = intervals()
    outcome = await bounded_call(lambda: simulate_scenario(body, catalog, base_dir=None, uncertainty=sure))
    return SimulateResponse(summary=outcome.summary, capacity=outcome.capacity, interval=outcome.interval)


@router.post("/plots/recommend", response_model=RecommendPlots, summary="recommend with the page's charts")
async def recommend_plots(
    body: WebScenario,
    catalog: CatalogDep,
    response: Response,
    cost_axis: plots.CostAxis = "usd_per_month",
    latency_axis: plots.LatencyAxis = "ttft_ms",
) -> RecommendPlots:
    sc, rec, bound = await _recommend(body, catalog, response)
    spec = model_spec(sc.model, sc.config_json)
    scaling = await bounded_call(lambda: throughput_scaling(sc, catalog, rec, spec=spec))
    order = [p.gpu for p in rec.plans]
    statistic = plots.latency_statistic(rec)
    field = plots.plotted_latency(rec, latency_axis)
    figures = {
        "pareto": plots.figure_json(plots.pareto_figure(rec, cost_axis, field)),
        "memory": plots.figure_json(plots.memory_figure(rec.plans)),
        "throughput": plots.figure_json(plots.throughput_figure(scaling, order)),
    }
    return RecommendPlots(
        recommendation=rec,
        search=bound,
        scaling=scaling,
        cost_axis=cost_axis,
        latency_axis=latency_axis,
        latency_statistic=statistic,
        latency_field=field,
        figures=figures,
    )


_BUDGET_FLAGS = (("--samples", "samples"), ("--seq-len", "seq_len"))
"""The flags a token-budget error may name, and the body field each is."""


def _train_tokens(body: TrainPlanBody) -> float:
    """``gpuplan train-plan``'s token budget rule, with the error tagged to the form's field."""
    try:
        return tokens_to_train(body.tokens, body.epochs, body.samples, body.seq_len)
    except UserInputError as exc:
        field = next((f for flag, f in _BUDGET_FLAGS if exc.message.startswith(flag)), "tokens")
        raise FieldError(exc.message, field=field, hint=exc.hint) from None


def train_request(body: TrainPlanBody) -> tuple[TrainPlanRequest, SearchBound]:
    """``gpuplan train-plan``'s request for these flags, built as the CLI builds it, within the web's bounds.

    A bad method or a missing token budget is the CLI's error (naming its flag), tagged with the
    field; a value out of range is TrainPlanRequest's validation error, as in the CLI.
    """
    try:
        method = resolve_method(body.method)
    except UserInputError as exc:
        raise FieldError(exc.message, field="method") from None
    tokens = _train_tokens(body)
    bound = search_bound(body.max_gpus)
    gpus = tuple(dict.fromkeys(g.strip() for g in body.gpus or () if g.strip()))
    req = TrainPlanRequest.model_validate(
        {
            "model": body.model,
            "method": method,
            "tokens": tokens,
            "seq_len": body.seq_len,
            "global_batch": body.global_batch,
            "dtype": body.dtype,
            "max_gpus": bound.max_gpus_searched,
            "gpus": gpus,
            "deadline_hours": body.deadline_hours,
            "objective": body.objective,
        }
    )
    model_spec(req.model, None)  # bundled ids and aliases only: the web never reads a path
    return req, bound


def _banded_training(req: TrainPlanRequest, catalog: Catalog, basis: PriceBasis) -> TrainPlanResult:
    """``plan_training`` on ``basis`` with the intervals ``train-plan`` shows (the bundled factors, 80 %)."""
    planned = plan_training(req, catalog, basis=basis)
    return with_training_intervals(planned, catalog, cal=None, uncertainty=intervals())


@router.post("/train-plan", response_model=TrainPlanResult, summary="gpuplan train-plan --format json")
async def train_plan(body: TrainPlanBody, catalog: CatalogDep, response: Response) -> TrainPlanResult:
    """Ranked training plans; the search bound is in the X-Gpuplan-Search-Bound header."""
    req, bound = train_request(body)
    basis = train_basis(body, catalog)
    _bound_header(bound, response)
    return await bounded_call(lambda: _banded_training(req, catalog, basis))


@router.post("/plots/train-plan", response_model=TrainPlots, summary="train-plan with the page's charts")
async def train_plan_plots(body: TrainPlanBody, catalog: CatalogDep, response: Response) -> TrainPlots:
    req, bound = train_request(body)
    basis = train_basis(body, catalog)
    _bound_header(bound, response)
    result = await bounded_call(lambda: _banded_training(req, catalog, basis))
    bars = train_memory_bars(result, limit=plots.MEMORY_MAX_PLANS)
    figures = {
        "pareto": plots.figure_json(plots_training.train_pareto_figure(result)),
        "memory": plots.figure_json(plots_training.train_memory_figure(bars)),
    }
    return TrainPlots(result=result, search=bound, memory=bars, figures=figures)


@router.post("/plots/fit", summary="gpuplan fit --plot: the memory chart as plotly JSON")
async def fit_plot(body: FitRequest, catalog: CatalogDep) -> dict[str, Any]:
    result = await fit(body, catalog)
    return {"fit": result.model_dump(mode="json"), "figure": plots.figure_json(plots.fit_figure(result))}


@router.get("/plots/gpus", summary="the GPU comparison chart and each GPU's on-demand price")
def gpus_plot(catalog: CatalogDep) -> dict[str, Any]:
    priced = offers(catalog, None)
    return {
        "figure": plots.figure_json(plots.gpu_comparison_figure(priced)),
        "offers": [
            {"gpu": o.gpu.id, "usd_per_gpu_hour": o.usd_per_gpu_hour, "price_source": o.price_source}
            for o in priced
        ],
    }
