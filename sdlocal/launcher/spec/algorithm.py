"""What the training container runs when it is not a script of the SDK's script mode (launcher/spec/parse.py
asks here first):

- SageMaker's built-in XGBoost algorithm, named by its image URI
  (`image_uris.retrieve("xgboost", region, "1.7-1")`) with no EntryPoint / `sagemaker_program`: the
  hyperparameters and channels are checked now, as the algorithm's container checks them at start
  (hook/algorithms/xgboost_request.py), so a bad one is a CreateTrainingJob error naming the field;
  the job runs `python -m sdlocal.hook.algorithms.xgboost --version V` (`BuiltinAlgorithm`) and
  its metric lines are read with the algorithm's metric definitions. Another of SageMaker's
  built-in algorithms (linear-learner, k-means, ...) is refused, naming it.
- `AlgorithmSpecification.ContainerEntrypoint` / `ContainerArguments` (the SDK v3 ModelTrainer's
  `/bin/bash -c ".../sm_drivers/sm_train.sh"`): that command, as any container runs it (`ContainerCommand`).

`MetricDefinitions` (the SDK's `metric_definitions`): the regexes SageMaker reads the training log
with (launcher/job/metrics.py), checked with the service's limits.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sdlocal.launcher.errors import SpecError
from sdlocal.launcher.spec.values import as_list, as_mapping

_IMAGE_FIELD = "AlgorithmSpecification.TrainingImage"
MAX_METRIC_DEFINITIONS = 40
MAX_ENTRYPOINT_ITEMS, MAX_ARGUMENT_ITEMS, MAX_COMMAND_ITEM_CHARS = 100, 100, 256
# ECR repositories of SageMaker's other built-in algorithms (sagemaker.image_uris' names): refused by name
OTHER_ALGORITHMS = (
    "blazingtext", "factorization-machines", "forecasting-deepar", "image-classification", "ipinsights", "kmeans",
    "knn", "lda", "linear-learner", "ntm", "object-detection", "object2vec", "pca", "randomcutforest",
    "semantic-segmentation", "seq2seq", "image-classification-neo", "xgboost-neo",
)
_ECR_REPOSITORY = re.compile(r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.[a-z0-9.-]+/(?P<repository>[a-z0-9._/-]+)(?::[^/]*)?$")


@dataclass(frozen=True)
class MetricDefinition:
    name: str
    regex: str

    def to_request(self) -> dict[str, str]:
        return {"Name": self.name, "Regex": self.regex}


@dataclass(frozen=True)
class BuiltinAlgorithm:
    """A SageMaker built-in algorithm that sdlocal runs itself (today: XGBoost)."""

    name: str  # "xgboost"
    version: str  # the container version, "1.7-1"
    module: str = "sdlocal.hook.algorithms.xgboost"

    def argv(self, python: str) -> list[str]:
        return [python, "-m", self.module, "--version", self.version]


@dataclass(frozen=True)
class ContainerCommand:
    """ContainerEntrypoint + ContainerArguments: the container's whole command."""

    entrypoint: tuple[str, ...]
    arguments: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        return [*self.entrypoint, *self.arguments]


def parse_metric_definitions(value: Any) -> tuple[MetricDefinition, ...]:
    field = "AlgorithmSpecification.MetricDefinitions"
    entries = as_list(value, field)
    if len(entries) > MAX_METRIC_DEFINITIONS:
        raise SpecError(field, f"has {len(entries)} entries; the maximum is {MAX_METRIC_DEFINITIONS}")
    out = []
    for i, entry in enumerate(entries):
        entry = as_mapping(entry, f"{field}[{i}]")
        name, regex = entry.get("Name"), entry.get("Regex")
        if not isinstance(name, str) or not 1 <= len(name) <= 255:
            raise SpecError(f"{field}[{i}].Name", "must be a string of 1-255 characters")
        if not isinstance(regex, str) or not 1 <= len(regex) <= 500:
            raise SpecError(f"{field}[{i}].Regex", "must be a string of 1-500 characters")
        try:
            compiled = re.compile(regex)
        except re.error as e:
            raise SpecError(f"{field}[{i}].Regex", f"{regex!r} is not a regular expression: {e}") from None
        if compiled.groups < 1:
            raise SpecError(f"{field}[{i}].Regex", f"{regex!r} has no group capturing the metric's value")
        out.append(MetricDefinition(name, regex))
    return tuple(out)


def _strings(value: Any, field: str, max_items: int) -> tuple[str, ...]:
    items = as_list(value, field)
    if not 1 <= len(items) <= max_items:
        raise SpecError(field, f"must hold 1-{max_items} strings")
    for i, item in enumerate(items):
        if not isinstance(item, str) or not 1 <= len(item) <= MAX_COMMAND_ITEM_CHARS:
            raise SpecError(f"{field}[{i}]", f"must be a string of 1-{MAX_COMMAND_ITEM_CHARS} characters")
    return tuple(items)


def parse_container_command(algo: Mapping[str, Any]) -> ContainerCommand | None:
    """ContainerEntrypoint (+ ContainerArguments) when given, else None (arguments alone would
    follow the image's own entrypoint, which sdlocal's images do not have)."""
    if algo.get("ContainerEntrypoint") is None:
        if algo.get("ContainerArguments") is not None:
            raise SpecError("AlgorithmSpecification.ContainerArguments",
                            "needs a ContainerEntrypoint: sdlocal's training image has no entrypoint of its own")
        return None
    entrypoint = _strings(algo["ContainerEntrypoint"], "AlgorithmSpecification.ContainerEntrypoint",
                          MAX_ENTRYPOINT_ITEMS)
    arguments: tuple[str, ...] = ()
    if algo.get("ContainerArguments") is not None:
        arguments = _strings(algo["ContainerArguments"], "AlgorithmSpecification.ContainerArguments",
                             MAX_ARGUMENT_ITEMS)
    return ContainerCommand(entrypoint, arguments)


def other_algorithm(image: str | None) -> str | None:
    """The name of the SageMaker built-in algorithm (not XGBoost) `image` is, else None."""
    m = _ECR_REPOSITORY.match((image or "").strip())
    if m is None:
        return None
    repository = m.group("repository")
    return repository if repository in OTHER_ALGORITHMS else None


def parse_builtin_algorithm(image: str | None, hyperparameters: Mapping[str, str],
                            input_data_config: Mapping[str, Mapping[str, Any]]
                            ) -> tuple[BuiltinAlgorithm, tuple[MetricDefinition, ...]] | None:
    """The built-in algorithm a request without a script asks for, checked as its container checks
    the request (one SpecError naming the field), with its metric definitions; None when `image`
    is no SageMaker algorithm image."""
    from sdlocal.hook.algorithms.errors import UserError
    from sdlocal.hook.algorithms.xgboost_image import parse_xgboost_image
    from sdlocal.hook.algorithms.xgboost_request import traits_of, validate_xgboost_request
    from sdlocal.hook.algorithms.xgboost_versions import metric_definitions

    other = other_algorithm(image)
    if other is not None:
        raise SpecError(_IMAGE_FIELD, f"{image}: SageMaker's built-in {other} algorithm is not run by sdlocal; "
                                      "it runs the XGBoost algorithm (sagemaker-xgboost images) and training scripts")
    xgb_image = parse_xgboost_image(image or "")
    if xgb_image is None:
        return None
    try:
        version = xgb_image.check_runnable()
        validate_xgboost_request(version, hyperparameters, input_data_config)
    except UserError as e:
        raise SpecError(e.field or "HyperParameters", e.message) from None
    definitions = tuple(MetricDefinition(d["Name"], d["Regex"]) for d in metric_definitions(traits_of(version)))
    return BuiltinAlgorithm("xgboost", version), definitions


def merged_definitions(first: Sequence[MetricDefinition], then: Sequence[MetricDefinition]
                       ) -> tuple[MetricDefinition, ...]:
    """`first`, then those of `then` whose name is not taken."""
    names = {d.name for d in first}
    return (*first, *(d for d in then if d.name not in names))
