"""Resolution shared by the use cases: a scenario document's GPU offers, its one GPU and its layout
against the catalog and the model, and a scenario document built from CLI flags or an API body.

Used by :mod:`gpuplan.usecases.recommend`, :mod:`gpuplan.usecases.predict`,
:mod:`gpuplan.usecases.simulate` and :mod:`gpuplan.usecases.fleet`. No rendering here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.adapters.scenario_files.deployment import (
    DeploymentDocument,
    ScenarioFile,
    ServingDocument,
    SpeculativeSection,
    describe_validation_error,
)
from gpuplan.core.errors import UserInputError
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.engine_releases import check_engine_version
from gpuplan.core.perf.inference import check_context_window, check_generative
from gpuplan.core.perf.layout import Layout, check_layout, split_gpus
from gpuplan.core.perf.speculative import Speculative, check_speculative
from gpuplan.core.pricing import PriceBasis, PriceQuote, missing_quote, typed_quote
from gpuplan.core.recommend.request import GpuOffer
from gpuplan.core.workload import Workload
from gpuplan.usecases.pricing import price_basis

DocT = TypeVar("DocT", bound=ServingDocument)


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
        engine_version=sc.engine_version,
        gpu_memory_utilization=sc.gpu_memory_utilization,
        speculative=deployment_speculative(sc, model),
    )
    check_layout(model, gpu, layout)
    return layout


def deployment_speculative(sc: DeploymentDocument, model: ModelSpec) -> Speculative | None:
    """The document's speculative decoding, its draft model resolved once here (like ``model``) and
    checked against the target ``model`` (``speculative.check_speculative``)."""
    section = sc.speculative
    if section is None:
        return None
    draft = get_model(section.draft_model) if section.draft_model else None
    spec = Speculative(
        method=section.method,
        draft_tokens=section.draft_tokens,
        acceptance_rate=section.acceptance_rate,
        draft_model=draft,
    )
    try:
        check_speculative(spec, model)
    except ValueError as why:
        raise UserInputError(
            str(why), hint="use --spec-method eagle or ngram, or a --draft-model of the target's family"
        ) from None
    return spec


def prefix_hit_rate(sc: ServingDocument) -> float:
    """The document's prefix-cache hit rate: ``workload.prefix_cache_hit_rate``, or the simulator's
    older ``simulation.prefix_cache_hit_rate``; written in both, they must agree."""
    workload, simulation = sc.workload, sc.simulation
    in_workload = workload is not None and "prefix_cache_hit_rate" in workload.model_fields_set
    in_simulation = "prefix_cache_hit_rate" in simulation.model_fields_set
    both = workload is not None and in_workload and in_simulation
    if both and workload is not None and workload.prefix_cache_hit_rate != simulation.prefix_cache_hit_rate:
        raise UserInputError(
            f"workload.prefix_cache_hit_rate ({workload.prefix_cache_hit_rate:g}) differs from "
            f"simulation.prefix_cache_hit_rate ({simulation.prefix_cache_hit_rate:g})",
            hint="give it once, in workload",
        )
    if workload is not None and in_workload:
        return workload.prefix_cache_hit_rate
    return simulation.prefix_cache_hit_rate


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


FEATURE_FLAGS = {
    "spec_method": "--spec-method",
    "spec_tokens": "--spec-tokens",
    "spec_acceptance": "--spec-acceptance",
    "draft_model": "--draft-model",
    "prefix_hit_rate": "--prefix-hit-rate",
    "engine_version": "--engine-version",
}
"""The flags of :class:`DeploymentFeatures`, by field."""
FEATURE_FLAG_FIELDS = {
    "speculative.method": "--spec-method",
    "speculative.draft_tokens": "--spec-tokens",
    "speculative.acceptance_rate": "--spec-acceptance",
    "speculative.draft_model": "--draft-model",
    "workload.prefix_cache_hit_rate": "--prefix-hit-rate",
    "simulation.prefix_cache_hit_rate": "--prefix-hit-rate",
    "engine_version": "--engine-version",
}
"""The document field each feature flag fills: an error names the flag the user typed."""
_ONE_SOURCE = "give it once: in the scenario file or as a flag"


@dataclass(frozen=True)
class DeploymentFeatures:
    """Speculative decoding, prefix caching and the engine release as given on the command line (None:
    not given), shared by ``predict``, ``simulate`` and ``recommend``."""

    spec_method: str | None = None
    spec_tokens: int | None = None
    spec_acceptance: float | None = None
    draft_model: str | None = None
    prefix_hit_rate: float | None = None
    engine_version: str | None = None

    def given(self) -> dict[str, object]:
        """The flags given, by field name."""
        return {name: getattr(self, name) for name in FEATURE_FLAGS if getattr(self, name) is not None}

    def speculative(self) -> dict[str, object] | None:
        """The ``speculative:`` mapping the flags describe; None without ``--spec-method``. A flag that
        needs another one is an error naming both."""
        if self.spec_method is None:
            orphans = [
                FEATURE_FLAGS[n]
                for n in ("spec_tokens", "spec_acceptance", "draft_model")
                if getattr(self, n)
            ]
            if orphans:
                raise UserInputError(
                    f"{', '.join(orphans)} {'needs' if len(orphans) == 1 else 'need'} --spec-method",
                    hint="e.g. --spec-method eagle (or draft, mtp, ngram)",
                )
            return None
        if (self.spec_method == "draft") != (self.draft_model is not None):
            raise UserInputError(
                "--draft-model goes with --spec-method draft, and --spec-method draft needs --draft-model",
                hint="e.g. --spec-method draft --draft-model meta-llama/Llama-3.2-1B",
            )
        section = {
            "method": self.spec_method,
            "draft_tokens": self.spec_tokens,
            "acceptance_rate": self.spec_acceptance,
            "draft_model": self.draft_model,
        }
        return {k: v for k, v in section.items() if v is not None}


def features_into(doc: dict[str, Any], features: DeploymentFeatures) -> dict[str, Any]:
    """A flag-built document (``scenario_from_mapping``) with the features' ``speculative:`` section and
    ``workload.prefix_cache_hit_rate``."""
    workload = {**doc.get("workload", {}), "prefix_cache_hit_rate": features.prefix_hit_rate}
    return {
        **doc,
        "speculative": features.speculative(),
        "workload": workload,
        "engine_version": features.engine_version,
    }


def with_features(sc: DocT, features: DeploymentFeatures) -> DocT:
    """A scenario document with the feature flags filled in; a flag the file already gives is an error
    (never a silent override), as is a value out of range (naming the flag)."""
    section = features.speculative()
    update: dict[str, Any] = {}
    if section is not None:
        if sc.speculative is not None:
            raise UserInputError(
                "--spec-method: the scenario file has a speculative: section", hint=_ONE_SOURCE
            )
        update["speculative"] = _flag_checked(SpeculativeSection, section, "speculative")
    update.update(_engine_version_flag(sc, features.engine_version))
    hit = features.prefix_hit_rate
    if hit is not None:
        if "prefix_cache_hit_rate" in sc.simulation.model_fields_set or (
            sc.workload is not None and "prefix_cache_hit_rate" in sc.workload.model_fields_set
        ):
            raise UserInputError(
                "--prefix-hit-rate: the scenario file gives prefix_cache_hit_rate", hint=_ONE_SOURCE
            )
        probe = {"scenario": "single", "input_tokens": 1, "output_tokens": 1, "prefix_cache_hit_rate": hit}
        _flag_checked(Workload, probe, "workload")
        if sc.workload is not None:
            update["workload"] = sc.workload.model_copy(update={"prefix_cache_hit_rate": hit})
        else:  # a trace gives every request: the simulator's own field
            update["simulation"] = sc.simulation.model_copy(update={"prefix_cache_hit_rate": hit})
    return sc.model_copy(update=update) if update else sc


def _engine_version_flag(sc: DeploymentDocument, version: str | None) -> dict[str, Any]:
    """``--engine-version`` as the document's ``engine_version`` (never over the file's own)."""
    if version is None:
        return {}
    if sc.engine_version is not None:
        raise UserInputError("--engine-version: the scenario file gives engine_version", hint=_ONE_SOURCE)
    try:
        return {"engine_version": check_engine_version(version)}
    except ValueError as exc:
        raise UserInputError(f"--engine-version {exc}", hint="e.g. --engine-version 0.14.1") from None


_CheckedT = TypeVar("_CheckedT", SpeculativeSection, Workload)


def _flag_checked(kind: type[_CheckedT], data: dict[str, Any], section: str) -> _CheckedT:
    """``data`` validated as ``kind``; an error names the flag of the field it is about."""
    try:
        return kind.model_validate(data)
    except ValidationError as exc:
        names = {path.removeprefix(f"{section}."): flag for path, flag in FEATURE_FLAG_FIELDS.items()}
        raise UserInputError(describe_validation_error(exc, names=names)) from None
