"""Resolution shared by the use cases: a scenario document's GPU offers, its one GPU and its layout
against the catalog and the model, and a scenario document built from CLI flags or an API body.

Used by :mod:`gpuplan.usecases.recommend`, :mod:`gpuplan.usecases.predict`,
:mod:`gpuplan.usecases.simulate` and :mod:`gpuplan.usecases.fleet`. No rendering here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.scenario_files.deployment import (
    DeploymentDocument,
    ScenarioFile,
    describe_validation_error,
)
from gpuplan.core.errors import UserInputError
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.inference import check_context_window, check_generative
from gpuplan.core.perf.layout import Layout, check_layout, split_gpus
from gpuplan.core.pricing import PriceBasis, PriceQuote, missing_quote, typed_quote
from gpuplan.core.recommend.request import GpuOffer
from gpuplan.usecases.pricing import price_basis


def offers(
    catalog: Catalog,
    gpu_ids: Sequence[str] | None,
    *,
    price_kind: str = "on_demand",
    usd_per_gpu_hour: float | None = None,
    basis: PriceBasis | None = None,
) -> list[GpuOffer]:
    """GPU offers priced on one basis (default: the market median); ``usd_per_gpu_hour`` overrides the
    catalog (only with one GPU). A GPU the basis does not quote carries ``price_missing``, saying so."""
    ids = list(gpu_ids) if gpu_ids else catalog.gpu_ids()
    if usd_per_gpu_hour is not None and len(ids) != 1:
        raise UserInputError("a price override needs exactly one GPU", hint="pass --gpus with one id")
    basis = basis or price_basis(catalog)
    result = []
    for gid in ids:
        gpu = catalog.get_gpu(gid)
        if usd_per_gpu_hour is not None:
            quote: PriceQuote | None = typed_quote(usd_per_gpu_hour=usd_per_gpu_hour, kind=price_kind)
        else:
            quote = catalog.quote(gpu.id, price_kind, basis)
        purchase = catalog.price(gpu.id, "purchase")
        result.append(
            GpuOffer(
                gpu=gpu,
                usd_per_gpu_hour=quote.usd_per_gpu_hour if quote else None,
                price_source=_source(quote),
                price_kind=price_kind,
                purchase_usd=purchase.usd if purchase else None,
                price_quote=quote,
                price_missing="" if quote else missing_quote(gpu=gpu.id, kind=price_kind, basis=basis),
            )
        )
    return result


def _source(quote: PriceQuote | None) -> str:
    if quote is None:
        return ""
    if quote.origin == "user override":
        return "user override"
    return f"{quote.provider} {quote.as_of} {quote.source_url}"


def check_generation(model: ModelSpec, sc: ScenarioFile) -> None:
    """The model generates, and prompt + answer fit its window unless ``max_model_len`` says otherwise."""
    check_generative(model)
    if sc.max_model_len is None:
        check_context_window(model, sc.workload.input_tokens + sc.workload.output_tokens)


def deployment_layout(sc: DeploymentDocument, model: ModelSpec, gpu: GpuSpec) -> Layout:
    """The layout a scenario's hardware / parallelism / precision sections describe, checked."""
    par = sc.parallelism
    tp, replicas = split_gpus(
        sc.hardware.count, par.tp, par.pp, field="hardware.count", attention_dp=par.attention_dp
    )
    layout = Layout(
        tp=tp,
        pp=par.pp,
        ep=par.ep,
        attention_dp=par.attention_dp,
        replicas=replicas,
        weight_dtype=sc.precision.weights,
        kv_dtype=sc.precision.kv_cache,
        engine=sc.engine,
        gpu_memory_utilization=sc.gpu_memory_utilization,
    )
    check_layout(model, gpu, layout)
    return layout


def deployment_gpu(sc: DeploymentDocument, catalog: Catalog) -> GpuSpec:
    """The scenario's one GPU type (``hardware.gpu``), required by predict and simulate."""
    if not sc.hardware.gpu:
        raise UserInputError(
            "hardware.gpu is required for this command", hint="e.g. hardware: {gpu: H100-SXM, count: 2}"
        )
    return catalog.get_gpu(sc.hardware.gpu)


def scenario_from_mapping(doc: dict[str, Any], *, names: Mapping[str, str] | None = None) -> ScenarioFile:
    """A scenario built from CLI flags or an API body; None values mean 'not given'. ``names``: the
    flag a field came from, which its error names (``describe_validation_error``)."""
    cleaned = _drop_none(doc)
    try:
        return ScenarioFile.model_validate(cleaned)
    except ValidationError as exc:
        raise UserInputError(describe_validation_error(exc, names=names)) from None


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value
