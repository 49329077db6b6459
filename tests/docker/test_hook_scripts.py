"""The example-style training scripts of tests/compat/scripts/ as `sdlocal run --runtime docker`
jobs: what their hook saves lands in S3 as under `python -m sdlocal.hook.run`, one hook per job, a hook
with its own out_dir is not uploaded, rules see the script's hook (tests/compat/test_scripts_e2e.py
runs the same with the process runtime)."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.compat._scripts import (
    ALL_CASES,
    assert_job_lands_in_s3,
    assert_own_out_dir_not_uploaded,
    assert_rules_see_the_scripts_hook,
)

pytestmark = pytest.mark.docker
RUNTIME = "docker"


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_everything_the_scripts_hook_saves_lands_in_s3(name: str, sdlocal_images: Any, tmp_path: Path,
                                                       moto_server: str, s3_client: Any, bucket: str) -> None:
    job = f"dk-scr-{name.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    assert_job_lands_in_s3(ALL_CASES[name], job, tmp_path, moto_server, s3_client, bucket, RUNTIME)


def test_a_hook_with_its_own_out_dir_is_not_uploaded(sdlocal_images: Any, tmp_path: Path, moto_server: str,
                                                     s3_client: Any, bucket: str) -> None:
    # a folder of the container's own filesystem: gone with the container, never in S3
    assert_own_out_dir_not_uploaded(Path("/tmp/own-out-dir"), f"dk-scr-own-{uuid.uuid4().hex[:6]}", tmp_path,
                                    moto_server, s3_client, bucket, RUNTIME)


def test_rules_see_the_scripts_hook(sdlocal_images: Any, tmp_path: Path, moto_server: str, bucket: str) -> None:
    assert_rules_see_the_scripts_hook(f"dk-scr-rules-{uuid.uuid4().hex[:6]}", tmp_path, moto_server, bucket,
                                      RUNTIME)
