"""Fixtures of the profiler-output tests: smdebug's sample files, copied into a job-like folder."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PROFILER_FIXTURES = REPO_ROOT.parent / "shared" / "fixtures" / "smdebug-profiler"


@pytest.fixture
def profiler_fixtures() -> Path:
    if not PROFILER_FIXTURES.exists():
        pytest.skip("shared fixtures not present")
    return PROFILER_FIXTURES
