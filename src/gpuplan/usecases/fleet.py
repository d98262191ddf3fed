"""Adapter of the fleet planner: read the fleet YAML and an inventory, resolve ids against the
catalog and the model registry, plan training jobs, call :func:`gpuplan.core.fleet.planner.plan_fleet`.

This is the only fleet module that does I/O; the rest of ``gpuplan.core.fleet`` is pure.
"""

from __future__ import annotations

from pathlib import Path

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.catalog.product_names import gpu_from_label
from gpuplan.adapters.models.registry import get_model
from gpuplan.adapters.scenario_files.deployment import parse_yaml_document
from gpuplan.core import jsontext
from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.errors import FileFormatError, InfeasibleError, UserInputError
from gpuplan.core.fleet.planner import FleetPlan, TrainingAllocation, plan_fleet
from gpuplan.core.fleet.pool_units import MIG_SEPARATOR, PoolUnit, mig_unit, parse_mig_ref, whole_gpu_unit
from gpuplan.core.fleet.spec import FleetSpec, InventoryItem
from gpuplan.core.pricing import PriceBasis
from gpuplan.core.recommend.request import GpuOffer
from gpuplan.data.bundled_calibration import default_calibration
from gpuplan.usecases.pricing import price_basis
from gpuplan.usecases.resolve import offers


def parse_fleet(text: str, *, origin: str) -> FleetSpec:
    """Validate fleet YAML; FileFormatError names ``origin`` and the line or field, on one line."""
    return parse_yaml_document(
        text, FleetSpec, origin=origin, keys="classes, gpus, ...", doc="docs/deploy.md"
    )


def load_fleet(path: Path) -> FleetSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"cannot read fleet file {path}: {exc}", hint="check the path") from None
    return parse_fleet(text, origin=str(path))


def _offer(spec: FleetSpec, catalog: Catalog, gpu_id: str, basis: PriceBasis) -> GpuOffer:
    """The offer of one GPU on the fleet's price basis; one provider that does not quote it is an error."""
    offer = offers(catalog, [gpu_id], price_kind=spec.price_kind, basis=basis)[0]
    if offer.price_missing and basis.key.startswith("provider:"):
        raise UserInputError(offer.price_missing)
    return offer


def pool_units(spec: FleetSpec, catalog: Catalog, basis: PriceBasis | None = None) -> list[PoolUnit]:
    """Whole-GPU units of ``spec.gpus`` and the MIG slices of ``spec.mig_profiles``, priced on ``basis``
    (default: the fleet file's ``price_provider``, else the market median)."""
    basis = basis or fleet_price_basis(spec, catalog)
    ids = dict.fromkeys(gpu_from_label(catalog, g)[0].id for g in spec.gpus)
    units = [whole_gpu_unit(_offer(spec, catalog, gid, basis)) for gid in ids]
    for ref in spec.mig_profiles:
        gpu_name, profile = parse_mig_ref(ref)
        gpu = gpu_from_label(catalog, gpu_name)[0]
        units.append(mig_unit(_offer(spec, catalog, gpu.id, basis), profile))
    return units


def fleet_price_basis(
    spec: FleetSpec, catalog: Catalog, *, provider: str | None = None, basis: str | None = None
) -> PriceBasis:
    """The fleet's price basis: ``--provider`` / ``--price-basis``, or the file's ``price_provider``
    (one of them: both is an error naming the two), else the market median."""
    if spec.price_provider is not None and (provider is not None or basis is not None):
        flag = "--provider" if provider is not None else "--price-basis"
        raise UserInputError(
            f"{flag} and the fleet file's price_provider both choose the price basis", hint="give one of them"
        )
    if spec.price_provider is not None:
        return price_basis(catalog, provider=spec.price_provider, provider_flag="price_provider")
    return price_basis(catalog, provider=provider, basis=basis)


def owned_units(items: list[InventoryItem], catalog: Catalog) -> dict[str, int]:
    """Unit id -> owned count; product labels and MIG profiles are checked against the catalog."""
    owned: dict[str, int] = {}
    for item in items:
        gpu, label_profile = gpu_from_label(catalog, item.gpu)
        profile = item.mig_profile or label_profile
        if profile is not None and profile not in {p.name for p in gpu.mig_profiles}:
            offered = ", ".join(p.name for p in gpu.mig_profiles) or "none"
            raise UserInputError(
                f"inventory: MIG profile {profile!r} is not offered by {gpu.id} (offers: {offered})"
            )
        unit = f"{gpu.id}{MIG_SEPARATOR}{profile}" if profile else gpu.id
        owned[unit] = owned.get(unit, 0) + item.count
    return owned


def inventory_items(path: Path) -> list[InventoryItem]:
    """Free GPUs of a ``gpuplan k8s inventory --format json`` file as inventory items."""
    expected = (
        'expected \'gpuplan k8s inventory --format json\' output: {"totals": [{"product", "available"}]}'
    )
    try:
        doc = jsontext.loads(path.read_text(encoding="utf-8"))
        rows = doc["totals"]
        return [_inventory_item(r, path, i) for i, r in enumerate(rows)]
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"cannot read inventory {path}: {exc}") from None
    except ValueError as exc:
        raise FileFormatError(f"{path}: not JSON ({exc})", hint=expected) from None
    except KeyError as exc:
        raise FileFormatError(f"{path}: missing key {exc}", hint=expected) from None
    except TypeError:
        raise FileFormatError(f"{path}: wrong shape", hint=expected) from None


def _inventory_item(row: dict[str, object], path: Path, index: int) -> InventoryItem:
    available = row["available"]
    if not isinstance(available, int) or isinstance(available, bool) or available < 0:
        raise FileFormatError(
            f"{path}: totals[{index}].available must be a whole number >= 0, got {available!r}"
        )
    mig = row.get("mig_profile")
    return InventoryItem(
        gpu=str(row["product"]), mig_profile=None if mig is None else str(mig), count=available
    )


def training_allocations(
    spec: FleetSpec, catalog: Catalog, basis: PriceBasis | None = None
) -> list[TrainingAllocation]:
    """Cheapest plan meeting each training job's deadline, on the fleet's whole-GPU types and price basis."""
    from gpuplan.usecases.train import TrainPlanRequest, plan_training

    gpus = tuple(dict.fromkeys(gpu_from_label(catalog, g)[0].id for g in spec.gpus))
    out = []
    for job in spec.training:
        req = TrainPlanRequest(
            model=job.model,
            method=job.method,
            tokens=job.tokens,
            seq_len=job.seq_len,
            global_batch=job.global_batch,
            gpus=gpus,
            max_gpus=spec.max_gpus_per_pool,
            deadline_hours=job.deadline_hours,
            objective="cost",
        )
        try:
            best = plan_training(req, catalog, basis=basis).plans[0]
        except InfeasibleError as exc:
            raise InfeasibleError(f"fleet infeasible: training job {job.name!r}: {exc.message}") from None
        per_run = best.cost.usd_by_price_kind.get(spec.price_kind) or best.cost.usd_by_price_kind.get(
            "on_demand"
        )
        if per_run is None:
            raise InfeasibleError(
                f"fleet infeasible: training job {job.name!r}: no {spec.price_kind} price for {best.gpu}"
            )
        out.append(
            TrainingAllocation(
                name=job.name,
                model=job.model,
                gpu=best.gpu,
                gpus=best.gpus,
                layout=best.layout,
                wall_hours=best.cost.wall_hours,
                usd_per_run=per_run,
                runs_per_month=job.runs_per_month,
                usd_per_month=per_run * job.runs_per_month,
            )
        )
    return out


def plan_from_spec(
    spec: FleetSpec,
    catalog: Catalog,
    *,
    inventory: Path | None = None,
    cal: Calibration | None = None,
    provider: str | None = None,
    basis: str | None = None,
) -> FleetPlan:
    """Resolve everything, then plan; errors are one-line gpuplan errors. ``provider`` / ``basis`` are
    ``--provider`` / ``--price-basis`` (see :func:`fleet_price_basis`)."""
    chosen = fleet_price_basis(spec, catalog, provider=provider, basis=basis)
    units = pool_units(spec, catalog, chosen)
    items = list(spec.inventory) + (inventory_items(inventory) if inventory else [])
    owned = owned_units(items, catalog)
    models = {c.model: get_model(c.model) for c in spec.classes}
    plan = plan_fleet(
        spec,
        models,
        units,
        cal=cal or default_calibration(),
        owned_units=owned,
        training=training_allocations(spec, catalog, chosen),
    )
    return plan.model_copy(update={"price_basis": chosen})
