"""The price basis of one answer, chosen from flags (``--provider``, ``--price-basis``), a scenario's
``prices:`` section or a fleet file, and the date its quotes are aged against. Shared by recommend,
predict, train-plan and fleet."""

from __future__ import annotations

import os
from datetime import date

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.scenario_files.deployment import ScenarioFile
from gpuplan.core.errors import UserInputError
from gpuplan.core.pricing import PriceBasis, choose_basis
from gpuplan.data.price_providers import price_providers

PRICE_DATE_ENV = "GPUPLAN_PRICE_DATE"
"""ISO date quotes are aged against (stale flags) instead of today: reproducible answers and goldens."""


def price_date() -> date:
    """``$GPUPLAN_PRICE_DATE`` if set, else today."""
    text = os.environ.get(PRICE_DATE_ENV)
    if not text:
        return date.today()
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UserInputError(f"{PRICE_DATE_ENV}={text!r} is not a date", hint="use YYYY-MM-DD") from None


def price_basis(
    catalog: Catalog,
    *,
    provider: str | None = None,
    basis: str | None = None,
    provider_flag: str = "--provider",
    basis_flag: str = "--price-basis",
) -> PriceBasis:
    """The basis the user chose (default: the market median), against the catalog's providers."""
    return choose_basis(
        providers=price_providers(),
        quoted_providers=catalog.cloud_providers(),
        provider=provider,
        basis=basis,
        priced_on=price_date(),
        provider_flag=provider_flag,
        basis_flag=basis_flag,
    )


def scenario_price_basis(
    sc: ScenarioFile, catalog: Catalog, *, provider: str | None = None, basis: str | None = None
) -> PriceBasis:
    """The price basis of a request: ``--provider`` / ``--price-basis``, or the document's
    ``prices.provider`` / ``prices.basis`` (one place: both is an error), else the market median."""
    in_doc = sc.prices.provider is not None or sc.prices.basis is not None
    if in_doc and (provider is not None or basis is not None):
        flag = "--provider" if provider is not None else "--price-basis"
        raise UserInputError(
            f"{flag} and the scenario's prices section both choose the price basis", hint="give one of them"
        )
    if in_doc:
        return price_basis(
            catalog,
            provider=sc.prices.provider,
            basis=sc.prices.basis,
            provider_flag="prices.provider",
            basis_flag="prices.basis",
        )
    return price_basis(catalog, provider=provider, basis=basis)
