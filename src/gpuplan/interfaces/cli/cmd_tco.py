"""``gpuplan tco``: rent vs buy for a GPU × count (``--gpu --count``) or a recommended plan (PLAN.json)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.cost import (
    DEFAULT_AMORTISATION_YEARS,
    DEFAULT_PUE,
    DEFAULT_SERVER_OVERHEAD,
    DEFAULT_USD_PER_KWH,
    DEFAULT_UTILISATION,
)
from gpuplan.core.errors import UserInputError, check_whole_number
from gpuplan.core.hardware import MAX_GPU_COUNT
from gpuplan.interfaces.cli.app import (
    CatalogOpt,
    FormatOpt,
    PriceBasisOpt,
    ProviderOpt,
    app,
    catalog_from,
    fmt,
    guarded,
    refuse_flags,
)
from gpuplan.interfaces.cli.render import json_or_table, lines, table
from gpuplan.interfaces.cli.views import quote_lines
from gpuplan.usecases.pricing import price_basis as price_basis_of
from gpuplan.usecases.tco import TcoAnswer, TcoRequest, tco_for_gpu, tco_for_plan
from gpuplan.usecases.tco_growth import Growth, GrowthRequest, TcoGrowthAnswer, tco_for_growth

PlanArg = Annotated[Path | None, typer.Argument(help="a 'recommend --format json' answer (its best plan)")]
RentOpt = Annotated[float | None, typer.Option(help="rent $/GPU-hour (default: the basis's quote)")]
BuyOpt = Annotated[float | None, typer.Option(help="purchase $ per GPU (default: the catalog's)")]
ShareOpt = Annotated[float, typer.Option(help="share of hours used (rent billed, power drawn)")]
OverheadOpt = Annotated[float, typer.Option(help="host/network share on top of the GPU price")]
GrowthOpt = Annotated[
    float | None,
    typer.Option(help="with PLAN.json: re-plan at this many times its load (rate or concurrency)"),
]


@app.command("tco")
@guarded
def tco_cmd(
    plan: PlanArg = None,
    gpu: Annotated[str | None, typer.Option(help="GPU id (with --count), instead of PLAN.json")] = None,
    count: Annotated[int, typer.Option(help="GPUs to rent or buy")] = 1,
    usd_per_gpu_hour: RentOpt = None,
    purchase_usd: BuyOpt = None,
    utilisation: ShareOpt = DEFAULT_UTILISATION,
    pue: Annotated[float, typer.Option(help="power usage effectiveness of the site")] = DEFAULT_PUE,
    usd_per_kwh: Annotated[float, typer.Option(help="electricity price")] = DEFAULT_USD_PER_KWH,
    years: Annotated[float, typer.Option(help="amortisation period")] = DEFAULT_AMORTISATION_YEARS,
    server_overhead: OverheadOpt = DEFAULT_SERVER_OVERHEAD,
    resale: Annotated[float, typer.Option(help="share of the purchase recovered at the end")] = 0.0,
    staff_usd_per_month: Annotated[float, typer.Option(help="operations staff share per month")] = 0.0,
    catalog: CatalogOpt = None,
    provider: ProviderOpt = None,
    price_basis: PriceBasisOpt = None,
    load_growth: GrowthOpt = None,
    model: Annotated[str | None, typer.Option(help="with PLAN.json: re-plan for this (bigger) model")] = None,
    plot: Annotated[
        Path | None, typer.Option(help="also draw money spent by month to FILE.html or FILE.png")
    ] = None,
    format: FormatOpt = "table",
) -> None:
    """Rent vs buy: monthly cost of each, the break-even month, and the totals over the amortisation period;
    with PLAN.json and --load-growth/--model, re-plan the grown workload and price buying for it."""
    shape = fmt(format)
    ownership = {"utilisation": utilisation, "pue": pue, "usd_per_kwh": usd_per_kwh}
    ownership |= {"amortisation_years": years, "server_overhead": server_overhead}
    req = _request(
        rent_usd_per_gpu_hour=usd_per_gpu_hour, purchase_usd=purchase_usd, ownership=ownership,
        resale_share=resale, staff_usd_per_month=staff_usd_per_month,
    )  # fmt: skip
    what = TcoTarget(plan, gpu, count, provider, price_basis, _growth(load_growth, model))
    answer = _answer(what, req, catalog_from(catalog))
    _growth_view(answer, shape) if isinstance(answer, TcoGrowthAnswer) else _view(answer, shape)
    if plot is not None:
        from gpuplan.interfaces.plots.cost import write_tco_plot

        write_tco_plot(plot, answer)


@dataclass(frozen=True)
class TcoTarget:
    """What is rented or bought: a PLAN.json (grown when ``growth``), or ``gpu`` x ``count`` on a basis."""

    plan: Path | None
    gpu: str | None
    count: int
    provider: str | None
    price_basis: str | None
    growth: GrowthRequest | None


def _growth(load_growth: float | None, model: str | None) -> GrowthRequest | None:
    """``--load-growth`` / ``--model`` as a validated request (None: neither given)."""
    if load_growth is None and model is None:
        return None
    try:
        return GrowthRequest(load_growth=1.0 if load_growth is None else load_growth, model=model)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise UserInputError(f"--load-growth {load_growth}: {str(err['msg']).lower()}") from None


def _answer(what: TcoTarget, req: TcoRequest, cat: Catalog) -> TcoAnswer:
    """The one use-case call the target asks for."""
    if (what.plan is None) == (what.gpu is None):
        raise UserInputError(
            "give exactly one of PLAN.json and --gpu (with --count)",
            hint="e.g. gpuplan tco --gpu A100-80GB-SXM --count 8",
        )
    check_whole_number("--count", what.count, maximum=MAX_GPU_COUNT)
    if what.plan is None:
        if what.growth is not None:
            raise UserInputError(
                "--load-growth and --model re-plan a PLAN.json", hint="pass a recommend JSON"
            )
        basis = price_basis_of(cat, provider=what.provider, basis=what.price_basis)
        return tco_for_gpu(cat, gpu=str(what.gpu), count=what.count, basis=basis, req=req)
    extra = {"count": None if what.count == 1 else what.count}
    refuse_flags(PLAN_IS_PRICED, provider=what.provider, price_basis=what.price_basis, **extra)
    if what.growth is not None:
        return tco_for_growth(cat, what.plan, req=req, growth=what.growth)
    return tco_for_plan(cat, what.plan, req=req)


PLAN_IS_PRICED = (
    " with PLAN.json (it is priced at its own quote and count)",
    "drop them, or use --gpu G --count N",
)
"""Why ``--provider``, ``--price-basis`` and ``--count`` are refused beside a PLAN.json (``refuse_flags``)."""

FLAG_OF = {
    "rent_usd_per_gpu_hour": "--usd-per-gpu-hour",
    "purchase_usd": "--purchase-usd",
    "utilisation": "--utilisation",
    "pue": "--pue",
    "usd_per_kwh": "--usd-per-kwh",
    "amortisation_years": "--years",
    "server_overhead": "--server-overhead",
    "resale_share": "--resale",
    "staff_usd_per_month": "--staff-usd-per-month",
}
"""The flag of each field of a TCO request, for one-line errors."""


def _request(**values: object) -> TcoRequest:
    """The flags as a validated request; a value out of range is a one-line error naming its flag."""
    try:
        return TcoRequest.model_validate(values)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        flag = FLAG_OF.get(str(err["loc"][-1]), str(err["loc"][-1]))
        raise UserInputError(f"{flag} {err['input']}: {str(err['msg']).lower()}") from None


@json_or_table
def _view(r: TcoAnswer) -> None:
    pays = (
        "buying never pays for itself (renting costs no more than owning's running costs)"
        if r.break_even_months is None
        else f"buying pays for itself after {r.break_even_months:.1f} months of renting"
    )
    table(
        f"Rent vs buy: {r.gpus}x {r.gpu} over {r.horizon_months:.0f} months",
        ["", "rent", "own"],
        [
            ("$/month", r.rent_usd_per_month, r.own_opex_usd_per_month),
            ("upfront $", 0.0, r.upfront_usd),
            ("total $ over the period", r.rent_total_usd, r.own_total_usd),
        ],
    )
    a = r.ownership
    lines(
        [
            f"Break-even: {pays}; over {a.amortisation_years:g} years {r.cheaper} is cheaper.",
            f"Own $/month = power ${r.power_usd_per_month:,.0f} (TDP x {a.utilisation:.0%} x PUE {a.pue:g} x "
            f"${a.usd_per_kwh:g}/kWh) + staff ${r.staff_usd_per_month:,.0f}; upfront = purchase "
            f"${r.purchase.usd_per_gpu:,.0f} x (1 + {a.server_overhead:.0%} server) x {r.gpus}; resale "
            f"{r.resale_share:.0%} at the end.",
            f"Purchase price: {r.purchase.provider or 'yours'}"
            + (f", as of {r.purchase.as_of}, {r.purchase.source_url}" if r.purchase.source_url else "")
            + ".",
            *quote_lines(r.price_basis, [r.rent_quote], [r.gpu]),
        ],
        title="Why",
    )


@json_or_table
def _growth_view(r: TcoGrowthAnswer) -> None:
    """Today's plan against the re-planned one, then rent vs buy of the grown plan."""
    g = r.growth
    rows = [
        (name, p.model, p.gpu, p.gpus, f"tp{p.tp} pp{p.pp} x{p.replicas} {p.weight_dtype}", p.usd_per_hour,
         p.upfront_usd, p.break_even_months)
        for name, p in (("today", g.today), (f"grown x{g.load_growth:g}", g.grown))
    ]  # fmt: skip
    table(
        "Growth, re-planned on the same GPU, dtype and price basis",
        ["plan", "model", "gpu", "gpus", "layout", "$/h", "upfront $", "break-even months"],
        rows,
    )
    lines([f"Buy {g.extra_gpus:+d} {g.grown.gpu} for the grown load (${g.extra_upfront_usd:,.0f} more upfront now, "
           f"or the same later at today's price); {_break_even_words(g)}."], title="Growth")  # fmt: skip
    _view(r, "table")


def _break_even_words(g: Growth) -> str:
    """Whether buying for the grown load moves the break-even month (a fixed staff cost does)."""
    before, after = g.today.break_even_months, g.grown.break_even_months
    if before is None or after is None:
        return "no break-even month within the amortisation on one side"
    if abs(after - before) < BREAK_EVEN_SAME_MONTHS:
        return "the break-even month does not move (upfront and monthly savings scale with the GPUs)"
    spread = "the fixed monthly costs spread over another GPU count"
    return f"the break-even month moves from {before:.1f} to {after:.1f} ({spread})"


BREAK_EVEN_SAME_MONTHS = 0.05
"""Break-even months closer than this read as unchanged (a tenth of a printed month)."""
