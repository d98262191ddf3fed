"""``gpuplan tco``: rent vs buy for a GPU × count, or for the best plan of a ``recommend`` JSON file.

The rent side is a quote on the answer's price basis (or the plan's own quote, or a typed price); the buy
side is the catalog's purchase price (or a typed one) with the ownership assumptions of
:class:`~gpuplan.core.cost.OwnershipAssumptions`. The arithmetic is :func:`gpuplan.core.tco.rent_vs_buy`.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from pydantic import Field, ValidationError

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.scenario_files.deployment import describe_validation_error
from gpuplan.core import jsontext
from gpuplan.core.cost import OwnershipAssumptions
from gpuplan.core.errors import FileFormatError, UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.pricing import PriceBasis, PriceQuote, missing_quote, typed_quote
from gpuplan.core.recommend.request import Recommendation
from gpuplan.core.tco import CostPoint, TcoInputs, TcoResult, cumulative_costs, rent_vs_buy


class PurchasePrice(FrozenModel):
    """The purchase price used: the catalog's (with its reporter, date and link) or the user's."""

    usd_per_gpu: float = Field(gt=0)
    provider: str | None
    as_of: date | None
    source_url: str | None


class TcoAnswer(TcoResult):
    """The JSON contract of ``gpuplan tco`` (docs/json.md): the result, then what it rests on."""

    price_basis: PriceBasis | None
    rent_quote: PriceQuote
    purchase: PurchasePrice
    ownership: OwnershipAssumptions
    resale_share: float
    staff_usd_per_month: float
    by_month: list[CostPoint] = Field(description="money spent by the end of each month, renting and owning")


class TcoRequest(FrozenModel):
    """What the user typed besides the GPUs: optional prices and the ownership assumptions."""

    kind: str = "on_demand"
    rent_usd_per_gpu_hour: float | None = Field(default=None, gt=0)
    purchase_usd: float | None = Field(default=None, gt=0)
    ownership: OwnershipAssumptions = OwnershipAssumptions()
    resale_share: float = Field(default=0.0, ge=0, lt=1)
    staff_usd_per_month: float = Field(default=0.0, ge=0)


def tco_for_gpu(catalog: Catalog, *, gpu: str, count: int, basis: PriceBasis, req: TcoRequest) -> TcoAnswer:
    """Rent vs buy for ``count`` GPUs, renting at their quote on ``basis`` (or the typed price)."""
    spec = catalog.get_gpu(gpu)
    if req.rent_usd_per_gpu_hour is not None:
        quote: PriceQuote | None = typed_quote(usd_per_gpu_hour=req.rent_usd_per_gpu_hour, kind=req.kind)
    else:
        quote = catalog.quote(spec.id, req.kind, basis)
    if quote is None:
        raise UserInputError(
            missing_quote(gpu=spec.id, kind=req.kind, basis=basis), hint="or give --usd-per-gpu-hour"
        )
    return tco_answer(catalog, spec.id, count, quote, basis, req)


def read_plan_file(path: Path) -> Recommendation:
    """A ``recommend --format json`` file with at least one plan; FileFormatError otherwise."""
    try:
        rec = Recommendation.model_validate(jsontext.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"cannot read {path}: {exc}") from None
    except ValidationError as exc:
        raise FileFormatError(
            f"{path}: not a 'gpuplan recommend --format json' answer ({describe_validation_error(exc, 1)})",
            hint="pass the recommend JSON, or --gpu",
        ) from None
    except ValueError:
        raise FileFormatError(
            f"{path}: not a 'gpuplan recommend --format json' answer (not JSON)",
            hint="pass the recommend JSON, or --gpu",
        ) from None
    if not rec.plans:
        raise FileFormatError(
            f"{path}: the recommendation has no plan to price", hint="pass --gpu and --count"
        )
    return rec


def tco_for_plan(catalog: Catalog, path: Path, *, req: TcoRequest) -> TcoAnswer:
    """Rent vs buy for the best plan of a ``recommend --format json`` file, at the plan's own quote."""
    rec = read_plan_file(path)
    best = rec.plans[0]
    quote = best.price_quote
    if req.rent_usd_per_gpu_hour is not None:
        quote = typed_quote(usd_per_gpu_hour=req.rent_usd_per_gpu_hour, kind=req.kind)
    if quote is None:
        raise UserInputError(f"{path}: its best plan has no price_quote", hint="give --usd-per-gpu-hour")
    if best.prefill is not None and best.prefill.gpu != best.gpu:
        raise UserInputError(
            f"{path}: its best plan has pools on two GPU types ({best.gpu_types}); tco prices one type",
            hint=f"run gpuplan tco --gpu {best.prefill.gpu} --count {best.prefill.count} and "
            f"--gpu {best.gpu} --count {best.layout.num_gpus}",
        )
    return tco_answer(catalog, best.gpu, best.num_gpus, quote, rec.price_basis, req)


def tco_answer(
    catalog: Catalog, gpu: str, count: int, quote: PriceQuote, basis: PriceBasis | None, req: TcoRequest
) -> TcoAnswer:
    spec = catalog.get_gpu(gpu)
    if spec.tdp_watts is None:
        raise UserInputError(
            f"{spec.id} has no published TDP in the catalog", hint="add tdp_watts with --catalog"
        )
    purchase = _purchase(catalog, spec.id, req)
    inputs = TcoInputs(
        gpu=spec.id,
        gpus=count,
        rent_usd_per_gpu_hour=quote.usd_per_gpu_hour,
        purchase_usd_per_gpu=purchase.usd_per_gpu,
        tdp_watts=spec.tdp_watts,
        ownership=req.ownership,
        resale_share=req.resale_share,
        staff_usd_per_month=req.staff_usd_per_month,
    )
    result = rent_vs_buy(inputs=inputs)
    return TcoAnswer(
        **result.model_dump(),
        price_basis=basis,
        rent_quote=quote,
        purchase=purchase,
        ownership=req.ownership,
        resale_share=req.resale_share,
        staff_usd_per_month=req.staff_usd_per_month,
        by_month=cumulative_costs(result=result, resale_share=req.resale_share),
    )


def _purchase(catalog: Catalog, gpu: str, req: TcoRequest) -> PurchasePrice:
    if req.purchase_usd is not None:
        return PurchasePrice(usd_per_gpu=req.purchase_usd, provider=None, as_of=None, source_url=None)
    price = catalog.price(gpu, "purchase")
    if price is None:
        raise UserInputError(
            f"no purchase price for {gpu} in the catalog",
            hint="give --purchase-usd, or add a kind: purchase price with --catalog",
        )
    return PurchasePrice(
        usd_per_gpu=price.usd, provider=price.provider, as_of=price.as_of, source_url=str(price.source_url)
    )
