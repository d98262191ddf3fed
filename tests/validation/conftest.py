"""End every run that could not check accuracy with a banner: a fresh clone has no ``../shared``, and
a skipped accuracy test must not read as a passed one."""

from __future__ import annotations

import pytest
from validation_data import SHARED, missing_data_banner


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    lines = missing_data_banner(SHARED)
    if lines:
        terminalreporter.write_sep("!", "ACCURACY NOT CHECKED", red=True, bold=True)
        for line in lines:
            terminalreporter.write_line(line, red=True)
