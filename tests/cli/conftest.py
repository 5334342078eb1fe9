"""Fixtures of the CLI tests: the default report, built once per session."""

from __future__ import annotations

import pytest
from default_report import DefaultReport, build_default_report


@pytest.fixture(scope="session")
def default_report(tmp_path_factory: pytest.TempPathFactory) -> DefaultReport:
    """The default report of DEFAULT_REPORT_SCENARIO, shared by every test that reads it (slow tests only)."""
    return build_default_report(tmp_path_factory.mktemp("default-report"))
