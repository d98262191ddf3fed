"""The error tree: did-you-mean matching, messages, nearest misses and exit codes."""

from __future__ import annotations

import pytest

from gpuplan.core.errors import (
    BenchmarkError,
    DataError,
    FileFormatError,
    GpuplanError,
    InfeasibleError,
    UnknownNameError,
    UserInputError,
    check_whole_number,
    closest,
    shown_int,
)

IDS = ["H100-SXM", "H100-PCIe", "H100-NVL", "H200-SXM", "A100-80GB-SXM", "L4", "T4"]


def test_closest_is_case_insensitive_and_keeps_original_spelling() -> None:
    hits = closest("h100-sxm", IDS)
    assert hits[0] == "H100-SXM"
    assert len(hits) <= 3


def test_closest_respects_n() -> None:
    assert closest("H100", IDS, n=1) == ["H100-SXM"]
    assert len(closest("H100", IDS, n=2)) == 2


def test_closest_finds_every_variant_of_a_prefix() -> None:
    assert set(closest("H100", IDS)) == {"H100-SXM", "H100-PCIe", "H100-NVL"}


def test_a_short_name_suggests_its_whole_family_first() -> None:
    """Issue 18: ``--gpu A100`` suggested "A10, A10G, H800", ``--gpu H100`` H800 first, and
    ``--model qwen2.5-7b`` missed Qwen2.5-7B-Instruct: the ids a name begins come first."""
    gpus = ["T4", "A100-40GB-PCIe", "A100-40GB-SXM", "A10", "A10G", "A100-80GB-SXM", "A100-80GB-PCIe", "H800"]
    assert closest("A100", gpus) == ["A100-40GB-PCIe", "A100-40GB-SXM", "A100-80GB-SXM", "A100-80GB-PCIe"]
    assert closest("h100", ["H800", *IDS])[:3] == ["H100-SXM", "H100-PCIe", "H100-NVL"]
    models = ["Qwen/Qwen2.5-3B", "Qwen/Qwen2-7B", "Qwen/Qwen2.5-7B-Instruct"]
    assert closest("qwen2.5-7b", models)[0] == "Qwen/Qwen2.5-7B-Instruct"
    assert closest("qwen2.5_7B", models)[0] == "Qwen/Qwen2.5-7B-Instruct"  # separators and case alike


def test_closest_falls_back_to_substring() -> None:
    # difflib ratio of "80gb" vs "a100-80gb-sxm" is 2*4/(4+13) = 0.47 < 0.5 cutoff, so only the
    # substring rule can find it.
    assert closest("80GB", IDS) == ["A100-80GB-SXM"]


def test_closest_with_nothing_near() -> None:
    assert closest("zzzz", IDS) == []
    assert closest("anything", []) == []


def test_unknown_name_message() -> None:
    err = UnknownNameError("GPU", "H10-SXM", IDS, hint="run 'gpuplan gpus'")
    assert err.suggestions[0] == "H100-SXM"
    assert err.message.startswith("unknown GPU 'H10-SXM'; did you mean H100-SXM")
    assert str(err) == f"{err.message} (run 'gpuplan gpus')"
    assert err.one_line() == str(err)
    assert err.exit_code == 1


def test_unknown_name_without_suggestions() -> None:
    err = UnknownNameError("model", "qqq", IDS)
    assert err.suggestions == []
    assert str(err) == "unknown model 'qqq'"


def test_infeasible_lists_first_three_nearest_misses() -> None:
    nearest = ["a: too slow", "b: too big", "c: too costly", "d: never shown"]
    err = InfeasibleError("no plan", nearest=nearest, hint="relax the SLA")
    assert err.nearest == nearest  # all kept on the object
    assert err.message == "no plan; nearest misses: a: too slow; b: too big; c: too costly"
    assert "d: never shown" not in str(err)
    assert str(err).endswith("(relax the SLA)")
    assert err.exit_code == 2


def test_infeasible_without_misses() -> None:
    err = InfeasibleError("nothing fits")
    assert err.nearest == []
    assert str(err) == "nothing fits"


@pytest.mark.parametrize(
    ("exc", "code", "parent"),
    [
        (GpuplanError("x"), 1, Exception),
        (UserInputError("x"), 1, GpuplanError),
        (UnknownNameError("dtype", "x", []), 1, UserInputError),
        (FileFormatError("x"), 1, UserInputError),
        (InfeasibleError("x"), 2, GpuplanError),
        (DataError("x"), 3, GpuplanError),
        (BenchmarkError("x"), 4, GpuplanError),
    ],
)
def test_exit_codes_per_branch(exc: GpuplanError, code: int, parent: type[Exception]) -> None:
    assert exc.exit_code == code
    assert isinstance(exc, parent)


def test_branches_are_disjoint() -> None:
    assert not issubclass(DataError, UserInputError)
    assert not issubclass(InfeasibleError, UserInputError)
    assert not issubclass(BenchmarkError, (UserInputError, DataError, InfeasibleError))


def test_hint_is_optional() -> None:
    assert str(DataError("bad row")) == "bad row"
    assert DataError("bad row", hint="fix it").one_line() == "bad row (fix it)"


def test_shown_int_keeps_a_huge_int_on_one_short_line() -> None:
    assert shown_int(123) == "123" and shown_int(-5) == "-5"
    assert shown_int(10**400) == "about 10^400"
    assert shown_int(-(10**5000)) == "about -10^5000"  # str() of this would raise


@pytest.mark.parametrize(
    ("value", "line"),
    [
        (0, "--tp must be a whole number >= 1, got 0 (e.g. --tp 1)"),
        (10**400, "--tp must be a whole number <= 1,024, got about 10^400"),
    ],
)
def test_check_whole_number_names_the_input(value: int, line: str) -> None:
    check_whole_number("--tp", 1024, maximum=1024)
    check_whole_number("--tp", None, maximum=1024)
    with pytest.raises(UserInputError) as err:
        check_whole_number("--tp", value, maximum=1024)
    assert err.value.one_line() == line
