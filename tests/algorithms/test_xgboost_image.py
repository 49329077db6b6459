"""Recognising SageMaker's XGBoost algorithm image: every URI the real SageMaker Python SDK
(side virtualenv, 2.257.7) retrieves for xgboost, in every region and version it knows, and what
is not that image."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from sdlocal.hook.algorithms.errors import UserError
from sdlocal.hook.algorithms.xgboost_image import NOT_RUNNABLE, RUNNABLE_VERSIONS, parse_xgboost_image

SDK_URIS = """
import json, os, warnings
warnings.filterwarnings("ignore")
import sagemaker
from sagemaker import image_uris
config = json.load(open(os.path.join(os.path.dirname(sagemaker.__file__), "image_uri_config", "xgboost.json")))
out = []
for version, entry in config["training"]["versions"].items():
    for region in entry["registries"]:
        for instance in ("ml.m5.xlarge", "ml.p3.2xlarge") if region == "us-east-1" else ("ml.m5.xlarge",):
            try:
                uri = image_uris.retrieve("xgboost", region, version, instance_type=instance, image_scope="training")
            except ValueError:  # 0.90-x and 1.0-1: CPU images only
                continue
            out.append([version, region, uri])
print(json.dumps(out))
"""


def test_every_uri_the_sdk_retrieves(sagemaker_python: Path) -> None:
    proc = subprocess.run([str(sagemaker_python), "-c", SDK_URIS], capture_output=True, text=True, timeout=300,
                          env={"SAGEMAKER_SUPPRESS_V2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    uris = json.loads(proc.stdout.strip().splitlines()[-1])
    versions = {v for v, _, _ in uris}
    assert set(RUNNABLE_VERSIONS) <= versions and len({r for _, r, _ in uris}) >= 30
    assert any(uri.endswith(":0.90-2-cpu-py3") for _, _, uri in uris) and len(uris) > 360
    for version, region, uri in uris:
        image = parse_xgboost_image(uri)
        assert image is not None, uri
        assert (image.version, image.region) == (version, region), uri
        assert image.runnable == (version in RUNNABLE_VERSIONS)
        if image.runnable:
            assert image.check_runnable() == version
    assert versions - set(RUNNABLE_VERSIONS) <= set(NOT_RUNNABLE)  # a new SDK version shows up here


@pytest.mark.parametrize("uri", [
    "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:9.9-9",  # unknown version: not runnable
])
def test_unknown_version_is_recognised_but_refused(uri: str) -> None:
    image = parse_xgboost_image(uri)
    assert image is not None and not image.runnable
    with pytest.raises(UserError, match=r"version 9\.9-9 .* is not run by sdlocal; it runs 0\.90-1, .*1\.7-1") as e:
        image.check_runnable()
    assert e.value.field == "AlgorithmSpecification.TrainingImage"


def test_the_legacy_and_the_3x_images_are_refused_with_why() -> None:
    legacy = parse_xgboost_image("811284229777.dkr.ecr.us-east-1.amazonaws.com/xgboost:1")
    assert legacy is not None and legacy.version == "1"
    with pytest.raises(UserError, match="legacy closed-source XGBoost 0.72"):
        legacy.check_runnable()
    v3 = parse_xgboost_image("683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:3.0-5")
    assert v3 is not None
    with pytest.raises(UserError, match="saves no Debugger tensors"):
        v3.check_runnable()


@pytest.mark.parametrize("uri", [
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1",  # not SageMaker's account there
    "683313688378.dkr.ecr.us-west-2.amazonaws.com/sagemaker-xgboost:1.7-1",  # us-east-1's account, other region
    "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:latest",
    "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost",
    "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1",
    "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.0.0-cpu-py310",
    "sagemaker-xgboost:1.7-1", "sdlocal-training:0.1.0", "",
])
def test_other_images_are_not_the_algorithm(uri: str) -> None:
    assert parse_xgboost_image(uri) is None


def test_tag_suffixes_and_china() -> None:
    image = parse_xgboost_image("683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.5-1-cpu-py3")
    assert image is not None and image.version == "1.5-1"
    cn = parse_xgboost_image("450853457545.dkr.ecr.cn-north-1.amazonaws.com.cn/sagemaker-xgboost:1.7-1")
    assert cn is not None and cn.region == "cn-north-1"
