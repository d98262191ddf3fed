"""The default price policy (latest quote per provider, lower median across providers) and price queries."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.adapters.catalog.loader import Catalog, load_catalog, representative_price
from gpuplan.core.errors import UnknownNameError
from gpuplan.core.hardware import PriceEntry


def _p(provider: str, usd: float, as_of: date, notes: str = "") -> PriceEntry:
    return PriceEntry(
        gpu="X",
        kind="on_demand",
        provider=provider,
        usd=usd,
        as_of=as_of,
        source_url="https://example.com/" + provider,
        notes=notes,
    )


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return load_catalog(config_dir=tmp_path_factory.mktemp("empty-config"))


def test_no_prices_means_none() -> None:
    assert representative_price([]) is None


def test_single_price_is_returned() -> None:
    only = _p("A", 2.0, date(2026, 1, 1))
    assert representative_price([only]) is only


def test_each_provider_counts_once_with_its_latest_quote() -> None:
    old_aws = _p("AWS", 12.29, date(2025, 1, 1))  # superseded by AWS's own newer quote
    entries = [
        old_aws,
        _p("AWS", 6.88, date(2026, 11, 9)),
        _p("Lambda", 3.99, date(2026, 9, 25)),
        _p("GCP", 10.98, date(2026, 9, 26)),
    ]
    chosen = representative_price(entries)
    assert (
        chosen is not None and chosen.provider == "AWS" and chosen.usd == 6.88
    )  # median of 3.99, 6.88, 10.98


def test_lower_median_leans_cheap_and_returns_a_real_observation() -> None:
    entries = [
        _p("A", 1.0, date(2026, 1, 1)),
        _p("B", 2.0, date(2026, 1, 1)),
        _p("C", 3.0, date(2026, 1, 1)),
        _p("D", 100.0, date(2026, 1, 1)),
    ]
    chosen = representative_price(entries)
    assert chosen is entries[1]  # lower median of 4; the 100.0 outlier cannot move it


def test_several_rows_on_a_providers_latest_date_are_reduced_to_their_lower_median() -> None:
    entries = [
        _p("RunPod", 3.99, date(2026, 11, 9), "Secure"),
        _p("RunPod", 2.69, date(2026, 11, 9), "Community"),
        _p("RunPod", 3.49, date(2026, 9, 25), "Secure, older"),
    ]
    chosen = representative_price(entries)
    assert chosen is not None and chosen.usd == 2.69


def test_provider_names_are_case_insensitive() -> None:
    entries = [
        _p("aws", 5.0, date(2025, 1, 1)),
        _p("AWS", 4.0, date(2026, 1, 1)),
        _p("Lambda", 3.0, date(2026, 1, 1)),
    ]
    chosen = representative_price(entries)
    assert chosen is not None and chosen.usd == 3.0  # providers {AWS: 4.0, Lambda: 3.0} -> lower median 3.0


_entries = st.lists(
    st.builds(
        _p,
        st.sampled_from(["A", "B", "C", "D", "E"]),
        st.floats(0.1, 50.0),
        st.dates(date(2023, 1, 1), date(2027, 1, 1)),
    ),
    min_size=1,
    max_size=12,
)


@given(_entries, st.randoms())
def test_policy_properties(entries: list[PriceEntry], rnd: object) -> None:
    chosen = representative_price(entries)
    assert chosen is not None and chosen in entries
    latest = {e.provider: max(x.as_of for x in entries if x.provider == e.provider) for e in entries}
    assert chosen.as_of == latest[chosen.provider]  # never a superseded quote
    candidates = [e.usd for e in entries if e.as_of == latest[e.provider]]
    assert min(candidates) <= chosen.usd <= max(candidates)
    shuffled = list(entries)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    again = representative_price(shuffled)
    assert again is not None and again.usd == chosen.usd  # order of the CSV does not matter


def test_bundled_h100_price_uses_the_post_cut_aws_quote(catalog: Catalog) -> None:
    chosen = catalog.price("H100-SXM")
    assert chosen is not None and chosen.kind == "on_demand" and chosen.gpu == "H100-SXM"
    assert 2.0 <= chosen.usd <= 8.0
    aws = [p for p in catalog.prices_for("H100-SXM", "on_demand") if p.provider == "AWS"]
    assert representative_price(aws).usd == 6.88  # type: ignore[union-attr]


def test_prices_for_filters_and_orders_newest_first(catalog: Catalog) -> None:
    rows = catalog.prices_for("nvidia h100 80gb hbm3")
    assert {p.gpu for p in rows} == {"H100-SXM"} and {p.kind for p in rows} >= {
        "on_demand",
        "spot",
        "purchase",
    }
    dates = [p.as_of for p in rows]
    assert dates == sorted(dates, reverse=True)
    assert all(p.kind == "spot" for p in catalog.prices_for("H100-SXM", "spot"))


def test_purchase_price(catalog: Catalog) -> None:
    purchase = catalog.price("H100-SXM", "purchase")
    assert purchase is not None and purchase.usd == 27_500  # midpoint of the 25-30k street-price range
    assert "25000-30000" in purchase.notes


def test_price_for_unknown_gpu_raises(catalog: Catalog) -> None:
    with pytest.raises(UnknownNameError):
        catalog.price("H1000")


def test_allowlisted_gpu_has_no_on_demand_price_but_may_have_purchase(catalog: Catalog) -> None:
    assert catalog.price("H20") is None
    h20 = catalog.price("H20", "purchase")
    assert h20 is not None and h20.as_of == date(2025, 5, 25)  # the newer Reuters figure wins


def test_price_notes_explain_conservative_dates() -> None:
    text = Path(__file__).resolve().parents[4].joinpath("src/gpuplan/data/catalog/prices.csv").read_text()
    assert "conservative" in text and "midpoint of range" in text


def test_unknown_price_kind_suggests_valid_kinds(catalog: Catalog) -> None:
    with pytest.raises(UnknownNameError, match="did you mean on_demand"):
        catalog.price("H100-SXM", "ondemand")
