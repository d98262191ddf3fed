"""Deploy commands: ``gpuplan fleet`` (tiered pools for several workload classes) and
``gpuplan k8s render | inventory | apply`` (manifests, cluster inventory, server-side apply)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from gpuplan.adapters.k8s.engine_args import ENGINES
from gpuplan.adapters.k8s.inventory import ClusterInventory
from gpuplan.core.errors import UserInputError
from gpuplan.core.fleet.planner import FleetPlan
from gpuplan.core.fleet.pool_units import MIG_SEPARATOR
from gpuplan.interfaces.cli.app import (
    CatalogOpt,
    FormatOpt,
    PriceBasisOpt,
    ProviderOpt,
    app,
    catalog_from,
    fmt,
    guarded,
)
from gpuplan.interfaces.cli.render import console, json_or_table, lines, table
from gpuplan.interfaces.cli.views import quote_lines
from gpuplan.usecases.fleet import load_fleet, plan_from_spec

k8s_app = typer.Typer(
    no_args_is_help=True, help="Kubernetes: render manifests, read the GPU inventory, apply."
)
app.add_typer(k8s_app, name="k8s")

KubeconfigOpt = Annotated[
    Path | None, typer.Option(help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
]
ContextOpt = Annotated[str | None, typer.Option(help="kubeconfig context")]


@app.command("fleet")
@guarded
def fleet_cmd(
    fleet: Annotated[Path, typer.Argument(help="fleet YAML (docs/deploy.md)")],
    inventory: Annotated[
        Path | None, typer.Option(help="owned GPUs: JSON of 'gpuplan k8s inventory --format json'")
    ] = None,
    catalog: CatalogOpt = None,
    provider: ProviderOpt = None,
    price_basis: PriceBasisOpt = None,
    format: FormatOpt = "table",
) -> None:
    """Cheapest set of GPU pools and routing of classes that meets every class's SLA."""
    f = fmt(format)
    result = plan_from_spec(
        load_fleet(fleet), catalog_from(catalog), inventory=inventory, provider=provider, basis=price_basis
    )
    _fleet_view(result, f)


def _fleet_quotes(r: FleetPlan) -> None:
    """The price basis and the quote of each pool's GPU (a MIG slice: its whole GPU's quote)."""
    parents = [p.unit.split(MIG_SEPARATOR)[0] for p in r.pools]
    lines(quote_lines(r.price_basis, [p.plan.price_quote for p in r.pools], parents), title="Quotes")


@json_or_table
def _fleet_view(r: FleetPlan) -> None:
    table(
        f"Fleet {r.name} ({r.engine}; {r.search})",
        ["pool", "gpu", "tier", "units", "owned", "tp", "repl", "dtype", "req/s", "util", "$/month"],
        [
            (
                p.name,
                p.unit,
                p.tier,
                p.units,
                p.owned_units,
                p.plan.layout.tp,
                p.plan.layout.replicas,
                p.plan.layout.weight_dtype,
                p.rate_rps,
                f"{p.utilisation:.0%}",
                p.usd_per_month,
            )
            for p in r.pools
        ],
    )
    table(
        "Tiers",
        ["tier", "gpu", "GPUs", "util", "$/month"],
        [
            (t.tier, ", ".join(t.units), t.physical_gpus, f"{t.utilisation:.0%}", t.usd_per_month)
            for t in r.tiers
        ],
    )
    if r.training:
        table(
            "Training",
            ["job", "gpu", "GPUs", "hours", "$/run", "$/month"],
            [(t.name, t.gpu, t.gpus, t.wall_hours, t.usd_per_run, t.usd_per_month) for t in r.training],
        )
    _fleet_quotes(r)
    items = [f"total ${r.usd_per_month:,.0f}/month (serving ${r.serving_usd_per_hour:,.2f}/h)"]
    if r.best_single_type and r.saving_usd_per_month is not None:
        items.append(
            f"best single-type fleet: all on {r.best_single_type.unit} ${r.best_single_type.usd_per_month or 0:,.0f}"
            f"/month; saving ${r.saving_usd_per_month:,.0f}/month ({(r.saving_share or 0):.0%})"
        )
    items += [f"all on {s.unit}: cannot serve {s.reason}" for s in r.single_type if s.usd_per_month is None]
    lines(items + r.notes, title="Summary")


@k8s_app.command("render")
@guarded
def render_cmd(
    source: Annotated[Path, typer.Argument(help="recommend JSON, fleet JSON, or fleet YAML")],
    engine: Annotated[str, typer.Option(help="vllm | sglang | tgi")] = "vllm",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="directory (default: stdout)")] = None,
    namespace: Annotated[str, typer.Option(help="namespace of the objects")] = "gpuplan",
    max_model_len: Annotated[
        int | None, typer.Option(help="context of a recommend plan (input + output)")
    ] = None,
    bench_image: Annotated[
        str | None, typer.Option(help="image with gpuplan: adds the in-cluster benchmark Job")
    ] = None,
    checkpoint: Annotated[
        str | None, typer.Option(help="pre-quantised weights to load (int4/int8 plans), e.g. an AWQ repo")
    ] = None,
    catalog: CatalogOpt = None,
) -> None:
    """Deployment, Service, PDB per pool; Namespace, PriorityClasses, optional benchmark Job."""
    from gpuplan.usecases.deploy import (
        dump,
        pools_from_file,
        render_files,
        render_warnings,
        with_checkpoint,
        write_files,
    )

    if engine not in ENGINES:
        raise UserInputError(f"--engine {engine!r} is not one of {', '.join(ENGINES)}")
    pools = pools_from_file(source, catalog_from(catalog), max_model_len=max_model_len)
    pools = with_checkpoint(pools, checkpoint, engine)
    files = render_files(pools, engine, namespace=namespace, bench_image=bench_image)
    for warning in render_warnings(pools, engine):
        sys.stderr.write(f"warning: {warning}\n")
    if output is None:
        sys.stdout.write(dump([obj for objs in files.values() for obj in objs]))
        return
    for path in write_files(files, output):
        console.print(str(path), highlight=False, markup=False)


@k8s_app.command("inventory")
@guarded
def inventory_cmd(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    catalog: CatalogOpt = None,
    format: FormatOpt = "table",
) -> None:
    """GPU products, counts, MIG slices, allocatable vs used, per node and in total."""
    from gpuplan.adapters.k8s.cluster import api_client, read_inventory

    f = fmt(format)
    inv = read_inventory(api_client(kubeconfig, context), catalog_from(catalog))
    _inventory_view(inv, f)


@json_or_table
def _inventory_view(inv: ClusterInventory) -> None:
    table(
        f"GPU nodes of {inv.server}",
        ["node", "product", "gpu", "mig", "alloc", "used", "gpuplan"],
        [
            (n.node, n.product, n.gpu, n.mig_profile, n.allocatable, n.used, n.used_by_gpuplan)
            for n in inv.nodes
        ],
    )
    table(
        "Totals",
        ["product", "gpu", "mig", "nodes", "alloc", "used", "available"],
        [(t.product, t.gpu, t.mig_profile, t.nodes, t.allocatable, t.used, t.available) for t in inv.totals],
    )


@k8s_app.command("apply")
@guarded
def apply_cmd(
    directory: Annotated[Path, typer.Argument(help="the -o DIR of 'gpuplan k8s render'")],
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Server-side apply every object, after a server-side dry-run of all of them."""
    from gpuplan.adapters.k8s.cluster import api_client, apply_objects, object_path
    from gpuplan.adapters.k8s.validate import schema_available, validate_schema
    from gpuplan.usecases.deploy import load_manifests

    objects = load_manifests(directory)
    for obj in objects:
        object_path(obj)
    if schema_available():
        validate_schema(objects)
    applied = apply_objects(api_client(kubeconfig, context), objects)
    lines([f"{name} applied" for name in applied], title=f"{len(applied)} objects (dry-run passed first)")
