"""The bundled GPU and price data: completeness, hand-checked values, unit and dense-vs-sparse sanity.

These tests catch the classic catalog bugs: a sparse figure left undivided, GiB typed as GB, a one-way
link bandwidth, a number without a source, or a GPU that no price covers.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest
import yaml

from gpuplan.adapters.catalog.loader import Catalog, load_catalog
from gpuplan.core.hardware import GpuSpec

EXPECTED_IDS = {
    "T4",
    "L4",
    "A10",
    "A10G",
    "L40S",
    "A100-40GB-PCIe",
    "A100-40GB-SXM",
    "A100-80GB-PCIe",
    "A100-80GB-SXM",
    "H100-PCIe",
    "H100-SXM",
    "H100-NVL",
    "H100-96GB-SXM",
    "H800",
    "H20",
    "H200-SXM",
    "H200-NVL",
    "GH200",
    "B200",
    "MI300X",
    "MI325X",
    "RTX-4090",
    "RTX-3090",
    "RTX-A6000",
    "RTX-A5000",
    "V100-32GB",
}
NO_ON_DEMAND_PRICE = {"H800", "H20", "H100-96GB-SXM", "H200-NVL"}
"""GPUs for which no dated public on-demand price was found (documented in catalog/README.md)."""

MIG_IDS = {
    "A100-40GB-PCIe",
    "A100-40GB-SXM",
    "A100-80GB-PCIe",
    "A100-80GB-SXM",
    "H100-PCIe",
    "H100-SXM",
    "H100-NVL",
    "H100-96GB-SXM",
    "H800",
    "H20",
    "H200-SXM",
    "H200-NVL",
    "GH200",
    "B200",
}
SCALE_UP = {
    "T4": ("pcie", 8),
    "L4": ("pcie", 8),
    "A10": ("pcie", 8),
    "A10G": ("pcie", 8),
    "L40S": ("pcie", 8),
    "RTX-4090": ("pcie", 8),
    "A100-40GB-PCIe": ("nvlink-bridge", 2),
    "A100-80GB-PCIe": ("nvlink-bridge", 2),
    "H100-PCIe": ("nvlink-bridge", 2),
    "H100-NVL": ("nvlink-bridge", 2),
    "H200-NVL": ("nvlink-bridge", 4),
    "RTX-A6000": ("nvlink-bridge", 2),
    "RTX-A5000": ("nvlink-bridge", 2),
    "RTX-3090": ("nvlink-bridge", 2),
    "A100-40GB-SXM": ("nvlink", 8),
    "A100-80GB-SXM": ("nvlink", 8),
    "H100-SXM": ("nvlink", 8),
    "H100-96GB-SXM": ("nvlink", 8),
    "H800": ("nvlink", 8),
    "H20": ("nvlink", 8),
    "H200-SXM": ("nvlink", 8),
    "GH200": ("nvlink", 1),
    "B200": ("nvlink", 8),
    "V100-32GB": ("nvlink", 8),
    "MI300X": ("xgmi", 8),
    "MI325X": ("xgmi", 8),
}
NVIDIA_SMI_NAMES = {
    "Tesla T4": "T4",
    "NVIDIA L4": "L4",
    "NVIDIA A10G": "A10G",
    "NVIDIA L40S": "L40S",
    "NVIDIA A100-SXM4-80GB": "A100-80GB-SXM",
    "NVIDIA A100-SXM4-40GB": "A100-40GB-SXM",
    "NVIDIA A100 80GB PCIe": "A100-80GB-PCIe",
    "NVIDIA A100-PCIE-40GB": "A100-40GB-PCIe",
    "NVIDIA H100 80GB HBM3": "H100-SXM",
    "NVIDIA H100 PCIe": "H100-PCIe",
    "NVIDIA H100 NVL": "H100-NVL",
    "NVIDIA H200": "H200-SXM",
    "NVIDIA H200 NVL": "H200-NVL",
    "NVIDIA B200": "B200",
    "NVIDIA H800": "H800",
    "NVIDIA H20": "H20",
    "NVIDIA GeForce RTX 4090": "RTX-4090",
    "NVIDIA GeForce RTX 3090": "RTX-3090",
    "NVIDIA RTX A6000": "RTX-A6000",
    "NVIDIA RTX A5000": "RTX-A5000",
    "Tesla V100-SXM2-32GB": "V100-32GB",
    "AMD Instinct MI300X": "MI300X",
    "AMD Instinct MI325X": "MI325X",
    "NVIDIA GH200 144G HBM3e": "GH200",
}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return load_catalog(config_dir=tmp_path_factory.mktemp("empty-config"))


def _bundled_files() -> list[str]:
    gpu_dir = resources.files("gpuplan.data").joinpath("catalog", "gpus")
    return sorted(f.name for f in gpu_dir.iterdir() if f.name.endswith(".yaml"))


def _gpus(catalog: Catalog) -> list[GpuSpec]:
    return [catalog.gpus[i] for i in catalog.gpu_ids()]


@pytest.mark.parametrize("name", _bundled_files())
def test_every_bundled_file_validates_and_is_named_after_its_id(name: str) -> None:
    text = resources.files("gpuplan.data").joinpath("catalog", "gpus", name).read_text(encoding="utf-8")
    spec = GpuSpec.model_validate(yaml.safe_load(text))
    assert name == f"{spec.id.lower()}.yaml"
    header = text.split("\nid:")[0]
    for caveat in ("DENSE", "BIDIRECTIONAL", "DECIMAL"):
        assert caveat in header, f"{name}: header comment must state the {caveat} convention"


def test_exactly_the_expected_gpus_are_bundled(catalog: Catalog) -> None:
    assert set(catalog.gpus) == EXPECTED_IDS
    assert len(_bundled_files()) == len(EXPECTED_IDS)


@pytest.mark.parametrize(
    ("gpu_id", "field", "expected"),
    [
        ("H100-SXM", "bf16", 989.5),
        ("H100-SXM", "fp8", 1979.0),
        ("A100-80GB-SXM", "bf16", 312.0),
        ("L4", "bf16", 121.0),
        ("MI300X", "bf16", 1307.4),
        ("B200", "fp4", 9000.0),
        ("H20", "bf16", 148.0),
        ("H20", "fp8", 296.0),
        ("RTX-4090", "fp16", 165.2),
        ("RTX-3090", "fp16", 71.0),
        ("A10G", "fp16", 70.0),
    ],
)
def test_hand_checked_tflops(catalog: Catalog, gpu_id: str, field: str, expected: float) -> None:
    assert catalog.get_gpu(gpu_id).tflops(field) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("gpu_id", "memory", "bandwidth"),
    [
        ("H100-SXM", 80e9, 3.35e12),
        ("A100-80GB-SXM", 80e9, 2.039e12),
        ("MI300X", 192e9, 5.3e12),
        ("GH200", 144e9, 4.9e12),
        ("B200", 180e9, 8e12),
        ("H20", 96e9, 4e12),
        ("H100-96GB-SXM", 96e9, 2.4e12),
        ("RTX-3090", 24e9, 936e9),
        ("RTX-A5000", 24e9, 768e9),
        ("H200-SXM", 141e9, 4.8e12),
    ],
)
def test_hand_checked_memory(catalog: Catalog, gpu_id: str, memory: float, bandwidth: float) -> None:
    spec = catalog.get_gpu(gpu_id)
    assert spec.memory_bytes == pytest.approx(memory)
    assert spec.memory_bandwidth_bytes_per_s == pytest.approx(bandwidth)


def test_paths_that_do_not_exist_are_null(catalog: Catalog) -> None:
    for gpu_id in ("T4", "V100-32GB"):
        spec = catalog.get_gpu(gpu_id)
        assert spec.tflops("bf16") is None and spec.tflops("tf32") is None and spec.tflops("fp8") is None
    assert catalog.get_gpu("A100-80GB-SXM").tflops("fp8") is None
    assert catalog.get_gpu("V100-32GB").tflops("int8") is None


def test_datatype_paths_follow_the_architecture(catalog: Catalog) -> None:
    for spec in _gpus(catalog):
        t = spec.dense_tflops
        assert (t.fp8 is not None) == (spec.family in {"ada", "hopper", "blackwell", "cdna3"}), spec.id
        assert (t.fp4 is not None) == (spec.family == "blackwell"), spec.id
        assert (t.bf16 is None) == (spec.family in {"turing", "volta"}), spec.id


def test_dense_not_sparse(catalog: Catalog) -> None:
    """Sparse headline numbers are exactly 2x dense; ratios and family ceilings catch an undivided one."""
    ceiling = {
        "turing": 70,
        "volta": 130,
        "ampere": 320,
        "ada": 370,
        "hopper": 1000,
        "blackwell": 2500,
        "cdna3": 1310,
    }
    for spec in _gpus(catalog):
        t = spec.dense_tflops
        assert t.fp16 <= ceiling[spec.family], f"{spec.id}: fp16 {t.fp16} looks like a sparse figure"
        if t.bf16 is not None:
            assert t.bf16 == pytest.approx(t.fp16), spec.id
        if t.fp8 is not None and t.bf16 is not None:
            assert t.fp8 == pytest.approx(2 * t.bf16, rel=0.02), spec.id
        if t.fp4 is not None and t.fp8 is not None:
            assert t.fp4 == pytest.approx(2 * t.fp8), spec.id
        if spec.family in {"hopper", "blackwell", "cdna3"} and t.tf32 is not None:
            assert t.tf32 == pytest.approx(t.fp16 / 2, rel=0.02), spec.id
    h100, nvl, h96 = (
        catalog.get_gpu(i).dense_tflops.bf16 or 0 for i in ("H100-SXM", "H100-NVL", "H100-96GB-SXM")
    )
    assert nvl < h96 < h100, "the 500 W Grand Teton H100 peak lies between H100 NVL and H100 SXM"


def test_units_are_si(catalog: Catalog) -> None:
    """Decimal bytes and bytes/s: a value typed in GB, GiB or GB/s would be far outside these ranges."""
    for spec in _gpus(catalog):
        assert 8e9 <= spec.memory_bytes <= 300e9, spec.id
        assert float(spec.memory_bytes / 1e9).is_integer(), f"{spec.id}: memory must be decimal GB, not GiB"
        assert 1e11 <= spec.memory_bandwidth_bytes_per_s <= 1e13, spec.id
        ic = spec.interconnect
        assert 1e10 <= ic.scale_up_bytes_per_s <= 2e12, spec.id
        if ic.pcie_gen is not None:
            assert ic.pcie_bytes_per_s == pytest.approx(32e9 * 2 ** (ic.pcie_gen - 3)), (
                f"{spec.id}: x16 bidir"
            )
        if ic.scale_up == "pcie":
            assert ic.scale_up_bytes_per_s == ic.pcie_bytes_per_s, spec.id


def test_scale_up_links(catalog: Catalog) -> None:
    assert {
        i: (s.interconnect.scale_up, s.interconnect.scale_up_domain_gpus) for i, s in catalog.gpus.items()
    } == SCALE_UP
    assert catalog.get_gpu("H100-SXM").interconnect.scale_up_bytes_per_s == 900e9  # bidirectional
    assert catalog.get_gpu("H800").interconnect.scale_up_bytes_per_s == 400e9
    assert catalog.get_gpu("GH200").interconnect.pcie_gen is None  # host link is NVLink-C2C


def test_mig_profiles(catalog: Catalog) -> None:
    assert {i for i, s in catalog.gpus.items() if s.mig_profiles} == MIG_IDS
    for gpu_id in MIG_IDS:
        spec = catalog.get_gpu(gpu_id)
        for p in spec.mig_profiles:
            g, gb = re.fullmatch(r"(\d)g\.(\d+)gb", p.name).groups()  # type: ignore[union-attr]
            assert p.compute_fraction == pytest.approx(int(g) / 7), p.name
            assert p.memory_bytes == pytest.approx(int(gb) * 1e9), p.name
            assert int(g) * p.max_instances <= 7, p.name
            assert p.memory_bytes <= spec.memory_bytes, p.name
        full = [p for p in spec.mig_profiles if p.name.startswith("7g.")]
        assert len(full) == 1 and full[0].memory_bytes == spec.memory_bytes, gpu_id
        assert max(p.max_instances for p in spec.mig_profiles) == 7, gpu_id


def test_every_numeric_group_has_a_source(catalog: Catalog) -> None:
    for spec in _gpus(catalog):
        groups = {
            "memory_bytes",
            "memory_bandwidth_bytes_per_s",
            "dense_tflops",
            "interconnect",
            "launch_year",
        }
        groups |= {"tdp_watts"} if spec.tdp_watts is not None else set()
        groups |= {"mig_profiles"} if spec.mig_profiles else set()
        assert groups <= set(spec.sources), f"{spec.id}: missing {groups - set(spec.sources)}"
        assert all(url.scheme == "https" for url in spec.sources.values()), spec.id
        assert "github.com/stas00/ml-engineering" in spec.notes, f"{spec.id}: notes must name the cross-check"


@pytest.mark.parametrize(("name", "gpu_id"), sorted(NVIDIA_SMI_NAMES.items()))
def test_device_names_printed_by_nvidia_smi_resolve(catalog: Catalog, name: str, gpu_id: str) -> None:
    assert catalog.get_gpu(name).id == gpu_id


def test_every_gpu_has_an_on_demand_price_or_is_allowlisted(catalog: Catalog) -> None:
    missing = {i for i in catalog.gpus if catalog.price(i, "on_demand") is None}
    assert missing == NO_ON_DEMAND_PRICE, "update NO_ON_DEMAND_PRICE and catalog/README.md together"


def test_bundled_prices_are_plausible(catalog: Catalog) -> None:
    assert len(catalog.prices) >= 90
    for p in catalog.prices:
        assert p.gpu in catalog.gpus
        if p.kind == "purchase":
            assert 500 <= p.usd <= 60_000, p
        else:
            assert 0.05 <= p.usd <= 20, p
    assert {p.kind for p in catalog.prices} >= {"on_demand", "spot", "capacity_block", "purchase"}


def test_prices_csv_has_the_documented_header() -> None:
    text = resources.files("gpuplan.data").joinpath("catalog", "prices.csv").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "gpu,kind,provider,usd,as_of,source_url,region,notes"


def test_readme_documents_the_allowlist() -> None:
    readme = Path(str(resources.files("gpuplan.data").joinpath("catalog", "README.md"))).read_text(
        encoding="utf-8"
    )
    assert all(gpu_id in readme for gpu_id in NO_ON_DEMAND_PRICE)


def test_power_references_match_the_referenced_gpu(catalog: Catalog) -> None:
    """A power-capped board names its full-power sibling; the copied TDP and 16-bit peak must be the
    sibling's own catalog values, and the sibling the same die (architecture string)."""
    capped = [g for g in (catalog.get_gpu(i) for i in catalog.gpu_ids()) if g.power_reference is not None]
    assert {g.id for g in capped} == {"H100-PCIe", "H100-NVL", "H200-NVL", "A100-40GB-PCIe", "A100-80GB-PCIe"}
    for gpu in capped:
        ref = gpu.power_reference
        assert ref is not None
        sibling = catalog.get_gpu(ref.gpu)
        assert (ref.tdp_watts, ref.bf16_tflops) == (sibling.tdp_watts, sibling.dense_tflops.bf16), gpu.id
        assert sibling.architecture == gpu.architecture, gpu.id
        assert sibling.tdp_watts is not None, sibling.id
        assert gpu.tdp_watts is not None and gpu.tdp_watts < sibling.tdp_watts, gpu.id


def test_every_cloud_quote_comes_from_a_provider_of_the_provider_table(catalog: Catalog) -> None:
    """A price basis selects quotes by provider: a cloud quote whose provider the table lacks would be on
    no basis but its own ``--provider`` (purchase prices name a reporter, not a seller of GPU-hours)."""
    from gpuplan.data.price_providers import price_providers

    table = {p.name for p in price_providers()}
    assert set(catalog.cloud_providers()) == table
    classes = {p.provider_class for p in price_providers()}
    assert classes == {"hyperscaler", "specialist", "marketplace"}
    assert {p.name for p in price_providers() if p.provider_class == "hyperscaler"} == {"AWS", "Azure", "GCP"}
    assert not any(p.market_median for p in price_providers() if p.provider_class == "hyperscaler")
