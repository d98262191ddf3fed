"""End a run whose accuracy tests could not check anything with a banner: a fresh clone has no
``../shared``, and a skipped accuracy test must not read as a passed one."""

from __future__ import annotations

import pytest


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    try:  # importable once a test of tests/validation was collected (pytest put its folder on the path)
        from validation_data import SHARED, missing_data_banner
    except ImportError:  # no accuracy test in this run: nothing to announce
        return
    lines = missing_data_banner(SHARED)
    if lines:
        terminalreporter.write_sep("!", "ACCURACY NOT CHECKED", red=True, bold=True)
        for line in lines:
            terminalreporter.write_line(line, red=True)
