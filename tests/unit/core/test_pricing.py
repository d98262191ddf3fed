"""Prices on one basis (core/pricing.py): which providers a basis holds, the quote it gives a GPU, the
stale flag, the message for a GPU it does not quote, and one-line errors for bad choices."""

from __future__ import annotations

from datetime import date

import pytest

from gpuplan.core.errors import UserInputError
from gpuplan.core.hardware import PriceEntry
from gpuplan.core.pricing import (
    STALE_AFTER_DAYS,
    PriceBasis,
    PriceProvider,
    choose_basis,
    is_stale,
    median_quote,
    missing_quote,
    quote_on_basis,
    typed_quote,
)

DAY = date(2026, 12, 3)
PROVIDERS = [
    PriceProvider.model_validate(
        {"name": n, "provider_class": c, "pricing_url": f"https://{n.lower()}.example/p", "market_median": m}
    )
    for n, c, m in [
        ("AWS", "hyperscaler", False),
        ("GCP", "hyperscaler", False),
        ("Lambda", "specialist", True),
        ("Nebius", "specialist", True),
        ("RunPod", "marketplace", True),
    ]
]
QUOTED = ["AWS", "GCP", "Lambda", "Nebius", "RunPod", "MyCloud"]


def _entry(provider: str, usd: float, as_of: date = date(2026, 11, 1), gpu: str = "H100-SXM") -> PriceEntry:
    return PriceEntry.model_validate(
        {
            "gpu": gpu,
            "kind": "on_demand",
            "provider": provider,
            "usd": usd,
            "as_of": as_of,
            "source_url": f"https://{provider.lower()}.example/q",
        }
    )


def _basis(provider: str | None = None, basis: str | None = None) -> PriceBasis:
    return choose_basis(
        providers=PROVIDERS, quoted_providers=QUOTED, provider=provider, basis=basis, priced_on=DAY
    )


def test_the_default_basis_is_the_market_median_over_the_marked_providers() -> None:
    basis = _basis()
    assert basis.key == "market-median"
    assert basis.providers == ("Lambda", "Nebius", "RunPod")
    assert "Lambda, Nebius, RunPod" in basis.label and basis.stale_after_days == STALE_AFTER_DAYS


def test_a_class_basis_holds_that_class_and_a_provider_basis_one_provider() -> None:
    assert _basis(basis="hyperscaler").providers == ("AWS", "GCP")
    assert _basis(basis="hyperscaler").key == "class:hyperscaler"
    aws = _basis(provider="aws")  # case-insensitive, spelt as the catalog spells it
    assert (aws.key, aws.providers) == ("provider:aws", ("AWS",))
    assert _basis(provider="MyCloud").providers == ("MyCloud",)  # a user's own provider counts


def test_bad_choices_are_one_line_errors_naming_the_flag_and_the_valid_values() -> None:
    with pytest.raises(UserInputError) as unknown:
        _basis(provider="Oracle")
    assert str(unknown.value).startswith("--provider 'Oracle' is not a provider in the catalog")
    assert "AWS, GCP, Lambda, MyCloud, Nebius, RunPod" in str(unknown.value)
    with pytest.raises(UserInputError) as bad:
        _basis(basis="cheapest")
    assert (
        "--price-basis 'cheapest' is not one of market-median, hyperscaler, specialist, marketplace"
        in str(bad.value)
    )
    with pytest.raises(UserInputError, match="both choose the price basis"):
        _basis(provider="AWS", basis="hyperscaler")


def test_the_quote_is_the_lower_median_of_the_basis_providers_latest_quotes() -> None:
    entries = [
        _entry("AWS", 6.88),  # not on the market basis: ignored
        _entry("Lambda", 3.99),
        _entry("Lambda", 2.00, as_of=date(2025, 1, 1)),  # superseded by Lambda's newer quote
        _entry("Nebius", 3.85),
        _entry("RunPod", 2.69),
        _entry("RunPod", 3.99),  # RunPod's own lower median of two shapes the same day: 2.69
    ]
    quote = quote_on_basis(entries=entries, basis=_basis())
    # per provider: Lambda 3.99, Nebius 3.85, RunPod 2.69 -> sorted 2.69, 3.85, 3.99 -> median 3.85
    assert quote is not None and (quote.provider, quote.usd_per_gpu_hour) == ("Nebius", 3.85)
    assert (quote.kind, quote.as_of, quote.origin, quote.providers_quoting) == (
        "on_demand",
        date(2026, 11, 1),
        "catalog",
        3,
    )
    assert quote.source_url == "https://nebius.example/q"
    aws = quote_on_basis(entries=entries, basis=_basis(provider="AWS"))
    assert aws is not None and aws.usd_per_gpu_hour == 6.88


def test_no_provider_of_the_basis_quoting_gives_no_quote_but_the_users_own_price_counts() -> None:
    entries = [_entry("MyCloud", 2.10)]
    assert quote_on_basis(entries=entries, basis=_basis()) is None
    mine = quote_on_basis(entries=entries, basis=_basis(), user_given=True)
    assert mine is not None and (mine.provider, mine.origin) == ("MyCloud", "user catalog")


def test_a_quote_older_than_the_threshold_is_stale() -> None:
    assert not is_stale(as_of=date(2026, 6, 6), priced_on=DAY, stale_after_days=180)  # 180 days: not yet
    assert is_stale(as_of=date(2026, 6, 5), priced_on=DAY, stale_after_days=180)  # 181 days
    old = quote_on_basis(entries=[_entry("Lambda", 1.29, as_of=date(2025, 1, 1))], basis=_basis())
    fresh = quote_on_basis(entries=[_entry("Lambda", 1.29, as_of=date(2026, 11, 9))], basis=_basis())
    assert old is not None and old.stale and fresh is not None and not fresh.stale


def test_the_missing_quote_message_names_the_basis_and_how_to_add_a_price() -> None:
    text = missing_quote(gpu="H800", kind="on_demand", basis=_basis())
    assert text.startswith("no on-demand quote for H800 from the providers of the market-median price basis")
    assert "--catalog" in text and "{gpu: H800, kind: on_demand, provider: NAME" in text
    assert "--provider" in text and "--price-basis" in text


def test_a_typed_price_has_no_provider_date_or_link() -> None:
    quote = typed_quote(usd_per_gpu_hour=2.5, kind="spot")
    assert (quote.provider, quote.as_of, quote.source_url, quote.origin) == (
        None,
        None,
        None,
        "user override",
    )


def test_median_quote_of_nothing_is_none() -> None:
    assert median_quote([]) is None
