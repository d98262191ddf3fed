"""The single loader of the GPU catalog: bundled data, then the user's config dir, then ``--catalog`` files.

Every other package gets GPUs and prices from here, so there is exactly one place that decides
precedence and validation. Layers, later wins:

1. bundled ``gpuplan/data/catalog/gpus/*.yaml`` and ``prices.csv`` (read with importlib.resources, so
   it works from a wheel or a zip); a problem here is our bug -> :class:`~gpuplan.core.errors.DataError`;
2. the config dir (``config_dir`` argument, else ``$GPUPLAN_CONFIG_DIR``, else ``~/.config/gpuplan``):
   ``gpus/*.yaml`` (one GPU mapping per file) and ``prices.csv``;
3. ``extra_files``: YAML files with optional top-level ``gpus:`` and ``prices:`` lists.

A user GPU mapping whose ``id`` names an existing GPU (id or alias, case-insensitive) is a partial
override: it is merged deep onto the existing spec and re-validated, so one field can be corrected
without copying the file. Any other mapping must be a complete :class:`GpuSpec`. User prices replace
all earlier prices of the same (gpu, kind). Problems in user files -> :class:`FileFormatError`.
Nothing is read at import time. The bundled files are parsed once per process, and
:func:`default_catalog` caches the no-argument load.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, get_args

from gpuplan.adapters.catalog._parse import load_yaml, read_prices_csv, validate_gpu, validate_price
from gpuplan.core.errors import (
    DataError,
    FileFormatError,
    GpuplanError,
    UnknownNameError,
    closest,
    lookup_key,
)
from gpuplan.core.hardware import GpuSpec, PriceEntry, PriceKind, Vendor
from gpuplan.core.pricing import PriceBasis, PriceQuote, median_quote, quote_on_basis
from gpuplan.data import bundled

CONFIG_DIR_ENV = "GPUPLAN_CONFIG_DIR"
"""Environment variable that overrides the default config dir ``~/.config/gpuplan``."""

_HINT = "run 'gpuplan gpus' to list them"
_VENDOR_ORDER = {vendor: i for i, vendor in enumerate(get_args(Vendor))}
_EXTRA_KEYS = ("gpus", "prices")
_PRICE_KINDS: tuple[str, ...] = get_args(PriceKind)


def normalize_name(name: str) -> str:
    """Lookup key for ids and aliases (:func:`gpuplan.core.errors.lookup_key`)."""
    return lookup_key(name)


def build_index(specs: Iterable[GpuSpec], origin: str, error: type[GpuplanError]) -> dict[str, str]:
    """Normalized id/alias -> GPU id. Two GPUs answering to the same name is an error, because
    ``get_gpu`` must never silently pick one of two different GPUs."""
    index: dict[str, str] = {}
    for spec in specs:
        for name in (spec.id, *spec.aliases):
            key = normalize_name(name)
            owner = index.setdefault(key, spec.id)
            if owner != spec.id:
                raise error(
                    f"{origin}: name {name!r} of GPU {spec.id} is already a name of GPU {owner}",
                    hint="make ids and aliases unique",
                )
    return index


def representative_price(entries: Sequence[PriceEntry]) -> PriceEntry | None:
    """The default price policy, :func:`gpuplan.core.pricing.median_quote`: the lower median, across
    providers, of each provider's latest quote (kept here for callers of the catalog)."""
    return median_quote(entries)


@dataclass(frozen=True, eq=False)
class Catalog:
    """An immutable, validated set of GPUs and prices. Build it with :func:`load_catalog`
    (or directly from specs in tests); lookups never touch the disk."""

    gpus: Mapping[str, GpuSpec]
    prices: tuple[PriceEntry, ...] = ()
    user_priced: frozenset[tuple[str, str]] = frozenset()
    """(gpu id, kind) pairs whose prices the user gave (config dir, ``--catalog``): used on any basis."""
    _index: Mapping[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        gpus = dict(self.gpus)
        for key, spec in gpus.items():
            if key != spec.id:
                raise DataError(f"catalog: GPU stored under {key!r} has id {spec.id!r}")
        object.__setattr__(self, "gpus", MappingProxyType(gpus))
        object.__setattr__(self, "prices", tuple(self.prices))
        index = build_index(gpus.values(), "catalog", DataError)
        object.__setattr__(self, "_index", MappingProxyType(index))
        unknown = sorted({p.gpu for p in self.prices} - gpus.keys())
        if unknown:
            raise DataError(f"catalog: prices for unknown GPU id(s) {', '.join(unknown)}")

    def get_gpu(self, name: str) -> GpuSpec:
        """The GPU whose id or alias is ``name`` (case/separator-insensitive); did-you-mean on a miss."""
        gpu_id = self._index.get(normalize_name(name))
        if gpu_id is None:
            raise UnknownNameError("GPU", name, self.gpu_ids(), hint=_HINT)
        return self.gpus[gpu_id]

    def gpu_ids(self) -> list[str]:
        """All ids, ordered by vendor (NVIDIA, AMD, Intel), then launch year, then memory, for listings."""
        return sorted(self.gpus, key=lambda i: _listing_key(self.gpus[i]))

    def prices_for(self, gpu_id: str, kind: str | None = None) -> list[PriceEntry]:
        """Every price observation for a GPU (id or alias), newest first, then cheapest first.

        ``kind`` is a plain string because it usually comes from a CLI flag or scenario file; an
        unknown kind raises :class:`UnknownNameError` with did-you-mean instead of matching nothing.
        """
        if kind is not None and kind not in _PRICE_KINDS:
            raise UnknownNameError("price kind", kind, _PRICE_KINDS, hint=f"one of {', '.join(_PRICE_KINDS)}")
        gid = self.get_gpu(gpu_id).id
        rows = [p for p in self.prices if p.gpu == gid and (kind is None or p.kind == kind)]
        return sorted(rows, key=lambda p: (-p.as_of.toordinal(), p.usd, p.provider))

    def price(self, gpu_id: str, kind: str = "on_demand") -> PriceEntry | None:
        """One representative price (see :func:`representative_price`), or ``None`` if none is known."""
        return representative_price(self.prices_for(gpu_id, kind))

    def quote(self, gpu_id: str, kind: str, basis: PriceBasis) -> PriceQuote | None:
        """The quote of ``gpu_id`` and ``kind`` on ``basis`` (the user's own prices on any basis), or
        ``None`` when no provider of the basis quotes it."""
        gid = self.get_gpu(gpu_id).id
        user = (gid, kind) in self.user_priced
        return quote_on_basis(entries=self.prices_for(gid, kind), basis=basis, user_given=user)

    def cloud_providers(self) -> list[str]:
        """Every provider with a cloud (not purchase) quote, a user's own included."""
        return sorted({p.provider for p in self.prices if p.kind != "purchase"}, key=str.casefold)


def _listing_key(spec: GpuSpec) -> tuple[int, int, float, str]:
    return (_VENDOR_ORDER.get(spec.vendor, len(_VENDOR_ORDER)), spec.launch_year, spec.memory_bytes, spec.id)


class _Builder:
    """Mutable state while layers are applied; frozen into a :class:`Catalog` at the end."""

    def __init__(self) -> None:
        self.gpus: dict[str, GpuSpec] = {}
        self.prices: list[PriceEntry] = []
        self.index: dict[str, str] = {}
        self.user_priced: set[tuple[str, str]] = set()

    def resolve(self, name: str) -> str | None:
        return self.index.get(normalize_name(name))

    def put_gpu(self, spec: GpuSpec, origin: str, error: type[GpuplanError]) -> None:
        candidate = {**self.gpus, spec.id: spec}
        self.index = build_index(candidate.values(), origin, error)
        self.gpus = candidate

    def add_user_gpu(self, data: Any, origin: str) -> None:
        """Add a new GPU, or deep-merge a partial override onto an existing one and re-validate."""
        if not isinstance(data, Mapping) or not isinstance(data.get("id"), str):
            raise FileFormatError(
                f"{origin}: each GPU entry must be a mapping with an 'id:' string",
                hint="see src/gpuplan/data/catalog/README.md",
            )
        existing = self.resolve(data["id"])
        if existing is None:
            spec = validate_gpu(data, origin, FileFormatError)
        else:
            base = self.gpus[existing].model_dump(mode="json")
            merged = _deep_merge(base, {**data, "id": existing})
            if "notes" not in data:
                changed = ", ".join(sorted(k for k in data if k != "id")) or "nothing"
                merged["notes"] = f"{base['notes']} [Overridden by {origin}: {changed}.]".strip()
            spec = validate_gpu(merged, origin, FileFormatError)
        self.put_gpu(spec, origin, FileFormatError)

    def set_prices(self, entries: Sequence[PriceEntry], origin: str, error: type[GpuplanError]) -> None:
        """Resolve each entry's GPU name to an id; replace earlier prices of the same (gpu, kind)."""
        resolved = []
        for entry in entries:
            gpu_id = self.resolve(entry.gpu)
            if gpu_id is None:
                hint = closest(entry.gpu, self.gpus)
                maybe = f"; did you mean {', '.join(hint)}?" if hint else ""
                raise error(f"{origin}: price for unknown GPU {entry.gpu!r}{maybe}", hint=_HINT)
            resolved.append(entry.model_copy(update={"gpu": gpu_id}))
        replaced = {(e.gpu, e.kind) for e in resolved}
        self.prices = [p for p in self.prices if (p.gpu, p.kind) not in replaced] + resolved
        self.user_priced |= replaced  # only user layers set prices (the bundled ones are loaded whole)

    def freeze(self) -> Catalog:
        return Catalog(gpus=self.gpus, prices=tuple(self.prices), user_priced=frozenset(self.user_priced))


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Nested mappings merge key by key; anything else (numbers, lists such as aliases) is replaced."""
    out = dict(base)
    for key, value in override.items():
        current = out.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            out[key] = _deep_merge(current, value)
        else:
            out[key] = value
    return out


@functools.lru_cache(maxsize=1)
def _bundled() -> tuple[tuple[GpuSpec, ...], tuple[PriceEntry, ...]]:
    """Parse and check the bundled files once per process (specs are frozen, so sharing is safe).
    Bundled files must be perfect: every error here is a DataError naming the file."""
    builder = _Builder()
    data = bundled("catalog")
    files = sorted(
        (f for f in data.joinpath("gpus").iterdir() if f.name.endswith(".yaml")), key=lambda f: f.name
    )
    if not files:
        raise DataError("bundled catalog: no GPU files found in gpuplan/data/catalog/gpus")
    for file in files:
        origin = f"bundled catalog file gpus/{file.name}"
        spec = validate_gpu(load_yaml(file.read_text(encoding="utf-8"), origin, DataError), origin, DataError)
        if f"{spec.id.lower()}.yaml" != file.name:
            raise DataError(f"{origin}: file name must be the lower-cased id ({spec.id.lower()}.yaml)")
        builder.put_gpu(spec, origin, DataError)
    origin = "bundled catalog file prices.csv"
    prices = read_prices_csv(data.joinpath("prices.csv").read_text(encoding="utf-8"), origin, DataError)
    unknown = sorted({p.gpu for p in prices} - builder.gpus.keys())
    if unknown:
        raise DataError(f"{origin}: prices for GPU id(s) without a spec: {', '.join(unknown)}")
    return tuple(builder.gpus.values()), tuple(prices)


def _load_bundled(builder: _Builder) -> None:
    specs, prices = _bundled()
    for spec in specs:
        builder.gpus[spec.id] = spec
    builder.index = build_index(specs, "bundled catalog", DataError)
    builder.prices = list(prices)


def default_config_dir() -> Path:
    """``$GPUPLAN_CONFIG_DIR`` if set, else ``~/.config/gpuplan``."""
    env = os.environ.get(CONFIG_DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / ".config" / "gpuplan"


def _read_user_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileFormatError(f"{path}: no such file", hint="check the --catalog path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"{path}: cannot be read ({exc})") from None


def _load_config_dir(builder: _Builder, config_dir: Path) -> None:
    """``gpus/*.yaml`` (one GPU mapping, full or partial, per file) and ``prices.csv``, if present."""
    gpu_dir = config_dir / "gpus"
    if gpu_dir.is_dir():
        for path in sorted(gpu_dir.glob("*.yaml")):
            data = load_yaml(_read_user_file(path), str(path), FileFormatError)
            if data is not None:
                builder.add_user_gpu(data, str(path))
    price_file = config_dir / "prices.csv"
    if price_file.is_file():
        entries = read_prices_csv(_read_user_file(price_file), str(price_file), FileFormatError)
        builder.set_prices(entries, str(price_file), FileFormatError)


def _load_extra_file(builder: _Builder, path: Path) -> None:
    """A ``--catalog`` file: ``{gpus: [GPU mappings], prices: [PriceEntry mappings]}``, both optional."""
    origin = str(path)
    data = load_yaml(_read_user_file(path), origin, FileFormatError)
    if data is None:
        return
    if not isinstance(data, Mapping):
        raise FileFormatError(f"{origin}: top level must be a mapping with 'gpus:' and/or 'prices:'")
    unknown = sorted(str(k) for k in data if k not in _EXTRA_KEYS)
    if unknown:
        raise FileFormatError(
            f"{origin}: unknown top-level key(s) {', '.join(unknown)} (allowed: {', '.join(_EXTRA_KEYS)})"
        )
    for key in _EXTRA_KEYS:
        if not isinstance(data.get(key) or [], list):
            raise FileFormatError(f"{origin}: '{key}:' must be a list of mappings")
    for gpu in data.get("gpus") or []:
        builder.add_user_gpu(gpu, origin)
    prices = [
        validate_price(p, f"{origin} prices[{i}]", FileFormatError)
        for i, p in enumerate(data.get("prices") or [])
    ]
    builder.set_prices(prices, origin, FileFormatError)


def load_catalog(*, extra_files: Sequence[Path] = (), config_dir: Path | None = None) -> Catalog:
    """Load bundled data, then the config dir, then ``extra_files`` in order (see module docstring).

    ``config_dir=None`` means :func:`default_config_dir`; a missing directory is simply skipped.
    """
    builder = _Builder()
    _load_bundled(builder)
    _load_config_dir(builder, config_dir if config_dir is not None else default_config_dir())
    for path in extra_files:
        _load_extra_file(builder, Path(path))
    return builder.freeze()


@functools.lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    """The catalog with no ``--catalog`` files, loaded once per process (call ``cache_clear()`` in
    tests that change ``$GPUPLAN_CONFIG_DIR``)."""
    return load_catalog()
