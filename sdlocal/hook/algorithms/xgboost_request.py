"""Validate a request for SageMaker's XGBoost algorithm: one `UserError` naming the culprit, in the
container's order (hyperparameters, then channels) with its messages where it has them.

    validate_xgboost_request("1.7-1", {"num_round": "50", ...},
                             {"train": {"ContentType": "text/csv", "TrainingInputMode": "File", ...}})

The channel mapping is inputdataconfig.json's shape (`Channel.to_input_data_config()` of each
channel). The container's channels (sagemaker_xgboost_container/algorithm_mode/channel_validation.py):
`train` (required), `validation`, `code`; ContentType csv/text/csv (`label_size=1` allowed),
libsvm/text/libsvm/text/x-libsvm (the default when none is given), parquet/application/x-parquet,
recordio-protobuf. sdlocal refuses what it does not run, with a message saying so: recordio-protobuf
data, Pipe mode, the internal cross-validation hyperparameters (`_kfold`, `_nfold`,
`_num_cv_round`) and Dask GPU training.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sdlocal.hook.algorithms.errors import UserError
from sdlocal.hook.algorithms.xgboost_image import RUNNABLE_VERSIONS
from sdlocal.hook.algorithms.xgboost_params import validate_hyperparameters
from sdlocal.hook.algorithms.xgboost_versions import VERSIONS, VersionTraits

CSV, LIBSVM, PARQUET, RECORDIO_PROTOBUF = "csv", "libsvm", "parquet", "recordio-protobuf"
_CONTENT_TYPES = {
    "csv": CSV, "text/csv": CSV,
    "libsvm": LIBSVM, "text/libsvm": LIBSVM, "text/x-libsvm": LIBSVM,
    "parquet": PARQUET, "application/x-parquet": PARQUET,
    "recordio-protobuf": RECORDIO_PROTOBUF, "application/x-recordio-protobuf": RECORDIO_PROTOBUF,
}
_ACCEPTED = ("csv, libsvm, parquet, recordio-protobuf, text/csv, text/libsvm, text/x-libsvm, application/x-parquet, "
             "application/x-recordio-protobuf")
CHANNELS = ("train", "validation", "code")
_NOT_RUN = ("_kfold", "_nfold", "_num_cv_round")


@dataclass(frozen=True)
class DataChannel:
    name: str
    content_type: str  # csv, libsvm or parquet
    raw_content_type: str | None  # as the request gave it


@dataclass(frozen=True)
class XGBoostRequest:
    traits: VersionTraits
    hyperparameters: Mapping[str, Any]  # parsed (int, float, str, lists) as the container's train_cfg
    channels: Mapping[str, DataChannel]  # train, and validation when given (not code)

    @property
    def content_type(self) -> str:
        """The data format of every channel: the train channel's (the container reads both with it)."""
        return self.channels["train"].content_type


def parse_content_type(value: str | None, channel: str = "train") -> str:
    """csv, libsvm, parquet or recordio-protobuf (data_utils.get_content_type): None is libsvm, the
    type's parameters are ignored except csv's `label_size`, which must be 1."""
    if value is None:
        return LIBSVM
    base, *params = (p.strip() for p in value.lower().split(";"))
    kind = _CONTENT_TYPES.get(base)
    where = f"InputDataConfig.{channel}.ContentType"
    if kind is None:
        raise UserError(f"{value} is not an accepted ContentType: {_ACCEPTED}.", where)
    if kind == CSV:
        options = dict(p.split("=", 1) for p in params if "=" in p)
        if options.get("label_size", "1").strip() != "1":
            raise UserError(f"{value} is not an accepted csv ContentType. Optional parameter label_size must be "
                            "equal to 1", where)
    return kind


def traits_of(version: str) -> VersionTraits:
    traits = VERSIONS.get(version)
    if traits is None:
        raise UserError(f"SageMaker XGBoost version {version!r} is not run by sdlocal; it runs "
                        f"{', '.join(RUNNABLE_VERSIONS)}", "AlgorithmSpecification.TrainingImage")
    return traits


def _channel(name: str, entry: Mapping[str, Any]) -> DataChannel | None:
    if name not in CHANNELS:
        raise UserError(f"Extraneous channel found: {name}", f"InputDataConfig.{name}")
    mode = entry.get("TrainingInputMode", "File")
    if mode == "Pipe":
        raise UserError(f"Channel {name}: TrainingInputMode Pipe is not supported by sdlocal's XGBoost algorithm "
                        "(it reads File mode channels); use File", f"InputDataConfig.{name}.InputMode")
    if mode not in ("File", "FastFile"):
        raise UserError(f"Channel configuration for '{name}' channel is not supported: {dict(entry)}",
                        f"InputDataConfig.{name}.InputMode")
    if name == "code":
        return None
    raw = entry.get("ContentType")
    kind = parse_content_type(raw, name)
    if kind == RECORDIO_PROTOBUF:
        raise UserError(f"Channel {name}: ContentType {raw} is not read by sdlocal's XGBoost algorithm; it reads "
                        "text/csv, text/libsvm (text/x-libsvm) and application/x-parquet",
                        f"InputDataConfig.{name}.ContentType")
    return DataChannel(name, kind, raw)


def validate_xgboost_request(version: str, hyperparameters: Mapping[str, Any],
                             input_data_config: Mapping[str, Mapping[str, Any]]) -> XGBoostRequest:
    """The request checked as the container of `version` checks it at start (plus what sdlocal
    does not run); raises one UserError whose `field` names the request field."""
    traits = traits_of(version)
    hps = validate_hyperparameters(traits, hyperparameters)
    for name in _NOT_RUN:
        if name in hps:
            raise UserError(f"Hyperparameter {name}: the container's cross-validation mode is not run by sdlocal",
                            f"HyperParameters.{name}")
    if hps.get("use_dask_gpu_training") == "true":
        raise UserError("Hyperparameter use_dask_gpu_training: Dask GPU training is not run by sdlocal",
                        "HyperParameters.use_dask_gpu_training")
    if "train" not in input_data_config:
        raise UserError("Missing required channel: train", "InputDataConfig.train")
    channels: dict[str, DataChannel] = {}
    for name, entry in input_data_config.items():
        channel = _channel(name, entry)
        if channel is not None:
            channels[name] = channel
    return XGBoostRequest(traits, hps, channels)
