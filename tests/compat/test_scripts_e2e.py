"""End to end: the example-style training scripts of tests/compat/scripts/ as `sdlocal run` jobs
(process runtime, a real moto server). Everything the script's hook saves lands in the job's
S3 debug-output: the same tensors, steps and values as the script under `python -m sdlocal.hook.run`; a
hook writing to its own out_dir is not uploaded (as on SageMaker); rules see the script's hook.
The same jobs with `--runtime docker`: tests/docker/test_hook_scripts.py."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from sdlocal.trial import create_trial
from tests.compat._scripts import (
    ALL_CASES,
    assert_job_lands_in_s3,
    assert_own_out_dir_not_uploaded,
    assert_rules_see_the_scripts_hook,
)

pytestmark = pytest.mark.slow
RUNTIME = "process"


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_everything_the_scripts_hook_saves_lands_in_s3(name: str, tmp_path: Path, moto_server: str,
                                                       s3_client: Any, bucket: str) -> None:
    job = f"scr-{name.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    assert_job_lands_in_s3(ALL_CASES[name], job, tmp_path, moto_server, s3_client, bucket, RUNTIME)


def test_a_hook_with_its_own_out_dir_is_not_uploaded(tmp_path: Path, moto_server: str, s3_client: Any,
                                                     bucket: str) -> None:
    own = tmp_path / "own"
    assert_own_out_dir_not_uploaded(own, f"scr-own-{uuid.uuid4().hex[:6]}", tmp_path, moto_server, s3_client,
                                    bucket, RUNTIME)
    assert create_trial(own).training_ended() and len(create_trial(own).tensor_names()) >= 5


def test_rules_see_the_scripts_hook(tmp_path: Path, moto_server: str, bucket: str) -> None:
    assert_rules_see_the_scripts_hook(f"scr-rules-{uuid.uuid4().hex[:6]}", tmp_path, moto_server, bucket, RUNTIME)
