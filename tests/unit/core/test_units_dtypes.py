"""Unit constants and the dtype table: decimal vs binary sizes, scale overhead, aliases, misses."""

from __future__ import annotations

import pytest

from gpuplan.core import units
from gpuplan.core.dtypes import DTYPES, WEIGHT_DTYPE_NAMES, get_dtype
from gpuplan.core.errors import UnknownNameError, UserInputError


def test_gib_is_binary_and_gb_is_decimal() -> None:
    assert units.GIB == 1024**3 == 1_073_741_824
    assert units.GB == 10**9
    # An "80 GB" card in decimal bytes is 80e9 / 2^30 = 74.505805969... GiB.
    assert units.gib(80e9) == pytest.approx(80e9 / 1_073_741_824)
    assert units.gib(80e9) == pytest.approx(74.50580596923828)
    assert units.gb(80e9) == 80.0
    # 1 GiB is 1.073741824 decimal GB.
    assert units.gb(units.GIB) == pytest.approx(1.073741824)


def test_time_and_money_constants() -> None:
    assert units.HOURS_PER_MONTH == 8760 / 12 == 730.0
    assert units.HOURS_PER_YEAR == 365 * 24
    assert units.S_PER_HOUR == 60 * 60
    assert units.TFLOPS == 1e12
    assert units.MILLION == 1e6


@pytest.mark.parametrize(
    ("name", "expected_bytes"),
    [
        ("fp32", 4.0),
        ("fp16", 2.0),
        ("bf16", 2.0),
        # int4 AWQ/GPTQ group 128: 4 bits + (16-bit scale + 4-bit zero) / 128 weights, / 8 bits per byte.
        ("int4", (4 + 20 / 128) / 8),
        # int8: 8 bits + one fp16 scale per 128 = 8.125 bits.
        ("int8", (8 + 16 / 128) / 8),
        # fp8 block: one fp32 scale per 128x128 block = 8 + 32/16384 bits.
        ("fp8", (8 + 32 / 16384) / 8),
        # NVFP4: 4 bits + one 8-bit scale per 16 = 4.5 bits.
        ("fp4", 4.5 / 8),
        # MXFP4: 4 bits + one 8-bit scale per 32 = 4.25 bits.
        ("mxfp4", 4.25 / 8),
    ],
)
def test_bytes_per_element_include_scale_overhead(name: str, expected_bytes: float) -> None:
    assert get_dtype(name).bytes_per_element == pytest.approx(expected_bytes, rel=1e-12)


def test_int4_group128_number() -> None:
    # (4 + 20/128) / 8 = 4.15625 / 8 = 0.51953125 bytes: 3.9 % over a bare nibble.
    assert get_dtype("int4").bytes_per_element == 0.51953125


def test_quantised_formats_are_smaller_than_bf16_and_larger_than_bare_bits() -> None:
    assert get_dtype("int4").bytes_per_element > 0.5
    assert get_dtype("fp8").bytes_per_element > 1.0
    for name in ("int4", "nf4", "fp4", "mxfp4", "int8", "fp8"):
        assert get_dtype(name).bytes_per_element < get_dtype("bf16").bytes_per_element


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("awq", "int4"),
        ("GPTQ", "int4"),
        ("w4a16", "int4"),
        ("bfloat16", "bf16"),
        ("BF16", "bf16"),
        ("  fp16 ", "fp16"),
        ("half", "fp16"),
        ("float32", "fp32"),
        ("w8a8", "int8"),
        ("nvfp4", "fp4"),
        ("e4m3", "fp8"),
    ],
)
def test_aliases(alias: str, canonical: str) -> None:
    assert get_dtype(alias) is DTYPES[canonical]


def test_compute_paths() -> None:
    # Weight-only int4 dequantises to 16-bit GEMMs; fp8 uses 8-bit tensor cores and falls back to fp16.
    assert get_dtype("int4").compute_key == "fp16"
    assert (get_dtype("fp8").compute_key, get_dtype("fp8").fallback_compute_key) == ("fp8", "fp16")
    assert get_dtype("bf16").fallback_compute_key == "fp16"


def test_every_listed_name_resolves() -> None:
    assert set(WEIGHT_DTYPE_NAMES) == set(DTYPES)
    for name in WEIGHT_DTYPE_NAMES:
        assert get_dtype(name).name == name


def test_unknown_dtype_suggests_closest() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_dtype("bf61")
    err = info.value
    assert isinstance(err, UserInputError)
    assert err.exit_code == 1
    assert err.kind == "dtype"
    assert err.name == "bf61"
    assert err.suggestions[0] == "bf16"
    assert "did you mean bf16" in str(err)
    assert "gpuplan dtypes" in str(err)


def test_unknown_dtype_without_close_match_has_no_did_you_mean() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_dtype("xyz")
    assert info.value.suggestions == []
    assert "did you mean" not in str(info.value)
