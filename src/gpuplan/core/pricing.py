"""Prices on one basis: which providers' quotes price every GPU of one answer, and the quote each plan
is priced from.

A **price basis** is a fixed set of providers: one provider (``provider:aws``), a provider class
(``class:hyperscaler`` / ``class:specialist`` / ``class:marketplace``) or the market median over the
providers the bundled provider table marks for it (``market-median``, the default). Every GPU of one
answer is priced from the quotes of that same set; a GPU none of them quotes gets no price (and a
message saying how to add one) rather than a price from somewhere else.

Within a basis the policy is the catalog's (:func:`median_quote`): each provider's most recent quote
(its own lower median when it lists several shapes that day), then the lower median across the
providers. A quote older than the basis's ``stale_after_days`` on the pricing date is flagged stale.
A price the user gave (a ``--catalog`` file, the config dir, a scenario's ``usd_per_gpu_hour``) is
used whatever the basis. Pure functions, keyword-only; the data comes in as arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Literal, get_args

from pydantic import Field, HttpUrl

from gpuplan.core.errors import UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.hardware import PriceEntry

ProviderClass = Literal["hyperscaler", "specialist", "marketplace"]
PROVIDER_CLASSES: tuple[str, ...] = get_args(ProviderClass)
MARKET_MEDIAN = "market-median"
"""Key of the default basis: the median over the providers the provider table marks ``market_median``."""
BASIS_CHOICES: tuple[str, ...] = (MARKET_MEDIAN, *PROVIDER_CLASSES)
"""What ``--price-basis`` accepts (one provider is ``--provider NAME``)."""
STALE_AFTER_DAYS = 180
"""A quote older than this is flagged stale. Cloud GPU list prices move by tens of percent within a
year: AWS cut P4d/P4de/P5 on-demand prices by up to 45% in June 2025
(https://aws.amazon.com/blogs/aws/announcing-up-to-45-price-reduction-for-amazon-ec2-nvidia-gpu-accelerated-instances/),
and the catalog's RunPod Secure H100 quote moved from $3.49 to $3.99 in six weeks (prices.csv)."""
QuoteOrigin = Literal["catalog", "user catalog", "user override"]


class PriceProvider(FrozenModel):
    """One seller of GPU-hours, its class and its own price page (``data/catalog/providers.csv``)."""

    name: str = Field(min_length=1)
    provider_class: ProviderClass
    pricing_url: HttpUrl
    market_median: bool = Field(description="one of the fixed providers of the market-median basis")


class PriceBasis(FrozenModel):
    """The providers whose quotes price every GPU of one answer (the JSON contract's ``price_basis``)."""

    key: str = Field(description="market-median, class:<class> or provider:<name>")
    label: str = Field(description="the basis in words")
    providers: tuple[str, ...] = Field(description="the providers whose quotes count, sorted")
    priced_on: date = Field(description="the date quotes are aged against (stale flags)")
    stale_after_days: int = Field(ge=1)


class PriceQuote(FrozenModel):
    """The quote one plan is priced from. ``provider``, ``as_of`` and ``source_url`` are null only for
    a price the user typed (a scenario's ``usd_per_gpu_hour``)."""

    provider: str | None
    kind: str
    usd_per_gpu_hour: float = Field(gt=0)
    as_of: date | None
    source_url: str | None
    stale: bool = Field(description="older than the basis's stale_after_days on its priced_on date")
    origin: QuoteOrigin
    providers_quoting: int = Field(ge=0, description="providers of the basis that quote this GPU and kind")


def median_quote(entries: Sequence[PriceEntry]) -> PriceEntry | None:
    """The lower median, across providers, of each provider's latest quote; None without quotes.

    For each provider only its most recent ``as_of`` counts (an old snapshot is superseded by that
    provider's newer quote); several rows on that date (instance shapes, tiers) give their own lower
    median. The lower median is an actual observation (it keeps its source URL and date), one outlier
    cannot move it, and ties lean to the cheaper quote.
    """
    by_provider: dict[str, list[PriceEntry]] = {}
    for entry in entries:
        by_provider.setdefault(entry.provider.casefold(), []).append(entry)
    latest = []
    for rows in by_provider.values():
        newest = max(r.as_of for r in rows)
        latest.append(_median_low([r for r in rows if r.as_of == newest]))
    return _median_low(latest) if latest else None


def _median_low(rows: Sequence[PriceEntry]) -> PriceEntry:
    ordered = sorted(rows, key=lambda r: (r.usd, r.provider, r.region, r.notes))
    return ordered[(len(ordered) - 1) // 2]


def choose_basis(
    *,
    providers: Sequence[PriceProvider],
    quoted_providers: Sequence[str],
    provider: str | None,
    basis: str | None,
    priced_on: date,
    provider_flag: str = "--provider",
    basis_flag: str = "--price-basis",
) -> PriceBasis:
    """The basis the user chose: one provider, a provider class, or the market median (the default).

    ``quoted_providers`` are the providers the catalog has cloud quotes from (a user's own provider
    counts). A name that is none of them, or a basis that is not one of :data:`BASIS_CHOICES`, is a
    one-line error naming the flag and the valid values.
    """
    if provider is not None and basis is not None:
        raise UserInputError(
            f"{provider_flag} and {basis_flag} both choose the price basis", hint="give one of them"
        )
    if provider is not None:
        return _provider_basis(quoted_providers, provider, priced_on, provider_flag)
    key = (basis or MARKET_MEDIAN).removeprefix("class:")  # the JSON's own key reads back
    if key not in BASIS_CHOICES:
        raise UserInputError(f"{basis_flag} {key!r} is not one of {', '.join(BASIS_CHOICES)}")
    if key == MARKET_MEDIAN:
        names = sorted((p.name for p in providers if p.market_median), key=str.casefold)
        label = f"market median of the latest quotes of {', '.join(names)}"
    else:
        names = sorted((p.name for p in providers if p.provider_class == key), key=str.casefold)
        label = f"{key} providers ({', '.join(names)}): median of their latest quotes"
        key = f"class:{key}"
    return PriceBasis(
        key=key, label=label, providers=tuple(names), priced_on=priced_on, stale_after_days=STALE_AFTER_DAYS
    )


def _provider_basis(quoted: Sequence[str], provider: str, priced_on: date, flag: str) -> PriceBasis:
    names = sorted(set(quoted), key=str.casefold)
    match = next((n for n in names if n.casefold() == provider.strip().casefold()), None)
    if match is None:
        raise UserInputError(
            f"{flag} {provider!r} is not a provider in the catalog; valid: {', '.join(names)}"
        )
    return PriceBasis(
        key=f"provider:{match.casefold()}",
        label=f"{match} only (its latest quotes)",
        providers=(match,),
        priced_on=priced_on,
        stale_after_days=STALE_AFTER_DAYS,
    )


def quote_on_basis(
    *, entries: Sequence[PriceEntry], basis: PriceBasis, user_given: bool = False
) -> PriceQuote | None:
    """The quote ``entries`` (one GPU, one kind) give on ``basis``; None when no provider of it quotes.

    ``user_given``: the entries are the user's own prices (they replaced the bundled ones), so they
    count whatever their provider.
    """
    members = {p.casefold() for p in basis.providers}
    rows = list(entries) if user_given else [e for e in entries if e.provider.casefold() in members]
    chosen = median_quote(rows)
    if chosen is None:
        return None
    return PriceQuote(
        provider=chosen.provider,
        kind=chosen.kind,
        usd_per_gpu_hour=chosen.usd,
        as_of=chosen.as_of,
        source_url=str(chosen.source_url),
        stale=is_stale(
            as_of=chosen.as_of, priced_on=basis.priced_on, stale_after_days=basis.stale_after_days
        ),
        origin="user catalog" if user_given else "catalog",
        providers_quoting=len({r.provider.casefold() for r in rows}),
    )


def typed_quote(*, usd_per_gpu_hour: float, kind: str) -> PriceQuote:
    """The quote of a $/GPU-hour the user typed: no provider, date or link to show."""
    return PriceQuote(
        provider=None,
        kind=kind,
        usd_per_gpu_hour=usd_per_gpu_hour,
        as_of=None,
        source_url=None,
        stale=False,
        origin="user override",
        providers_quoting=0,
    )


def is_stale(*, as_of: date, priced_on: date, stale_after_days: int) -> bool:
    """Whether a quote dated ``as_of`` is older than ``stale_after_days`` on ``priced_on``."""
    return (priced_on - as_of).days > stale_after_days


def missing_quote(*, gpu: str, kind: str, basis: PriceBasis) -> str:
    """Why ``gpu`` has no price on ``basis``, and how to give it one."""
    return (
        f"no {kind.replace('_', '-')} quote for {gpu} from the providers of the {basis.key} price basis; "
        f"add one in a --catalog file (prices: [{{gpu: {gpu}, kind: {kind}, provider: NAME, usd: N, "
        "as_of: YYYY-MM-DD, source_url: URL}]) or choose another basis (--provider, --price-basis)"
    )


def quote_label(quote: PriceQuote) -> str:
    """A quote in a few words for a table cell: provider and date, stale flagged."""
    if quote.origin == "user override":
        return "your $/GPU-h"
    stale = " (stale)" if quote.stale else ""
    return f"{quote.provider} {quote.as_of}{stale}"
