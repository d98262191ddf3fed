"""The accuracy tests' end-of-run banner appears exactly when the validation data is absent."""

from __future__ import annotations

from pathlib import Path

from validation_data import missing_data_banner


def test_absent_validation_data_is_announced_with_its_path(tmp_path: Path) -> None:
    absent = tmp_path / "shared" / "validation"
    lines = missing_data_banner(absent)
    assert str(absent) in lines[0] and "SKIPPED" in lines[0]


def test_present_validation_data_prints_nothing(tmp_path: Path) -> None:
    assert missing_data_banner(tmp_path) == []
