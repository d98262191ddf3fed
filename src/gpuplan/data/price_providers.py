"""The bundled provider table, ``catalog/providers.csv``: each cloud seller of GPU-hours, its class
(hyperscaler, specialist cloud, marketplace), whether it is one of the fixed providers of the
market-median price basis, and its own price page. See ``core/pricing.py`` for how a basis uses it."""

from __future__ import annotations

import csv
import functools
import io

from pydantic import ValidationError

from gpuplan.core.errors import DataError
from gpuplan.core.pricing import PriceProvider
from gpuplan.data import read_bundled_text

COLUMNS = ("provider", "class", "market_median", "pricing_url", "notes")
_ORIGIN = "bundled catalog file providers.csv"
_FLAGS = {"yes": True, "no": False}


@functools.lru_cache(maxsize=1)
def price_providers() -> tuple[PriceProvider, ...]:
    """Every provider of the table, in file order; a malformed row is a DataError naming its line."""
    reader = csv.DictReader(io.StringIO(read_bundled_text("catalog", "providers.csv")))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise DataError(f"{_ORIGIN}: columns must be {','.join(COLUMNS)}")
    out = []
    for line, row in enumerate(reader, start=2):
        flag = _FLAGS.get(row["market_median"])
        if flag is None:
            raise DataError(f"{_ORIGIN} line {line}: market_median must be yes or no")
        try:
            out.append(
                PriceProvider.model_validate(
                    {
                        "name": row["provider"],
                        "provider_class": row["class"],
                        "pricing_url": row["pricing_url"],
                        "market_median": flag,
                    }
                )
            )
        except ValidationError as exc:
            raise DataError(f"{_ORIGIN} line {line}: {exc.errors()[0]['msg']}") from None
    names = [p.name.casefold() for p in out]
    if len(set(names)) != len(names):
        raise DataError(f"{_ORIGIN}: a provider is listed twice")
    return tuple(out)
