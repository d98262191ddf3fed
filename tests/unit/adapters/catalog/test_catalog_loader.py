"""The loader: lookups, layering (config dir, --catalog files), overrides and one-line error messages."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuplan.adapters.catalog.loader import CONFIG_DIR_ENV, Catalog, default_catalog, load_catalog
from gpuplan.core.errors import DataError, FileFormatError, UnknownNameError

H100_URL = "https://www.nvidia.com/en-us/data-center/h100/"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return load_catalog(config_dir=tmp_path_factory.mktemp("empty-config"))


@pytest.fixture
def empty_config(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    path.mkdir()
    return path


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _load_extra(tmp_path: Path, empty_config: Path, text: str) -> Catalog:
    return load_catalog(extra_files=[_write(tmp_path / "my.yaml", text)], config_dir=empty_config)


# --- lookups ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["H100-SXM", "h100-sxm", "H100 SXM", "h100_sxm", "NVIDIA H100 80GB HBM3", "H100-SXM5-80GB", "h100 sxm5"],
)
def test_get_gpu_is_case_and_separator_insensitive_and_knows_aliases(catalog: Catalog, name: str) -> None:
    assert catalog.get_gpu(name).id == "H100-SXM"


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        ("H100", {"H100-SXM", "H100-NVL"}),
        ("a100-80gb", {"A100-80GB-SXM", "A100-80GB-PCIe"}),
        ("mi300", {"MI300X"}),
    ],
)
def test_unknown_gpu_suggests_close_ids(catalog: Catalog, name: str, suggested: set[str]) -> None:
    with pytest.raises(UnknownNameError) as info:
        catalog.get_gpu(name)
    assert suggested <= set(info.value.suggestions)
    message = str(info.value)
    assert "did you mean" in message and "run 'gpuplan gpus' to list them" in message and "\n" not in message


def test_ambiguous_short_names_are_not_aliases(catalog: Catalog) -> None:
    for ambiguous in ("H100", "A100", "A100-80GB", "H200", "GH200 480GB"):
        with pytest.raises(UnknownNameError):
            catalog.get_gpu(ambiguous)


def test_gpu_ids_are_ordered_by_vendor_then_year_then_memory(catalog: Catalog) -> None:
    ids = catalog.gpu_ids()
    specs = [catalog.gpus[i] for i in ids]
    vendors = [s.vendor for s in specs]
    assert vendors == sorted(vendors, key=["NVIDIA", "AMD", "Intel"].index)
    nvidia = [(s.launch_year, s.memory_bytes) for s in specs if s.vendor == "NVIDIA"]
    assert nvidia == sorted(nvidia)
    assert ids[0] == "T4" and ids[-2:] == ["MI300X", "MI325X"]


def test_catalog_is_immutable(catalog: Catalog) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        catalog.prices = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        catalog.gpus["X"] = catalog.get_gpu("T4")  # type: ignore[index]
    assert isinstance(catalog.prices, tuple)


def test_catalog_rejects_inconsistent_data(catalog: Catalog) -> None:
    h100 = catalog.get_gpu("H100-SXM")
    clash = h100.model_copy(update={"id": "H100-COPY"})  # same aliases as H100-SXM
    with pytest.raises(DataError, match="already a name of GPU"):
        Catalog(gpus={"H100-SXM": h100, "H100-COPY": clash})
    with pytest.raises(DataError, match="stored under"):
        Catalog(gpus={"WRONG": h100})
    with pytest.raises(DataError, match="unknown GPU id"):
        Catalog(gpus={"H100-SXM": h100}, prices=tuple(catalog.prices_for("T4")))


# --- --catalog files -------------------------------------------------------------------------------------


def test_partial_override_merges_deep_and_revalidates(
    tmp_path: Path, empty_config: Path, catalog: Catalog
) -> None:
    merged = _load_extra(
        tmp_path,
        empty_config,
        """\
        gpus:
          - id: h100 sxm5          # an alias, any case
            memory_bandwidth_bytes_per_s: 3.0e+12
            dense_tflops: {bf16: 900.0}
            sources: {memory_bandwidth_bytes_per_s: https://example.com/measured}
        """,
    )
    spec, before = merged.get_gpu("H100-SXM"), catalog.get_gpu("H100-SXM")
    assert spec.memory_bandwidth_bytes_per_s == 3.0e12 and spec.dense_tflops.bf16 == 900.0
    assert spec.dense_tflops.fp8 == before.dense_tflops.fp8  # untouched keys of a merged mapping survive
    assert spec.memory_bytes == before.memory_bytes and spec.aliases == before.aliases
    assert str(spec.sources["memory_bandwidth_bytes_per_s"]) == "https://example.com/measured"
    assert str(spec.sources["dense_tflops"]) == H100_URL
    assert "Overridden by" in spec.notes and "my.yaml" in spec.notes
    assert catalog.get_gpu("H100-SXM").memory_bandwidth_bytes_per_s == 3.35e12  # other catalogs unaffected


def test_new_gpu_from_a_catalog_file(tmp_path: Path, empty_config: Path) -> None:
    merged = _load_extra(
        tmp_path,
        empty_config,
        f"""\
        gpus:
          - id: MY-ACCEL
            vendor: NVIDIA
            family: hopper
            architecture: test
            launch_year: 2025
            form_factor: PCIe
            memory_bytes: 64.0e+9
            memory_bandwidth_bytes_per_s: 2.0e+12
            dense_tflops: {{fp32: 50.0, fp16: 500.0, bf16: 500.0}}
            interconnect: {{scale_up: pcie, scale_up_bytes_per_s: 128.0e+9, scale_up_domain_gpus: 4}}
            aliases: [My Accelerator]
            sources: {{memory_bytes: {H100_URL}, memory_bandwidth_bytes_per_s: {H100_URL},
                       dense_tflops: {H100_URL}, interconnect: {H100_URL}}}
        prices:
          - {{gpu: my accelerator, kind: on_demand, provider: Me, usd: 1.5, as_of: 2026-01-01,
             source_url: https://example.com/p}}
        """,
    )
    assert merged.get_gpu("my accelerator").id == "MY-ACCEL"
    assert "MY-ACCEL" in merged.gpu_ids()
    price = merged.price("MY-ACCEL")
    assert price is not None and price.usd == 1.5 and price.gpu == "MY-ACCEL"


def test_user_prices_replace_bundled_prices_of_the_same_gpu_and_kind(
    tmp_path: Path, empty_config: Path, catalog: Catalog
) -> None:
    merged = _load_extra(
        tmp_path,
        empty_config,
        """\
        prices:
          - {gpu: NVIDIA H100 80GB HBM3, kind: on_demand, provider: Contract, usd: 1.99, as_of: 2026-06-01,
             source_url: https://example.com/contract}
        """,
    )
    on_demand = merged.prices_for("H100-SXM", "on_demand")
    assert [(p.provider, p.usd) for p in on_demand] == [("Contract", 1.99)]
    assert merged.price("H100-SXM") == on_demand[0]
    assert merged.prices_for("H100-SXM", "spot") == catalog.prices_for("H100-SXM", "spot")
    assert merged.prices_for("A100-80GB-SXM") == catalog.prices_for("A100-80GB-SXM")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "gpus:\n  - {id: H100-SXM, memory_bandwidth_bytes_per_s: -1.0}\n",
            ["my.yaml", "GPU H100-SXM", "memory_bandwidth_bytes_per_s", "greater than 0", "-1.0"],
        ),
        (
            "gpus:\n  - {id: H100-SXM, memory_gb: 80}\n",
            ["my.yaml", "GPU H100-SXM", "memory_gb", "Extra inputs"],
        ),
        (
            "gpus:\n  - {id: H100-SXM, dense_tflops: {fp6: 1.0}}\n",
            ["GPU H100-SXM", "dense_tflops.fp6", "Extra inputs"],
        ),
        (
            "gpus:\n  - {id: H100-SXM, interconnect: {scale_up: infiniband}}\n",
            ["GPU H100-SXM", "interconnect.scale_up", "'nvlink'"],
        ),
        ("gpus:\n  - {id: NEW, vendor: NVIDIA}\n", ["GPU NEW", "family: Field required"]),
        ("gpu:\n  - {id: H100-SXM}\n", ["my.yaml", "unknown top-level key(s) gpu", "allowed: gpus, prices"]),
        ("gpus: {id: H100-SXM}\n", ["'gpus:' must be a list"]),
        ("gpus:\n  - 42\n", ["each GPU entry must be a mapping"]),
        (
            "prices:\n  - {gpu: H100-SXM, kind: hourly, provider: X, usd: 1, as_of: 2026-01-01, "
            "source_url: https://e.com}\n",
            ["my.yaml prices[0]", "kind", "'on_demand'"],
        ),
        (
            "prices:\n  - {gpu: H1OO-SXM, kind: spot, provider: X, usd: 1, as_of: 2026-01-01, "
            "source_url: https://e.com}\n",
            ["unknown GPU 'H1OO-SXM'", "did you mean", "H100-SXM"],
        ),
    ],
)
def test_bad_catalog_files_raise_one_line_file_format_errors(
    tmp_path: Path, empty_config: Path, body: str, expected: list[str]
) -> None:
    with pytest.raises(FileFormatError) as info:
        _load_extra(tmp_path, empty_config, body)
    message = str(info.value)
    assert "\n" not in message
    for fragment in expected:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_first_three_validation_errors_are_shown(tmp_path: Path, empty_config: Path) -> None:
    body = (
        "gpus:\n  - {id: H100-SXM, memory_bytes: -1, memory_bandwidth_bytes_per_s: -1, tdp_watts: -1,"
        " launch_year: 1}\n"
    )
    with pytest.raises(FileFormatError, match=r"\+1 more"):
        _load_extra(tmp_path, empty_config, body)


def test_new_gpu_without_sources_is_rejected(tmp_path: Path, empty_config: Path, catalog: Catalog) -> None:
    data = catalog.get_gpu("T4").model_dump(mode="json")
    data.update(id="MY-T4", aliases=[], sources={"memory_bytes": H100_URL})
    with pytest.raises(FileFormatError, match="no source URL for memory_bandwidth_bytes_per_s"):
        load_catalog(
            extra_files=[_write(tmp_path / "x.yaml", f"gpus: [{data}]".replace("None", "null"))],
            config_dir=empty_config,
        )


def test_alias_collisions_are_rejected(tmp_path: Path, empty_config: Path) -> None:
    with pytest.raises(FileFormatError, match="already a name of GPU H100-SXM"):
        _load_extra(tmp_path, empty_config, "gpus:\n  - {id: T4, aliases: [NVIDIA H100 80GB HBM3]}\n")


@pytest.mark.parametrize(
    ("body", "line", "problem"),
    [
        ("gpus:\n  - id: H100-SXM\n    tdp_watts: [600\n", 4, "expected"),
        ("gpus:\n  - id: H100-SXM\n    memory_bytes: 1.0e+9\n    memory_bytes: 2.0e+9\n", 4, "duplicate key"),
        ("prices:\n\t- x\n", 2, "cannot start any token"),
    ],
)
def test_malformed_yaml_names_the_file_and_line(
    tmp_path: Path, empty_config: Path, body: str, line: int, problem: str
) -> None:
    with pytest.raises(FileFormatError) as info:
        _load_extra(tmp_path, empty_config, body)
    assert f"my.yaml line {line}:" in str(info.value) and problem in str(info.value)


def test_missing_catalog_file(tmp_path: Path, empty_config: Path) -> None:
    with pytest.raises(FileFormatError, match="no such file"):
        load_catalog(extra_files=[tmp_path / "nope.yaml"], config_dir=empty_config)


def test_empty_catalog_file_changes_nothing(tmp_path: Path, empty_config: Path, catalog: Catalog) -> None:
    merged = _load_extra(tmp_path, empty_config, "# nothing here\n")
    assert merged.gpu_ids() == catalog.gpu_ids() and merged.prices == catalog.prices


# --- config dir ------------------------------------------------------------------------------------------

PRICE_HEADER = "gpu,kind,provider,usd,as_of,source_url,region,notes\n"


def test_config_dir_gpus_and_prices_then_extra_files_win(tmp_path: Path, empty_config: Path) -> None:
    _write(empty_config / "gpus" / "fix.yaml", "id: L4\ntdp_watts: 75.0\nnotes: measured at the wall\n")
    _write(
        empty_config / "prices.csv", PRICE_HEADER + "L4,on_demand,Office,0.5,2026-02-02,https://e.com/a,,\n"
    )
    extra = _write(tmp_path / "later.yaml", "gpus:\n  - {id: L4, tdp_watts: 80.0}\n")
    merged = load_catalog(config_dir=empty_config)
    assert merged.get_gpu("L4").tdp_watts == 75.0 and merged.get_gpu("L4").notes == "measured at the wall"
    assert [p.provider for p in merged.prices_for("L4", "on_demand")] == ["Office"]
    assert load_catalog(config_dir=empty_config, extra_files=[extra]).get_gpu("L4").tdp_watts == 80.0


def test_config_dir_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "gpus" / "t4.yaml", "id: T4\ntdp_watts: 71.0\n")
    monkeypatch.setenv(CONFIG_DIR_ENV, str(tmp_path))
    assert load_catalog().get_gpu("T4").tdp_watts == 71.0


@pytest.mark.parametrize(
    ("csv_text", "expected"),
    [
        (
            PRICE_HEADER + "L4,on_demand,X,-1,2026-01-01,https://e.com,,\n",
            ["prices.csv line 2", "usd", "greater than 0"],
        ),
        (PRICE_HEADER + "L4,on_demand,X,1,yesterday,https://e.com,,\n", ["prices.csv line 2", "as_of"]),
        (
            "gpu,kind,provider,usd,as_of,url\n",
            ["prices.csv line 1", "unknown column(s) ['url']", "source_url"],
        ),
        (PRICE_HEADER + "L4,on_demand,X,1,2026-01-01,https://e.com,,,extra\n", ["line 2", "more cells"]),
        (
            PRICE_HEADER + "L44,on_demand,X,1,2026-01-01,https://e.com,,\n",
            ["unknown GPU 'L44'", "did you mean"],
        ),
    ],
)
def test_bad_config_prices_csv(empty_config: Path, csv_text: str, expected: list[str]) -> None:
    _write(empty_config / "prices.csv", csv_text)
    with pytest.raises(FileFormatError) as info:
        load_catalog(config_dir=empty_config)
    for fragment in expected:
        assert fragment in str(info.value)


def test_bad_config_gpu_file(empty_config: Path) -> None:
    _write(empty_config / "gpus" / "broken.yaml", "id: L4\nmemory_bytes: 0\n")
    with pytest.raises(
        FileFormatError, match=r"broken\.yaml: GPU L4: memory_bytes: Input should be greater than 0"
    ):
        load_catalog(config_dir=empty_config)


# --- caching and import ----------------------------------------------------------------------------------


def test_default_catalog_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_DIR_ENV, str(tmp_path))
    default_catalog.cache_clear()
    try:
        first = default_catalog()
        assert default_catalog() is first
        assert set(first.gpus) == set(load_catalog(config_dir=tmp_path).gpus)
    finally:
        default_catalog.cache_clear()


def test_import_does_no_io(tmp_path: Path) -> None:
    """A broken user config must not break importing the loader: loading happens on first use."""
    _write(tmp_path / "gpus" / "bad.yaml", "id: [\n")
    src = Path(__file__).resolve().parents[4] / "src"
    code = "import gpuplan.adapters.catalog.loader as c; print(c.default_catalog.cache_info().currsize)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(src), CONFIG_DIR_ENV: str(tmp_path), "PATH": ""},
    )
    assert result.stdout.strip() == "0"


def test_power_reference_needs_a_source_and_the_gpus_own_tdp(tmp_path: Path, empty_config: Path) -> None:
    ref = "{gpu: L40S-FULL-POWER, tdp_watts: 450.0, bf16_tflops: 400.0}"
    with pytest.raises(FileFormatError, match="no source URL for power_reference"):
        _load_extra(tmp_path, empty_config, f"gpus:\n  - {{id: L40S, power_reference: {ref}}}\n")
    with pytest.raises(FileFormatError, match="power_reference needs this GPU's own tdp_watts"):
        _load_extra(
            tmp_path,
            empty_config,
            f"gpus:\n  - {{id: A10G, power_reference: {ref}, sources: {{power_reference: {H100_URL}}}}}\n",
        )
    capped = _load_extra(
        tmp_path,
        empty_config,
        f"gpus:\n  - {{id: L40S, power_reference: {ref}, sources: {{power_reference: {H100_URL}}}}}\n",
    ).get_gpu("L40S")
    assert capped.power_reference is not None and capped.power_reference.tdp_watts == 450.0


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("{gpu: H100-SXM, tdp_watts: 700.0, bf16_tflops: 1.0e-300}", "not within 2x of this GPU's own"),
        ("{gpu: H100-SXM, tdp_watts: 700.0, bf16_tflops: 0.9895}", "not within 2x of this GPU's own"),
        ("{gpu: H100-SXM, tdp_watts: 100.0, bf16_tflops: 989.5}", "below this GPU's own"),
    ],
)
def test_implausible_power_references_are_refused(
    tmp_path: Path, empty_config: Path, reference: str, message: str
) -> None:
    with pytest.raises(FileFormatError, match=message):
        _load_extra(tmp_path, empty_config, f"gpus:\n  - {{id: H100-PCIe, power_reference: {reference}}}\n")
