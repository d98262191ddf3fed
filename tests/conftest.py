"""End a run whose accuracy tests could not check anything with a banner: a fresh clone has no
``../shared``, and a skipped accuracy test must not read as a passed one. Likewise a run that skipped
the real-engine test (``tests/integration/test_real_engine.py``: no ``engine`` extra installed)."""

from __future__ import annotations

import pytest

ENGINE_SKIP_MARK = "REAL ENGINE NOT TESTED"
"""The start of the real-engine test's skip reason (``test_real_engine.SKIP_REASON``)."""


def _engine_skips(terminalreporter: pytest.TerminalReporter) -> list[str]:
    reasons = []
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""
        if ENGINE_SKIP_MARK in reason:
            reasons.append(reason.removeprefix("Skipped: "))
    return reasons


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    if engine := _engine_skips(terminalreporter):
        terminalreporter.write_sep("!", ENGINE_SKIP_MARK, red=True, bold=True)
        terminalreporter.write_line(engine[0], red=True)
    try:  # importable once a test of tests/validation was collected (pytest put its folder on the path)
        from validation_data import SHARED, missing_data_banner
    except ImportError:  # no accuracy test in this run: nothing to announce
        return
    lines = missing_data_banner(SHARED)
    if lines:
        terminalreporter.write_sep("!", "ACCURACY NOT CHECKED", red=True, bold=True)
        for line in lines:
            terminalreporter.write_line(line, red=True)
