"""Is a TrainingImage SageMaker's XGBoost algorithm, and which version?

`parse_xgboost_image(uri)` answers from the URI alone (no registry is asked): an image of the
`sagemaker-xgboost` repository (or the legacy `xgboost:1`) in the ECR account that SageMaker uses
for that region (hook/algorithms/_xgboost_registries.py), with a version tag as
`sagemaker.image_uris.retrieve("xgboost", region, version)` spells it (`1.7-1`, `0.90-2-cpu-py3`),
or `<version>-cpu-py3`/`-gpu-py3`. `XGBoostImage.check_runnable()` raises the one-line error for a
version sdlocal does not run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from sdlocal.hook.algorithms._xgboost_registries import LEGACY_REGISTRIES, REGISTRIES
from sdlocal.hook.algorithms.errors import UserError

REPOSITORY = "sagemaker-xgboost"
LEGACY_REPOSITORY = "xgboost"
# the container versions that `python -m sdlocal.hook.algorithms.xgboost` runs (those the SDK offers up to 1.x)
RUNNABLE_VERSIONS = ("0.90-1", "0.90-2", "1.0-1", "1.2-1", "1.2-2", "1.3-1", "1.5-1", "1.7-1")
# versions the SDK knows but sdlocal does not run, and why
NOT_RUNNABLE = {
    "1": "the legacy closed-source XGBoost 0.72 algorithm",
    "3.0-5": "the XGBoost 3.0 container (it saves no Debugger tensors and its custom metrics differ)",
}
_URI = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.(?P<domain>[a-z0-9.-]+)/"
                  r"(?P<repository>[a-z0-9._/-]+):(?P<tag>[A-Za-z0-9._-]+)$")
_TAG = re.compile(r"^(?P<version>\d+\.\d+-\d+)(?:-(?:cpu|gpu)-py3)?$")
_ERROR_FIELD = "AlgorithmSpecification.TrainingImage"


@dataclass(frozen=True)
class XGBoostImage:
    uri: str
    region: str
    account: str
    version: str  # the container version: "1.7-1", "0.90-2", ... ("1" for the legacy algorithm)

    @property
    def runnable(self) -> bool:
        return self.version in RUNNABLE_VERSIONS

    def check_runnable(self) -> str:
        """The version, or a UserError naming the image when sdlocal does not run it."""
        if self.runnable:
            return self.version
        why = NOT_RUNNABLE.get(self.version, "a version the SageMaker SDK does not know")
        raise UserError(f"{self.uri}: SageMaker XGBoost version {self.version} ({why}) is not run by sdlocal; "
                        f"it runs {', '.join(RUNNABLE_VERSIONS)}", _ERROR_FIELD)


def parse_xgboost_image(uri: str) -> XGBoostImage | None:
    """The XGBoost algorithm image `uri` names, or None when it is not SageMaker's XGBoost algorithm
    (another image, another account than SageMaker's for that region, no version tag)."""
    m = _URI.match(uri.strip())
    if m is None:
        return None
    region, repository, tag = m.group("region"), m.group("repository"), m.group("tag")
    if repository == REPOSITORY:
        registries, t = REGISTRIES, _TAG.match(tag)
        version = t.group("version") if t is not None else None
    elif repository == LEGACY_REPOSITORY:
        registries, version = LEGACY_REGISTRIES, ("1" if tag in ("1", "latest") else None)
    else:
        return None
    if version is None or registries.get(region) != (m.group("account"), m.group("domain")):
        return None
    return XGBoostImage(uri=uri.strip(), region=region, account=m.group("account"), version=version)
