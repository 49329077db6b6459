"""The rules beyond Debugger on the docker runtime: the jobs of tests/launcher/e2e/test_records_rules_e2e.py
(an unchanged plain loop with one silent error each, and the healthy loop judged by all four rules),
the training in sdlocal's training image (or SDLOCAL_TEST_TRAINING_IMAGE), each rule in its own
evaluator container."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.launcher.e2e.test_records_rules_e2e import EXPECTED, run_all

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_each_silent_error_is_found_in_containers(sdlocal_images: Any, moto_server: str, tmp_path: Path) -> None:
    image = os.environ.get("SDLOCAL_TEST_TRAINING_IMAGE", sdlocal_images.training)
    assert run_all(tmp_path, moto_server, "docker", image) == EXPECTED
