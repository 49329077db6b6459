"""Fixtures of the profiler-output tests: smdebug's sample files, copied into a job-like folder."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURE_PROFILER


@pytest.fixture
def profiler_fixtures() -> Path:
    # A missing fixture folder is a broken checkout: fail, never skip.
    assert FIXTURE_PROFILER.is_dir(), f"profiler fixtures missing at {FIXTURE_PROFILER}"
    return FIXTURE_PROFILER
